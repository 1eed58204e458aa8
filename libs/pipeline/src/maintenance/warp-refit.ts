import { mulberry32, s3Keys, warpEpochOf, warpLayoutOf, type Collection, type CollectionManifest, type SegmentRef } from '@lateral/shared';
import { SegmentCorruptError, readSegment } from '@lateral/codec';
import { distinctSample, fitWarpCodec, ivfCentroidCount, normalizeRows, searchSegment, type SearchSegment } from '@lateral/search';
import { onnxSphericalKmeans, onnxTwoLevelKmeans, type OnnxNearestCentroid } from '@lateral/kernels';
import type { CodecArtifactRepository, GenerationRepository, IvfCentroidRepository, Logger, ObjectStore, WarpCodecRepository } from '@lateral/infra';
import { segmentReadOptions, type StaticEmbeddingsCache } from '@lateral/serving';
import { KMEANS_ITERATIONS, WARP_CODEC_SAMPLE, assignToEpoch, warpLayoutObject, type SegmentIndexerDeps } from '../ingest/segment-indexer';
import { gcKeys, type GarbageRecord } from './gc';

/**
 * WARP centroid refits (docs/scaling.md, "WARP centroids"). A WARP collection's first centroids
 * are fitted by its first index job on that one segment's tokens (PLAID's rule on ~10^4 tokens:
 * 1,024 centroids), so as the collection grows its lists grow with it and a query's probes scan an
 * ever larger share of its tokens. The refit job (refit.processor.ts, its own queue and lease,
 * queued after committed generations when one is due) calls `warpMaintain`, while merges go on
 * at the generation's current epoch:
 * - refit: when PLAID's rule on the generation's stored tokens gives more centroids than the
 *   current epoch has (2^floor(log2(16 sqrt N)): it doubles each time N grows 4x), it fits the
 *   next epoch's centroids (spherical k-means on a seeded sample drawn from every segment) and its
 *   residual codec, written conditionally as `ivf/v{n}.e{epoch}.centroids` / `.warp-codec`;
 * - rebuild: every segment whose layout is of an older epoch gets one at the newest epoch, from
 *   its codes (decoded, assigned to the new centroids, residuals packed), written under
 *   `search-layouts/v{n}/e{epoch}/`; one generation then moves those segments to the epoch
 *   (`SegmentRef.warpEpoch`), and their old layouts go to garbage collection like a merge's inputs.
 * A segment committed while a rebuild runs (its index job used the older epoch), or a merge's
 * output committed after it (the merge read its inputs at the older epoch), is searched with its
 * own epoch's centroids meanwhile (warpScan groups segments by epoch) and moved by the refit job's
 * next round, or by a later refit job (queued while segments of an older epoch are listed). Segment indexes (IVF and BM25 postings) keep epoch 0's centroids: only WARP's layouts
 * are refitted. A fixed IVF_CENTROIDS (> 0) never refits.
 */

/** Sampled tokens per centroid for a refit's k-means (the first fit samples 32 from one small segment). */
export const REFIT_SAMPLE_PER_CENTROID = 8;

export interface WarpRefitDeps extends Pick<SegmentIndexerDeps, 'assigner' | 'ivfCentroids'> {
  ivf: Pick<IvfCentroidRepository, 'ensure' | 'get'>;
  warpCodecs?: Pick<WarpCodecRepository, 'ensure' | 'get'>;
  store: Pick<ObjectStore, 'get' | 'put'>;
  codecs: Pick<CodecArtifactRepository, 'get'>;
  generations: Pick<GenerationRepository, 'commit'>;
  staticEmbeddings: Pick<StaticEmbeddingsCache, 'forCollection'>;
  logger: Logger;
}

export interface WarpMaintenance {
  /** The epoch the generation's layouts are now at. */
  epoch: number;
  /** Its centroid count. */
  centroids: number;
  /** true: this job fitted the epoch. */
  refitted: boolean;
  /** Segments whose layouts were rebuilt at the epoch. */
  rebuilt: number;
  /** The generation committed (0: none). */
  generation: number;
}

/**
 * The centroid count a refit should fit, or null when none is due: PLAID's rule on `tokens` when
 * it exceeds `currentK` (only growth refits; a fixed count never refits).
 */
export function warpRefitCentroids(tokens: number, currentK: number, fixed: number): number | null {
  if (fixed > 0) return null;
  const k = Math.min(tokens, ivfCentroidCount(tokens));
  return k > currentK ? k : null;
}

/**
 * The live tokens of a segment as its ref says: its tokens less its deleted documents' share
 * (tombstones carry document indexes, not token counts, so a deleted document counts as one of
 * average length: exact for a segment without deletes, and never more than its tokens).
 */
export function liveTokens(ref: Pick<SegmentRef, 'tokens' | 'documents' | 'tombstones'>): number {
  const dead = ref.tombstones?.length ?? 0;
  if (dead === 0 || ref.documents <= 0) return ref.tokens;
  return Math.round((ref.tokens * Math.max(0, ref.documents - dead)) / ref.documents);
}

/** A segment of the generation decoded (its tokens as float rows); null when missing or corrupt (named in the log, left as it is). */
export async function decoded(deps: WarpRefitDeps, collection: Collection, ref: SegmentRef): Promise<SearchSegment | null> {
  const bytes = await deps.store.get(ref.key);
  if (!bytes) {
    deps.logger.warn(`WARP refit of ${collection.id}: segment ${ref.key} is missing from S3; its layout stays at epoch ${ref.warpEpoch ?? 0}`);
    return null;
  }
  try {
    const artifact = await deps.codecs.get(collection.tenantId, collection.id, ref.codecVersion);
    return searchSegment(readSegment(bytes, ref.key, artifact, await segmentReadOptions(artifact, collection, deps.staticEmbeddings)));
  } catch (err) {
    if (!(err instanceof SegmentCorruptError)) throw err;
    deps.logger.warn(`WARP refit of ${collection.id}: ${err.message}; its layout stays at epoch ${ref.warpEpoch ?? 0}`);
    return null;
  }
}

/** Per token row of a segment, 1 when its document is live; null when no document is deleted. */
function liveRows(ref: Pick<SegmentRef, 'tombstones'>, tokenOffsets: ArrayLike<number>): Uint8Array | null {
  if (!ref.tombstones?.length) return null;
  const live = new Uint8Array(tokenOffsets[tokenOffsets.length - 1]).fill(1);
  for (const doc of ref.tombstones) if (doc + 1 < tokenOffsets.length) live.fill(0, tokenOffsets[doc], tokenOffsets[doc + 1]);
  return live;
}

/** From this many centroids up, a refit fits them in two levels (onnxTwoLevelKmeans). */
export const TWO_LEVEL_KMEANS_MIN = 4096;

/**
 * A refit's k centroids on its sample x [n, d] (unit rows). Flat spherical k-means costs
 * KMEANS_ITERATIONS x n x k inner products with n = 8k: quadratic in k (a refit to 16,384
 * centroids took ~25 minutes on a busy 2-core machine). From TWO_LEVEL_KMEANS_MIN up, two levels
 * (onnxTwoLevelKmeans): 5.0x faster at 16,384 with a mean similarity 0.0006 lower (`npm run bench
 * -- refit`), centroids numbered by coarse group so neighbouring lists tend to be adjacent.
 */
async function refitCentroids(assigner: OnnxNearestCentroid, x: Float32Array, n: number, d: number, k: number): Promise<Float32Array> {
  const rand = mulberry32(2);
  if (k < TWO_LEVEL_KMEANS_MIN) return onnxSphericalKmeans(assigner, x, n, d, distinctSample(n, k, rand), KMEANS_ITERATIONS);
  return (await onnxTwoLevelKmeans(assigner, x, n, d, k, KMEANS_ITERATIONS, (rows, m) => distinctSample(rows, m, rand))).centroids;
}

/** Fits epoch `epoch`'s k centroids and residual codec on a seeded sample of every segment's tokens (read one segment at a time). */
export async function fitEpoch(deps: WarpRefitDeps, collection: Collection, refs: readonly SegmentRef[], k: number, epoch: number, bits: 2 | 4): Promise<void> {
  const tenantId = collection.tenantId;
  const collectionId = collection.id;
  const cv = collection.codecVersion;
  const assigner = await deps.assigner();
  const total = refs.reduce((a, r) => a + r.tokens, 0);
  const n = Math.min(total, Math.max(REFIT_SAMPLE_PER_CENTROID * k, 4096));
  const rows = distinctSample(total, n, mulberry32(1)).sort();
  let d = 0;
  let sample = new Float32Array(0);
  let got = 0;
  let base = 0;
  let at = 0;
  for (const ref of refs) {
    const end = base + ref.tokens;
    if (at < n && rows[at] < end) {
      const seg = await decoded(deps, collection, ref);
      if (seg) {
        if (d === 0) {
          d = seg.dims;
          sample = new Float32Array(n * d);
        }
        const x = seg.tokens;
        // rows of deleted documents are not sampled: the centroids fit the live tokens
        const live = liveRows(ref, seg.tokenOffsets);
        for (; at < n && rows[at] < end; at++) {
          const row = rows[at] - base;
          if (live && live[row] === 0) continue;
          sample.set(x.subarray(row * d, (row + 1) * d), got++ * d);
        }
      } else while (at < n && rows[at] < end) at++;
    }
    base = end;
  }
  if (got < k) throw new Error(`WARP refit of ${collectionId}: ${got} tokens sampled for ${k} centroids`);
  const x = normalizeRows(sample.subarray(0, got * d), got, d);
  await deps.ivf.ensure(tenantId, collectionId, cv, async () => ({ k, dims: d, centroids: await refitCentroids(assigner, x, got, d, k) }), epoch);
  const ivf = (await deps.ivf.get(tenantId, collectionId, cv, epoch))!;
  await deps.warpCodecs!.ensure(
    tenantId, collectionId, cv,
    async () => {
      // The codec on the residuals of (up to WARP_CODEC_SAMPLE of) the same sample against the new centroids.
      const m = Math.min(got, WARP_CODEC_SAMPLE);
      // exactly m rows: a sample that skipped deleted rows holds fewer than it was sized for
      // (grouped from GROUPED_ASSIGN_MIN centroids, as the layouts' tokens are: a flat pass over 8 x K rows cost as much as the k-means)
      const { nearest } = await assignToEpoch(assigner, sample.subarray(0, m * d), m, ivf.centroids, ivf.k, d);
      const residuals = new Float32Array(m * d);
      for (let i = 0; i < m; i++) for (let j = 0; j < d; j++) residuals[i * d + j] = sample[i * d + j] - ivf.centroids[nearest[i] * d + j];
      return fitWarpCodec(residuals, m, d, bits);
    },
    epoch,
  );
}

/**
 * Refits the WARP centroids of `collection` when due and moves every segment of `manifest` to the
 * newest epoch (see the file comment). null: not a WARP collection, nothing indexed yet, or
 * nothing to do.
 */
export async function warpMaintain(deps: WarpRefitDeps & { store: Pick<ObjectStore, 'get' | 'put' | 'delete'> }, collection: Collection, manifest: CollectionManifest): Promise<WarpMaintenance | null> {
  const warp = warpLayoutOf(collection);
  if (!warp || !deps.warpCodecs) return null;
  const tenantId = collection.tenantId;
  const collectionId = collection.id;
  const cv = collection.codecVersion;
  const refs = manifest.segments.filter((s) => s.codecVersion === cv);
  if (refs.length === 0) return null;
  let epoch = warpEpochOf(refs);
  const current = await deps.ivf.get(tenantId, collectionId, cv, epoch);
  if (!current) return null;
  // PLAID's rule on the live tokens: deleted documents' tokens (tombstones) do not count.
  const tokens = refs.reduce((a, r) => a + liveTokens(r), 0);
  const k = warpRefitCentroids(tokens, current.k, deps.ivfCentroids);
  let refitted = false;
  if (k !== null) {
    const t0 = performance.now();
    epoch++;
    // Fitted already (an earlier pass or job whose segments were all merged away before its commit, or that stopped after the fit): reused, not sampled again.
    const fitted = (await deps.ivf.get(tenantId, collectionId, cv, epoch)) && (await deps.warpCodecs.get(tenantId, collectionId, cv, epoch));
    if (!fitted) {
      await fitEpoch(deps, collection, refs, k, epoch, warp.bits);
      refitted = true;
      deps.logger.info(`WARP refit of ${collectionId}: ${tokens} tokens, ${current.k} -> ${k} centroids (epoch ${epoch}) in ${((performance.now() - t0) / 1000).toFixed(1)} s`);
    }
  }
  const stale = refs.filter((r) => (r.warpEpoch ?? 0) !== epoch);
  if (stale.length === 0) return k !== null ? { epoch, centroids: (await deps.ivf.get(tenantId, collectionId, cv, epoch))!.k, refitted, rebuilt: 0, generation: 0 } : null;
  const rebuilt = new Map<string, SegmentRef>();
  const t0 = performance.now();
  for (const ref of stale) {
    const seg = await decoded(deps, collection, ref);
    if (!seg) continue;
    await deps.store.put(s3Keys.searchLayout(tenantId, collectionId, ref.batchId, cv, epoch), await warpLayoutObject(deps, collection, seg, cv, epoch));
    rebuilt.set(ref.key, ref);
  }
  // Applied to the newest generation (GenerationRepository.commit re-runs it on a lost race): a
  // segment merged away meanwhile is not listed any more and stays behind; a merge that committed
  // its output meanwhile left that output at its own epoch (moved by the next round, refit.processor.ts).
  let moved: SegmentRef[] = [];
  let gone: SegmentRef[] = [];
  const result = await deps.generations.commit(tenantId, collectionId, (segments, now) => {
    moved = [];
    const listed = new Set<string>();
    const next = segments.map((s) => {
      listed.add(s.key);
      const r = rebuilt.get(s.key);
      if (!r || r.checksum !== s.checksum || (s.warpEpoch ?? 0) === epoch) return s;
      moved.push(s);
      return { ...s, warpEpoch: epoch };
    });
    gone = [...rebuilt.values()].filter((r) => !listed.has(r.key));
    return moved.length > 0 ? { segments: next, codecVersion: now?.codecVersion ?? cv, documents: now?.documents } : null;
  });
  // The layouts built for segments merged away before this commit: no generation lists them at this epoch, nor ever will (removed now).
  for (const r of gone) await deps.store.delete(s3Keys.searchLayout(tenantId, collectionId, r.batchId, r.codecVersion, epoch));
  if (result.committed) {
    // The replaced layouts (each moved segment's at the epoch it had in the generation replaced), removed once no kept generation lists them (gc.ts).
    const objects = moved.map((r) => s3Keys.searchLayout(tenantId, collectionId, r.batchId, r.codecVersion, r.warpEpoch ?? 0));
    const record: GarbageRecord = { generation: result.manifest.generation, committedAt: result.manifest.committedAt, objects };
    await deps.store.put(gcKeys.record(tenantId, collectionId, record.generation), JSON.stringify(record), 'application/json');
  }
  const centroids = (await deps.ivf.get(tenantId, collectionId, cv, epoch))!.k;
  deps.logger.info(`WARP layouts of ${collectionId}: ${rebuilt.size} segments rebuilt at epoch ${epoch} (${centroids} centroids) in ${((performance.now() - t0) / 1000).toFixed(1)} s${result.committed ? `: generation ${result.manifest.generation} moved ${moved.length}` : ''}${gone.length ? `, ${gone.length} merged away meanwhile` : ''}`);
  return { epoch, centroids, refitted, rebuilt: moved.length, generation: result.committed ? result.manifest.generation : 0 };
}
