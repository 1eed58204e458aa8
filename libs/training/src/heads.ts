/**
 * The trainable heads as TF.js graphs, the same functions as the ONNX artifacts
 * (libs/kernels/src/graphs.ts) and the references (libs/scoring):
 * - separable LITE: S = Q D^T on query [L1, d] / documents [B, L2, d] zero-padded (truncate, then
 *   similarity 0: SPEC section 1's padding convention), rows then columns through
 *   affine -> ReLU -> LayerNorm (biased variance, eps 1e-5) twice, score w . vec(S'');
 * - K-NRM: phi from the 11 fixed RBF kernels over the real tokens (log clamped at 1e-10), then
 *   tanh(w . phi + b); only w and b are learned.
 * Weights are held transposed (x W^T layout) and exported back to the row-major `LiteWeights` /
 * `KnrmWeights` that `writeLiteArtifact` / `writeKnrmArtifact` take.
 */
import { KNRM_MIN_K, KNRM_MU, KNRM_SIGMA, LITE_LN_EPS, liteShapes, type KnrmWeights, type LiteWeights } from '@lateral/scoring';
import { rng, tf } from './tf';

export interface LiteSizes {
  L1: number;
  L2: number;
  m1: number;
  m2: number;
}

interface Dense {
  wT: tf.Variable; // [inp, out]
  b: tf.Variable;
  g: tf.Variable;
  beta: tf.Variable;
}

function glorot(r: () => number, inp: number, out: number): Float32Array {
  const lim = Math.sqrt(6 / (inp + out));
  return Float32Array.from({ length: inp * out }, () => (r() * 2 - 1) * lim);
}

function dense(r: () => number, inp: number, out: number, name: string): Dense {
  return {
    wT: tf.variable(tf.tensor2d(glorot(r, inp, out), [inp, out]), true, `${name}_wT`),
    b: tf.variable(tf.zeros([out]), true, `${name}_b`),
    g: tf.variable(tf.ones([out]), true, `${name}_g`),
    beta: tf.variable(tf.zeros([out]), true, `${name}_beta`),
  };
}

/** LayerNorm(ReLU(x W^T + b)) over the last axis of a 2-D [rows, inp] x. */
function denseLayer(x: tf.Tensor2D, l: Dense): tf.Tensor2D {
  const h = tf.relu(tf.add(tf.matMul(x, l.wT), l.b)) as tf.Tensor2D;
  const { mean, variance } = tf.moments(h, -1, true);
  return tf.add(tf.mul(tf.div(tf.sub(h, mean), tf.sqrt(tf.add(variance, LITE_LN_EPS))), l.g), l.beta) as tf.Tensor2D;
}

/** w (out x inp row-major) from W^T (inp x out row-major). */
function untranspose(wT: Float32Array, inp: number, out: number): Float32Array {
  const w = new Float32Array(wT.length);
  for (let k = 0; k < inp; k++) for (let o = 0; o < out; o++) w[o * inp + k] = wT[k * out + o];
  return w;
}
function transpose(W: Float32Array, out: number, inp: number): Float32Array {
  const t = new Float32Array(W.length);
  for (let o = 0; o < out; o++) for (let k = 0; k < inp; k++) t[k * out + o] = W[o * inp + k];
  return t;
}

export class LiteTf {
  readonly row1: Dense;
  readonly row2: Dense;
  readonly col1: Dense;
  readonly col2: Dense;
  /** final weights as [L2, L1] (w[i * L2 + j] = wT[j, i]) */
  readonly finalT: tf.Variable;
  /**
   * Residual on MaxSim: the weight of the base score, which `score` takes divided by `baseScale`
   * (MaxSim's within-list deviation, so it starts at 1 in the units the ranking loss sees).
   */
  readonly alpha: tf.Variable | null;

  /** residual: a LITE correction on MaxSim (SPEC section 1's LITE plus alpha x MaxSim / baseScale); null: plain LITE */
  constructor(readonly sizes: LiteSizes, seed: number, readonly residual: { baseScale: number } | null = null) {
    const { L1, L2, m1, m2 } = sizes;
    const r = rng(seed);
    this.row1 = dense(r, L2, m2, 'row1');
    this.row2 = dense(r, m2, L2, 'row2');
    this.col1 = dense(r, L1, m1, 'col1');
    this.col2 = dense(r, m1, L1, 'col2');
    // The final layer starts at zero: every candidate scores 0 and the first steps fit a linear
    // ranker over the (random-feature) S''. The former start (4x Glorot over L1 * L2 = 6,000
    // inputs) gave scores of deviation about 5 that ranked at random, and Adam's small steps over
    // the few hundred groups this data gives never undid it (trained LITE stayed near random).
    void glorot(r, L1 * L2, 1); // keeps the generator's sequence (and the seeded weights above) unchanged
    this.finalT = tf.variable(tf.zeros([L2, L1]), true, 'final_wT');
    this.alpha = residual ? tf.variable(tf.scalar(1), true, 'maxsim_alpha') : null;
  }

  variables(): tf.Variable[] {
    return [this.row1, this.row2, this.col1, this.col2].flatMap((l) => [l.wT, l.b, l.g, l.beta]).concat(this.finalT, this.alpha ? [this.alpha] : []);
  }

  /** S: [B, L1, L2] (already padded) -> scores [B]. */
  scoreSimilarities(S: tf.Tensor3D): tf.Tensor1D {
    const { L1, L2 } = this.sizes;
    const B = S.shape[0];
    const h = denseLayer(tf.reshape(S, [B * L1, L2]), this.row1);
    const r = denseLayer(h, this.row2); // [B*L1, L2]
    const rT = tf.reshape(tf.transpose(tf.reshape(r, [B, L1, L2]), [0, 2, 1]), [B * L2, L1]) as tf.Tensor2D;
    const c = denseLayer(denseLayer(rT, this.col1), this.col2); // [B*L2, L1]
    return tf.sum(tf.mul(tf.reshape(c, [B, L2, L1]), this.finalT), [1, 2]) as tf.Tensor1D;
  }

  /**
   * queries [B, L1, d] and documents [B, L2, d], both zero-padded -> scores [B]. A residual head
   * also takes `base` [B], each pair's MaxSim over all its real tokens, and adds alpha x base / baseScale.
   */
  score(queries: tf.Tensor3D, docs: tf.Tensor3D, base?: tf.Tensor1D): tf.Tensor1D {
    const lite = this.scoreSimilarities(tf.matMul(queries, docs, false, true) as tf.Tensor3D);
    if (!this.alpha) return lite;
    if (!base) throw new RangeError('LiteTf.score: a residual head needs base (each pair\'s MaxSim)');
    return tf.add(lite, tf.mul(tf.div(base, this.residual!.baseScale), this.alpha)) as tf.Tensor1D;
  }

  /** The weights in `liteReference` / artifact layout. */
  async export(): Promise<LiteWeights> {
    const { L1, L2, m1, m2 } = this.sizes;
    const get = async (v: tf.Variable) => Float32Array.from(await v.data());
    const layer = async (l: Dense, inp: number, out: number) => [untranspose(await get(l.wT), inp, out), await get(l.b), await get(l.g), await get(l.beta)];
    const [W1, b1, g1, be1] = await layer(this.row1, L2, m2);
    const [W2, b2, g2, be2] = await layer(this.row2, m2, L2);
    const [W3, b3, g3, be3] = await layer(this.col1, L1, m1);
    const [W4, b4, g4, be4] = await layer(this.col2, m1, L1);
    const w = untranspose(await get(this.finalT), L2, L1);
    const out: LiteWeights = { L1, L2, m1, m2, W1, b1, g1, be1, W2, b2, g2, be2, W3, b3, g3, be3, W4, b4, g4, be4, w };
    // float32, as the artifact stores it, so TF.js and ONNX Runtime score with the same weight
    if (this.alpha) out.maxsimWeight = Math.fround((await this.alpha.data())[0] / this.residual!.baseScale);
    return out;
  }

  /** Loads weights (e.g. the best epoch's snapshot) into the variables. */
  load(w: LiteWeights): void {
    const { L1, L2, m1, m2 } = this.sizes;
    const shapes = liteShapes(L1, L2, m1, m2);
    for (const [k, len] of Object.entries(shapes)) {
      if (w[k as keyof typeof shapes].length !== len) throw new RangeError(`LiteTf.load: ${k} has length ${w[k as keyof typeof shapes].length}, expected ${len}`);
    }
    const set = (l: Dense, W: Float32Array, b: Float32Array, g: Float32Array, be: Float32Array, out: number, inp: number) => {
      l.wT.assign(tf.tensor2d(transpose(W, out, inp), [inp, out]));
      l.b.assign(tf.tensor1d(b));
      l.g.assign(tf.tensor1d(g));
      l.beta.assign(tf.tensor1d(be));
    };
    set(this.row1, w.W1, w.b1, w.g1, w.be1, m2, L2);
    set(this.row2, w.W2, w.b2, w.g2, w.be2, L2, m2);
    set(this.col1, w.W3, w.b3, w.g3, w.be3, m1, L1);
    set(this.col2, w.W4, w.b4, w.g4, w.be4, L1, m1);
    this.finalT.assign(tf.tensor2d(transpose(w.w, L1, L2), [L2, L1]));
    if ((w.maxsimWeight !== undefined) !== !!this.alpha) throw new RangeError(`LiteTf.load: the weights are ${w.maxsimWeight !== undefined ? 'a residual on MaxSim' : 'plain LITE'}, the model ${this.alpha ? 'a residual' : 'plain LITE'}`);
    if (this.alpha) this.alpha.assign(tf.scalar(w.maxsimWeight! * this.residual!.baseScale));
  }

  dispose(): void {
    for (const v of this.variables()) v.dispose();
  }
}

/**
 * K-NRM's phi (11 features) of one query against B documents: query [n, d] (real tokens only),
 * docs [B, L, d] zero-padded, mask [B, L] (1 real, 0 padding). Not trainable: the kernels are fixed.
 */
export function knrmPhiTf(query: tf.Tensor2D, docs: tf.Tensor3D, mask: tf.Tensor2D): tf.Tensor2D {
  return tf.tidy(() => {
    const s = tf.expandDims(tf.matMul(docs, tf.transpose(query)), 3); // [B, L, n, 1]
    const diff = tf.sub(s, tf.tensor1d(KNRM_MU as number[]));
    const coef = tf.tensor1d(KNRM_SIGMA.map((x) => -1 / (2 * x * x)));
    const k = tf.mul(tf.exp(tf.mul(tf.mul(diff, diff), coef)), tf.reshape(mask, [mask.shape[0], mask.shape[1], 1, 1])); // [B, L, n, 11]
    const logK = tf.log(tf.maximum(tf.sum(k, 1), KNRM_MIN_K)); // [B, n, 11]
    return tf.sum(logK, 1) as tf.Tensor2D; // [B, 11]
  });
}

/**
 * K-NRM's learned part, tanh(w . phi + b), trained on standardised features: the phi are sums of
 * logs over query tokens (the exact-match kernel alone is about -23 per unmatched token), so raw
 * weights of Adam's step size already saturate tanh. The model is z = w' . (phi - mu) / sigma + b'
 * with mu, sigma the training features' mean and deviation; `export` folds them back into the
 * plain w, b the ONNX graph takes (w = w' / sigma, b = b' - w . mu), the same function.
 */
export class KnrmTf {
  readonly w: tf.Variable;
  readonly b: tf.Variable;
  private readonly mu: Float32Array;
  private readonly sigma: Float32Array;
  constructor(stats?: { mu: Float32Array; sigma: Float32Array }) {
    const K = KNRM_MU.length;
    this.mu = stats?.mu ?? new Float32Array(K);
    this.sigma = stats?.sigma ?? new Float32Array(K).fill(1);
    // Zero start: tanh in its linear range.
    this.w = tf.variable(tf.zeros([K, 1]), true, 'knrm_w');
    this.b = tf.variable(tf.scalar(0), true, 'knrm_b');
  }
  variables(): tf.Variable[] {
    return [this.w, this.b];
  }
  /** phi [B, 11] -> scores [B]. */
  scorePhi(phi: tf.Tensor2D): tf.Tensor1D {
    const z = tf.div(tf.sub(phi, tf.tensor1d(this.mu)), tf.tensor1d(this.sigma));
    return tf.reshape(tf.tanh(tf.add(tf.matMul(z, this.w), this.b)), [-1]) as tf.Tensor1D;
  }
  async export(): Promise<KnrmWeights> {
    const wp = await this.w.data();
    let b = (await this.b.data())[0];
    const w = new Float32Array(wp.length);
    for (let k = 0; k < w.length; k++) {
      w[k] = wp[k] / this.sigma[k];
      b -= w[k] * this.mu[k];
    }
    return { w, b };
  }
  load(weights: KnrmWeights): void {
    const wp = new Float32Array(KNRM_MU.length);
    let b = weights.b;
    for (let k = 0; k < wp.length; k++) {
      wp[k] = weights.w[k] * this.sigma[k];
      b += weights.w[k] * this.mu[k];
    }
    this.w.assign(tf.tensor2d(wp, [KNRM_MU.length, 1]));
    this.b.assign(tf.scalar(b));
  }
  dispose(): void {
    this.w.dispose();
    this.b.dispose();
  }
}

/** Zero-pads / truncates `rows` rows of width d to `L` rows (the artifacts' convention). */
export function padRowsTo(v: Float32Array, rows: number, d: number, L: number, out = new Float32Array(L * d), at = 0): Float32Array {
  const k = Math.min(rows, L) * d;
  out.set(v.subarray(0, k), at);
  out.fill(0, at + k, at + L * d);
  return out;
}
