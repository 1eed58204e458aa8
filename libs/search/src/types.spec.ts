import { describe, expect, it } from 'vitest';
import { docPrefixesOf, searchSegment } from './types';

describe('docPrefixesOf', () => {
  // 4 documents of 3, 0, 5 and 2 tokens, dims 2; row r holds [r, -r].
  const offsets = Uint32Array.from([0, 3, 3, 8, 10]);
  const d = 2;
  const rows = Float32Array.from({ length: 10 * d }, (_, i) => (i % 2 === 0 ? i / 2 : -(i - 1) / 2));
  const rowIds = (v: Float32Array) => Array.from({ length: v.length / d }, (_, r) => v[r * d]);

  it('keeps the first min(m, tokens) rows of each document, empty documents included', () => {
    expect(rowIds(docPrefixesOf(rows, 0, offsets, d, 0, 4, 2))).toEqual([0, 1, 3, 4, 8, 9]);
    expect(rowIds(docPrefixesOf(rows, 0, offsets, d, 0, 4, 9))).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
    expect(docPrefixesOf(rows, 0, offsets, d, 1, 2, 4).length).toBe(0);
  });

  it('reads a decode of the range alone when rowBase is its first row', () => {
    const range = rows.subarray(offsets[2] * d, offsets[4] * d);
    expect(docPrefixesOf(range, offsets[2], offsets, d, 2, 4, 3)).toEqual(docPrefixesOf(rows, 0, offsets, d, 2, 4, 3));
    expect(rowIds(docPrefixesOf(range, offsets[2], offsets, d, 2, 4, 3))).toEqual([3, 4, 5, 8, 9]);
  });

  it('is what a SearchSegment without its own prefix decoder returns', () => {
    const seg = searchSegment({
      name: 's',
      documents: 4,
      dims: d,
      docIds: ['a', 'b', 'c', 'e'],
      tokenOffsets: offsets,
      tokenIds: new Int32Array(10),
      docVectors: null,
      metadata: () => null,
      decodeAll: () => rows,
    });
    expect(seg.docPrefixTokens(1, 4, 4)).toEqual(docPrefixesOf(rows, 0, offsets, d, 1, 4, 4));
    expect(rowIds(seg.docPrefixTokens(1, 4, 4))).toEqual([3, 4, 5, 6, 8, 9]);
  });
});
