import { describe, expect, it } from 'vitest';
import { POOL_FACTOR_MAX, POOL_WINDOW, poolBatch, poolTokens, pooledCount, wardClusters } from './token-pooling';
import { rng } from './test-utils';
import { readSegment, writeSegment } from './segment';
import { createCodec } from './create-codec';
import { fitCodec } from './fit-codec';
import { CodecSettingsSchema } from '@lateral/shared';

/** m x d Gaussian rows, optionally unit-normalised. */
function rows(m: number, d: number, seed: number, unit = false): Float32Array {
  const r = rng(seed);
  const x = new Float32Array(m * d);
  for (let i = 0; i < m; i++) {
    let s = 0;
    for (let t = 0; t < d; t++) {
      const u = Math.sqrt(-2 * Math.log(r() + 1e-12)) * Math.cos(2 * Math.PI * r());
      x[i * d + t] = u;
      s += u * u;
    }
    if (unit) for (let t = 0; t < d; t++) x[i * d + t] /= Math.sqrt(s);
  }
  return x;
}

/** Within-cluster sum of squares of a labelling. */
function wcss(x: Float32Array, m: number, d: number, labels: Int32Array): number {
  const k = Math.max(...labels) + 1;
  const sum = new Float64Array(k * d);
  const n = new Float64Array(k);
  for (let i = 0; i < m; i++) {
    n[labels[i]]++;
    for (let t = 0; t < d; t++) sum[labels[i] * d + t] += x[i * d + t];
  }
  let e = 0;
  for (let i = 0; i < m; i++) for (let t = 0; t < d; t++) e += (x[i * d + t] - sum[labels[i] * d + t] / n[labels[i]]) ** 2;
  return e;
}

describe('token pooling (Ward)', () => {
  it('poolFactor 1 is the identity: same rows, one cluster per token, same batch arrays', () => {
    const x = rows(37, 16, 1, true);
    const p = poolTokens(x, 37, 16, 1);
    expect(p.count).toBe(37);
    expect(Array.from(p.vectors)).toEqual(Array.from(x));
    expect(Array.from(p.assignment)).toEqual(Array.from({ length: 37 }, (_, i) => i));
    const offsets = Uint32Array.from([0, 10, 37]);
    const ids = Int32Array.from({ length: 37 }, (_, i) => 1000 + i);
    const b = poolBatch(offsets, ids, x, 16, 1);
    expect(b.vectors).toBe(x);
    expect(b.tokenIds).toBe(ids);
    expect(b.tokenOffsets).toBe(offsets);
  });

  it('gives ceil(m / poolFactor) clusters for every m and factor, each non-empty', () => {
    for (const f of [2, 3, 4, 7]) {
      for (const m of [1, 2, 3, 5, 8, 13, 64, 97]) {
        const p = poolTokens(rows(m, 8, m * 31 + f), m, 8, f);
        expect(p.count).toBe(Math.ceil(m / f));
        expect(pooledCount(m, f)).toBe(Math.ceil(m / f));
        const seen = new Set(p.assignment);
        expect(seen.size).toBe(p.count);
        expect(Math.max(...p.assignment)).toBe(p.count - 1);
      }
    }
    expect(poolTokens(new Float32Array(0), 0, 8, 2).count).toBe(0);
  });

  it('each pooled row is the mean of its members (re-normalised for unit rows, raw otherwise)', () => {
    const d = 12;
    for (const unit of [false, true]) {
      const x = rows(23, d, unit ? 5 : 6, unit);
      const p = poolTokens(x, 23, d, 3);
      expect(p.normalized).toBe(unit);
      for (let c = 0; c < p.count; c++) {
        const mean = new Float64Array(d);
        let n = 0;
        for (let i = 0; i < 23; i++) {
          if (p.assignment[i] !== c) continue;
          n++;
          for (let t = 0; t < d; t++) mean[t] += x[i * d + t];
        }
        let norm = 0;
        for (let t = 0; t < d; t++) {
          mean[t] /= n;
          norm += mean[t] ** 2;
        }
        const scale = unit ? 1 / Math.sqrt(norm) : 1;
        for (let t = 0; t < d; t++) expect(p.vectors[c * d + t]).toBeCloseTo(mean[t] * scale, 5);
        // the representative is a member
        expect(p.assignment[p.representative[c]]).toBe(c);
      }
    }
    // explicit normalize: false keeps the shorter mean of unit rows
    const u = rows(10, d, 7, true);
    const raw = poolTokens(u, 10, d, 2, { normalize: false });
    expect(raw.normalized).toBe(false);
  });

  it('is deterministic, and the clusters do not depend on anything but the rows', () => {
    const x = rows(150, 32, 11, true);
    const a = poolTokens(x, 150, 32, 3);
    const b = poolTokens(x.slice(), 150, 32, 3);
    expect(Array.from(b.assignment)).toEqual(Array.from(a.assignment));
    expect(Array.from(b.vectors)).toEqual(Array.from(a.vectors));
  });

  it('finds obvious clusters: three tight groups, interleaved in order, pooled into three', () => {
    const d = 4;
    const centres = [
      [1, 0, 0, 0],
      [0, 1, 0, 0],
      [0, 0, 0, 1],
    ];
    const r = rng(3);
    const m = 9;
    const x = new Float32Array(m * d);
    const truth = [0, 1, 2, 0, 1, 2, 0, 1, 2];
    for (let i = 0; i < m; i++) for (let t = 0; t < d; t++) x[i * d + t] = centres[truth[i]][t] + 0.01 * (r() - 0.5);
    const p = poolTokens(x, m, d, 3, { normalize: false });
    expect(p.count).toBe(3);
    // clusters numbered by their first token: 0, 1, 2 = the truth
    expect(Array.from(p.assignment)).toEqual(truth);
    for (let c = 0; c < 3; c++) for (let t = 0; t < d; t++) expect(p.vectors[c * d + t]).toBeCloseTo(centres[c][t], 2);
  });

  it('Ward cut is no worse than a greedy O(m^3) Ward reference and than contiguous chunks', () => {
    const m = 40;
    const d = 6;
    const x = rows(m, d, 21);
    for (const k of [1, 5, 13, 20, 39]) {
      const labels = wardClusters(x, m, d, k);
      // reference: repeatedly merge the pair with the smallest n_a n_b / (n_a + n_b) ||c_a - c_b||^2
      let clusters = Array.from({ length: m }, (_, i) => [i]);
      const centroid = (c: number[]) => Array.from({ length: d }, (_, t) => c.reduce((s, i) => s + x[i * d + t], 0) / c.length);
      while (clusters.length > k) {
        let best = Infinity;
        let pa = 0;
        let pb = 1;
        for (let a = 0; a < clusters.length; a++)
          for (let b = a + 1; b < clusters.length; b++) {
            const ca = centroid(clusters[a]);
            const cb = centroid(clusters[b]);
            const na = clusters[a].length;
            const nb = clusters[b].length;
            const cost = ((na * nb) / (na + nb)) * ca.reduce((s, v, t) => s + (v - cb[t]) ** 2, 0);
            if (cost < best) {
              best = cost;
              pa = a;
              pb = b;
            }
          }
        clusters[pa] = [...clusters[pa], ...clusters[pb]];
        clusters = clusters.filter((_, i) => i !== pb);
      }
      const ref = new Int32Array(m);
      clusters.forEach((c, j) => c.forEach((i) => (ref[i] = j)));
      expect(wcss(x, m, d, labels)).toBeCloseTo(wcss(x, m, d, ref), 6);
      const chunks = Int32Array.from({ length: m }, (_, i) => Math.floor((i * k) / m));
      expect(wcss(x, m, d, labels)).toBeLessThanOrEqual(wcss(x, m, d, chunks) + 1e-9);
    }
  });

  it('pools a batch document by document, keeping a member token id per pooled row', () => {
    const d = 8;
    const offsets = Uint32Array.from([0, 5, 5, 16]);
    const x = rows(16, d, 9, true);
    const ids = Int32Array.from({ length: 16 }, (_, i) => 100 + i);
    const b = poolBatch(offsets, ids, x, d, 2);
    expect(Array.from(b.tokenOffsets)).toEqual([0, 3, 3, 9]);
    expect(b.vectors.length).toBe(9 * d);
    const first = poolTokens(x.subarray(0, 5 * d), 5, d, 2);
    expect(Array.from(b.vectors.subarray(0, 3 * d))).toEqual(Array.from(first.vectors));
    for (let c = 0; c < 3; c++) expect(b.tokenIds[c]).toBe(100 + first.representative[c]);
    for (let c = 3; c < 9; c++) expect(b.tokenIds[c]).toBeGreaterThanOrEqual(105);
  });

  it('pools documents longer than POOL_WINDOW window by window, still ceil(m / f) rows', () => {
    const m = POOL_WINDOW + 301;
    const d = 4;
    const x = rows(m, d, 13);
    const p = poolTokens(x, m, d, 3);
    expect(p.count).toBe(Math.ceil(m / 3));
    // no cluster spans the window boundary (windows of floor(POOL_WINDOW / 3) * 3 tokens)
    const w = Math.floor(POOL_WINDOW / 3) * 3;
    const before = new Set(Array.from(p.assignment.subarray(0, w)));
    for (const c of p.assignment.subarray(w)) expect(before.has(c)).toBe(false);
  });

  it('refuses a poolFactor outside 1..POOL_FACTOR_MAX or not an integer', () => {
    const x = rows(4, 2, 1);
    for (const f of [0, -1, 1.5, POOL_FACTOR_MAX + 1, Number.NaN]) expect(() => poolTokens(x, 4, 2, f)).toThrow(/poolFactor/);
  });

  it('segments record poolFactor in the codec descriptor; poolFactor 1 writes the same bytes as none', () => {
    const d = 8;
    const offsets = Uint32Array.from([0, 7, 19]);
    const x = rows(19, d, 17, true);
    const ids = Int32Array.from({ length: 19 }, (_, i) => 200 + i);
    const fp16 = createCodec(CodecSettingsSchema.parse({ kind: 'fp16' }));
    const docs = { docIds: ['a', 'b'], tokenOffsets: offsets, tokenIds: ids, vectors: x, dims: d };
    expect(writeSegment(docs, fp16, { poolFactor: 1 })).toEqual(writeSegment(docs, fp16));
    expect(readSegment(writeSegment(docs, fp16), 'plain').codec.poolFactor).toBeUndefined();
    const p = poolBatch(offsets, ids, x, d, 3);
    const seg = readSegment(writeSegment({ ...docs, ...p }, fp16, { poolFactor: 3 }), 'pooled');
    expect(seg.codec.poolFactor).toBe(3);
    expect(Array.from(seg.tokenOffsets)).toEqual([0, 3, 7]);
    expect(() => writeSegment(docs, fp16, { poolFactor: 0 })).toThrow(/poolFactor/);
    // side information needs one token id per row: no pooled segment with it
    const settings = CodecSettingsSchema.parse({ kind: 'eden', bits: 4, dims: 4, layout: 'cross', sideInfo: true });
    const side = rows(19, 4, 3);
    const art = fitCodec(settings, x, d, { seed: 1, staticEmbeddings: side, staticDims: 4 });
    expect(() => writeSegment({ ...docs, staticEmbeddings: side }, createCodec(settings, art), { poolFactor: 2 })).toThrow(/side-information/);
  });
});
