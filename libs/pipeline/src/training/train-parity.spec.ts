import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { LITE_DEFAULT, LITE_SMALL, liteReference, maxsim, type KnrmWeights, type LiteWeights } from '@lateral/scoring';
import { OnnxKnrm, OnnxLite, readLiteArtifact, writeKnrmArtifact, writeLiteArtifact } from '@lateral/kernels';
import { rng, scoreWithWeights, synthetic, trainHead, type TokenSource, type TrainingQuery } from '@lateral/training';

/**
 * Trained in TF.js, served by ONNX Runtime: the weights a train job writes must give the scores
 * they were trained to give. Heads are trained for real (a few epochs on a synthetic collection),
 * written as the artifacts re-rank requests load, and both runtimes score the same candidates,
 * including a query longer than L1 and a document longer than L2 (truncation) and an empty document.
 */
const dir = mkdtempSync(path.join(tmpdir(), 'lateral-parity-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function withLongOnes(src: TokenSource, q: TrainingQuery): { src: TokenSource; q: TrainingQuery; cands: number[] } {
  const r = rng(11);
  const d = src.dims;
  const long = { vectors: Float32Array.from({ length: 70 * d }, () => (r() * 2 - 1) * 0.3), length: 70 };
  const empty = { vectors: new Float32Array(0), length: 0 };
  const base = 100_000;
  const ext: TokenSource = { dims: d, doc: (i) => (i === base ? long : i === base + 1 ? empty : src.doc(i)) };
  const qLong = new Float32Array(35 * d);
  for (let i = 0; i < 35; i++) qLong.set(q.vectors.subarray((i % q.length) * d, (i % q.length + 1) * d), i * d);
  return { src: ext, q: { ...q, vectors: qLong, length: 35 }, cands: [...q.candidates, base, base + 1] };
}

function csr(src: TokenSource, cands: number[]) {
  const d = src.dims;
  const offsets = new Uint32Array(cands.length + 1);
  cands.forEach((c, i) => (offsets[i + 1] = offsets[i] + src.doc(c).length));
  const docs = new Float32Array(offsets[cands.length] * d);
  cands.forEach((c, i) => docs.set(src.doc(c).vectors.subarray(0, src.doc(c).length * d), offsets[i] * d));
  return { docs, offsets };
}

describe('trained heads: TF.js scores = ONNX Runtime scores of the written artifact', () => {
  it.each([
    ['small', LITE_SMALL],
    ['default', LITE_DEFAULT],
  ] as const)('LITE (%s size) after training', { timeout: 300_000 }, async (name, sizes) => {
    const { src, queries } = synthetic(10, 32);
    const res = await trainHead(src, queries, { head: 'lite', sizes, seed: 3, maxEpochs: 1, positivesPerQuery: 1, learningRate: 1e-3, distillSteps: 2, backend: 'wasm' });
    const weights = res.weights as LiteWeights;
    const file = path.join(dir, `lite-${name}.onnx`);
    writeLiteArtifact(file, weights);
    expect(Array.from(readLiteArtifact(file).W2)).toEqual(Array.from(weights.W2));
    const ort = await OnnxLite.create(file, { intraOpThreads: 1 });
    try {
      for (const q0 of queries.slice(0, 3)) {
        const { src: ext, q, cands } = withLongOnes(src, q0);
        const tfScores = await scoreWithWeights(ext, q, cands, weights, 'wasm');
        const { docs, offsets } = csr(ext, cands);
        const onnx = await ort.score(q.vectors, q.length, docs, offsets, ext.dims);
        expect(tfScores.length).toBe(cands.length);
        const scale = Math.max(...Array.from(onnx, Math.abs));
        for (let c = 0; c < cands.length; c++) expect(Math.abs(tfScores[c] - onnx[c])).toBeLessThan(1e-4 * Math.max(1, scale));
        // the scores differ between candidates: the comparison is not of constants
        expect(new Set(Array.from(onnx, (v) => v.toFixed(4))).size).toBeGreaterThan(cands.length / 2);
      }
    } finally {
      await ort.release();
    }
  });

  it('residual LITE (small) after training: TF.js, ONNX Runtime and the float64 reference agree, the artifact keeps its MaxSim weight', { timeout: 300_000 }, async () => {
    const { src, queries } = synthetic(10, 32);
    // the first stage is MaxSim itself, as the train job computes it
    const withMaxsim = queries.map((q) => ({ ...q, firstStage: Float32Array.from(q.candidates, (c) => maxsim(q.vectors, q.length, src.doc(c).vectors, src.doc(c).length, src.dims)) }));
    const res = await trainHead(src, withMaxsim, { head: 'lite', residual: true, sizes: LITE_SMALL, seed: 3, maxEpochs: 2, patience: 2, positivesPerQuery: 1, learningRate: 1e-3, backend: 'wasm' });
    const weights = res.weights as LiteWeights;
    expect(Number.isFinite(weights.maxsimWeight)).toBe(true);
    const file = path.join(dir, 'lite-residual.onnx');
    writeLiteArtifact(file, weights);
    expect(readLiteArtifact(file).maxsimWeight).toBe(weights.maxsimWeight);
    const ort = await OnnxLite.create(file, { intraOpThreads: 1 });
    try {
      expect(ort.residual).toBe(true);
      for (const q0 of withMaxsim.slice(0, 3)) {
        // the query longer than L1 and a document longer than L2: LITE truncates, MaxSim does not
        const { src: ext, q: qLong, cands: all } = withLongOnes(src, q0);
        const cands = all.slice(0, -1); // not the empty document: its MaxSim is -Infinity, so is its score
        const base = Float32Array.from(cands, (c) => maxsim(qLong.vectors, qLong.length, ext.doc(c).vectors, ext.doc(c).length, ext.dims));
        const q = { ...qLong, candidates: cands, firstStage: base };
        const tfScores = await scoreWithWeights(ext, q, cands, weights, 'wasm');
        const { docs, offsets } = csr(ext, cands);
        await expect(ort.score(q.vectors, q.length, docs, offsets, ext.dims)).rejects.toThrow(/residual on MaxSim and needs base/);
        const onnx = await ort.score(q.vectors, q.length, docs, offsets, ext.dims, base);
        const scale = Math.max(...Array.from(onnx, Math.abs));
        cands.forEach((c, i) => {
          const ref = liteReference(q.vectors, q.length, ext.doc(c).vectors, ext.doc(c).length, ext.dims, weights);
          expect(Math.abs(tfScores[i] - onnx[i])).toBeLessThan(1e-4 * Math.max(1, scale));
          expect(Math.abs(ref - onnx[i])).toBeLessThan(1e-4 * Math.max(1, scale));
        });
        // the learned correction is not zero: the scores are not a multiple of MaxSim alone
        const plain = Array.from(base, (b) => weights.maxsimWeight! * b);
        expect(Math.max(...plain.map((v, i) => Math.abs(v - onnx[i])))).toBeGreaterThan(1e-4);
      }
    } finally {
      await ort.release();
    }
  });

  it('K-NRM after training', async () => {
    const { src, queries } = synthetic(14, 32);
    const res = await trainHead(src, queries, { head: 'knrm', seed: 1, maxEpochs: 2, learningRate: 1e-3, backend: 'wasm' });
    const weights = res.weights as KnrmWeights;
    expect(Array.from(weights.w).some((v) => v !== 0)).toBe(true);
    const file = path.join(dir, 'knrm.onnx');
    writeKnrmArtifact(file, weights);
    const ort = await OnnxKnrm.create(file, { intraOpThreads: 1 });
    try {
      for (const q0 of queries.slice(0, 3)) {
        const { src: ext, q, cands } = withLongOnes(src, q0);
        const tfScores = await scoreWithWeights(ext, q, cands, weights, 'wasm');
        const { docs, offsets } = csr(ext, cands);
        const onnx = await ort.score(q.vectors, q.length, docs, offsets, ext.dims);
        for (let c = 0; c < cands.length; c++) expect(Math.abs(tfScores[c] - onnx[c])).toBeLessThan(1e-5);
        expect(new Set(Array.from(onnx, (v) => v.toFixed(5))).size).toBeGreaterThan(cands.length / 2);
      }
    } finally {
      await ort.release();
    }
  });
});
