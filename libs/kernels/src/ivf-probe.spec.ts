import { afterAll, describe, expect, it } from 'vitest';
import { mulberry32 } from '@lateral/shared';
import { xtrProbe } from '@lateral/search';
import { OnnxIvfProbe } from './ivf-probe';

function unitRows(rand: () => number, rows: number, d: number): Float32Array {
  const x = new Float32Array(rows * d);
  for (let r = 0; r < rows; r++) {
    let norm = 0;
    for (let j = 0; j < d; j++) norm += (x[r * d + j] = rand() - 0.5) ** 2;
    for (let j = 0; j < d; j++) x[r * d + j] /= Math.sqrt(norm);
  }
  return x;
}

const dot64 = (a: Float32Array, ao: number, b: Float32Array, bo: number, d: number) => {
  let s = 0;
  for (let t = 0; t < d; t++) s += a[ao + t] * b[bo + t];
  return s;
};

describe('OnnxIvfProbe', () => {
  let probe: OnnxIvfProbe;
  afterAll(async () => probe?.release());

  it("returns each query token's nprobe best centroids, best first, as xtrProbe does (up to float32 rounding at near-ties)", async () => {
    probe = await OnnxIvfProbe.create(1);
    const rand = mulberry32(7);
    for (const [n, K, d, nprobe] of [[16, 1024, 64, 32], [3, 300, 100, 7], [1, 64, 384, 64], [40, 2048, 128, 1]]) {
      const q = unitRows(rand, n, d);
      const C = unitRows(rand, K, d);
      const got = await probe.probe(q, n, C, d, nprobe);
      const ref = xtrProbe(q, n, C, d, nprobe);
      expect([got.n, got.nprobe, got.centroids.length]).toEqual([n, nprobe, n * nprobe]);
      let same = 0;
      for (let i = 0; i < n; i++) {
        const ids = Array.from(got.centroids.subarray(i * nprobe, (i + 1) * nprobe));
        const score = (c: number) => dot64(q, i * d, C, c * d, d);
        expect(new Set(ids).size).toBe(nprobe);
        // best first (float32 GEMM order: equal up to rounding)
        for (let p = 1; p < nprobe; p++) expect(score(ids[p]!)).toBeLessThanOrEqual(score(ids[p - 1]!) + 1e-5);
        // nothing left out scores above the worst kept one (beyond rounding)
        const floor = Math.min(...ids.map(score));
        const kept = new Set(ids);
        for (let c = 0; c < K; c++) if (!kept.has(c)) expect(score(c)).toBeLessThanOrEqual(floor + 1e-5);
        if (ids.join() === Array.from(ref.centroids.subarray(i * nprobe, (i + 1) * nprobe)).join()) same++;
      }
      // random unit vectors have no near-ties in practice: the lists are identical
      expect(same).toBe(n);
    }
  });

  it('probes every list with nprobe = K, and rejects bad shapes and nprobe out of range', async () => {
    const rand = mulberry32(3);
    const q = unitRows(rand, 2, 8);
    const C = unitRows(rand, 5, 8);
    const all = await probe.probe(q, 2, C, 8, 5);
    for (let i = 0; i < 2; i++) expect([...all.centroids.subarray(i * 5, i * 5 + 5)].sort()).toEqual([0, 1, 2, 3, 4]);
    await expect(probe.probe(q, 2, C, 8, 6)).rejects.toThrow(/nprobe must be an integer in \[1, K = 5\]/);
    await expect(probe.probe(q, 3, C, 8, 2)).rejects.toThrow(/expected 3 x 8/);
    await expect(probe.probe(q, 2, C.subarray(0, 39), 8, 2)).rejects.toThrow(/K x d/);
    expect((await probe.probe(new Float32Array(0), 0, C, 8, 2)).centroids.length).toBe(0);
  });
});
