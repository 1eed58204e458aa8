import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mulberry32 } from '@lateral/shared';
import { distinctSample, normalizeRows } from '@lateral/search';
import { OnnxNearestCentroid, allotCentroids, groupCentroids, onnxSphericalKmeans, onnxTwoLevelKmeans } from './nearest-centroid';

/** n unit rows of dimension d around `clusters` random unit centres (noise `spread`). */
function clustered(n: number, d: number, clusters: number, spread: number, seed: number): Float32Array {
  const rand = mulberry32(seed);
  const gauss = () => Math.sqrt(-2 * Math.log(1 - rand())) * Math.cos(2 * Math.PI * rand());
  const centres = new Float32Array(clusters * d).map(gauss);
  const x = new Float32Array(n * d);
  for (let i = 0; i < n; i++) {
    const c = Math.floor(rand() * clusters);
    for (let j = 0; j < d; j++) x[i * d + j] = centres[c * d + j] + spread * gauss();
  }
  return normalizeRows(x, n, d);
}

/** Mean inner product of every row with its nearest centroid (exact, in JavaScript). */
function meanBest(x: Float32Array, n: number, c: Float32Array, k: number, d: number): number {
  let sum = 0;
  for (let i = 0; i < n; i++) {
    let best = -Infinity;
    for (let j = 0; j < k; j++) {
      let s = 0;
      for (let t = 0; t < d; t++) s += x[i * d + t] * c[j * d + t];
      if (s > best) best = s;
    }
    sum += best;
  }
  return sum / n;
}

/** An assigner that counts its inner products (rows x centroids of every call). */
function counting(inner: OnnxNearestCentroid): { assigner: OnnxNearestCentroid; products: () => number } {
  let products = 0;
  const assigner = Object.create(inner) as OnnxNearestCentroid;
  assigner.assign = (x, n, c, k, d) => {
    products += n * k;
    return inner.assign(x, n, c, k, d);
  };
  return { assigner, products: () => products };
}

describe('allotCentroids', () => {
  it('gives every centroid out, in proportion to the rows, never more than a group holds', () => {
    expect([...allotCentroids([50, 30, 20], 10)]).toEqual([5, 3, 2]);
    // largest remainder: quotas 3.33, 3.33, 3.33 -> the first group gets the spare one
    expect([...allotCentroids([10, 10, 10], 10)]).toEqual([4, 3, 3]);
    // a small group is capped at its rows; the rest go round to the others
    const capped = allotCentroids([1, 100, 100], 150);
    expect(capped[0]).toBe(1);
    expect(capped.reduce((a, b) => a + b, 0)).toBe(150);
    expect([...allotCentroids([0, 7, 0], 7)]).toEqual([0, 7, 0]);
    expect(() => allotCentroids([2, 2], 5)).toThrow(RangeError);
  });
});

describe('onnxTwoLevelKmeans', () => {
  let onnx: OnnxNearestCentroid;
  beforeAll(async () => {
    onnx = await OnnxNearestCentroid.create(1);
  });
  afterAll(async () => onnx.release());

  const n = 4096;
  const d = 24;
  const k = 256;
  const x = clustered(n, d, 96, 0.35, 7);
  const pick = (seed: number) => {
    const rand = mulberry32(seed);
    return (rows: number, m: number) => distinctSample(rows, m, rand);
  };

  it('returns k unit centroids numbered group by group, deterministically', async () => {
    const a = await onnxTwoLevelKmeans(onnx, x, n, d, k, 4, pick(3));
    const b = await onnxTwoLevelKmeans(onnx, x, n, d, k, 4, pick(3));
    expect(a.centroids.length).toBe(k * d);
    expect(a.groupStart.length).toBe(17); // k1 = sqrt(256) = 16 coarse groups
    expect(a.groupStart[0]).toBe(0);
    expect(a.groupStart[16]).toBe(k);
    for (let g = 0; g < 16; g++) expect(a.groupStart[g + 1]).toBeGreaterThanOrEqual(a.groupStart[g]);
    for (let j = 0; j < k; j++) {
      let norm = 0;
      for (let t = 0; t < d; t++) norm += a.centroids[j * d + t] ** 2;
      expect(Math.abs(Math.sqrt(norm) - 1)).toBeLessThan(1e-5);
    }
    expect(b.centroids).toEqual(a.centroids);
    expect(b.groupStart).toEqual(a.groupStart);
    // a group's fine centroids lie nearer their own coarse centroid than the average coarse centroid does
    let own = 0;
    let other = 0;
    for (let g = 0; g < 16; g++) {
      for (let j = a.groupStart[g]; j < a.groupStart[g + 1]; j++) {
        for (let h = 0; h < 16; h++) {
          let s = 0;
          for (let t = 0; t < d; t++) s += a.centroids[j * d + t] * a.coarse[h * d + t];
          if (h === g) own += s;
          else other += s / 15;
        }
      }
    }
    expect(own / k).toBeGreaterThan(other / k + 0.2);
  });

  it('fits as well as flat spherical k-means within 0.005 mean similarity, for a fraction of the inner products', async () => {
    const n2 = 8192;
    const k2 = 1024;
    const x2 = clustered(n2, d, 400, 0.35, 9);
    const flat = counting(onnx);
    const flatC = await onnxSphericalKmeans(flat.assigner, x2, n2, d, pick(3)(n2, k2), 4);
    const two = counting(onnx);
    const twoC = await onnxTwoLevelKmeans(two.assigner, x2, n2, d, k2, 4, pick(3));
    const flatFit = meanBest(x2, n2, flatC, k2, d);
    const twoFit = meanBest(x2, n2, twoC.centroids, k2, d);
    expect(twoFit).toBeGreaterThan(flatFit - 0.005); // measured: 0.95165 against 0.95176
    // flat: 4 x n x 1,024. Two levels (k1 = 32): 4 x n x 32 (coarse) + n x 32 (rows to groups)
    // + ~4 x n x 32 (fine) + 2 refining steps of 8 groups of ~32 (their coarse probe, n x 32 each,
    // runs in its own graph and is not counted here) = ~800 n; measured 6.6M against 33.6M
    expect(flat.products()).toBe(4 * n2 * k2);
    expect(two.products()).toBeLessThan(flat.products() / 4);
  });

  it('refuses more centroids than rows', async () => {
    await expect(onnxTwoLevelKmeans(onnx, x.subarray(0, 10 * d), 10, d, 11, 2, pick(1))).rejects.toThrow(RangeError);
  });
});

describe('OnnxNearestCentroid.assignGrouped', () => {
  let onnx: OnnxNearestCentroid;
  beforeAll(async () => {
    onnx = await OnnxNearestCentroid.create(1);
  });
  afterAll(async () => onnx.release());

  const d = 32;
  const k = 1024;
  const n = 6000;
  // centroids fitted on the same kind of data they will be asked about
  const train = clustered(16384, d, 200, 0.4, 11);
  const x = clustered(n, d, 200, 0.4, 11).slice(0); // same centres (same seed), the first n rows
  const pick = (seed: number) => {
    const rand = mulberry32(seed);
    return (rows: number, m: number) => distinctSample(rows, m, rand);
  };

  it('probing every group gives assign()\'s answer (up to float ties between groups)', async () => {
    const centroids = clustered(k, d, 64, 0.5, 5);
    const groups = await groupCentroids(onnx, centroids, k, d, 4, pick(1));
    expect(groups.start.length).toBe(33);
    expect([...groups.members].sort((a, b) => a - b)).toEqual([...Array(k).keys()]);
    const exact = await onnx.assign(x, n, centroids, k, d);
    const all = await onnx.assignGrouped(x, n, centroids, k, d, groups, 32);
    let differ = 0;
    for (let i = 0; i < n; i++) {
      if (all.nearest[i] !== exact.nearest[i]) differ++;
      expect(Math.abs(all.similarity[i] - exact.similarity[i])).toBeLessThan(1e-5);
    }
    expect(differ).toBeLessThan(n / 1000);
  });

  it('with 8 of 32 groups probed, nearly every row gets its nearest centroid, and the rest a near one', async () => {
    const centroids = await onnxSphericalKmeans(onnx, train, 16384, d, pick(2)(16384, k), 4);
    const groups = await groupCentroids(onnx, centroids, k, d, 4, pick(3));
    const exact = await onnx.assign(x, n, centroids, k, d);
    const probed = await onnx.assignGrouped(x, n, centroids, k, d, groups, 8);
    let same = 0;
    let loss = 0;
    for (let i = 0; i < n; i++) {
      if (probed.nearest[i] === exact.nearest[i]) same++;
      loss += exact.similarity[i] - probed.similarity[i];
      // the centroid given is the one whose inner product it reports
      let s = 0;
      for (let t = 0; t < d; t++) s += x[i * d + t] * centroids[probed.nearest[i] * d + t];
      expect(Math.abs(s - probed.similarity[i])).toBeLessThan(1e-4);
    }
    // measured: 0.9995 of the rows, a mean loss of 0.00017
    expect(same / n).toBeGreaterThan(0.99);
    expect(loss / n).toBeLessThan(0.001);
  });
});
