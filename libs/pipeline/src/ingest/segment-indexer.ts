import { PermanentJobError, mulberry32, type Collection } from '@lateral/shared';
import type { SegmentReader } from '@lateral/codec';
import { buildSegmentIndex, distinctSample, ivfCentroidCount, normalizeRows, searchSegment, serializeSegmentIndex } from '@lateral/search';
import { onnxSphericalKmeans, type OnnxNearestCentroid } from '@lateral/kernels';
import type { IvfCentroidRepository } from '@lateral/infra';
import { specialTokenIds } from '@lateral/serving';
import type { EncoderProvider } from '../encoders';
import { permanentModelErrors } from '../model-errors';

/** What building a segment's search index touches: the IVF centroids, the encoder (its special tokens) and the k-means kernel. */
export interface SegmentIndexerDeps {
  ivf: Pick<IvfCentroidRepository, 'ensure'>;
  encoders: EncoderProvider;
  /** IVF centroids per collection and codec version; 0 = PLAID's rule on the first segment's tokens. */
  ivfCentroids: number;
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
  deps: SegmentIndexerDeps,
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
