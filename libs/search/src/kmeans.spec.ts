import { describe, expect, it } from 'vitest';
import { assignNearest, fitIvfCentroids, ivfCentroidCount, normalizeRows, sphericalKmeans } from './kmeans';
import { randomUnit, rng, unitRows } from './test-utils';

describe('ivfCentroidCount (PLAID: 2^floor(log2(16 sqrt N)), clamped to [16, 65536])', () => {
  it('follows the rule, exactly at powers of two, and clamps', () => {
    expect(ivfCentroidCount(0)).toBe(16);
    expect(ivfCentroidCount(1)).toBe(16); // 16 -> 2^4
    expect(ivfCentroidCount(3)).toBe(16); // 27.7 -> 16
    expect(ivfCentroidCount(4)).toBe(32); // 32 exactly
    expect(ivfCentroidCount(65_536)).toBe(4096); // 16 * 256 = 4096 exactly
    expect(ivfCentroidCount(65_535)).toBe(2048);
    expect(ivfCentroidCount(1_000_000)).toBe(8192); // 16000
    expect(ivfCentroidCount(16_777_216)).toBe(65536); // 16 * 4096
    expect(ivfCentroidCount(1e12)).toBe(65536);
    expect(() => ivfCentroidCount(-1)).toThrow('nTokens must be a finite number >= 0');
  });
});

describe('assignNearest', () => {
  it('equals a brute-force argmax of inner products, ties to the lower centroid', () => {
    const r = rng(5);
    for (const [n, k, d] of [[1, 1, 1], [7, 5, 3], [65, 130, 9], [33, 67, 16]] as const) {
      const x = randomUnit(r, n, d);
      const base = randomUnit(r, Math.ceil(k / 2), d);
      // every centroid twice: exact ties everywhere
      const c = new Float32Array(k * d);
      for (let j = 0; j < k; j++) c.set(base.subarray((j >> 1) * d, ((j >> 1) + 1) * d), j * d);
      const got = assignNearest(x, n, c, k, d);
      for (let i = 0; i < n; i++) {
        let best = -Infinity, arg = -1;
        for (let j = 0; j < k; j++) {
          let s = 0;
          for (let t = 0; t < d; t++) s += x[i * d + t] * c[j * d + t];
          if (s > best) { best = s; arg = j; }
        }
        expect(got.index[i]).toBe(arg);
        expect(got.similarity[i]).toBe(best);
        expect(arg % 2).toBe(0);
      }
    }
  });

  it('names the shape that is wrong', () => {
    expect(() => assignNearest(new Float32Array(5), 2, new Float32Array(4), 2, 2)).toThrow('x has length 5, expected n x d = 2 x 2 = 4');
    expect(() => assignNearest(new Float32Array(4), 2, new Float32Array(3), 2, 2)).toThrow('centroids has length 3, expected k x d = 2 x 2 = 4');
  });
});

function clustered(seed: number, clusters: number, per: number, d: number, noise: number) {
  const r = rng(seed);
  const centers = randomUnit(r, clusters, d);
  const x = new Float32Array(clusters * per * d);
  const label = new Uint32Array(clusters * per);
  for (let i = 0; i < clusters * per; i++) {
    const c = i % clusters;
    label[i] = c;
    for (let t = 0; t < d; t++) x[i * d + t] = centers[c * d + t] + noise * (r() * 2 - 1);
  }
  return { x: unitRows(x, clusters * per, d), label, centers };
}

describe('sphericalKmeans', () => {
  it('recovers well-separated clusters, with unit centroids, deterministically', () => {
    const { x, label } = clustered(1, 8, 40, 16, 0.15);
    const n = 320;
    for (const init of ['kmeans++', 'random'] as const) {
      const a = sphericalKmeans(x, n, 16, 8, { seed: 7, init, iterations: 10 });
      const b = sphericalKmeans(x, n, 16, 8, { seed: 7, init, iterations: 10 });
      expect(Array.from(a.centroids)).toEqual(Array.from(b.centroids));
      for (let j = 0; j < a.k; j++) {
        let s = 0;
        for (let t = 0; t < 16; t++) s += a.centroids[j * 16 + t] ** 2;
        expect(Math.abs(Math.sqrt(s) - 1)).toBeLessThan(1e-6);
      }
      // truth (the generating centers) scores 0.947; random init may merge two clusters (a local optimum)
      expect(a.meanSimilarity).toBeGreaterThan(init === 'kmeans++' ? 0.945 : 0.85);
      expect(Array.from(a.sizes).reduce((p, q) => p + q, 0)).toBe(n);
      if (init === 'kmeans++') {
        // every true cluster maps to one centroid and every centroid to one cluster
        const idx = assignNearest(x, n, a.centroids, a.k, 16).index;
        const pairs = new Set<string>();
        for (let i = 0; i < n; i++) pairs.add(`${label[i]}-${idx[i]}`);
        expect(pairs.size).toBe(8);
        expect(new Set(idx).size).toBe(8);
      }
    }
  });

  it('clamps k to the number of points, re-seeds empty clusters, survives duplicates', () => {
    const x = new Float32Array([1, 0, 1, 0, 1, 0, 0, 1]);
    const res = sphericalKmeans(x, 4, 2, 10, { seed: 1 });
    expect(res.k).toBe(4);
    expect(res.centroids.length).toBe(8);
    expect(Array.from(res.sizes).reduce((p, q) => p + q, 0)).toBe(4);
    expect(() => sphericalKmeans(new Float32Array(0), 0, 2, 3)).toThrow('needs at least one point');
  });

  it('normalizeRows leaves zero rows at zero', () => {
    expect(Array.from(normalizeRows(new Float32Array([3, 4, 0, 0]), 2, 2))).toEqual([0.6000000238418579, 0.800000011920929, 0, 0]);
  });
});

describe('fitIvfCentroids', () => {
  it('uses PLAID K by default, samples deterministically, accepts an injected assignment step', () => {
    const { x } = clustered(2, 10, 200, 8, 0.3);
    const n = 2000;
    let calls = 0;
    const res = fitIvfCentroids(x, n, 8, {
      seed: 3, sampleSize: 700, iterations: 3,
      assign: (p, m, c, k, d) => { calls++; return assignNearest(p, m, c, k, d); },
    });
    expect(res.k).toBe(ivfCentroidCount(2000)); // 16 * 44.7 = 715 -> 512
    expect(res.sampleSize).toBe(700);
    expect(calls).toBeGreaterThan(0);
    const again = fitIvfCentroids(x, n, 8, { seed: 3, sampleSize: 700, iterations: 3 });
    expect(Array.from(again.centroids)).toEqual(Array.from(res.centroids));
    const other = fitIvfCentroids(x, n, 8, { seed: 4, sampleSize: 700, iterations: 3 });
    expect(Array.from(other.centroids)).not.toEqual(Array.from(res.centroids));
  });
});
