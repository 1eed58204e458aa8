import { maxsim } from './maxsim';
import { assertDim, assertMatrix, ShapeError } from './shapes';

/**
 * Separable LITE (LITE paper section 3, SPEC section 1). Shapes are fixed per artifact:
 * L1 query rows, L2 document columns, hidden widths m1 (column MLP) and m2 (row MLP).
 *
 * Padding convention (shared by training, `liteReference`, the ONNX artifact and serving):
 * S = Q D^T over the real tokens, then **truncate** to the first L1 query tokens / first L2
 * document tokens and **pad with similarity 0** up to L1 x L2. The scorer is position-dependent,
 * so the pad value is part of the model: do not change it without retraining.
 */
export interface LiteWeights {
  L1: number;
  L2: number;
  m1: number;
  m2: number;
  /** row MLP, layer 1: W1 m2 x L2, b1 m2, LayerNorm gain g1 / bias be1 (m2) */
  W1: Float32Array; b1: Float32Array; g1: Float32Array; be1: Float32Array;
  /** row MLP, layer 2: W2 L2 x m2, b2 L2, g2 / be2 (L2) */
  W2: Float32Array; b2: Float32Array; g2: Float32Array; be2: Float32Array;
  /** column MLP, layer 1: W3 m1 x L1, b3 m1, g3 / be3 (m1) */
  W3: Float32Array; b3: Float32Array; g3: Float32Array; be3: Float32Array;
  /** column MLP, layer 2: W4 L1 x m1, b4 L1, g4 / be4 (L1) */
  W4: Float32Array; b4: Float32Array; g4: Float32Array; be4: Float32Array;
  /** final linear layer over vec(S'') in row-major order (index i * L2 + j): L1 * L2 */
  w: Float32Array;
  /**
   * LITE residual on MaxSim (absent: plain LITE). When set, the score is
   * `maxsimWeight * MaxSim(q, d) + LITE(S)`, MaxSim being the plain, unnormalised sum over every
   * real query and document token (not truncated to L1 x L2; `maxsim` here, the re-rank MaxSim
   * scorer in serving). LITE's part is unchanged; the correction it learns starts at zero.
   */
  maxsimWeight?: number;
}

/** LayerNorm epsilon, inside the square root (PyTorch's default). */
export const LITE_LN_EPS = 1e-5;
export const LITE_DEFAULT = { L1: 30, L2: 200, m1: 360, m2: 2400 } as const;
export const LITE_SMALL = { L1: 30, L2: 50, m1: 360, m2: 768 } as const;

export function liteShapes(L1: number, L2: number, m1: number, m2: number): Record<keyof Omit<LiteWeights, 'L1' | 'L2' | 'm1' | 'm2' | 'maxsimWeight'>, number> {
  return {
    W1: m2 * L2, b1: m2, g1: m2, be1: m2,
    W2: L2 * m2, b2: L2, g2: L2, be2: L2,
    W3: m1 * L1, b3: m1, g3: m1, be3: m1,
    W4: L1 * m1, b4: L1, g4: L1, be4: L1,
    w: L1 * L2,
  };
}

export function assertLiteWeights(fn: string, wts: LiteWeights): void {
  for (const k of ['L1', 'L2', 'm1', 'm2'] as const) assertDim(fn, k, wts[k], 1);
  if (wts.maxsimWeight !== undefined && !Number.isFinite(wts.maxsimWeight)) throw new ShapeError(`${fn}: weights.maxsimWeight must be a finite number, got ${wts.maxsimWeight}`);
  const shapes = liteShapes(wts.L1, wts.L2, wts.m1, wts.m2);
  for (const [key, len] of Object.entries(shapes)) {
    const arr = wts[key as keyof typeof shapes];
    if (!arr || arr.length !== len) {
      throw new ShapeError(`${fn}: weights.${key} has length ${arr?.length}, expected ${len} for L1=${wts.L1} L2=${wts.L2} m1=${wts.m1} m2=${wts.m2}`);
    }
  }
}

/**
 * The fixed-size LITE input: S = Q D^T truncated / zero-padded to L1 x L2 (see the convention above).
 * q: n x d, doc: m x d. Returns L1 x L2 (float32).
 */
export function litePaddedSimilarity(q: Float32Array, n: number, doc: Float32Array, m: number, d: number, L1: number, L2: number): Float32Array {
  const fn = 'litePaddedSimilarity';
  assertDim(fn, 'n', n);
  assertDim(fn, 'm', m);
  assertDim(fn, 'd', d, 1);
  assertMatrix(fn, 'q', q, n, d, 'n', 'd');
  assertMatrix(fn, 'doc', doc, m, d, 'm', 'd');
  const S = new Float32Array(L1 * L2);
  const nn = Math.min(n, L1), mm = Math.min(m, L2);
  for (let i = 0; i < nn; i++) {
    for (let j = 0; j < mm; j++) {
      let acc = 0;
      for (let k = 0; k < d; k++) acc += q[i * d + k] * doc[j * d + k];
      S[i * L2 + j] = acc;
    }
  }
  return S;
}

/** y = LN(ReLU(W x + b)) with W: out x inp, x: inp. float64 throughout. */
function layer(W: Float32Array, b: Float32Array, g: Float32Array, be: Float32Array, x: Float64Array, out: number, inp: number): Float64Array {
  const y = new Float64Array(out);
  let mean = 0;
  for (let o = 0; o < out; o++) {
    let acc = b[o];
    for (let k = 0; k < inp; k++) acc += W[o * inp + k] * x[k];
    y[o] = acc > 0 ? acc : 0;
    mean += y[o];
  }
  mean /= out;
  let v = 0;
  for (let o = 0; o < out; o++) v += (y[o] - mean) ** 2;
  const inv = 1 / Math.sqrt(v / out + LITE_LN_EPS);
  for (let o = 0; o < out; o++) y[o] = (y[o] - mean) * inv * g[o] + be[o];
  return y;
}

/**
 * LITE forward pass on an already padded similarity matrix.
 * S: L1 x L2. Returns the scalar score w . vec(S'').
 * Every layer is affine -> ReLU -> LayerNorm (biased variance, eps 1e-5), including both
 * output layers; no residual connections.
 */
export function liteForward(S: Float32Array, wts: LiteWeights): number {
  assertLiteWeights('liteForward', wts);
  const { L1, L2, m1, m2 } = wts;
  assertMatrix('liteForward', 'S', S, L1, L2, 'L1', 'L2');
  const S1 = new Float64Array(L1 * L2);
  const row = new Float64Array(L2);
  for (let i = 0; i < L1; i++) {
    for (let j = 0; j < L2; j++) row[j] = S[i * L2 + j];
    const h = layer(wts.W1, wts.b1, wts.g1, wts.be1, row, m2, L2);
    const r = layer(wts.W2, wts.b2, wts.g2, wts.be2, h, L2, m2);
    S1.set(r, i * L2);
  }
  const col = new Float64Array(L1);
  let score = 0;
  for (let j = 0; j < L2; j++) {
    for (let i = 0; i < L1; i++) col[i] = S1[i * L2 + j];
    const g = layer(wts.W3, wts.b3, wts.g3, wts.be3, col, m1, L1);
    const c = layer(wts.W4, wts.b4, wts.g4, wts.be4, g, L1, m1);
    for (let i = 0; i < L1; i++) score += wts.w[i * L2 + j] * c[i];
  }
  return score;
}

/**
 * Separable LITE reference: q: n x d, doc: m x d (truncated / zero-padded to L1 x L2). Returns a
 * scalar. A residual head (`maxsimWeight` set) adds maxsimWeight x MaxSim over all real tokens.
 */
export function liteReference(q: Float32Array, n: number, doc: Float32Array, m: number, d: number, wts: LiteWeights): number {
  assertLiteWeights('liteReference', wts);
  const lite = liteForward(litePaddedSimilarity(q, n, doc, m, d, wts.L1, wts.L2), wts);
  return wts.maxsimWeight === undefined ? lite : wts.maxsimWeight * maxsim(q, n, doc, m, d) + lite;
}

export interface LiteFlatWeights {
  L1: number;
  L2: number;
  /** hidden width h */
  hidden: number;
  /** W: h x (L1 * L2), applied to vec(S) in row-major order */
  W: Float32Array;
  b: Float32Array;
  /** a: h */
  a: Float32Array;
}

/**
 * Flattened LITE (theory-only in the paper): a . ReLU(W vec(S) + b), with S padded as for LITE.
 * q: n x d, doc: m x d. Returns a scalar.
 */
export function liteFlat(q: Float32Array, n: number, doc: Float32Array, m: number, d: number, wts: LiteFlatWeights): number {
  const fn = 'liteFlat';
  const { L1, L2, hidden } = wts;
  assertDim(fn, 'L1', L1, 1);
  assertDim(fn, 'L2', L2, 1);
  assertDim(fn, 'hidden', hidden, 1);
  assertMatrix(fn, 'weights.W', wts.W, hidden, L1 * L2, 'hidden', '(L1*L2)');
  if (wts.b.length !== hidden) throw new ShapeError(`${fn}: weights.b has length ${wts.b.length}, expected hidden = ${hidden}`);
  if (wts.a.length !== hidden) throw new ShapeError(`${fn}: weights.a has length ${wts.a.length}, expected hidden = ${hidden}`);
  const S = litePaddedSimilarity(q, n, doc, m, d, L1, L2);
  const F = L1 * L2;
  let score = 0;
  for (let h = 0; h < hidden; h++) {
    let acc = wts.b[h];
    for (let k = 0; k < F; k++) acc += wts.W[h * F + k] * S[k];
    if (acc > 0) score += wts.a[h] * acc;
  }
  return score;
}
