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

/** Tokens per block of `twoLayer`: each weight row loaded once serves this many tokens. */
export const AESI_TOKEN_BLOCK = 4;

/**
 * Each packed half's two matrices transposed (output-major: one contiguous row per output), made
 * once per weights array: a codec's weights are never written in place (training exports new arrays).
 */
const transposedHalves = new WeakMap<Float32Array, { key: string; w1T: Float32Array; w2T: Float32Array }>();
function transposed(w: Float32Array, inp: number, h: number, o: number): { w1T: Float32Array; w2T: Float32Array } {
  const key = `${inp}x${h}x${o}`;
  const got = transposedHalves.get(w);
  if (got && got.key === key) return got;
  const w2 = inp * h + h;
  const w1T = new Float32Array(inp * h);
  for (let k = 0; k < inp; k++) for (let j = 0; j < h; j++) w1T[j * inp + k] = w[k * h + j];
  const w2T = new Float32Array(h * o);
  for (let k = 0; k < h; k++) for (let j = 0; j < o; j++) w2T[j * h + k] = w[w2 + k * o + j];
  const t = { key, w1T, w2T };
  transposedHalves.set(w, t);
  return t;
}

/**
 * sums[r] = start + sum over k < len of x[r len + k] wT[row + k], for the 4 tokens r of a block
 * (x holds them one after another), in k order, the weight read once for the four.
 */
function dots4(wT: Float32Array, row: number, len: number, x: Float64Array, start: number, sums: Float64Array): void {
  let s0 = start, s1 = start, s2 = start, s3 = start;
  for (let k = 0; k < len; k++) {
    const wk = wT[row + k];
    s0 += x[k] * wk;
    s1 += x[len + k] * wk;
    s2 += x[2 * len + k] * wk;
    s3 += x[3 * len + k] * wk;
  }
  sums[0] = s0;
  sums[1] = s1;
  sums[2] = s2;
  sums[3] = s3;
}

/**
 * One two-layer half for m tokens: out[m x o] = W2 gelu(W1 [a; b] + b1) + b2, where a is m x na
 * and b is m x nb (rows concatenated), W1 = w[0 .. (na+nb) h), then b1, W2 (h x o), b2.
 *
 * Tokens go in blocks of AESI_TOKEN_BLOCK against the weights transposed once (output-major): each
 * output is four dot products over one contiguous weight row, summed in registers, so a weight is
 * read once per block instead of once per token and nothing is stored until the sum is done (the
 * input-major per-token loop read and wrote its whole hidden vector for every input). Each token's
 * sums still run over k in the same order from the same bias, so the results are the same numbers
 * as `aesiTwoLayerPerToken`, bit for bit (where that loop skips a zero input, the blocks add 0).
 */
function twoLayer(w: Float32Array, a: ArrayLike<number>, na: number, b: ArrayLike<number>, nb: number, m: number, h: number, o: number): Float64Array {
  const inp = na + nb;
  const b1 = inp * h;
  const w2 = b1 + h;
  const b2 = w2 + h * o;
  const out = new Float64Array(m * o);
  const B = AESI_TOKEN_BLOCK;
  let t0 = 0;
  if (m >= B) {
    const { w1T, w2T } = transposed(w, inp, h, o);
    const xs = new Float64Array(B * inp);
    const g = new Float64Array(B * h);
    const sums = new Float64Array(B);
    for (; t0 + B <= m; t0 += B) {
      for (let r = 0; r < B; r++) {
        const t = t0 + r;
        for (let k = 0; k < na; k++) xs[r * inp + k] = a[t * na + k];
        for (let k = 0; k < nb; k++) xs[r * inp + na + k] = b[t * nb + k];
      }
      for (let j = 0; j < h; j++) {
        dots4(w1T, j * inp, inp, xs, w[b1 + j], sums);
        for (let r = 0; r < B; r++) g[r * h + j] = geluErf(Math.fround(sums[r]));
      }
      for (let j = 0; j < o; j++) {
        dots4(w2T, j * h, h, g, w[b2 + j], sums);
        for (let r = 0; r < B; r++) out[(t0 + r) * o + j] = sums[r];
      }
    }
  }
  if (t0 < m) {
    // the last m mod AESI_TOKEN_BLOCK tokens (or all of fewer than a block), one at a time
    const rest = aesiTwoLayerPerToken(w, sliceRows(a, na, t0, m), na, sliceRows(b, nb, t0, m), nb, m - t0, h, o);
    out.set(rest, t0 * o);
  }
  return out;
}

function sliceRows(x: ArrayLike<number>, width: number, from: number, to: number): ArrayLike<number> {
  return ArrayBuffer.isView(x) ? (x as unknown as Float32Array).subarray(from * width, to * width) : Array.prototype.slice.call(x, from * width, to * width);
}

/**
 * The plain per-token loop of `twoLayer` (the reference its token blocks are checked against, bit
 * for bit, and the baseline of `npm run bench -- score`'s AESI case).
 */
export function aesiTwoLayerPerToken(w: Float32Array, a: ArrayLike<number>, na: number, b: ArrayLike<number>, nb: number, m: number, h: number, o: number): Float64Array {
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
