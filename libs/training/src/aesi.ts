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
 */
import { initTf, rng, shuffled, tf, type TfBackend } from './tf';
import { TrainingDivergedError } from './trainer';

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

  private static half(x: tf.Tensor2D, a: Layer, b: Layer): tf.Tensor2D {
    return tf.add(tf.matMul(geluTf(tf.add(tf.matMul(x, a.w), a.b)) as tf.Tensor2D, b.w), b.b) as tf.Tensor2D;
  }

  /** v [m, d], u [m, s] -> z [m, c] */
  encode(v: tf.Tensor2D, u: tf.Tensor2D): tf.Tensor2D {
    return AesiTf.half(tf.concat([v, u], 1), this.e1, this.e2);
  }

  /** z [m, c], u [m, s] -> v' [m, d] */
  decode(z: tf.Tensor2D, u: tf.Tensor2D): tf.Tensor2D {
    return AesiTf.half(tf.concat([z, u], 1), this.d1, this.d2);
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

export interface AesiProgress {
  epoch: number;
  maxEpochs: number;
  step: number;
  stepsPerEpoch: number;
  loss: number;
  etaSeconds: number;
  curve: AesiEpoch[];
}

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
  const stepsPerEpoch = Math.ceil(train.length / B);

  const model = new AesiTf({ inputDims: dims, sideDims, codeDims: o.codeDims, width: o.width }, o.seed);
  const optimizer = tf.train.adam(o.learningRate);
  const curve: AesiEpoch[] = [];
  let best: { epoch: number; valMse: number; weights: AesiExport; relError: number } | null = null;
  let lastFinite: number | null = null;
  try {
    const heldOut = async () => {
      let sq = 0;
      let norm = 0;
      for (let a = 0; a < val.length; a += B) {
        const idx = val.slice(a, a + B);
        const [e, nn] = tf.tidy(() => {
          const v = tf.tensor2d(gather(vectors, dims, idx, idx.length), [idx.length, dims]);
          const u = tf.tensor2d(gather(side, sideDims, idx, idx.length), [idx.length, sideDims]);
          return [tf.sum(tf.square(tf.sub(model.decode(model.encode(v, u), u), v))), tf.sum(tf.square(v))];
        });
        sq += (await e.data())[0];
        norm += (await nn.data())[0];
        e.dispose();
        nn.dispose();
        await yieldLoop();
      }
      return { mse: sq / (val.length * dims), relError: norm > 0 ? sq / norm : 0 };
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
        const v = tf.tensor2d(gather(vectors, dims, idx, B), [B, dims]);
        const u = tf.tensor2d(gather(side, sideDims, idx, B), [B, sideDims]);
        const m = tf.tensor1d(mask);
        const cost = optimizer.minimize(() => model.loss(v, u, m), true, model.variables())!;
        const loss = (await cost.data())[0];
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
        best = { epoch, valMse: h.mse, relError: h.relError, weights: await model.export() };
        since = 0;
      } else if (++since >= o.patience) break;
    }
  } finally {
    model.dispose();
    optimizer.dispose();
  }
  return {
    weights: best!.weights,
    bestEpoch: best!.epoch,
    curve,
    heldOut: { tokens: val.length, mse: best!.valMse, relError: best!.relError },
    data: { tokens: n, trainTokens: train.length, valTokens: val.length },
    options: { ...o, backend },
    seconds: (performance.now() - t0) / 1000,
  };
}
