import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { maxsim } from '@lateral/scoring';
import { mulberry32 } from '@lateral/shared';
import { OnnxMaxsim } from './maxsim-single-tensor';
import { candidates, docOf, unitRows } from '../../libs/kernels/src/test-data';

const rng = mulberry32;

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
