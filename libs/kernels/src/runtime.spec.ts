import { describe, expect, it } from 'vitest';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { knrm, liteReference, LITE_SMALL } from '@lateral/scoring';
import { buildLiteModel, OnnxKnrm, OnnxLite } from './index';
import { encodeModel } from './onnx-graph';
import { randomKnrmWeights, randomLiteWeights, readLiteArtifact, writeLiteArtifact } from './artifact';
import { mulberry32 } from '@lateral/shared';
import { candidates, docOf, unitRows } from './test-data';

const rng = mulberry32;

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
