import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { knrm, liteReference, LITE_SMALL, maxsim } from '@lateral/scoring';
import { buildLiteModel, OnnxKnrm, OnnxLite, OnnxMaxsim } from './index';
import { encodeModel } from '@lateral/model';
import { randomKnrmWeights, randomLiteWeights, readLiteArtifact, writeLiteArtifact } from './artifact';
import { mulberry32 } from '@lateral/shared';

const rng = mulberry32;
function unitRows(r: () => number, rows: number, d: number): Float32Array {
  const a = new Float32Array(rows * d);
  for (let i = 0; i < rows; i++) {
    let s = 0;
    for (let k = 0; k < d; k++) { a[i * d + k] = r() - 0.5; s += a[i * d + k] ** 2; }
    for (let k = 0; k < d; k++) a[i * d + k] /= Math.sqrt(s);
  }
  return a;
}
function candidates(r: () => number, lengths: number[], d: number) {
  const offsets = new Uint32Array(lengths.length + 1);
  lengths.forEach((l, c) => { offsets[c + 1] = offsets[c] + l; });
  return { docs: unitRows(r, offsets[lengths.length], d), offsets, lengths };
}
const docOf = (docs: Float32Array, offsets: Uint32Array, c: number, d: number) => docs.subarray(offsets[c] * d, offsets[c + 1] * d);

describe('OnnxMaxsim', () => {
  let scorer: OnnxMaxsim;
  beforeAll(async () => { scorer = await OnnxMaxsim.create(); });
  afterAll(async () => { await scorer.release(); });

  it('agrees with the reference on ragged candidates incl. empty ones (1e-5 abs, fp32 GEMM)', async () => {
    const r = rng(1);
    const d = 32, n = 7;
    const q = unitRows(r, n, d);
    const { docs, offsets, lengths } = candidates(r, [5, 0, 1, 17, 3, 0, 9, 12], d);
    const biasAdd = await OnnxMaxsim.create({ maskMode: 'bias-add' });
    const biasColumn = await OnnxMaxsim.create({ maskMode: 'bias-column' });
    const smallChunks = await OnnxMaxsim.create({ chunkFloats: 40 * d });
    expect(scorer.maskMode).toBe('gather');
    for (const [normalize, s] of [[false, scorer], [true, scorer], [false, biasAdd], [true, biasAdd], [false, biasColumn], [true, smallChunks]] as const) {
      const got = await s.score(q, n, docs, offsets, d, { normalize });
      lengths.forEach((m, c) => {
        const ref = maxsim(q, n, docOf(docs, offsets, c, d), m, d, { normalize });
        if (m === 0) expect(got[c]).toBe(-Infinity);
        else expect(Math.abs(got[c] - ref)).toBeLessThan(1e-5);
      });
    }
    await Promise.all([biasAdd.release(), biasColumn.release(), smallChunks.release()]);
  });

  it('gather mode: chunks made only of empty candidates, and empty candidates at the end', async () => {
    const r = rng(9);
    const d = 8, n = 2;
    const q = unitRows(r, n, d);
    const { docs, offsets, lengths } = candidates(r, [0, 0, 3, 0, 2, 0, 0], d);
    const tiny = await OnnxMaxsim.create({ chunkFloats: 1 });
    for (const s of [scorer, tiny]) {
      const got = await s.score(q, n, docs, offsets, d);
      lengths.forEach((m, c) => {
        if (m === 0) expect(got[c]).toBe(-Infinity);
        else expect(Math.abs(got[c] - maxsim(q, n, docOf(docs, offsets, c, d), m, d))).toBeLessThan(1e-5);
      });
    }
    await tiny.release();
  });

  it('uniform-length candidates (no mask) and small chunks give the same scores, one-token query', async () => {
    const r = rng(2);
    const d = 16;
    const q = unitRows(r, 1, d);
    const { docs, offsets } = candidates(r, Array(20).fill(6), d);
    const small = await OnnxMaxsim.create({ chunkFloats: 6 * 16 * 3 });
    const a = await scorer.score(q, 1, docs, offsets, d);
    const b = await small.score(q, 1, docs, offsets, d);
    await small.release();
    for (let c = 0; c < 20; c++) {
      expect(Math.abs(a[c] - maxsim(q, 1, docOf(docs, offsets, c, d), 6, d))).toBeLessThan(1e-5);
      expect(b[c]).toBeCloseTo(a[c], 6);
    }
  });

  it('never lets padding act as similarity 0 (all-negative similarities)', async () => {
    const q = Float32Array.of(1, 0);
    const docs = Float32Array.of(-1, 0, -0.5, 0, -0.25, 0); // doc 0: 1 token (-1), doc 1: 2 tokens (-0.5, -0.25)
    const got = await scorer.score(q, 1, docs, Uint32Array.of(0, 1, 3), 2);
    expect(Array.from(got)).toEqual([-1, -0.25]);
    for (const maskMode of ['bias-add', 'bias-column'] as const) {
      const other = await OnnxMaxsim.create({ maskMode });
      expect(Array.from(await other.score(q, 1, docs, Uint32Array.of(0, 1, 3), 2))).toEqual([-1, -0.25]);
      await other.release();
    }
  });

  it('exact on small-integer data with ties; empty query scores 0 like the reference', async () => {
    const r = rng(8);
    const d = 5, n = 3;
    const q = Float32Array.from({ length: n * d }, () => Math.floor(r() * 5) - 2);
    const lengths = [4, 1, 0, 7, 4];
    const offsets = new Uint32Array(lengths.length + 1);
    lengths.forEach((l, c) => { offsets[c + 1] = offsets[c] + l; });
    const docs = Float32Array.from({ length: offsets[lengths.length] * d }, () => Math.floor(r() * 3) - 1);
    const got = await scorer.score(q, n, docs, offsets, d);
    lengths.forEach((m, c) => expect(got[c]).toBe(maxsim(q, n, docOf(docs, offsets, c, d), m, d)));
    const none = await scorer.score(new Float32Array(0), 0, docs, offsets, d);
    lengths.forEach((m, c) => expect(none[c]).toBe(maxsim(new Float32Array(0), 0, docOf(docs, offsets, c, d), m, d)));
  });

  it('names shapes in its errors', async () => {
    await expect(scorer.score(new Float32Array(3), 2, new Float32Array(4), Uint32Array.of(0, 2), 2)).rejects.toThrow('OnnxMaxsim.score: q has length 3, expected n x d = 2 x 2 = 4');
  });
});

describe('OnnxLite', () => {
  it('agrees with liteReference to 1e-4 (small sizes, ragged, truncated, empty candidates; artifact round trip)', async () => {
    const w = randomLiteWeights(7, LITE_SMALL);
    const dir = mkdtempSync(join(tmpdir(), 'lite-'));
    try {
      const path = join(dir, 'lite.onnx');
      writeLiteArtifact(path, w);
      const back = readLiteArtifact(path);
      expect(Array.from(back.W1.subarray(0, 50))).toEqual(Array.from(w.W1.subarray(0, 50)));
      expect(Array.from(back.w)).toEqual(Array.from(w.w));
      const lite = await OnnxLite.create(path, { batch: 4 });
      expect([lite.L1, lite.L2]).toEqual([30, 50]);
      const r = rng(3);
      const d = 24;
      for (const n of [1, 12, 30, 41]) {
        const q = unitRows(r, n, d);
        const { docs, offsets, lengths } = candidates(r, [50, 7, 0, 80, 1, 33, 50, 2, 64], d);
        const got = await lite.score(q, n, docs, offsets, d);
        lengths.forEach((m, c) => {
          const ref = liteReference(q, n, docOf(docs, offsets, c, d), m, d, w);
          expect(Math.abs(got[c] - ref)).toBeLessThan(1e-4 * Math.max(1, Math.abs(ref)));
        });
      }
      await lite.release();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('default sizes (L1 = 30, L2 = 200, m1 = 360, m2 = 2400) from in-memory weights agree to 1e-4', async () => {
    const w = randomLiteWeights(9, { L1: 30, L2: 200, m1: 360, m2: 2400 });
    const lite = await OnnxLite.create(w);
    const r = rng(4);
    const d = 32;
    const q = unitRows(r, 20, d);
    const { docs, offsets, lengths } = candidates(r, [200, 150, 260], d);
    const got = await lite.score(q, 20, docs, offsets, d);
    lengths.forEach((m, c) => {
      const ref = liteReference(q, 20, docOf(docs, offsets, c, d), m, d, w);
      expect(Math.abs(got[c] - ref)).toBeLessThan(1e-4 * Math.max(1, Math.abs(ref)));
    });
    await lite.release();
  });
});

describe('LITE formulations', () => {
  it('gemm2d and matmul3d graphs agree with liteReference to 1e-4', async () => {
    const w = randomLiteWeights(11, { L1: 6, L2: 10, m1: 12, m2: 20 });
    const r = rng(12);
    const d = 8;
    const q = unitRows(r, 5, d);
    const { docs, offsets, lengths } = candidates(r, [10, 3, 0, 14], d);
    for (const f of ['gemm2d', 'matmul3d'] as const) {
      const lite = await OnnxLite.create(encodeModel(buildLiteModel(w, f)));
      const got = await lite.score(q, 5, docs, offsets, d);
      lengths.forEach((m, c) => {
        const ref = liteReference(q, 5, docOf(docs, offsets, c, d), m, d, w);
        expect(Math.abs(got[c] - ref)).toBeLessThan(1e-4 * Math.max(1, Math.abs(ref)));
      });
      expect(readLiteArtifact(encodeModel(buildLiteModel(w, f))).W3).toEqual(w.W3);
      await lite.release();
    }
  });
});

describe('OnnxKnrm', () => {
  it('agrees with knrm to 1e-5 with padding masked', async () => {
    const w = randomKnrmWeights(5);
    const k = await OnnxKnrm.create(w);
    const r = rng(6);
    const d = 16, n = 5;
    const q = unitRows(r, n, d);
    const { docs, offsets, lengths } = candidates(r, [4, 9, 1, 0, 6], d);
    const got = await k.score(q, n, docs, offsets, d);
    lengths.forEach((m, c) => {
      expect(Math.abs(got[c] - knrm(q, n, docOf(docs, offsets, c, d), m, d, w))).toBeLessThan(1e-5);
    });
    await k.release();
  });
});
