import { describe, expect, it } from 'vitest';
import type { EncodedText } from '@lateral/model';
import { flatten, relativeError, sampleRows, segmentSlice } from './compression-collection';

const enc = (ids: number[], d: number, base: number): EncodedText => ({
  tokenIds: Int32Array.from(ids),
  vectors: Float32Array.from({ length: ids.length * d }, (_, k) => base + k),
  weights: null,
  length: ids.length,
  truncated: false,
});

describe('compression sweeps: collection helpers', () => {
  const d = 2;
  const docs = [enc([5, 6], d, 0), enc([], d, 100), enc([7], d, 10)];

  it('flatten concatenates token ids and vectors with n + 1 offsets', () => {
    const f = flatten(docs, d);
    expect(f.T).toBe(3);
    expect(Array.from(f.offsets)).toEqual([0, 2, 2, 3]);
    expect(Array.from(f.tokenIds)).toEqual([5, 6, 7]);
    expect(Array.from(f.vectors)).toEqual([0, 1, 2, 3, 10, 11]);
  });

  it('segmentSlice cuts documents [a, b) with offsets rebased to 0 and their static rows', () => {
    const f = flatten(docs, d);
    const side = { vectors: Float32Array.from([1, 2, 3]), dims: 1 };
    const s = segmentSlice({ docIds: ['a', 'b', 'c'], ...f }, d, 1, 3, side);
    expect(s.docIds).toEqual(['b', 'c']);
    expect(Array.from(s.tokenOffsets)).toEqual([0, 0, 1]);
    expect(Array.from(s.tokenIds)).toEqual([7]);
    expect(Array.from(s.vectors)).toEqual([10, 11]);
    expect(Array.from(s.staticEmbeddings!)).toEqual([3]);
    expect(segmentSlice({ docIds: ['a', 'b', 'c'], ...f }, d, 0, 1, null).staticEmbeddings).toBeUndefined();
  });

  it('sampleRows draws k distinct rows in index order, the same for the same seed', () => {
    const n = 50;
    const x = Float32Array.from({ length: n * d }, (_, k) => Math.floor(k / d));
    const a = sampleRows(x, n, d, 10, 7);
    expect(a.idx).toHaveLength(10);
    expect(new Set(a.idx).size).toBe(10);
    expect([...a.idx].sort((p, q) => p - q)).toEqual(a.idx);
    expect(Array.from(a.rows.subarray(0, 2))).toEqual([a.idx[0], a.idx[0]]);
    expect(sampleRows(x, n, d, 10, 7).idx).toEqual(a.idx);
    expect(sampleRows(x, n, d, 10, 8).idx).not.toEqual(a.idx);
    expect(sampleRows(x, n, d, 80, 7).idx).toEqual(Array.from({ length: n }, (_, i) => i)); // k > n: every row
  });

  it('relativeError is sum of squared errors over the reference energy', () => {
    const ref = Float32Array.from([3, 4]); // energy 25
    expect(relativeError(ref, Float32Array.from([3, 4]))).toBe(0);
    expect(relativeError(ref, Float32Array.from([3, 3]))).toBeCloseTo(1 / 25, 12);
    expect(relativeError(new Float32Array(2), Float32Array.from([1, 1]))).toBe(0);
  });
});
