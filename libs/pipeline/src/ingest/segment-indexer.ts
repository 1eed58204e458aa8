import { PermanentJobError, bm25AnalyzerOf, mulberry32, warpLayoutOf, type Collection } from '@lateral/shared';
import type { SegmentReader } from '@lateral/codec';
import { type SearchSegment, buildSegmentIndex, buildWarpLayout, centroidsChecksum, distinctSample, fitWarpCodec, ivfCentroidCount, normalizeRows, searchSegment, serializeSegmentIndex, serializeWarpLayout } from '@lateral/search';
import { groupCentroids, onnxSphericalKmeans, type CentroidGroups, type OnnxNearestCentroid } from '@lateral/kernels';
import type { IvfCentroidRepository, WarpCodecRepository } from '@lateral/infra';
import { specialTokenIds } from '@lateral/serving';
import type { EncoderProvider } from '../encoders';
import { permanentModelErrors } from '../model-errors';

/** What building a segment's search index touches: the IVF centroids, the encoder (its special tokens) and the k-means kernel. */
export interface SegmentIndexerDeps {
  /** `get`: a WARP refit's centroids (epoch > 0), which only refits write. */
  ivf: Pick<IvfCentroidRepository, 'ensure'> & Partial<Pick<IvfCentroidRepository, 'get'>>;
  encoders: EncoderProvider;
  /** IVF centroids per collection and codec version; 0 = PLAID's rule on the first segment's tokens. */
  ivfCentroids: number;
  /** The nearest-centroid GEMM kernel (ONNX Runtime), created once per process. */
  assigner: () => Promise<OnnxNearestCentroid>;
  /** WARP residual codecs (collections with `search.layout` 'warp'; required for those). */
  warpCodecs?: Pick<WarpCodecRepository, 'ensure'> & Partial<Pick<WarpCodecRepository, 'get'>>;
}

/** Lloyd iterations of a WARP refit's k-means (maintenance/warp-refit.ts) and of the centroid groups of a grouped assignment. */
export const KMEANS_ITERATIONS = 4;
/**
 * The first fit of a collection's centroids (its first indexed segment): sampled tokens per
 * centroid and Lloyd iterations. Each iteration is a T x K x d GEMM, so the fit cost as many
 * nearest-centroid passes as it had iterations over the sample; on a 512-document ingest (issue 29,
 * 45k tokens in the first segment, K = 2,048) the former 32 per centroid (all 45k tokens) and 4
 * iterations were the largest single cost beside the encoder. 16 per centroid and 2 iterations
 * cost a third of it; on held-out Vaswani tokens (`scripts/bench/first-fit-probe.ts`) the mean
 * inner product with the nearest centroid fell 0.7210 -> 0.7096 (a refit's 8 per centroid and 4
 * iterations: 0.7007), and WARP's nDCG@10 / recall@100 stayed within noise (docs/benchmarks.md,
 * "Ingest: the CPU beside the encoder").
 */
export const SAMPLE_PER_CENTROID = 16;
export const FIRST_FIT_ITERATIONS = 2;
/** Residuals sampled for WARP's codec fit (per-dimension quantiles). */
export const WARP_CODEC_SAMPLE = 65_536;

/** A segment's search objects: its index (always) and its WARP search layout (collections with `search.layout` 'warp'). */
export interface SegmentSearchObjects {
  index: Uint8Array;
  /** serialised centroid-major layout, or null when the collection has none */
  warp: Uint8Array | null;
}

/**
 * The serialized search index of one segment (its reader): token IVF postings against the
 * collection's centroids for `codecVersion` (fitted on this segment's tokens when it is the first
 * one indexed) and BM25 postings over its terms (the analysed words of `bm25Terms` in a collection
 * whose analyser is `english`, else its token ids). Shared by index jobs and merges.
 */
export async function segmentIndexBytes(
  deps: SegmentIndexerDeps,
  collection: Collection,
  reader: SegmentReader,
  codecVersion: number,
  /** BM25's terms: the analysed words (batchBm25Terms) in a collection whose analyser is `english`; else the raw (unpooled) batch's token ids when the segment's rows are pooled (reader.codec.poolFactor > 1). */
  bm25Terms?: { tokenIds: Int32Array; tokenOffsets: Uint32Array },
): Promise<Uint8Array> {
  return (await segmentSearchObjects(deps, { ...collection, search: undefined }, reader, codecVersion, bm25Terms)).index;
}

/**
 * segmentIndexBytes, and for a collection with `search.layout` 'warp' the segment's centroid-major
 * search layout (docs/segment-format.md) from the same decode and centroid assignment: each token
 * row in its nearest centroid's list, its residual packed at the collection's bits. WARP's residual
 * codec is fitted once per collection and codec version (conditional write beside the centroids),
 * on a seeded sample of the residuals of the segment that gets there first.
 */
export async function segmentSearchObjects(
  deps: SegmentIndexerDeps,
  collection: Collection,
  reader: SegmentReader,
  codecVersion: number,
  bm25Terms?: { tokenIds: Int32Array; tokenOffsets: Uint32Array },
  /** The WARP centroid epoch to build the layout with (its centroids and codec exist: a refit wrote them); 0: the codec version's own. */
  warpEpoch = 0,
): Promise<SegmentSearchObjects> {
  const analysed = bm25AnalyzerOf(collection) === 'english';
  if (analysed && !bm25Terms) throw new PermanentJobError(`${reader.name}: collection ${collection.id} analyses BM25's words ('english'), and its index was asked for without the batch's analysed terms`);
  if (!analysed && (reader.codec.poolFactor ?? 1) > 1 && !bm25Terms) throw new PermanentJobError(`${reader.name} holds pooled rows (poolFactor ${reader.codec.poolFactor}); its BM25 postings need the raw batch's terms`);
  const p = { tenantId: collection.tenantId, collectionId: collection.id, codecVersion };
  const seg = searchSegment(reader);
  const d = reader.dims;
  const T = reader.tokens;
  const assigner = await deps.assigner();
  const ivf = await deps.ivf.ensure(p.tenantId, p.collectionId, p.codecVersion, async () => {
    // Fitted on this (the first indexed) segment's tokens: a seeded sample, SAMPLE_PER_CENTROID per centroid.
    const k = Math.min(T, deps.ivfCentroids || ivfCentroidCount(T));
    const n = Math.min(T, Math.max(SAMPLE_PER_CENTROID * k, 4096));
    const rows = distinctSample(T, n, mulberry32(1)).sort();
    const sample = new Float32Array(n * d);
    rows.forEach((r, i) => sample.set(seg.tokens.subarray(r * d, r * d + d), i * d));
    const x = normalizeRows(sample, n, d);
    const centroids = await onnxSphericalKmeans(assigner, x, n, d, distinctSample(n, k, mulberry32(2)), FIRST_FIT_ITERATIONS);
    return { k, dims: d, centroids };
  });
  if (ivf.dims !== d) throw new PermanentJobError(`IVF centroids of ${p.collectionId} v${p.codecVersion} have ${ivf.dims} dims, the segment ${d}`);
  const encoder = await deps.encoders(collection.model).catch(permanentModelErrors);
  const skip = specialTokenIds(encoder);
  const { nearest } = await assigner.assign(seg.tokens, T, ivf.centroids, ivf.k, d);
  // Analysed terms are word hashes: the encoder's skip list is about its own token ids and does not apply.
  const index = buildSegmentIndex(seg, ivf.centroids, d, { assignments: nearest, ...(analysed ? {} : { bm25Skip: (id: number) => skip.has(id) }), ...(bm25Terms ? { bm25Terms } : {}) });
  const out = serializeSegmentIndex(index);
  const warp = warpLayoutOf(collection);
  if (!warp) return { index: out, warp: null };
  if (warpEpoch > 0) return { index: out, warp: await warpLayoutObject(deps, collection, seg, codecVersion, warpEpoch) };
  if (!deps.warpCodecs) throw new Error(`collection ${p.collectionId} has a WARP search layout, and this index stage was given no WARP codec repository`);
  const codec = await deps.warpCodecs.ensure(p.tenantId, p.collectionId, p.codecVersion, () => {
    const n = Math.min(T, WARP_CODEC_SAMPLE);
    if (n === 0) throw new PermanentJobError(`${reader.name} has no tokens to fit the WARP codec of ${p.collectionId} v${p.codecVersion} on`);
    const rows = distinctSample(T, n, mulberry32(3)).sort();
    const residuals = new Float32Array(n * d);
    // (the arrays read once: \`seg.tokens\` is a getter, and read per value it cost ~2 s of the first index job: issue 29's profile)
    const tokens = seg.tokens;
    const centroids = ivf.centroids;
    rows.forEach((r, i) => {
      const c = nearest[r];
      for (let j = 0; j < d; j++) residuals[i * d + j] = tokens[r * d + j] - centroids[c * d + j];
    });
    return fitWarpCodec(residuals, n, d, warp.bits);
  });
  if (codec.dims !== d || codec.bits !== warp.bits) throw new PermanentJobError(`WARP codec of ${p.collectionId} v${p.codecVersion} has ${codec.dims} dims at ${codec.bits} bits, the segment ${d} dims and the collection ${warp.bits} bits`);
  const layout = buildWarpLayout({ vectors: seg.tokens, dims: d, tokenOffsets: seg.tokenOffsets, centroids: ivf.centroids, codec, assignment: nearest, centroidsChecksum: centroidsChecksum(ivf.centroids) });
  return { index: out, warp: serializeWarpLayout(layout) };
}

/** From this many centroids up, a layout's tokens are assigned in the groups of centroids nearest them (assignGrouped). */
export const GROUPED_ASSIGN_MIN = 4096;
/** Coarse groups probed per token by a grouped assignment. */
export const GROUPED_ASSIGN_PROBES = 8;
const epochGroups = new WeakMap<Float32Array, Promise<CentroidGroups>>();

/**
 * Every token row's centroid of a refit epoch. Exact below GROUPED_ASSIGN_MIN centroids; from
 * there on, looked for only in the GROUPED_ASSIGN_PROBES groups (of sqrt(K), groupCentroids)
 * nearest the token: 3.1x faster at K = 16,384 (`npm run bench -- refit`), the cost that
 * dominated a refit's rebuild of every layout and every later index job (T x K x d: ~11 TFLOP for
 * 3.4M tokens at K = 16,384). A token whose nearest centroid lies outside its probed groups is
 * listed under the best one inside them (0.5% of tokens in that bench), its residual taken against
 * that centroid, so its decoded vector is as exact as any other's.
 */
export async function assignToEpoch(assigner: OnnxNearestCentroid, x: Float32Array, n: number, centroids: Float32Array, k: number, d: number): Promise<{ nearest: Uint32Array }> {
  if (k < GROUPED_ASSIGN_MIN) return assigner.assign(x, n, centroids, k, d);
  let groups = epochGroups.get(centroids);
  if (!groups) {
    const rand = mulberry32(4);
    groups = groupCentroids(assigner, centroids, k, d, KMEANS_ITERATIONS, (rows, m) => distinctSample(rows, m, rand));
    epochGroups.set(centroids, groups);
  }
  return assigner.assignGrouped(x, n, centroids, k, d, await groups, GROUPED_ASSIGN_PROBES);
}

/** What building a layout at a refit's epoch reads: that epoch's centroids and codec. */
export type WarpEpochDeps = Pick<SegmentIndexerDeps, 'assigner'> & {
  ivf: Partial<Pick<IvfCentroidRepository, 'get'>>;
  warpCodecs?: Partial<Pick<WarpCodecRepository, 'get'>>;
};

/**
 * A segment's search layout at WARP centroid epoch `warpEpoch` > 0 (a refit's centroids and codec,
 * which must exist): every token row assigned to its nearest centroid of that epoch, its residual
 * packed with that epoch's codec. Used by index jobs once a collection was refitted, by merges whose
 * inputs cannot be merged list by list, and by the refit itself (warp-refit.ts).
 */
export async function warpLayoutObject(deps: WarpEpochDeps, collection: Collection, seg: SearchSegment, codecVersion: number, warpEpoch: number): Promise<Uint8Array> {
  const warp = warpLayoutOf(collection);
  if (!warp) throw new Error(`collection ${collection.id} has no WARP search layout`);
  if (!deps.ivf.get || !deps.warpCodecs?.get) throw new Error(`building ${collection.id}'s search layout at WARP epoch ${warpEpoch} needs the centroid and codec repositories`);
  const [ivf, codec] = await Promise.all([deps.ivf.get(collection.tenantId, collection.id, codecVersion, warpEpoch), deps.warpCodecs.get(collection.tenantId, collection.id, codecVersion, warpEpoch)]);
  if (!ivf || !codec) throw new Error(`WARP epoch ${warpEpoch} of ${collection.id} v${codecVersion} has no ${ivf ? 'codec' : 'centroids'} in S3`);
  const d = seg.dims;
  if (ivf.dims !== d || codec.dims !== d || codec.bits !== warp.bits) throw new PermanentJobError(`WARP epoch ${warpEpoch} of ${collection.id} v${codecVersion} has ${ivf.dims}-dim centroids and a ${codec.dims}-dim ${codec.bits}-bit codec; the segment has ${d} dims and the collection ${warp.bits} bits`);
  const T = seg.tokenOffsets[seg.documents];
  const { nearest } = await assignToEpoch(await deps.assigner(), seg.tokens, T, ivf.centroids, ivf.k, d);
  return serializeWarpLayout(buildWarpLayout({ vectors: seg.tokens, dims: d, tokenOffsets: seg.tokenOffsets, centroids: ivf.centroids, codec, assignment: nearest, centroidsChecksum: centroidsChecksum(ivf.centroids) }));
}
