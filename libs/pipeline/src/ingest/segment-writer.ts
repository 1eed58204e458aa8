import { MEBERT_PREFIX_ROWS, PermanentJobError, type Collection } from '@lateral/shared';
import { containsNaNHalf, createCodec, poolBatch, writeSegment, type SegmentReader } from '@lateral/codec';
import type { StaticEmbeddings } from '@lateral/model';
import type { CodecArtifactRepository } from '@lateral/infra';
import type { StaticEmbeddingsCache } from '@lateral/serving';

/** What coding a raw batch into a segment touches: the codec artifacts and the models' static tables. */
export interface SegmentWriterDeps {
  codecs: Pick<CodecArtifactRepository, 'ensure'>;
  staticEmbeddings: Pick<StaticEmbeddingsCache, 'forCollection'>;
}

/** A code section's bytes as halves (a copy only when they start at an odd offset). */
function halves(codes: Uint8Array): Uint16Array {
  return codes.byteOffset % 2 === 0 ? new Uint16Array(codes.buffer, codes.byteOffset, codes.length / 2) : new Uint16Array(codes.slice().buffer);
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
 * artifact when it is the first batch): the bytes of the compressed segment, with ME-BERT's prefix
 * section (each document's first MEBERT_PREFIX_ROWS rows' codes again, for codecs that code rows
 * on their own; docs/segment-format.md). Deterministic per
 * document (same artifact, same seed), so a merge that re-codes the raw vectors of several
 * batches writes the codes their own segments held.
 */
export async function compressRaw(
  deps: SegmentWriterDeps,
  collection: Collection,
  raw: SegmentReader,
  codecVersion: number,
  rawKey: string,
): Promise<Uint8Array> {
  // Settings of this job's codec version: the collection's current one, or a re-compression's.
  const settings = codecVersion === collection.codecVersion ? collection.codec : collection.pending?.codecVersion === codecVersion ? collection.pending.codec : null;
  if (!settings) throw new PermanentJobError(`codec version ${codecVersion} of ${collection.id} is neither current (${collection.codecVersion}) nor being re-compressed`);
  // Token pooling (codec.poolFactor): each document's raw vectors clustered into ceil(m / f) means,
  // fitted and coded as they are stored; BM25 keeps the raw batch's terms (segment-indexer.ts).
  const poolFactor = settings.poolFactor ?? 1;
  if (poolFactor > 1 && settings.sideInfo) throw new PermanentJobError(`codec v${codecVersion} of ${collection.id}: codec.poolFactor ${poolFactor} cannot be combined with codec.sideInfo`);
  // The raw batch's fp16 codes as they are, for a plain fp16 codec (unpooled, no side information):
  // decoding them and coding the values again gives the same bytes (containsNaNHalf), so they are
  // copied instead; a batch holding a NaN takes the long way, which writes the quiet NaN.
  const rawCodes = raw.codec.kind === 'fp16' && !raw.codec.sideInfo && (raw.codec.poolFactor ?? 1) === 1 && poolFactor === 1 && settings.kind === 'fp16' && !settings.sideInfo ? raw.codedVectors() : null;
  const passThrough = rawCodes !== null && rawCodes.norms.length === 0 && rawCodes.codes.length % 2 === 0 && !containsNaNHalf(halves(rawCodes.codes));
  let decoded: Float32Array | null = null;
  const vectors = () => (decoded ??= raw.decodeAll());
  const rows = passThrough ? { tokenOffsets: raw.tokenOffsets, tokenIds: raw.tokenIds, vectors: null } : poolBatch(raw.tokenOffsets, raw.tokenIds, vectors(), raw.dims, poolFactor);
  // Side information: the static embedding of every raw token, from the collection's model (fit and encode).
  const se = settings.sideInfo ? await deps.staticEmbeddings.forCollection(collection) : null;
  const staticEmbeddings = se ? lookupStatic(se, raw.tokenIds, rawKey) : undefined;
  const artifact = await deps.codecs.ensure(collection.tenantId, collection.id, codecVersion, settings, () => ({
    vectors: rows.vectors ?? vectors(),
    dims: raw.dims,
    ...(se ? { staticEmbeddings, staticDims: se.dims } : {}),
  }));
  if (artifact.settings.sideInfo && !staticEmbeddings) throw new PermanentJobError(`codec v${codecVersion} of ${collection.id} uses side information but its job settings do not`);
  const codec = createCodec(artifact.settings, artifact);
  const metadata = Array.from({ length: raw.documents }, (_, i) => raw.metadata(i));
  const coded = passThrough && codec.descriptor.kind === 'fp16' ? rawCodes : undefined;
  return writeSegment(
    { docIds: raw.docIds, tokenOffsets: rows.tokenOffsets, tokenIds: rows.tokenIds, vectors: coded ? new Float32Array(0) : (rows.vectors ?? vectors()), dims: raw.dims, docVectors: raw.docVectors ?? undefined, metadata, staticEmbeddings },
    codec,
    // ME-BERT's prefix section: each document's first MEBERT_PREFIX_ROWS rows' codes (format v2; none for EDEN cross / residual).
    { seed: artifact.seed, poolFactor, prefixRows: MEBERT_PREFIX_ROWS, ...(coded ? { coded } : {}) },
  );
}
