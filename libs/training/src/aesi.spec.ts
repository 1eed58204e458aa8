import { beforeAll, describe, expect, it } from 'vitest';
import { aesiArtifact, createCodec, deserializeArtifact, erf, geluErf, LinearStage, serializeArtifact } from '@lateral/codec';
import { CodecSettingsSchema } from '@lateral/shared';
import { AesiTf, centreAndScale, foldAesiNormalisation, geluTf, trainAesi } from './aesi';
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

  it('the fast dense gradient equals TF.js\'s own matMul gradient', async () => {
    const m = new AesiTf({ inputDims: 10, sideDims: 6, codeDims: 3, width: 14 }, 4);
    const { vectors, side } = tokens(9, 10, 6, 21);
    const v = tf.tensor2d(vectors, [9, 10]);
    const u = tf.tensor2d(side, [9, 6]);
    const mask = tf.tensor1d([1, 1, 1, 1, 1, 1, 1, 0, 0]);
    // the same network written with plain tf.matMul on the same variables
    const plain = () => {
      const lin = (x: tf.Tensor, l: { w: tf.Variable; b: tf.Variable }) => tf.add(tf.matMul(x as tf.Tensor2D, l.w as tf.Tensor2D), l.b);
      const z = lin(geluTf(lin(tf.concat([v, u], 1), m.e1)), m.e2);
      const rec = lin(geluTf(lin(tf.concat([z, u], 1), m.d1)), m.d2);
      const err = tf.sum(tf.square(tf.sub(rec, v)), 1);
      return tf.div(tf.sum(tf.mul(err, mask)), tf.mul(tf.sum(mask), 10)) as tf.Scalar;
    };
    const fast = tf.variableGrads(() => m.loss(v, u, mask), m.variables());
    const ref = tf.variableGrads(plain, m.variables());
    expect((await fast.value.data())[0]).toBeCloseTo((await ref.value.data())[0], 6);
    for (const name of Object.keys(ref.grads)) {
      const a = await fast.grads[name].data();
      const b = await ref.grads[name].data();
      const scale = Math.max(...Array.from(b, Math.abs));
      expect(scale).toBeGreaterThan(0);
      for (let i = 0; i < b.length; i++) expect(Math.abs(a[i] - b[i])).toBeLessThan(1e-5 * Math.max(1, scale));
    }
    m.dispose();
  });

  it('folding the normalisation gives the raw-space network: z - zMean from raw v, u and the raw reconstruction', async () => {
    const d = 7;
    const s = 5;
    const c = 3;
    const h = 11;
    const m = new AesiTf({ inputDims: d, sideDims: s, codeDims: c, width: h }, 6);
    const r = rng(31);
    const n = { vMean: Float64Array.from({ length: d }, () => r() - 0.5), vScale: 0.05, uMean: Float64Array.from({ length: s }, () => 3 * r()), uScale: 7, zMean: Float64Array.from({ length: c }, () => r() - 0.5) };
    const t = 6;
    const v = Float32Array.from({ length: t * d }, () => r() - 0.5);
    const u = Float32Array.from({ length: t * s }, () => 10 * r());
    const vn = v.map((x, i) => (x - n.vMean[i % d]) / n.vScale);
    const un = u.map((x, i) => (x - n.uMean[i % s]) / n.uScale);
    const zT = m.encode(tf.tensor2d(vn, [t, d]), tf.tensor2d(un, [t, s]));
    const zn = await zT.data();
    const recN = await m.decode(zT, tf.tensor2d(un, [t, s])).data();
    const folded = foldAesiNormalisation(await m.export(), n);
    const settings = CodecSettingsSchema.parse({ kind: 'eden', bits: 8, dims: c, layout: 'cross', sideInfo: true });
    const stage = new LinearStage(aesiArtifact(settings, folded, 1n));
    const z = stage.forward(v, d, u);
    for (let i = 0; i < t * c; i++) expect(z[i]).toBeCloseTo(zn[i] - n.zMean[i % c], 4);
    const rec = stage.inverse(z, t, d, u);
    for (let i = 0; i < t * d; i++) expect(rec[i]).toBeCloseTo(n.vScale * recN[i] + n.vMean[i % d], 4);
    m.dispose();
  });

  it('centreAndScale: per-coordinate mean of the chosen rows and the RMS of the centred values', () => {
    const x = Float32Array.from([1, 10, 3, 14, 100, 100]);
    const { mean, scale } = centreAndScale(x, 2, [0, 1]);
    expect(Array.from(mean)).toEqual([2, 12]);
    expect(scale).toBeCloseTo(Math.sqrt((1 + 4 + 1 + 4) / 4), 12);
    expect(centreAndScale(Float32Array.from([5, 5, 5, 5]), 2, [0, 1]).scale).toBe(1);
  });

  it('training is invariant to the scale and offset of v and u (unit vectors beside 10x larger static embeddings train as well), and the code is centred', async () => {
    const d = 16;
    const s = 6;
    const { vectors, side } = tokens(600, d, s, 5);
    const opts = { codeDims: 2, width: 32, seed: 7, maxEpochs: 4, patience: 2, batchTokens: 64, learningRate: 3e-3 };
    const a = await trainAesi(vectors, side, d, s, opts);
    // a sentence encoder's regime: v ~0.05 per coordinate around an offset, u ~10x larger
    const vs = vectors.map((x, i) => 0.05 * x + 0.2 * Math.sin(i % d));
    const us = side.map((x) => 12 * x + 3);
    const b = await trainAesi(vs, us, d, s, opts);
    expect(b.curve.length).toBe(a.curve.length);
    // the same fit up to float rounding: every epoch's raw MSE is 0.05^2 times the unscaled run's
    b.curve.forEach((e, i) => expect(e.valMse / a.curve[i].valMse / 0.0025).toBeGreaterThan(0.97));
    b.curve.forEach((e, i) => expect(e.valMse / a.curve[i].valMse / 0.0025).toBeLessThan(1.03));
    expect(a.curve.at(-1)!.valMse).toBeLessThan(0.7 * a.curve[0].valMse);
    // the exported code has (about) zero mean over the tokens, however far z was from 0 in training
    const stage = new LinearStage(aesiArtifact(CodecSettingsSchema.parse({ kind: 'eden', bits: 8, dims: 2, layout: 'cross', sideInfo: true }), b.weights, 1n));
    const z = stage.forward(vs, d, us);
    for (let j = 0; j < 2; j++) {
      let mean = 0;
      let sq = 0;
      for (let t = 0; t < 600; t++) {
        mean += z[t * 2 + j] / 600;
        sq += z[t * 2 + j] ** 2 / 600;
      }
      expect(Math.abs(mean)).toBeLessThan(0.2 * Math.sqrt(sq));
    }
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
