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
 * Kernel: register-blocked 2 query rows x 4 document rows (8 independent float64 accumulators,
 * 6 loads per 8 multiply-adds), remainders handled by 1-row / 1-column loops. The running
 * maxima live in a float64 scratch of length n so each candidate touches Q once per 4 doc rows.
 * Agrees with `maxsim` up to float64 summation order, then float32 rounding of the result.
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
  const n2 = n - (n % 2);
  for (let c = 0; c < C; c++) {
    const start = offsets[c];
    const end = offsets[c + 1];
    if (end === start) {
      out[c] = -Infinity;
      continue;
    }
    best.fill(-Infinity);
    let j = start;
    for (; j + 4 <= end; j += 4) {
      const b0 = j * d, b1 = b0 + d, b2 = b1 + d, b3 = b2 + d;
      let i = 0;
      for (; i < n2; i += 2) {
        const a0 = i * d, a1 = a0 + d;
        let s00 = 0, s01 = 0, s02 = 0, s03 = 0, s10 = 0, s11 = 0, s12 = 0, s13 = 0;
        for (let k = 0; k < d; k++) {
          const x0 = q[a0 + k], x1 = q[a1 + k];
          const y0 = docs[b0 + k], y1 = docs[b1 + k], y2 = docs[b2 + k], y3 = docs[b3 + k];
          s00 += x0 * y0; s01 += x0 * y1; s02 += x0 * y2; s03 += x0 * y3;
          s10 += x1 * y0; s11 += x1 * y1; s12 += x1 * y2; s13 += x1 * y3;
        }
        let m0 = best[i], m1 = best[i + 1];
        if (s00 > m0) m0 = s00; if (s01 > m0) m0 = s01; if (s02 > m0) m0 = s02; if (s03 > m0) m0 = s03;
        if (s10 > m1) m1 = s10; if (s11 > m1) m1 = s11; if (s12 > m1) m1 = s12; if (s13 > m1) m1 = s13;
        best[i] = m0; best[i + 1] = m1;
      }
      if (i < n) {
        const a0 = i * d;
        let s0 = 0, s1 = 0, s2 = 0, s3 = 0;
        for (let k = 0; k < d; k++) {
          const x0 = q[a0 + k];
          s0 += x0 * docs[b0 + k]; s1 += x0 * docs[b1 + k]; s2 += x0 * docs[b2 + k]; s3 += x0 * docs[b3 + k];
        }
        let m0 = best[i];
        if (s0 > m0) m0 = s0; if (s1 > m0) m0 = s1; if (s2 > m0) m0 = s2; if (s3 > m0) m0 = s3;
        best[i] = m0;
      }
    }
    for (; j < end; j++) {
      const b0 = j * d;
      for (let i = 0; i < n; i++) {
        const a0 = i * d;
        let s0 = 0;
        for (let k = 0; k < d; k++) s0 += q[a0 + k] * docs[b0 + k];
        if (s0 > best[i]) best[i] = s0;
      }
    }
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
