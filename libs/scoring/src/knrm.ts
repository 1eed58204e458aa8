import { assertDim, assertMatrix, ShapeError } from './shapes';

/**
 * K-NRM kernel centres, in the order the weight vector `w` uses: the exact-match kernel first
 * (mu = 1.0, sigma = 1e-3), then mu = 0.9, 0.7, ..., -0.9 (sigma = 0.1). SPEC section 1.
 */
export const KNRM_MU: readonly number[] = [1.0, 0.9, 0.7, 0.5, 0.3, 0.1, -0.1, -0.3, -0.5, -0.7, -0.9];
export const KNRM_SIGMA: readonly number[] = [1e-3, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1];
/**
 * log K is clamped below at log(1e-10): a query token far from every kernel centre (or an empty
 * document) would otherwise give log 0 = -inf and a NaN score; the original K-NRM code clamps the same way.
 */
export const KNRM_MIN_K = 1e-10;

export interface KnrmWeights {
  /** 11 weights, one per kernel, in KNRM_MU order. */
  w: Float32Array | number[];
  b: number;
}

/**
 * K-NRM soft-match features phi (11) from a similarity matrix.
 * sim: n x m (row-major, only real tokens: padding is excluded by construction). Returns 11 (float64).
 * K_k(i) = sum_j exp(-(S_ij - mu_k)^2 / (2 sigma_k^2)), phi_k = sum_i log max(K_k(i), 1e-10).
 */
export function knrmFeatures(sim: Float32Array, n: number, m: number): Float64Array {
  assertDim('knrmFeatures', 'n', n);
  assertDim('knrmFeatures', 'm', m);
  assertMatrix('knrmFeatures', 'sim', sim, n, m, 'n', 'm');
  const K = KNRM_MU.length;
  const phi = new Float64Array(K);
  const inv = KNRM_SIGMA.map((s) => 1 / (2 * s * s));
  for (let i = 0; i < n; i++) {
    for (let k = 0; k < K; k++) {
      let acc = 0;
      for (let j = 0; j < m; j++) {
        const diff = sim[i * m + j] - KNRM_MU[k];
        acc += Math.exp(-diff * diff * inv[k]);
      }
      phi[k] += Math.log(Math.max(acc, KNRM_MIN_K));
    }
  }
  return phi;
}

/** S = Q D^T. q: n x d, doc: m x d. Returns n x m (float32). */
export function similarityMatrix(q: Float32Array, n: number, doc: Float32Array, m: number, d: number): Float32Array {
  assertDim('similarityMatrix', 'n', n);
  assertDim('similarityMatrix', 'm', m);
  assertDim('similarityMatrix', 'd', d, 1);
  assertMatrix('similarityMatrix', 'q', q, n, d, 'n', 'd');
  assertMatrix('similarityMatrix', 'doc', doc, m, d, 'm', 'd');
  const s = new Float32Array(n * m);
  for (let i = 0; i < n; i++) {
    for (let j = 0; j < m; j++) {
      let acc = 0;
      for (let k = 0; k < d; k++) acc += q[i * d + k] * doc[j * d + k];
      s[i * m + j] = acc;
    }
  }
  return s;
}

/**
 * K-NRM score: tanh(w . phi + b). q: n x d, doc: m x d, weights: w (11), b. Returns a scalar in (-1, 1).
 */
export function knrm(q: Float32Array, n: number, doc: Float32Array, m: number, d: number, weights: KnrmWeights): number {
  if (weights.w.length !== KNRM_MU.length) {
    throw new ShapeError(`knrm: w has length ${weights.w.length}, expected 11 (one weight per kernel)`);
  }
  const phi = knrmFeatures(similarityMatrix(q, n, doc, m, d), n, m);
  let z = weights.b;
  for (let k = 0; k < phi.length; k++) z += weights.w[k] * phi[k];
  return Math.tanh(z);
}
