import { PermanentJobError, QueueName, s3Keys, type Collection, type JobPayload, type JobResults } from '@lateral/shared';
import { SegmentCorruptError, readSegment, type SegmentReader } from '@lateral/codec';
import { buildSegmentIndex, distinctSample, ivfCentroidCount, normalizeRows, searchSegment, serializeSegmentIndex } from '@lateral/search';
import { mulberry32 } from '@lateral/shared';
import { onnxSphericalKmeans, type OnnxNearestCentroid } from '@lateral/kernels';
import type { CodecArtifactRepository, CollectionRepository, IvfCentroidRepository, JobQueues, ObjectStore } from '@lateral/infra';
import type { EncoderProvider } from '../encoders';
import { enqueueNext } from '../pipeline';
import { segmentReadOptions, type StaticEmbeddingsCache, segmentHeadData, serializeSegmentHead, specialTokenIds } from '@lateral/serving';
import { permanentModelErrors } from '../model-errors';

/** What the index processor touches. */
export interface IndexDeps {
  store: Pick<ObjectStore, 'get' | 'put'>;
  collections: Pick<CollectionRepository, 'get'>;
  codecs: Pick<CodecArtifactRepository, 'get'>;
  ivf: Pick<IvfCentroidRepository, 'ensure'>;
  encoders: EncoderProvider;
  queues: Pick<JobQueues, 'add'>;
  /** IVF centroids per collection and codec version; 0 = PLAID's rule on the first segment's tokens. */
  ivfCentroids: number;
  /** Static tables of the models, for segments written with side information. */
  staticEmbeddings: Pick<StaticEmbeddingsCache, 'forCollection'>;
  /** The nearest-centroid GEMM kernel (ONNX Runtime), created once per process. */
  assigner: () => Promise<OnnxNearestCentroid>;
}

/** Lloyd iterations of the IVF fit, and sampled tokens per centroid. */
const KMEANS_ITERATIONS = 4;
const SAMPLE_PER_CENTROID = 32;

/**
 * The serialized search index of one segment (its reader): token IVF postings against the
 * collection's centroids for `codecVersion` (fitted on this segment's tokens when it is the first
 * one indexed) and BM25 postings over its token ids. Shared by index jobs and merges.
 */
export async function segmentIndexBytes(
  deps: Pick<IndexDeps, 'ivf' | 'encoders' | 'ivfCentroids' | 'assigner'>,
  collection: Collection,
  reader: SegmentReader,
  codecVersion: number,
  /** The raw (unpooled) batch's terms, for BM25 when the segment's rows are pooled (reader.codec.poolFactor > 1). */
  bm25Terms?: { tokenIds: Int32Array; tokenOffsets: Uint32Array },
): Promise<Uint8Array> {
  if ((reader.codec.poolFactor ?? 1) > 1 && !bm25Terms) throw new PermanentJobError(`${reader.name} holds pooled rows (poolFactor ${reader.codec.poolFactor}); its BM25 postings need the raw batch's terms`);
  const p = { tenantId: collection.tenantId, collectionId: collection.id, codecVersion };
  const seg = searchSegment(reader);
  const d = reader.dims;
  const T = reader.tokens;
  const assigner = await deps.assigner();
  const ivf = await deps.ivf.ensure(p.tenantId, p.collectionId, p.codecVersion, async () => {
    // Fitted on this (the first indexed) segment's tokens: a seeded sample, 32 per centroid.
    const k = Math.min(T, deps.ivfCentroids || ivfCentroidCount(T));
    const n = Math.min(T, Math.max(SAMPLE_PER_CENTROID * k, 4096));
    const rows = distinctSample(T, n, mulberry32(1)).sort();
    const sample = new Float32Array(n * d);
    rows.forEach((r, i) => sample.set(seg.tokens.subarray(r * d, r * d + d), i * d));
    const x = normalizeRows(sample, n, d);
    const centroids = await onnxSphericalKmeans(assigner, x, n, d, distinctSample(n, k, mulberry32(2)), KMEANS_ITERATIONS);
    return { k, dims: d, centroids };
  });
  if (ivf.dims !== d) throw new PermanentJobError(`IVF centroids of ${p.collectionId} v${p.codecVersion} have ${ivf.dims} dims, the segment ${d}`);
  const encoder = await deps.encoders(collection.model).catch(permanentModelErrors);
  const skip = specialTokenIds(encoder);
  const { nearest } = await assigner.assign(seg.tokens, T, ivf.centroids, ivf.k, d);
  const index = buildSegmentIndex(seg, ivf.centroids, d, { assignments: nearest, bm25Skip: (id) => skip.has(id), ...(bm25Terms ? { bm25Terms } : {}) });
  const out = serializeSegmentIndex(index);
  return out;
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
 * for this codec version, BM25 postings over its token ids) and stores it beside the segment,
 * before the segment is committed, so every committed segment can be searched. Deterministic:
 * a replayed job writes the same bytes. The centroids are fitted once per collection and codec
 * version, by the first index job, on that segment's tokens (conditional write).
 */
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
  const out = await segmentIndexBytes(deps, collection, reader, p.codecVersion, await pooledTerms(deps, reader, s3Keys.rawVectors(p.tenantId, p.collectionId, p.batchId)));
  const indexKey = s3Keys.segmentIndex(p.tenantId, p.collectionId, p.batchId, p.codecVersion);
  await deps.store.put(indexKey, out);
  // The head from the same checked read, before the commit: every committed segment has one (older ones are read whole once).
  await deps.store.put(s3Keys.segmentHead(p.tenantId, p.collectionId, p.batchId, p.codecVersion), serializeSegmentHead(segmentHeadData(reader, bytes.byteLength)));
  const result = { indexKey, bytes: out.byteLength };
  await enqueueNext(deps.queues, QueueName.index, p, result);
  return result;
}
