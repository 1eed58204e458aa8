import { describe, expect, it } from 'vitest';
import { buildSegmentIndex, searchSegment, serializeSegmentIndex } from '@lateral/search';
import { mulberry32 } from '@lateral/shared';
import { SegmentIndexCopier } from './merge-index';

/** A segment source of `lengths` documents: random unit token rows of `d` dims and token ids in [0, 40). */
function source(name: string, lengths: number[], d: number, seed: number) {
  const r = mulberry32(seed);
  const tokenOffsets = new Uint32Array(lengths.length + 1);
  lengths.forEach((m, i) => (tokenOffsets[i + 1] = tokenOffsets[i] + m));
  const T = tokenOffsets[lengths.length];
  const tokens = Float32Array.from({ length: T * d }, () => r() * 2 - 1);
  const tokenIds = Int32Array.from({ length: T }, () => Math.floor(r() * 40));
  return { name, documents: lengths.length, dims: d, docIds: lengths.map((_, i) => `${name}-${i}`), tokenOffsets, tokenIds, docVectors: null, metadata: () => null, decodeAll: () => tokens, tokens };
}

/** The kept documents of several sources as one source (what a merge writes). */
function concat(parts: { src: ReturnType<typeof source>; keep: number[] }[]) {
  const d = parts[0].src.dims;
  const offsets = [0];
  const ids: number[] = [];
  const vecs: number[] = [];
  for (const { src, keep } of parts) {
    for (const i of keep) {
      const a = src.tokenOffsets[i];
      const b = src.tokenOffsets[i + 1];
      offsets.push(offsets[offsets.length - 1] + b - a);
      ids.push(...src.tokenIds.subarray(a, b));
      vecs.push(...src.tokens.subarray(a * d, b * d));
    }
  }
  const tokens = Float32Array.from(vecs);
  const n = offsets.length - 1;
  return { name: 'merged', documents: n, dims: d, docIds: Array.from({ length: n }, (_, i) => `m-${i}`), tokenOffsets: Uint32Array.from(offsets), tokenIds: Int32Array.from(ids), docVectors: null, metadata: () => null, decodeAll: () => tokens };
}

describe('SegmentIndexCopier (the merged segment index from the inputs, nothing decoded)', () => {
  it('gives the bytes buildSegmentIndex gives on the kept documents (IVF rows, BM25 postings, lengths), skipped terms kept out', () => {
    const d = 8;
    const K = 5;
    const r = mulberry32(9);
    const centroids = Float32Array.from({ length: K * d }, () => r() * 2 - 1);
    const skip = (id: number) => id % 7 === 0;
    const a = source('a', [6, 0, 9, 3, 12], d, 1);
    const b = source('b', [4, 8, 2], d, 2);
    const c = source('c', [5, 5], d, 3);
    const parts = [
      { src: a, keep: [0, 1, 3, 4] },
      { src: b, keep: [] as number[] },
      { src: c, keep: [1] },
    ];
    const copier = new SegmentIndexCopier();
    for (const { src, keep } of parts) copier.append(buildSegmentIndex(searchSegment(src), centroids, d, { bm25Skip: skip }), src.tokenOffsets, keep);
    const merged = copier.finish();
    const rebuilt = buildSegmentIndex(searchSegment(concat(parts)), centroids, d, { bm25Skip: skip });
    expect(merged.documents).toBe(5);
    expect(merged.bm25.totalLength).toBe(rebuilt.bm25.totalLength);
    expect(Buffer.from(serializeSegmentIndex(merged)).equals(Buffer.from(serializeSegmentIndex(rebuilt)))).toBe(true);
  });

  it('refuses an input indexed with other centroids, and unordered kept documents', () => {
    const d = 4;
    const src = source('a', [3, 2], d, 4);
    const one = buildSegmentIndex(searchSegment(src), Float32Array.from([1, 0, 0, 0, 0, 1, 0, 0]), d);
    const other = buildSegmentIndex(searchSegment(src), Float32Array.from([0, 0, 1, 0, 0, 0, 0, 1]), d);
    const copier = new SegmentIndexCopier();
    copier.append(one, src.tokenOffsets, [0]);
    expect(() => copier.append(other, src.tokenOffsets, [0])).toThrow(/other centroids/);
    expect(() => new SegmentIndexCopier().append(one, src.tokenOffsets, [1, 0])).toThrow(/ascending/);
  });
});
