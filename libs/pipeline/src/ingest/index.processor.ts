import { PermanentJobError, QueueName, s3Keys, warpEpochOf, warpLayoutToWrite, type JobPayload, type JobResults } from '@lateral/shared';
import { SegmentCorruptError, crc32c, readSegment, type SegmentReader } from '@lateral/codec';
import type { CodecArtifactRepository, CollectionRepository, GenerationRepository, JobQueues, ObjectStore } from '@lateral/infra';
import { searchSegment } from '@lateral/search';
import { segmentHeadData, segmentReadOptions, serializeSegmentHead, type StaticEmbeddingsCache } from '@lateral/serving';
import { enqueueNext } from '../pipeline';
import { segmentSearchObjects, warpLayoutObject, type SegmentIndexerDeps } from './segment-indexer';
import { batchBm25Terms } from './bm25-terms';

/** What the index processor touches. */
export interface IndexDeps extends SegmentIndexerDeps {
  store: Pick<ObjectStore, 'get' | 'put'>;
  collections: Pick<CollectionRepository, 'get'>;
  codecs: Pick<CodecArtifactRepository, 'get'>;
  queues: Pick<JobQueues, 'add'>;
  /** The current generation, whose newest WARP centroid epoch a WARP collection's new layout is built at (absent: epoch 0). */
  generations?: Pick<GenerationRepository, 'manifest'>;
  /** Static tables of the models, for segments written with side information. */
  staticEmbeddings: Pick<StaticEmbeddingsCache, 'forCollection'>;
}

/**
 * A pooled segment's (codec.poolFactor > 1) original terms: BM25 counts the document's tokens, not
 * its pooled rows, so they come from the raw fp16 batch the segment was coded from (kept while a
 * generation lists the segment). undefined for an unpooled segment.
 */
async function pooledTerms(deps: Pick<IndexDeps, 'store'>, reader: SegmentReader, rawKey: string): Promise<{ tokenIds: Int32Array; tokenOffsets: Uint32Array } | undefined> {
  if ((reader.codec.poolFactor ?? 1) <= 1) return undefined;
  const bytes = await deps.store.get(rawKey);
  if (!bytes) throw new PermanentJobError(`raw vectors are missing from S3: ${rawKey} (the BM25 terms of pooled segment ${reader.name})`);
  let raw;
  try {
    raw = readSegment(bytes, rawKey);
  } catch (err) {
    if (err instanceof SegmentCorruptError) throw new PermanentJobError(err.message);
    throw err;
  }
  if (raw.documents !== reader.documents || raw.docIds.some((id, i) => id !== reader.docIds[i])) {
    throw new PermanentJobError(`raw batch ${rawKey} does not hold the documents of pooled segment ${reader.name}`);
  }
  return { tokenIds: raw.tokenIds, tokenOffsets: raw.tokenOffsets };
}

/**
 * Builds a written segment's search index (token IVF postings against the collection's centroids
 * for this codec version, BM25 postings over its terms: the analysed words of the batch's
 * documents in a collection whose analyser is `english`, else its token ids) and stores it beside the segment,
 * before the segment is committed, so every committed segment can be searched. Deterministic:
 * a replayed job writes the same bytes. The centroids are fitted once per collection and codec
 * version, by the first index job, on that segment's tokens (conditional write). A collection
 * with `search.layout` 'warp' also gets the segment's centroid-major search layout
 * (`search-layouts/v{n}/{batch}.warp`), built with the same centroids and the collection's WARP
 * codec (fitted once per codec version, the same way).
 */
/**
 * A re-index (maintenance/warp-reindex.ts) that recorded its centroid epoch while this job ran,
 * after the job read the collection: the segment's layout at that epoch now, so its commit names
 * the epoch and the re-index finds it built (the record read again; nothing when it still asks
 * for none, or for an epoch-0 layout, which only a first index job fits).
 */
async function lateWarpLayout(deps: IndexDeps, p: JobPayload<QueueName.index>, reader: SegmentReader): Promise<void> {
  const now = await deps.collections.get(p.tenantId, p.collectionId);
  const late = now ? warpLayoutToWrite(now, p.codecVersion) : null;
  if (!now || !late) return;
  const epoch = late.epoch ?? (deps.generations ? warpEpochOf((await deps.generations.manifest(p.tenantId, p.collectionId))?.segments.filter((s) => s.codecVersion === p.codecVersion) ?? []) : 0);
  if (epoch === 0) return;
  const layout = await warpLayoutObject(deps, { ...now, search: late.search }, searchSegment(reader), p.codecVersion, epoch);
  await deps.store.put(s3Keys.searchLayout(p.tenantId, p.collectionId, p.batchId, p.codecVersion, epoch), layout);
}

export async function indexProcessor(deps: IndexDeps, p: JobPayload<QueueName.index>): Promise<JobResults[QueueName.index]> {
  const collection = await deps.collections.get(p.tenantId, p.collectionId);
  if (!collection) throw new PermanentJobError(`collection ${p.tenantId}/${p.collectionId} no longer exists`);
  const bytes = await deps.store.get(p.segmentKey);
  if (!bytes) throw new PermanentJobError(`segment missing from S3: ${p.segmentKey}`);
  let reader;
  try {
    const artifact = await deps.codecs.get(p.tenantId, p.collectionId, p.codecVersion);
    reader = readSegment(bytes, p.segmentKey, artifact, await segmentReadOptions(artifact, collection, deps.staticEmbeddings));
  } catch (err) {
    if (err instanceof SegmentCorruptError) throw new PermanentJobError(err.message);
    throw err;
  }
  // BM25's terms: the batch's analysed words (analyser 'english'), else the encoder's pieces (a pooled segment's from its raw batch).
  const terms = (await batchBm25Terms(deps.store, collection, p.batchId, reader.docIds)) ?? (await pooledTerms(deps, reader, s3Keys.rawVectors(p.tenantId, p.collectionId, p.batchId)));
  // A refitted WARP collection's new segments get layouts at its newest centroid epoch (maintenance/warp-refit.ts);
  // during a re-index to WARP (maintenance/warp-reindex.ts), at the epoch the re-index fitted.
  const toWrite = warpLayoutToWrite(collection, p.codecVersion);
  const warpEpoch = !toWrite ? 0 : (toWrite.epoch ?? (deps.generations ? warpEpochOf((await deps.generations.manifest(p.tenantId, p.collectionId))?.segments.filter((s) => s.codecVersion === p.codecVersion) ?? []) : 0));
  const { index: out, warp } = await segmentSearchObjects(deps, toWrite ? { ...collection, search: toWrite.search } : collection, reader, p.codecVersion, terms, warpEpoch);
  const indexKey = s3Keys.segmentIndex(p.tenantId, p.collectionId, p.batchId, p.codecVersion);
  // The WARP search layout (collections with search.layout 'warp') before the index: a committed segment always has both.
  if (warp) await deps.store.put(s3Keys.searchLayout(p.tenantId, p.collectionId, p.batchId, p.codecVersion, warpEpoch), warp);
  else await lateWarpLayout(deps, p, reader);
  await deps.store.put(indexKey, out);
  // The head from the same checked read, before the commit: every committed segment has one (older ones are read whole once).
  await deps.store.put(s3Keys.segmentHead(p.tenantId, p.collectionId, p.batchId, p.codecVersion), serializeSegmentHead(segmentHeadData(reader, bytes.byteLength)));
  // The whole object's checksum, of the bytes whose every section was verified above: the commit
  // records it (SegmentRef.checksum) and reads the head instead of the segment again.
  const result = { indexKey, bytes: out.byteLength, segment: { checksum: crc32c(bytes).toString(16).padStart(8, '0'), bytes: bytes.byteLength } };
  await enqueueNext(deps.queues, QueueName.index, p, result);
  return result;
}
