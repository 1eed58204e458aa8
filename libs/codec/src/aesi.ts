/**
 * SDR's AESI autoencoder (SPEC section 2, SDR 3.1) as codec math: the reference inference of the
 * weights that @lateral/training fits with TF.js.
 *
 *   encoder  z  = W2e gelu(W1e [v; u] + b1e) + b2e      (d + s -> h -> c)
 *   decoder  v' = W2d gelu(W1d [z; u] + b1d) + b2d      (c + s -> h -> d)
 *
 * v: the contextual token vector (d), u: the static input embedding of the same token id (s, free
 * at read time), z: the code (c) that the EDEN stage then quantises. GELU is the exact erf form,
 * gelu(x) = x/2 (1 + erf(x / sqrt 2)), with erf to 1.5e-7 absolute (Abramowitz & Stegun 7.1.26,
 * the approximation TF.js's own Erf kernels use), below float32's resolution of the activations.
 *
 * Weights are stored input-major (x W layout, as TF.js holds them): one packed array per half,
 * encoder = W1e [(d+s) x h] | b1e [h] | W2e [h x c] | b2e [c],
 * decoder = W1d [(c+s) x h] | b1d [h] | W2d [h x d] | b2d [d].
 */

export interface AesiShape {
  /** d: contextual dims */
  inputDims: number;
  /** s: static embedding dims */
  sideDims: number;
  /** c: code dims */
  codeDims: number;
  /** h: intermediate width (1536 in the paper) */
  width: number;
}

export const aesiEncoderLength = (a: AesiShape) => (a.inputDims + a.sideDims) * a.width + a.width + a.width * a.codeDims + a.codeDims;
export const aesiDecoderLength = (a: AesiShape) => (a.codeDims + a.sideDims) * a.width + a.width + a.width * a.inputDims + a.inputDims;

const P = 0.3275911;
const A1 = 0.254829592;
const A2 = -0.284496736;
const A3 = 1.421413741;
const A4 = -1.453152027;
const A5 = 1.061405429;

/** erf to 1.5e-7 absolute (A&S 7.1.26). */
export function erfApprox(x: number): number {
  const s = x < 0 ? -1 : 1;
  const ax = Math.abs(x);
  const t = 1 / (1 + P * ax);
  const y = 1 - ((((A5 * t + A4) * t + A3) * t + A2) * t + A1) * t * Math.exp(-ax * ax);
  return s * y;
}

/** Exact (erf) GELU. */
export function geluErf(x: number): number {
  return 0.5 * x * (1 + erfApprox(x * Math.SQRT1_2));
}

/**
 * One two-layer half for m tokens: out[m x o] = W2 gelu(W1 [a; b] + b1) + b2, where a is m x na
 * and b is m x nb (rows concatenated), W1 = w[0 .. (na+nb) h), then b1, W2 (h x o), b2.
 */
function twoLayer(w: Float32Array, a: ArrayLike<number>, na: number, b: ArrayLike<number>, nb: number, m: number, h: number, o: number): Float64Array {
  const inp = na + nb;
  const b1 = inp * h;
  const w2 = b1 + h;
  const b2 = w2 + h * o;
  const out = new Float64Array(m * o);
  const hid = new Float64Array(h);
  for (let t = 0; t < m; t++) {
    for (let j = 0; j < h; j++) hid[j] = w[b1 + j];
    for (let k = 0; k < inp; k++) {
      const x = k < na ? a[t * na + k] : b[t * nb + k - na];
      if (x === 0) continue;
      const row = k * h;
      for (let j = 0; j < h; j++) hid[j] += x * w[row + j];
    }
    const ot = t * o;
    for (let j = 0; j < o; j++) out[ot + j] = w[b2 + j];
    for (let k = 0; k < h; k++) {
      const g = geluErf(Math.fround(hid[k]));
      if (g === 0) continue;
      const row = w2 + k * o;
      for (let j = 0; j < o; j++) out[ot + j] += g * w[row + j];
    }
  }
  return out;
}

/** v (m x d), u (m x s) -> z (m x c). */
export function aesiEncode(shape: AesiShape, encoder: Float32Array, v: ArrayLike<number>, u: ArrayLike<number>, m: number): Float64Array {
  return twoLayer(encoder, v, shape.inputDims, u, shape.sideDims, m, shape.width, shape.codeDims);
}

/** z (m x c), u (m x s) -> v' (m x d). */
export function aesiDecode(shape: AesiShape, decoder: Float32Array, z: ArrayLike<number>, u: ArrayLike<number>, m: number): Float64Array {
  return twoLayer(decoder, z, shape.codeDims, u, shape.sideDims, m, shape.width, shape.inputDims);
}
