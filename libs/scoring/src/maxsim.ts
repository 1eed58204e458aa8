import { kernels } from '@lateral/simd';
import { assertDim, assertMatrix, assertOffsets, ShapeError } from './shapes';

/**
 * Conventions shared by every MaxSim variant (SPEC section 1, ColBERT):
 * - score = sum_i max_j <q_i, d_j>; with `normalize: true` the sum is divided by n (changes no ranking).
 * - Only the m real rows of a document are visited, which is the same as masking padded slots
 *   with -inf: a padded zero vector would otherwise act as an implicit "0" similarity (Theorem 3.2).
 * - Empty document (m = 0): the max over an empty set is -inf, so the score is **-Infinity**
 *   (for any n >= 1, with or without normalisation). It ranks below every non-empty document.
 * - Empty query (n = 0): the empty sum, 0 (normalised: 0 as well, not NaN).
 * - Accumulation is in float64; the batch kernels return float32.
 */
export interface MaxsimOptions {
  /** Divide the sum over query tokens by n. Default false. */
  normalize?: boolean;
}

/**
 * MaxSim from a similarity matrix already computed: sum_i max_j S[i, j], S: n x m row-major
 * (same empty-set rules as `maxsim`). For scores computed another way, e.g. from codes.
 */
export function maxsimOfSimilarities(S: ArrayLike<number>, n: number, m: number, opts: MaxsimOptions = {}): number {
  assertMatrix('maxsimOfSimilarities', 'S', S, n, m, 'n', 'm');
  if (n === 0) return 0;
  if (m === 0) return -Infinity;
  let total = 0;
  for (let i = 0; i < n; i++) {
    let best = -Infinity;
    for (let j = 0; j < m; j++) if (S[i * m + j] > best) best = S[i * m + j];
    total += best;
  }
  return opts.normalize ? total / n : total;
}

/**
 * Reference MaxSim, the plain triple loop.
 * q: n x d, doc: m x d (row-major). Returns a scalar.
 */
export function maxsim(q: Float32Array, n: number, doc: Float32Array, m: number, d: number, opts: MaxsimOptions = {}): number {
  assertDim('maxsim', 'n', n);
  assertDim('maxsim', 'm', m);
  assertDim('maxsim', 'd', d, 1);
  assertMatrix('maxsim', 'q', q, n, d, 'n', 'd');
  assertMatrix('maxsim', 'doc', doc, m, d, 'm', 'd');
  if (n === 0) return 0;
  if (m === 0) return -Infinity;
  let total = 0;
  for (let i = 0; i < n; i++) {
    let best = -Infinity;
    for (let j = 0; j < m; j++) {
      let s = 0;
      for (let k = 0; k < d; k++) s += q[i * d + k] * doc[j * d + k];
      if (s > best) best = s;
    }
    total += best;
  }
  return opts.normalize ? total / n : total;
}

/**
 * Fast MaxSim over many candidates (CSR layout).
 * q: n x d; docs: T x d, every candidate's token rows concatenated; offsets: (C + 1), candidate c
 * owns rows offsets[c] .. offsets[c+1]-1. Returns C scores (float32).
 *
 * Kernel: the maxima kernel of @lateral/simd (the one MaxSim inner loop, shared with exhaustive
 * search: WebAssembly SIMD with 2 query rows per float64 lane pair, or its JavaScript twin,
 * register-blocked 2 query rows x 4 document rows). Every dot product is a float64 sum in
 * dimension order, as in `maxsim`, so the result is `maxsim`'s rounded to float32.
 */
export function maxsimBatch(q: Float32Array, n: number, docs: Float32Array, offsets: Uint32Array, d: number, opts: MaxsimOptions = {}): Float32Array {
  const fn = 'maxsimBatch';
  assertDim(fn, 'n', n);
  assertDim(fn, 'd', d, 1);
  assertMatrix(fn, 'q', q, n, d, 'n', 'd');
  if (docs.length % d !== 0) throw new ShapeError(`${fn}: docs has length ${docs.length}, expected T x d with d = ${d} (not a multiple of d)`);
  const T = docs.length / d;
  assertOffsets(fn, offsets, T);
  const C = offsets.length - 1;
  const out = new Float32Array(C);
  if (n === 0) return out;
  const best = new Float64Array(n);
  const kq = kernels().prepare(q, n, d);
  for (let c = 0; c < C; c++) {
    const start = offsets[c];
    const end = offsets[c + 1];
    if (end === start) {
      out[c] = -Infinity;
      continue;
    }
    best.fill(-Infinity);
    kq.maxima(docs, start * d, end - start, best, null, 0);
    let total = 0;
    for (let i = 0; i < n; i++) total += best[i];
    out[c] = opts.normalize ? total / n : total;
  }
  return out;
}

export type TopKReduce = 'sum' | 'mean';

/**
 * MaxSim-top-k (LITE Table 6 ablation): per query token, reduce the k largest similarities over
 * the document's tokens by `reduce` ('sum' or 'mean'), then sum over query tokens.
 * q: n x d, doc: m x d. k in {1, 2, 4, 8}; k = 1 equals `maxsim` for either reduce.
 * Fewer than k tokens (m < k): the reduction runs over the m available ones ('mean' divides by m),
 * never over padding. Empty document: -Infinity, as for maxsim. `normalize` divides by n.
 */
export function maxsimTopK(
  q: Float32Array, n: number, doc: Float32Array, m: number, d: number,
  k: 1 | 2 | 4 | 8, reduce: TopKReduce = 'sum', opts: MaxsimOptions = {},
): number {
  const fn = 'maxsimTopK';
  if (k !== 1 && k !== 2 && k !== 4 && k !== 8) throw new RangeError(`${fn}: k must be one of 1, 2, 4, 8, got ${k}`);
  if (reduce !== 'sum' && reduce !== 'mean') throw new RangeError(`${fn}: reduce must be 'sum' or 'mean', got ${String(reduce)}`);
  assertDim(fn, 'n', n);
  assertDim(fn, 'm', m);
  assertDim(fn, 'd', d, 1);
  assertMatrix(fn, 'q', q, n, d, 'n', 'd');
  assertMatrix(fn, 'doc', doc, m, d, 'm', 'd');
  if (n === 0) return 0;
  if (m === 0) return -Infinity;
  const kk = Math.min(k, m);
  const top = new Float64Array(kk);
  let total = 0;
  for (let i = 0; i < n; i++) {
    top.fill(-Infinity);
    for (let j = 0; j < m; j++) {
      let s = 0;
      for (let t = 0; t < d; t++) s += q[i * d + t] * doc[j * d + t];
      // insertion into a descending list of length kk
      if (s > top[kk - 1]) {
        let p = kk - 1;
        while (p > 0 && top[p - 1] < s) { top[p] = top[p - 1]; p--; }
        top[p] = s;
      }
    }
    let acc = 0;
    for (let p = 0; p < kk; p++) acc += top[p];
    total += reduce === 'mean' ? acc / kk : acc;
  }
  return opts.normalize ? total / n : total;
}
