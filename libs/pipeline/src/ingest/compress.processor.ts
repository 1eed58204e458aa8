import { PermanentJobError, QueueName, s3Keys, type Collection, type JobPayload, type JobResults } from '@lateral/shared';
import { SegmentCorruptError, createCodec, poolBatch, readSegment, writeSegment, type SegmentReader } from '@lateral/codec';
import type { StaticEmbeddings } from '@lateral/model';
import type { CodecArtifactRepository, CollectionRepository, JobQueues, ObjectStore } from '@lateral/infra';
import { enqueueNext } from '../pipeline';
import type { StaticEmbeddingsCache } from '@lateral/serving';

/** What the compress processor touches. */
export interface CompressDeps {
  store: Pick<ObjectStore, 'get' | 'put'>;
  collections: Pick<CollectionRepository, 'get'>;
  codecs: Pick<CodecArtifactRepository, 'ensure'>;
  staticEmbeddings: Pick<StaticEmbeddingsCache, 'forCollection'>;
  queues: Pick<JobQueues, 'add'>;
}

/** The static rows of the raw segment's tokens; a token id outside the table is a permanent error (wrong model table). */
function lookupStatic(se: StaticEmbeddings, tokenIds: Int32Array, rawKey: string): Float32Array {
  try {
    return se.lookup(tokenIds);
  } catch (err) {
    if (err instanceof RangeError) throw new PermanentJobError(`${rawKey}: ${err.message}`);
    throw err;
  }
}

/**
 * Codes raw fp16 vectors (a raw segment) with the collection's codec `codecVersion` (fitting its
 * artifact when it is the first batch): the bytes of the compressed segment. Deterministic per
 * document (same artifact, same seed), so a merge that re-codes the raw vectors of several
 * batches writes the codes their own segments held.
 */
export async function compressRaw(
  ctx: Pick<CompressDeps, 'codecs' | 'staticEmbeddings'>,
  collection: Collection,
  raw: SegmentReader,
  codecVersion: number,
  rawKey: string,
): Promise<Uint8Array> {
  // Settings of this job's codec version: the collection's current one, or a re-compression's.
  const settings = codecVersion === collection.codecVersion ? collection.codec : collection.pending?.codecVersion === codecVersion ? collection.pending.codec : null;
  if (!settings) throw new PermanentJobError(`codec version ${codecVersion} of ${collection.id} is neither current (${collection.codecVersion}) nor being re-compressed`);
  // Token pooling (codec.poolFactor): each document's raw vectors clustered into ceil(m / f) means,
  // fitted and coded as they are stored; BM25 keeps the raw batch's terms (index.processor.ts).
  const poolFactor = settings.poolFactor ?? 1;
  if (poolFactor > 1 && settings.sideInfo) throw new PermanentJobError(`codec v${codecVersion} of ${collection.id}: codec.poolFactor ${poolFactor} cannot be combined with codec.sideInfo`);
  const rows = poolBatch(raw.tokenOffsets, raw.tokenIds, raw.decodeAll(), raw.dims, poolFactor);
  // Side information: the static embedding of every raw token, from the collection's model (fit and encode).
  const se = settings.sideInfo ? await ctx.staticEmbeddings.forCollection(collection) : null;
  const staticEmbeddings = se ? lookupStatic(se, raw.tokenIds, rawKey) : undefined;
  const artifact = await ctx.codecs.ensure(collection.tenantId, collection.id, codecVersion, settings, () => ({
    vectors: rows.vectors,
    dims: raw.dims,
    ...(se ? { staticEmbeddings, staticDims: se.dims } : {}),
  }));
  if (artifact.settings.sideInfo && !staticEmbeddings) throw new PermanentJobError(`codec v${codecVersion} of ${collection.id} uses side information but its job settings do not`);
  const codec = createCodec(artifact.settings, artifact);
  const metadata = Array.from({ length: raw.documents }, (_, i) => raw.metadata(i));
  return writeSegment(
    { docIds: raw.docIds, tokenOffsets: rows.tokenOffsets, tokenIds: rows.tokenIds, vectors: rows.vectors, dims: raw.dims, docVectors: raw.docVectors ?? undefined, metadata, staticEmbeddings },
    codec,
    { seed: artifact.seed, poolFactor },
  );
}

/**
 * Turns a batch's raw fp16 vectors into an immutable segment with the collection's codec.
 * The segment key carries the codec version, so a re-compression never overwrites a live segment.
 */
export async function compressProcessor(ctx: CompressDeps, p: JobPayload<QueueName.compress>): Promise<JobResults[QueueName.compress]> {
  const collection = await ctx.collections.get(p.tenantId, p.collectionId);
  if (!collection) throw new PermanentJobError(`collection ${p.tenantId}/${p.collectionId} no longer exists`);
  const bytes = await ctx.store.get(p.rawKey);
  if (!bytes) throw new PermanentJobError(`raw vectors are missing from S3: ${p.rawKey}`);
  let raw;
  try {
    raw = readSegment(bytes, p.rawKey);
  } catch (err) {
    if (err instanceof SegmentCorruptError) throw new PermanentJobError(err.message);
    throw err;
  }
  const segment = await compressRaw(ctx, collection, raw, p.codecVersion, p.rawKey);
  const segmentKey = s3Keys.segment(p.tenantId, p.collectionId, p.batchId, p.codecVersion);
  await ctx.store.put(segmentKey, segment);
  const result = { segmentKey, bytes: segment.byteLength };
  await enqueueNext(ctx.queues, QueueName.compress, p, result);
  return result;
}
