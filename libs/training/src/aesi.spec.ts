import { beforeAll, describe, expect, it } from 'vitest';
import { aesiArtifact, createCodec, deserializeArtifact, erf, geluErf, LinearStage, serializeArtifact } from '@lateral/codec';
import { CodecSettingsSchema } from '@lateral/shared';
import { AesiTf, geluTf, trainAesi } from './aesi';
import { initTf, rng, tf } from './tf';

/** n tokens of d dims whose vectors depend (non-linearly) on an s-dim "static embedding" plus a little context. */
function tokens(n: number, d: number, s: number, seed: number) {
  const r = rng(seed);
  const g = () => r() * 2 - 1;
  const mix = Float32Array.from({ length: s * d }, g);
  const side = Float32Array.from({ length: n * s }, g);
  const vectors = new Float32Array(n * d);
  for (let t = 0; t < n; t++) {
    const ctx = g();
    for (let j = 0; j < d; j++) {
      let x = 0;
      for (let k = 0; k < s; k++) x += side[t * s + k] * mix[k * d + j];
      vectors[t * d + j] = Math.tanh(x) + 0.3 * ctx * Math.cos(j);
    }
  }
  return { vectors, side };
}

describe('AESI autoencoder (TF.js)', () => {
  beforeAll(async () => {
    await initTf();
  });

  it('has the SDR shapes: [v; u] -> h -> c and [z; u] -> h -> d, biases present', () => {
    const m = new AesiTf({ inputDims: 12, sideDims: 5, codeDims: 3, width: 20 }, 1);
    expect(m.variables().map((v) => v.shape)).toEqual([[17, 20], [20], [20, 3], [3], [8, 20], [20], [20, 12], [12]]);
    const v = tf.randomNormal([7, 12], 0, 1, 'float32', 3) as tf.Tensor2D;
    const u = tf.randomNormal([7, 5], 0, 1, 'float32', 4) as tf.Tensor2D;
    const z = m.encode(v, u);
    expect(z.shape).toEqual([7, 3]);
    expect(m.decode(z, u).shape).toEqual([7, 12]);
    m.dispose();
  });

  it('GELU is the exact erf form (TF.js and the codec math), not the tanh approximation', async () => {
    const xs = [-4, -1.5, -0.3, 0, 0.2, 1, 2.5, 6];
    const tfv = await geluTf(tf.tensor1d(xs)).data();
    xs.forEach((x, i) => {
      const exact = 0.5 * x * (1 + erf(x / Math.SQRT2));
      expect(geluErf(x)).toBeCloseTo(exact, 6);
      expect(tfv[i]).toBeCloseTo(exact, 5);
    });
    // tanh form differs by ~1e-4 at x = 1.5-2: the exact form is what is computed
    const tanhForm = (x: number) => 0.5 * x * (1 + Math.tanh(Math.sqrt(2 / Math.PI) * (x + 0.044715 * x ** 3)));
    expect(Math.abs(geluErf(-1.5) - tanhForm(-1.5))).toBeGreaterThan(1e-4);
    expect(Math.abs(geluErf(-1.5) - 0.5 * -1.5 * (1 + erf(-1.5 / Math.SQRT2)))).toBeLessThan(1e-6);
  });

  it('MSE counts only the non-padding tokens (mask 0 rows change nothing)', async () => {
    const m = new AesiTf({ inputDims: 6, sideDims: 4, codeDims: 2, width: 8 }, 2);
    const { vectors, side } = tokens(5, 6, 4, 9);
    const v = tf.tensor2d(vectors, [5, 6]);
    const u = tf.tensor2d(side, [5, 4]);
    const real = (await m.loss(v, u, tf.ones([5]) as tf.Tensor1D).data())[0];
    // the same 5 tokens plus 3 garbage padding rows, masked out
    const pv = tf.concat([v, tf.fill([3, 6], 9)]) as tf.Tensor2D;
    const pu = tf.concat([u, tf.fill([3, 4], -7)]) as tf.Tensor2D;
    const mask = tf.tensor1d([1, 1, 1, 1, 1, 0, 0, 0]);
    const padded = (await m.loss(pv, pu, mask).data())[0];
    expect(padded).toBeCloseTo(real, 6);
    const unmasked = (await m.loss(pv, pu, tf.ones([8]) as tf.Tensor1D).data())[0];
    expect(unmasked).toBeGreaterThan(2 * real);
    // and by hand: mean over the 5 tokens' coordinates
    const rec = await m.decode(m.encode(v, u), u).data();
    let sq = 0;
    for (let i = 0; i < 30; i++) sq += (rec[i] - vectors[i]) ** 2;
    expect(real).toBeCloseTo(sq / 30, 5);
    m.dispose();
  });

  it('trains (held-out error falls), stops early, and is reproducible for a seed', async () => {
    const { vectors, side } = tokens(600, 16, 6, 5);
    const opts = { codeDims: 2, width: 32, seed: 7, maxEpochs: 6, patience: 2, batchTokens: 64, learningRate: 3e-3 };
    const a = await trainAesi(vectors, side, 16, 6, opts);
    const b = await trainAesi(vectors, side, 16, 6, opts);
    expect(a.curve.length).toBeGreaterThanOrEqual(2);
    expect(a.data).toEqual({ tokens: 600, trainTokens: 540, valTokens: 60 });
    expect(a.curve.at(-1)!.valMse).toBeLessThan(0.7 * a.curve[0].valMse);
    expect(a.heldOut.relError).toBeLessThan(0.5);
    expect(Array.from(b.weights.encoder)).toEqual(Array.from(a.weights.encoder));
    expect(Array.from(b.weights.decoder)).toEqual(Array.from(a.weights.decoder));
    expect(b.curve.map((e) => e.valMse)).toEqual(a.curve.map((e) => e.valMse));
    const c = await trainAesi(vectors, side, 16, 6, { ...opts, seed: 8 });
    expect(Array.from(c.weights.decoder)).not.toEqual(Array.from(a.weights.decoder));
    // side information is what makes a 2-dim code work here: without it (u = 0) the error is larger
    const noSide = await trainAesi(vectors, new Float32Array(side.length), 16, 6, opts);
    expect(noSide.heldOut.mse).toBeGreaterThan(1.5 * a.heldOut.mse);
  }, 120_000);

  it('the codec inference path (artifact -> LinearStage / EDEN codec) reconstructs what TF.js does', async () => {
    const d = 24;
    const s = 8;
    const { vectors, side } = tokens(300, d, s, 11);
    const res = await trainAesi(vectors, side, d, s, { codeDims: 4, width: 48, seed: 3, maxEpochs: 2, batchTokens: 100 });
    const settings = CodecSettingsSchema.parse({ kind: 'eden', bits: 8, dims: 4, layout: 'cross', sideInfo: true });
    const art = deserializeArtifact(serializeArtifact(aesiArtifact(settings, res.weights, 42n)));
    expect(art.aesiWidth).toBe(48);
    const m = 50;
    const v = vectors.subarray(0, m * d);
    const u = side.subarray(0, m * s);
    // TF.js
    const model = new AesiTf({ inputDims: d, sideDims: s, codeDims: 4, width: 48 }, 0);
    model.load(res.weights);
    const zT = model.encode(tf.tensor2d(v, [m, d]), tf.tensor2d(u, [m, s]));
    const zTf = await zT.data();
    const recTf = await model.decode(zT, tf.tensor2d(u, [m, s])).data();
    // codec math
    const stage = new LinearStage(art);
    const z = stage.forward(v, d, u);
    const rec = stage.inverse(z, m, d, u);
    for (let i = 0; i < zTf.length; i++) expect(z[i]).toBeCloseTo(zTf[i], 4);
    let maxErr = 0;
    let maxAbs = 0;
    for (let i = 0; i < rec.length; i++) {
      maxErr = Math.max(maxErr, Math.abs(rec[i] - recTf[i]));
      maxAbs = Math.max(maxAbs, Math.abs(recTf[i]));
    }
    expect(maxErr).toBeLessThan(1e-4 * Math.max(1, maxAbs));
    // the EDEN codec over the code: 8-bit quantisation of z, decoded through the same decoder
    const codec = createCodec(settings, art);
    const key = { docId: 'd', seed: 42n };
    const back = codec.decodeDoc(codec.encodeDoc(v, d, key, u), m, d, key, u);
    let se = 0;
    let sn = 0;
    for (let i = 0; i < back.length; i++) {
      se += (back[i] - recTf[i]) ** 2;
      sn += recTf[i] ** 2;
    }
    expect(se / sn).toBeLessThan(1e-3);
    model.dispose();
  }, 120_000);
});
