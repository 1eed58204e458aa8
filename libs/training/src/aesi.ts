/**
 * SDR's AESI autoencoder (SPEC section 2, SDR 3.1) fitted with TF.js on a collection's token
 * vectors v (d) and the static input embeddings u (s) of the same token ids:
 *
 *   encoder  z  = W2e gelu(W1e [v; u] + b1e) + b2e      (d + s -> h -> c)
 *   decoder  v' = W2d gelu(W1d [z; u] + b1d) + b2d      (c + s -> h -> d)
 *
 * GELU is the exact (erf) form; h = 1536 in the paper (configurable). Loss: MSE over the real
 * (non-padding) tokens of a batch; batches have a fixed size and the last one is padded with rows
 * whose mask is 0. Adam (lr 1e-3 as the paper). A seeded share of the tokens is held out: after
 * every epoch their MSE decides early stopping, the best epoch's weights are kept. Everything
 * random comes from the seed. The weights export in the packed layout @lateral/codec's AESI
 * inference reads (input-major W, then bias, per layer).
 *
 * Normalisation: the network is trained on centred, rescaled inputs, v_n = (v - mean_v) / s_v and
 * u_n = (u - mean_u) / s_u (s = the RMS of the centred rows over the training tokens). Contextual
 * vectors of a sentence encoder are unit vectors (coordinates ~0.05) while static input embeddings
 * are ~10x larger, so raw, the encoder's first layer saw almost only u and the targets were ~20x
 * below the initial outputs: Adam spent its steps on scale, not context (held-out relative error
 * ~0.9 after 560 steps, worse than PCA without side information). The export folds the
 * normalisation back into the weights (foldAesiNormalisation), and also centres the code (its
 * mean over the held-out tokens moves into b2e and b1d), so an EDEN block's norm pays for the code's
 * spread, not for a constant offset: same function, the codec's raw-space layout.
 */
import { initTf, rng, shuffled, tf, type TfBackend } from './tf';
import { TrainingDivergedError, type EpochProgress } from './trainer';

export interface AesiSizes {
  inputDims: number;
  sideDims: number;
  codeDims: number;
  /** intermediate width (1536 in the paper) */
  width: number;
}

export interface AesiExport extends AesiSizes {
  encoder: Float32Array;
  decoder: Float32Array;
}

interface Layer {
  w: tf.Variable; // [inp, out]
  b: tf.Variable; // [out]
}

function glorot(r: () => number, inp: number, out: number): Float32Array {
  const lim = Math.sqrt(6 / (inp + out));
  return Float32Array.from({ length: inp * out }, () => (r() * 2 - 1) * lim);
}

function layer(r: () => number, inp: number, out: number, name: string): Layer {
  return { w: tf.variable(tf.tensor2d(glorot(r, inp, out), [inp, out]), true, name + '_w'), b: tf.variable(tf.zeros([out]), true, name + '_b') };
}

/** Exact GELU: x/2 (1 + erf(x / sqrt 2)). */
export function geluTf(x: tf.Tensor): tf.Tensor {
  return tf.mul(tf.mul(x, 0.5), tf.add(tf.erf(tf.mul(x, Math.SQRT1_2)), 1));
}

type DenseFn = (x: tf.Tensor, w: tf.Tensor, b: tf.Tensor) => tf.Tensor2D;

/**
 * x W + b with its gradient ordered for the wasm backend's fast kernel. TF.js's own matMul
 * gradient takes dx = matMul(dy, W, false, true) and dW = matMul(x, dy, true, false), and the
 * wasm backend's transposed products are 7-10x slower than transposing the operand first and
 * multiplying plainly (measured: 256 x 768 by 256 x 1536 with transposeA 2.2 s, 0.07 s via
 * tf.transpose): the same products, computed by TF.js ops in the fast order. `inputGrad` false
 * (x is data: the token vectors, the static embeddings) returns a zero dx instead of computing
 * one. GELU, the loss and Adam keep TF.js's own gradients.
 */
function denseOp(inputGrad: boolean): DenseFn {
  return tf.customGrad((...args: (tf.Tensor | tf.GradSaveFunc)[]) => {
    const [x, w, b, save] = args as [tf.Tensor2D, tf.Tensor2D, tf.Tensor1D, tf.GradSaveFunc];
    save([x, w]);
    return {
      value: tf.add(tf.matMul(x, w), b),
      gradFunc: (dy: tf.Tensor, saved: tf.Tensor[]) => {
        const [sx, sw] = saved as [tf.Tensor2D, tf.Tensor2D];
        const g = dy as tf.Tensor2D;
        return [inputGrad ? tf.matMul(g, tf.transpose(sw)) : tf.zerosLike(sx), tf.matMul(tf.transpose(sx), g), tf.sum(g, 0)];
      },
    };
  }) as DenseFn;
}
const dense = denseOp(true);
const denseOfData = denseOp(false);

export class AesiTf {
  readonly e1: Layer;
  readonly e2: Layer;
  readonly d1: Layer;
  readonly d2: Layer;

  constructor(readonly sizes: AesiSizes, seed: number) {
    const { inputDims: d, sideDims: s, codeDims: c, width: h } = sizes;
    for (const [k, v] of Object.entries(sizes)) if (!Number.isInteger(v) || v < 1) throw new RangeError(`AESI ${k} must be a positive integer, got ${v}`);
    const r = rng(seed);
    this.e1 = layer(r, d + s, h, 'aesi_e1');
    this.e2 = layer(r, h, c, 'aesi_e2');
    this.d1 = layer(r, c + s, h, 'aesi_d1');
    this.d2 = layer(r, h, d, 'aesi_d2');
  }

  variables(): tf.Variable[] {
    return [this.e1, this.e2, this.d1, this.d2].flatMap((l) => [l.w, l.b]);
  }

  /** v [m, d], u [m, s] -> z [m, c] (the inputs are data: no gradient flows into them) */
  encode(v: tf.Tensor2D, u: tf.Tensor2D): tf.Tensor2D {
    const hid = geluTf(denseOfData(tf.concat([v, u], 1) as tf.Tensor2D, this.e1.w, this.e1.b)) as tf.Tensor2D;
    return dense(hid, this.e2.w, this.e2.b);
  }

  /**
   * z [m, c], u [m, s] -> v' [m, d]. W1d [z; u] = W1d[:c] z + W1d[c:] u: the gradient flows into
   * z (the encoder) but not into u, so only the code's rows take the input-gradient product.
   */
  decode(z: tf.Tensor2D, u: tf.Tensor2D): tf.Tensor2D {
    const c = this.sizes.codeDims;
    const wz = tf.slice(this.d1.w, [0, 0], [c, -1]);
    const wu = tf.slice(this.d1.w, [c, 0], [-1, -1]);
    const pre = tf.add(dense(z, wz, this.d1.b), denseOfData(u, wu, tf.zerosLike(this.d1.b)));
    return dense(geluTf(pre) as tf.Tensor2D, this.d2.w, this.d2.b);
  }

  /**
   * Mean squared error per coordinate over the rows whose mask is 1 (padding rows count for
   * nothing): sum_t mask_t ||v'_t - v_t||^2 / (d * sum_t mask_t).
   */
  loss(v: tf.Tensor2D, u: tf.Tensor2D, mask: tf.Tensor1D): tf.Scalar {
    const err = tf.sum(tf.square(tf.sub(this.decode(this.encode(v, u), u), v)), 1);
    return tf.div(tf.sum(tf.mul(err, mask)), tf.mul(tf.maximum(tf.sum(mask), 1), this.sizes.inputDims)) as tf.Scalar;
  }

  /** Packed weights: encoder W1e | b1e | W2e | b2e, decoder W1d | b1d | W2d | b2d (input-major). */
  async export(): Promise<AesiExport> {
    const pack = async (ls: Layer[]) => {
      const parts = await Promise.all(ls.flatMap((l) => [l.w.data(), l.b.data()]));
      const out = new Float32Array(parts.reduce((n, p) => n + p.length, 0));
      let o = 0;
      for (const p of parts) {
        out.set(p as Float32Array, o);
        o += p.length;
      }
      return out;
    };
    return { ...this.sizes, encoder: await pack([this.e1, this.e2]), decoder: await pack([this.d1, this.d2]) };
  }

  load(w: AesiExport): void {
    const unpack = (a: Float32Array, ls: Layer[]) => {
      let o = 0;
      for (const l of ls)
        for (const v of [l.w, l.b]) {
          const n = v.size;
          v.assign(tf.tensor(a.subarray(o, o + n), v.shape));
          o += n;
        }
      if (o !== a.length) throw new RangeError(`packed AESI weights have ${a.length} values, the model ${o}`);
    };
    unpack(w.encoder, [this.e1, this.e2]);
    unpack(w.decoder, [this.d1, this.d2]);
  }

  dispose(): void {
    for (const v of this.variables()) v.dispose();
  }
}

export interface AesiTrainOptions {
  codeDims: number;
  /** intermediate width; default 1536 (the paper) */
  width?: number;
  seed: number;
  maxEpochs?: number;
  patience?: number;
  learningRate?: number;
  /** tokens per Adam step (fixed; the last batch is padded and masked) */
  batchTokens?: number;
  /** share of the tokens held out for early stopping and the held-out error */
  valFraction?: number;
  backend?: TfBackend;
  /** called after every step; throw (e.g. a cancellation) to stop */
  onProgress?: (p: AesiProgress) => Promise<void> | void;
}

export interface AesiEpoch {
  epoch: number;
  /** training MSE per coordinate (mean over the epoch's steps) */
  trainMse: number;
  /** held-out MSE per coordinate */
  valMse: number;
  /** held-out sum ||v - v'||^2 / sum ||v||^2 */
  valRelError: number;
  seconds: number;
}

/** `loss`: the training MSE of the epoch so far. */
export type AesiProgress = EpochProgress<AesiEpoch>;

export interface AesiTrainResult {
  weights: AesiExport;
  bestEpoch: number;
  curve: AesiEpoch[];
  heldOut: { tokens: number; mse: number; relError: number };
  data: { tokens: number; trainTokens: number; valTokens: number };
  options: Required<Omit<AesiTrainOptions, 'onProgress' | 'backend'>> & { backend: TfBackend };
  seconds: number;
}

const yieldLoop = () => new Promise<void>((r) => setImmediate(r));

/** How the network's inputs were normalised: x_n = (x - mean) / scale, for v and for u. */
export interface AesiNormalisation {
  vMean: Float64Array;
  vScale: number;
  uMean: Float64Array;
  uScale: number;
  /** the code's mean (in the trained network's units), subtracted from the exported code */
  zMean: Float64Array;
}

/** Per-coordinate mean and the RMS of the centred rows (1 when they are all equal) of rows `idx` of an n x k matrix. */
export function centreAndScale(x: Float32Array, k: number, idx: readonly number[]): { mean: Float64Array; scale: number } {
  const mean = new Float64Array(k);
  for (const r of idx) for (let j = 0; j < k; j++) mean[j] += x[r * k + j];
  for (let j = 0; j < k; j++) mean[j] /= Math.max(1, idx.length);
  let sq = 0;
  for (const r of idx) for (let j = 0; j < k; j++) sq += (x[r * k + j] - mean[j]) ** 2;
  const scale = Math.sqrt(sq / Math.max(1, idx.length * k));
  return { mean, scale: scale > 0 && Number.isFinite(scale) ? scale : 1 };
}

/**
 * The weights of a network trained on normalised inputs (v_n, u_n; output v_n) rewritten for raw
 * inputs and a raw output, with the code centred: for every v, u the exported encoder gives
 * z - zMean and the exported decoder, fed that, gives scale_v v_n' + mean_v. Float64 arithmetic,
 * stored as float32.
 *   W1e = [W1e_v / s_v; W1e_u / s_u], b1e -= mean_v W1e_v / s_v + mean_u W1e_u / s_u
 *   b2e -= zMean
 *   W1d = [W1d_z; W1d_u / s_u],       b1d += zMean W1d_z - mean_u W1d_u / s_u
 *   W2d = s_v W2d,                    b2d = s_v b2d + mean_v
 */
export function foldAesiNormalisation(w: AesiExport, n: AesiNormalisation): AesiExport {
  const { inputDims: d, sideDims: s, codeDims: c, width: h } = w;
  const enc = Float64Array.from(w.encoder);
  const dec = Float64Array.from(w.decoder);
  // encoder layer 1: rows 0..d-1 act on v, d..d+s-1 on u; bias at (d+s) h
  const b1e = (d + s) * h;
  for (let k = 0; k < d + s; k++) {
    const isV = k < d;
    const inv = 1 / (isV ? n.vScale : n.uScale);
    const m = isV ? n.vMean[k] : n.uMean[k - d];
    for (let j = 0; j < h; j++) {
      enc[k * h + j] *= inv;
      enc[b1e + j] -= m * enc[k * h + j];
    }
  }
  const b2e = b1e + h + h * c;
  for (let j = 0; j < c; j++) enc[b2e + j] -= n.zMean[j];
  // decoder layer 1: rows 0..c-1 act on z, c..c+s-1 on u
  const b1d = (c + s) * h;
  for (let k = 0; k < c + s; k++) {
    if (k < c) {
      for (let j = 0; j < h; j++) dec[b1d + j] += n.zMean[k] * dec[k * h + j];
    } else {
      const inv = 1 / n.uScale;
      const m = n.uMean[k - c];
      for (let j = 0; j < h; j++) {
        dec[k * h + j] *= inv;
        dec[b1d + j] -= m * dec[k * h + j];
      }
    }
  }
  const w2d = b1d + h;
  const b2d = w2d + h * d;
  for (let i = 0; i < h * d; i++) dec[w2d + i] *= n.vScale;
  for (let j = 0; j < d; j++) dec[b2d + j] = n.vScale * dec[b2d + j] + n.vMean[j];
  return { ...w, encoder: Float32Array.from(enc), decoder: Float32Array.from(dec) };
}

/** Rows `idx` of an n x k matrix, padded with zero rows to `rows`. */
function gather(x: Float32Array, k: number, idx: readonly number[], rows: number): Float32Array {
  const out = new Float32Array(rows * k);
  idx.forEach((r, i) => out.set(x.subarray(r * k, (r + 1) * k), i * k));
  return out;
}

/**
 * Fits AESI on n tokens: `vectors` n x dims (contextual), `side` n x sideDims (static embeddings
 * of the same tokens, same order).
 */
export async function trainAesi(vectors: Float32Array, side: Float32Array, dims: number, sideDims: number, opts: AesiTrainOptions): Promise<AesiTrainResult> {
  const t0 = performance.now();
  const o = {
    codeDims: opts.codeDims,
    width: opts.width ?? 1536,
    seed: opts.seed,
    maxEpochs: opts.maxEpochs ?? 10,
    patience: opts.patience ?? 2,
    learningRate: opts.learningRate ?? 1e-3,
    batchTokens: opts.batchTokens ?? 256,
    valFraction: opts.valFraction ?? 0.1,
  };
  const n = vectors.length / dims;
  if (!Number.isInteger(n) || side.length !== n * sideDims) throw new RangeError(`AESI needs n x ${dims} vectors and n x ${sideDims} static embeddings, got ${vectors.length} and ${side.length} values`);
  const nVal = Math.max(1, Math.round(n * o.valFraction));
  if (n - nVal < 1) throw new RangeError(`AESI needs at least 2 tokens, got ${n}`);
  const backend = await initTf(opts.backend ?? 'wasm');
  const r = rng(o.seed ^ 0x9e3779b9);
  const order = shuffled(Array.from({ length: n }, (_, i) => i), r);
  const val = order.slice(0, nVal).sort((a, b) => a - b);
  const train = order.slice(nVal);
  const B = Math.min(o.batchTokens, train.length);
  // Normalisation from the training tokens (see the module comment); the network sees vn, un.
  const vn = centreAndScale(vectors, dims, train);
  const un = centreAndScale(side, sideDims, train);
  const normalised = (x: Float32Array, k: number, p: { mean: Float64Array; scale: number }) => {
    const out = new Float32Array(x.length);
    for (let i = 0; i < x.length; i++) out[i] = (x[i] - p.mean[i % k]) / p.scale;
    return out;
  };
  const V = normalised(vectors, dims, vn);
  const U = normalised(side, sideDims, un);
  const mseUnit = vn.scale * vn.scale; // normalised MSE -> raw MSE
  let valEnergy = 0;
  for (const r of val) for (let j = 0; j < dims; j++) valEnergy += vectors[r * dims + j] ** 2;
  const stepsPerEpoch = Math.ceil(train.length / B);

  const model = new AesiTf({ inputDims: dims, sideDims, codeDims: o.codeDims, width: o.width }, o.seed);
  const optimizer = tf.train.adam(o.learningRate);
  const curve: AesiEpoch[] = [];
  let best: { epoch: number; valMse: number; weights: AesiExport; relError: number; zMean: Float64Array } | null = null;
  let lastFinite: number | null = null;
  try {
    const heldOut = async () => {
      let sq = 0;
      const zMean = new Float64Array(o.codeDims);
      for (let a = 0; a < val.length; a += B) {
        const idx = val.slice(a, a + B);
        const [e, zs] = tf.tidy(() => {
          const v = tf.tensor2d(gather(V, dims, idx, idx.length), [idx.length, dims]);
          const u = tf.tensor2d(gather(U, sideDims, idx, idx.length), [idx.length, sideDims]);
          const z = model.encode(v, u);
          return [tf.sum(tf.square(tf.sub(model.decode(z, u), v))), tf.sum(z, 0)];
        });
        sq += (await e.data())[0];
        (await zs.data()).forEach((x: number, j: number) => (zMean[j] += x / val.length));
        e.dispose();
        zs.dispose();
        await yieldLoop();
      }
      // back in raw units: MSE per coordinate, and relative to the raw held-out vectors' energy
      return { mse: (sq * mseUnit) / (val.length * dims), relError: valEnergy > 0 ? (sq * mseUnit) / valEnergy : 0, zMean };
    };

    let since = 0;
    for (let epoch = 1; epoch <= o.maxEpochs; epoch++) {
      const te = performance.now();
      const perm = shuffled(train, r);
      let sum = 0;
      for (let step = 0; step < stepsPerEpoch; step++) {
        const idx = perm.slice(step * B, (step + 1) * B);
        const mask = new Float32Array(B);
        mask.fill(1, 0, idx.length);
        const v = tf.tensor2d(gather(V, dims, idx, B), [B, dims]);
        const u = tf.tensor2d(gather(U, sideDims, idx, B), [B, sideDims]);
        const m = tf.tensor1d(mask);
        const cost = optimizer.minimize(() => model.loss(v, u, m), true, model.variables())!;
        const loss = (await cost.data())[0] * mseUnit;
        tf.dispose([v, u, m, cost]);
        if (!Number.isFinite(loss)) throw new TrainingDivergedError(epoch, lastFinite);
        lastFinite = loss;
        sum += loss;
        const elapsed = (performance.now() - t0) / 1000;
        const done = (epoch - 1) * stepsPerEpoch + step + 1;
        await opts.onProgress?.({ epoch, maxEpochs: o.maxEpochs, step: step + 1, stepsPerEpoch, loss: sum / (step + 1), etaSeconds: (elapsed / done) * (o.maxEpochs * stepsPerEpoch - done), curve });
        await yieldLoop();
      }
      const h = await heldOut();
      if (!Number.isFinite(h.mse)) throw new TrainingDivergedError(epoch, lastFinite);
      curve.push({ epoch, trainMse: sum / stepsPerEpoch, valMse: h.mse, valRelError: h.relError, seconds: (performance.now() - te) / 1000 });
      if (!best || h.mse < best.valMse) {
        best = { epoch, valMse: h.mse, relError: h.relError, weights: await model.export(), zMean: h.zMean };
        since = 0;
      } else if (++since >= o.patience) break;
    }
  } finally {
    model.dispose();
    optimizer.dispose();
  }
  return {
    weights: foldAesiNormalisation(best!.weights, { vMean: vn.mean, vScale: vn.scale, uMean: un.mean, uScale: un.scale, zMean: best!.zMean }),
    bestEpoch: best!.epoch,
    curve,
    heldOut: { tokens: val.length, mse: best!.valMse, relError: best!.relError },
    data: { tokens: n, trainTokens: train.length, valTokens: val.length },
    options: { ...o, backend },
    seconds: (performance.now() - t0) / 1000,
  };
}
