import { afterAll, describe, expect, it } from 'vitest';
import { mulberry32 } from '@lateral/shared';
import { fitWarpCodec, warpQuery, xtrProbe } from '@lateral/search';
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

  it('a large centroid set gets its own session with the centroids packed as a constant: the same ids, scores within float32 rounding', async () => {
    probe ??= await OnnxIvfProbe.create(1);
    const rand = mulberry32(21);
    const [n, K, d, k] = [5, 1024, 96, 128];
    const q = unitRows(rand, n, d);
    const C = unitRows(rand, K, d);
    // The first call starts the packed session and is served by the shared graph.
    const shared = await probe.top(q, n, C, d, k);
    expect(await probe.pack(C, d)).toBe(true);
    const packed = await probe.top(q, n, C, d, k);
    expect(Array.from(packed.ids)).toEqual(Array.from(shared.ids));
    for (let i = 0; i < n * k; i++) expect(packed.scores[i]).toBeCloseTo(shared.scores[i], 5);
    const probed = await probe.probe(q, n, C, d, 8);
    for (let i = 0; i < n; i++) expect(Array.from(probed.centroids.subarray(i * 8, i * 8 + 8))).toEqual(Array.from(shared.ids.subarray(i * k, i * k + 8)));
    // small sets stay on the shared graph
    expect(await probe.pack(unitRows(rand, 16, 8), 8)).toBe(false);
  });

  it("top: the k best centroids with their scores; WARP's warpQuery given them probes and imputes as from Q C^T", async () => {
    probe ??= await OnnxIvfProbe.create(1);
    const rand = mulberry32(11);
    for (const [n, K, d, k] of [[8, 512, 64, 128], [3, 200, 384, 200]]) {
      const q = unitRows(rand, n, d);
      const C = unitRows(rand, K, d);
      const top = await probe.top(q, n, C, d, k);
      expect([top.ids.length, top.scores.length]).toEqual([n * k, n * k]);
      for (let i = 0; i < n; i++) for (let p = 0; p < k; p++) expect(top.scores[i * k + p]).toBeCloseTo(dot64(q, i * d, C, top.ids[i * k + p]! * d, d), 5);
      const residuals = unitRows(rand, 256, d).map((x) => x * 0.1);
      const codec = fitWarpCodec(residuals, 256, d, 4);
      const sizes = Array.from({ length: K }, (_, c) => 1 + ((c * 7) % 13));
      const nprobe = 16;
      const plain = warpQuery(q, n, C, codec, sizes, { nprobe, tPrime: 100 });
      const given = warpQuery(q, n, C, codec, sizes, { nprobe, tPrime: 100, centroidTop: { k, ...top } });
      expect(Array.from(given.probes)).toEqual(Array.from(plain.probes));
      for (let x = 0; x < plain.probeScores.length; x++) expect(given.probeScores[x]).toBeCloseTo(plain.probeScores[x]!, 5);
      for (let i = 0; i < n; i++) expect(given.imputed[i]).toBeCloseTo(plain.imputed[i]!, 5);
      expect(Array.from(given.tables)).toEqual(Array.from(plain.tables));
      // fewer than the bound's centroids given: refused, naming the field
      expect(() => warpQuery(q, n, C, codec, sizes, { nprobe, centroidTop: { k: 8, ids: top.ids.subarray(0, n * 8), scores: top.scores.subarray(0, n * 8) } })).toThrow('centroidTop');
    }
  });
});
