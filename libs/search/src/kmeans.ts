import { kernels } from '@lateral/simd';
import { mulberry32 } from '@lateral/shared';

/**
 * Spherical k-means for the token IVF (SPEC 3.1, PLAID): centroids are unit vectors, a point
 * belongs to the centroid with the largest inner product, a centroid is the normalised sum of its
 * points. Fitted once per collection and codec version on a sample of token vectors; the caller
 * persists the centroids (K x d float32) and passes them to buildSegmentIndex and xtrProbe.
 */

export const IVF_MIN_CENTROIDS = 16;
export const IVF_MAX_CENTROIDS = 65536;

/**
 * PLAID's rule K = 2^floor(log2(16 sqrt(N_tokens))), clamped to [16, 65536].
 * Computed with integer doubling (no log2 rounding at exact powers of two).
 */
export function ivfCentroidCount(nTokens: number): number {
  if (!Number.isFinite(nTokens) || nTokens < 0) throw new RangeError(`ivfCentroidCount: nTokens must be a finite number >= 0, got ${nTokens}`);
  const target = 16 * Math.sqrt(nTokens);
  let k = 1;
  while (k * 2 <= target && k < IVF_MAX_CENTROIDS) k *= 2;
  return Math.min(IVF_MAX_CENTROIDS, Math.max(IVF_MIN_CENTROIDS, k));
}

/** Row-wise L2 normalisation (copy); a zero row stays zero. x: n x d. */
export function normalizeRows(x: Float32Array, n: number, d: number): Float32Array {
  if (x.length !== n * d) throw new RangeError(`normalizeRows: x has length ${x.length}, expected n x d = ${n} x ${d} = ${n * d}`);
  const out = new Float32Array(n * d);
  for (let i = 0; i < n; i++) {
    const o = i * d;
    let s = 0;
    for (let k = 0; k < d; k++) s += x[o + k] * x[o + k];
    const inv = s > 0 ? 1 / Math.sqrt(s) : 0;
    for (let k = 0; k < d; k++) out[o + k] = x[o + k] * inv;
  }
  return out;
}

export interface Assignment {
  /** n: the best centroid of each point (ties: the lower centroid index) */
  index: Uint32Array;
  /** n: its inner product */
  similarity: Float64Array;
}

/** The assignment step, replaceable (e.g. by a GEMM in ONNX Runtime) as long as it keeps the tie rule. */
export type AssignFn = (x: Float32Array, n: number, centroids: Float32Array, k: number, d: number) => Assignment;

const POINT_TILE = 32;

/**
 * Nearest centroid by maximum inner product. x: n x d, centroids: k x d (both row-major).
 * Tiles of 32 points, each the query of the maxima kernel of @lateral/simd (the MaxSim inner
 * loop) over every centroid; every inner product is a float64 sum in dimension order, so the
 * result does not depend on the tiling. Ties go to the lower centroid index.
 * Cost 2 n k d flops: for large k and d, inject a GEMM-backed AssignFn instead.
 */
export function assignNearest(x: Float32Array, n: number, centroids: Float32Array, k: number, d: number): Assignment {
  if (!Number.isInteger(d) || d < 1) throw new RangeError(`assignNearest: d must be an integer >= 1, got ${d}`);
  if (x.length !== n * d) throw new RangeError(`assignNearest: x has length ${x.length}, expected n x d = ${n} x ${d} = ${n * d}`);
  if (centroids.length !== k * d) throw new RangeError(`assignNearest: centroids has length ${centroids.length}, expected k x d = ${k} x ${d} = ${k * d}`);
  if (k < 1 && n > 0) throw new RangeError('assignNearest: needs at least one centroid');
  const index = new Uint32Array(n);
  const similarity = new Float64Array(n).fill(-Infinity);
  const arg = new Int32Array(POINT_TILE);
  const k4 = kernels();
  for (let p0 = 0; p0 < n; p0 += POINT_TILE) {
    const p1 = Math.min(n, p0 + POINT_TILE);
    const best = similarity.subarray(p0, p1);
    arg.fill(0);
    k4.prepare(x.subarray(p0 * d, p1 * d), p1 - p0, d).maxima(centroids, 0, k, best, arg, 0);
    for (let p = p0; p < p1; p++) index[p] = arg[p - p0];
  }
  return { index, similarity };
}

export interface KmeansOptions {
  /** mulberry32 seed; default 0 */
  seed?: number;
  /** Lloyd iterations at most (stops early when no assignment changes); default 6 */
  iterations?: number;
  /** 'kmeans++' (spherical: D^2 = 1 - cos) or 'random' distinct points; default kmeans++ when n k <= 2^24, else random */
  init?: 'kmeans++' | 'random';
  /** replaces assignNearest (must keep its tie rule for reproducibility) */
  assign?: AssignFn;
}

export interface KmeansResult {
  /** k x d, unit rows (float32) */
  centroids: Float32Array;
  k: number;
  d: number;
  /** Lloyd iterations run */
  iterations: number;
  /** points per centroid after the last assignment */
  sizes: Uint32Array;
  /** mean inner product of a point with its centroid after the last assignment (1 = perfect) */
  meanSimilarity: number;
}

/**
 * Spherical k-means on n points (x: n x d, normalised here, copy). k is clamped to n.
 * Deterministic for a given seed (mulberry32), whatever the machine. An empty cluster is
 * re-seeded with the point farthest from its own centroid (lowest similarity, lowest index on a
 * tie), each point used at most once per iteration.
 */
export function sphericalKmeans(x: Float32Array, n: number, d: number, k: number, opts: KmeansOptions = {}): KmeansResult {
  if (!Number.isInteger(n) || n < 1) throw new RangeError(`sphericalKmeans: needs at least one point, got n = ${n}`);
  if (!Number.isInteger(d) || d < 1) throw new RangeError(`sphericalKmeans: d must be an integer >= 1, got ${d}`);
  if (!Number.isInteger(k) || k < 1) throw new RangeError(`sphericalKmeans: k must be an integer >= 1, got ${k}`);
  const iterations = opts.iterations ?? 6;
  if (!Number.isInteger(iterations) || iterations < 0) throw new RangeError(`sphericalKmeans: iterations must be an integer >= 0, got ${iterations}`);
  const pts = normalizeRows(x, n, d);
  const K = Math.min(k, n);
  const rand = mulberry32(opts.seed ?? 0);
  const assign = opts.assign ?? assignNearest;
  const init = opts.init ?? (n * K <= 1 << 24 ? 'kmeans++' : 'random');
  const c = new Float32Array(K * d);
  const picks = init === 'kmeans++' ? kmeansPlusPlus(pts, n, d, K, rand) : distinctSample(n, K, rand);
  for (let j = 0; j < K; j++) c.set(pts.subarray(picks[j] * d, picks[j] * d + d), j * d);

  const sums = new Float64Array(K * d);
  const sizes = new Uint32Array(K);
  let current = assign(pts, n, c, K, d);
  let run = 0;
  for (let it = 0; it < iterations; it++) {
    run++;
    sums.fill(0);
    sizes.fill(0);
    const idx = current.index;
    for (let i = 0; i < n; i++) {
      const j = idx[i];
      sizes[j]++;
      const a = i * d, b = j * d;
      for (let t = 0; t < d; t++) sums[b + t] += pts[a + t];
    }
    const used = new Uint8Array(n);
    for (let j = 0; j < K; j++) {
      const b = j * d;
      let norm = 0;
      for (let t = 0; t < d; t++) norm += sums[b + t] * sums[b + t];
      if (sizes[j] > 0 && norm > 0) {
        const inv = 1 / Math.sqrt(norm);
        for (let t = 0; t < d; t++) c[b + t] = sums[b + t] * inv;
      } else {
        // empty (or cancelling) cluster: take the worst-served point not taken yet
        let worst = -1;
        for (let i = 0; i < n; i++) if (!used[i] && (worst < 0 || current.similarity[i] < current.similarity[worst])) worst = i;
        if (worst >= 0) {
          used[worst] = 1;
          c.set(pts.subarray(worst * d, worst * d + d), b);
        }
      }
    }
    const next = assign(pts, n, c, K, d);
    let changed = false;
    for (let i = 0; i < n && !changed; i++) if (next.index[i] !== idx[i]) changed = true;
    current = next;
    if (!changed) break;
  }
  sizes.fill(0);
  let simSum = 0;
  for (let i = 0; i < n; i++) {
    sizes[current.index[i]]++;
    simSum += current.similarity[i];
  }
  return { centroids: c, k: K, d, iterations: run, sizes, meanSimilarity: simSum / n };
}

/** k distinct indices of [0, n), by a seeded partial Fisher-Yates (order of selection). */
export function distinctSample(n: number, k: number, rand: () => number): Uint32Array {
  if (k > n) throw new RangeError(`distinctSample: cannot take ${k} distinct of ${n}`);
  const perm = new Uint32Array(n);
  for (let i = 0; i < n; i++) perm[i] = i;
  for (let i = 0; i < k; i++) {
    const j = i + Math.floor(rand() * (n - i));
    const t = perm[i];
    perm[i] = perm[j];
    perm[j] = t;
  }
  return perm.slice(0, k);
}

/** k-means++ with D(x)^2 = 1 - max cos to the chosen centroids (pts normalised). */
function kmeansPlusPlus(pts: Float32Array, n: number, d: number, K: number, rand: () => number): Uint32Array {
  const picks = new Uint32Array(K);
  const dist = new Float64Array(n).fill(Infinity);
  picks[0] = Math.floor(rand() * n);
  const chosen = new Uint8Array(n);
  chosen[picks[0]] = 1;
  // every point's dot product with the last pick: the maxima kernel over that one row (each a
  // float64 sum in dimension order; -Infinity only where the plain sum is not above it)
  const kq = kernels().prepare(pts, n, d);
  const sims = new Float64Array(n);
  for (let j = 1; j < K; j++) {
    sims.fill(-Infinity);
    kq.maxima(pts, picks[j - 1] * d, 1, sims, null, 0);
    let total = 0;
    for (let i = 0; i < n; i++) {
      const dd = Math.max(0, 1 - sims[i]);
      if (dd < dist[i]) dist[i] = dd;
      if (!chosen[i]) total += dist[i];
    }
    let pick = -1;
    if (total > 0) {
      let target = rand() * total;
      for (let i = 0; i < n; i++) {
        if (chosen[i]) continue;
        target -= dist[i];
        pick = i;
        if (target < 0) break;
      }
    } else {
      // every remaining point coincides with a centroid: any unchosen one will do
      const skip = Math.floor(rand() * (n - j));
      for (let i = 0, seen = 0; i < n; i++) if (!chosen[i] && seen++ === skip) { pick = i; break; }
    }
    picks[j] = pick;
    chosen[pick] = 1;
  }
  return picks;
}

export interface FitIvfOptions extends KmeansOptions {
  /** centroid count; default ivfCentroidCount(nTokens) */
  k?: number;
  /** token vectors sampled for the fit; default min(nTokens, max(64 k, 4096)) */
  sampleSize?: number;
}

/**
 * Fits the IVF centroids of a collection on a seeded uniform sample of its token vectors.
 * vectors: nTokens x d. Returns the k-means result (k may be less than asked when the sample
 * is smaller). Cost about 2 (iterations + 1) sampleSize k d flops through `assign`.
 */
export function fitIvfCentroids(vectors: Float32Array, nTokens: number, d: number, opts: FitIvfOptions = {}): KmeansResult & { sampleSize: number } {
  if (vectors.length !== nTokens * d) throw new RangeError(`fitIvfCentroids: vectors has length ${vectors.length}, expected nTokens x d = ${nTokens} x ${d} = ${nTokens * d}`);
  const k = opts.k ?? ivfCentroidCount(nTokens);
  const sampleSize = Math.min(nTokens, opts.sampleSize ?? Math.max(64 * k, 4096));
  const rand = mulberry32((opts.seed ?? 0) ^ 0x5eed5eed);
  const rows = sampleSize === nTokens ? null : distinctSample(nTokens, sampleSize, rand).sort();
  let sample = vectors;
  if (rows) {
    sample = new Float32Array(sampleSize * d);
    for (let i = 0; i < sampleSize; i++) sample.set(vectors.subarray(rows[i] * d, rows[i] * d + d), i * d);
  }
  return { ...sphericalKmeans(sample, sampleSize, d, k, opts), sampleSize };
}
