import { describe, expect, it } from 'vitest';
import { crc32c, SegmentCorruptError } from '@lateral/codec';
import {
  buildSegmentIndex, deserializeSegmentIndex, serializeSegmentIndex, SegmentIndexCorruptError, SEGMENT_INDEX_SECTIONS,
  type SegmentIndex,
} from './segment-index';
import { sphericalKmeans } from './kmeans';
import { makeCorpus, segmentsOf } from './test-utils';

const corpus = makeCorpus(21, { documents: 40, dims: 8, maxLen: 15, vocab: 30 });
const [seg] = segmentsOf(corpus);
const T = corpus.tokenIds.length;
const { centroids, k: K } = sphericalKmeans(corpus.vectors, T, 8, 16, { seed: 1 });
const skip = (id: number) => id === 100; // the most frequent id, as a "special token"
const index = buildSegmentIndex(seg, centroids, 8, { bm25Skip: skip });

const expectSameIndex = (a: SegmentIndex, b: SegmentIndex) => {
  expect(b.documents).toBe(a.documents);
  expect(b.tokens).toBe(a.tokens);
  expect(b.dims).toBe(a.dims);
  expect(b.centroidCount).toBe(a.centroidCount);
  expect(b.centroidsCrc).toBe(a.centroidsCrc);
  for (const k of ['listOffsets', 'rows'] as const) expect(Array.from(b.ivf[k])).toEqual(Array.from(a.ivf[k]));
  for (const k of ['terms', 'postingOffsets', 'postingDocs', 'postingTfs', 'docLengths'] as const) expect(Array.from(b.bm25[k])).toEqual(Array.from(a.bm25[k]));
  expect(b.bm25.totalLength).toBe(a.bm25.totalLength);
};

describe('buildSegmentIndex', () => {
  it('takes BM25 postings from bm25Terms when the rows are pooled (codec.poolFactor), IVF from the rows', () => {
    // the same documents as `seg`, but one row per document (a pooled segment) with a dummy token id
    const D = corpus.lengths.length;
    const rowsPerDoc = Uint32Array.from({ length: D + 1 }, (_, i) => i);
    const pooled = { ...seg, tokenOffsets: rowsPerDoc, tokenIds: new Int32Array(D), tokens: seg.tokens.slice(0, D * 8) };
    const terms = { tokenIds: seg.tokenIds, tokenOffsets: seg.tokenOffsets };
    const p = buildSegmentIndex(pooled, centroids, 8, { bm25Skip: skip, bm25Terms: terms });
    expect(p.tokens).toBe(D);
    expect(p.ivf.rows.length).toBe(D);
    for (const k of ['terms', 'postingOffsets', 'postingDocs', 'postingTfs', 'docLengths'] as const) expect(Array.from(p.bm25[k])).toEqual(Array.from(index.bm25[k]));
    expect(p.bm25.totalLength).toBe(index.bm25.totalLength);
    expect(() => buildSegmentIndex(pooled, centroids, 8, { bm25Terms: { tokenIds: seg.tokenIds, tokenOffsets: seg.tokenOffsets.subarray(1) } })).toThrow(/bm25Terms/);
  });

  it('puts every token row exactly once in the list of its nearest centroid, ascending', () => {
    const { listOffsets, rows } = index.ivf;
    expect(listOffsets.length).toBe(K + 1);
    expect(rows.length).toBe(T);
    expect(new Set(rows).size).toBe(T);
    for (let c = 0; c < K; c++) {
      for (let p = listOffsets[c]; p < listOffsets[c + 1]; p++) {
        const r = rows[p];
        if (p > listOffsets[c]) expect(rows[p - 1]).toBeLessThan(r);
        let best = -Infinity, arg = -1;
        for (let j = 0; j < K; j++) {
          let s = 0;
          for (let t = 0; t < 8; t++) s += corpus.vectors[r * 8 + t] * centroids[j * 8 + t];
          if (s > best) { best = s; arg = j; }
        }
        expect(arg).toBe(c);
      }
    }
  });

  it('builds BM25 postings equal to a direct count, skipping the given token ids', () => {
    const { terms, postingOffsets, postingDocs, postingTfs, docLengths, totalLength } = index.bm25;
    const expected = new Map<number, Map<number, number>>();
    let row = 0;
    const lengths: number[] = [];
    corpus.lengths.forEach((m, doc) => {
      let len = 0;
      for (let j = 0; j < m; j++, row++) {
        const t = corpus.tokenIds[row];
        if (skip(t)) continue;
        len++;
        const perDoc = expected.get(t) ?? new Map<number, number>();
        perDoc.set(doc, (perDoc.get(doc) ?? 0) + 1);
        expected.set(t, perDoc);
      }
      lengths.push(len);
    });
    expect(Array.from(terms)).toEqual([...expected.keys()].sort((a, b) => a - b));
    expect(terms.includes(100)).toBe(false);
    terms.forEach((t, u) => {
      const got = new Map<number, number>();
      for (let p = postingOffsets[u]; p < postingOffsets[u + 1]; p++) got.set(postingDocs[p], postingTfs[p]);
      expect(got).toEqual(expected.get(t));
    });
    expect(Array.from(docLengths)).toEqual(lengths);
    expect(totalLength).toBe(lengths.reduce((a, b) => a + b, 0));
  });

  it('takes precomputed assignments, checks them and the dims', () => {
    const assignments = new Uint32Array(T).fill(3);
    const idx = buildSegmentIndex(seg, centroids, 8, { assignments });
    expect(idx.ivf.listOffsets[3]).toBe(0);
    expect(idx.ivf.listOffsets[4]).toBe(T);
    expect(() => buildSegmentIndex(seg, centroids, 8, { assignments: new Uint32Array(T).fill(K) })).toThrow(`assignments[0] = ${K} is not a centroid (K = ${K})`);
    expect(() => buildSegmentIndex(seg, centroids.subarray(0, 4 * 4), 4)).toThrow('centroids have d = 4, segment "seg-0" has dims 8');
  });

  it('indexes an empty segment', () => {
    const empty = segmentsOf(corpus, [0, 0])[0];
    const idx = buildSegmentIndex(empty, centroids, 8);
    expect(idx.tokens).toBe(0);
    expectSameIndex(idx, deserializeSegmentIndex(serializeSegmentIndex(idx), 'empty'));
  });
});

describe('segment index format (LSIX v1)', () => {
  const bytes = serializeSegmentIndex(index);

  it('round-trips exactly, with a header + 7-section layout', () => {
    expectSameIndex(index, deserializeSegmentIndex(bytes, 'idx', { documents: 40, tokens: T, centroids, dims: 8 }));
    expect(String.fromCharCode(...bytes.subarray(0, 4))).toBe('LSIX');
    const view = new DataView(bytes.buffer);
    expect(view.getUint16(4, true)).toBe(1);
    expect(view.getUint32(8, true)).toBe(160);
    expect(bytes.length).toBe(160 + 4 * (K + 1 + T + index.bm25.terms.length * 2 + 1 + index.bm25.postingDocs.length * 2 + 40));
    // deserialising an unaligned copy works too
    const shifted = new Uint8Array(bytes.length + 1).subarray(1);
    shifted.set(bytes);
    expectSameIndex(index, deserializeSegmentIndex(shifted, 'idx'));
  });

  const names = ['ivf.listOffsets', 'ivf.rows', 'bm25.terms', 'bm25.postingOffsets', 'bm25.postingDocs', 'bm25.postingTfs', 'bm25.docLengths'];

  it('refuses a flipped byte in any section, naming the section', () => {
    const view = new DataView(bytes.buffer);
    SEGMENT_INDEX_SECTIONS.forEach((_, k) => {
      const off = view.getUint32(44 + 16 * k + 4, true);
      const len = view.getUint32(44 + 16 * k + 8, true);
      if (len === 0) return;
      const bad = bytes.slice();
      bad[off + Math.floor(len / 2)] ^= 0x10;
      let err: unknown;
      try {
        deserializeSegmentIndex(bad, 'idx-7');
      } catch (e) {
        err = e;
      }
      expect(err).toBeInstanceOf(SegmentIndexCorruptError);
      expect(err).toBeInstanceOf(SegmentCorruptError);
      expect((err as SegmentIndexCorruptError).section).toBe(names[k]);
      expect((err as Error).message).toBe(`segment index "idx-7" is corrupt in section "${names[k]}": checksum mismatch (corrupted)`);
    });
  });

  it('refuses truncation, trailing bytes, a bad header, and names where', () => {
    expect(() => deserializeSegmentIndex(bytes.subarray(0, 20), 'i')).toThrow('segment index "i" is corrupt in section "header": 20 bytes is shorter than the 48-byte fixed header (truncated)');
    expect(() => deserializeSegmentIndex(bytes.subarray(0, 100), 'i')).toThrow('section "header": header length 160 out of range (file is 100 bytes; truncated?)');
    expect(() => deserializeSegmentIndex(bytes.subarray(0, bytes.length - 4), 'i')).toThrow('section "bm25.docLengths": ends at');
    expect(() => deserializeSegmentIndex(bytes.subarray(0, 170), 'i')).toThrow('section "ivf.listOffsets": ends at');
    const longer = new Uint8Array(bytes.length + 4);
    longer.set(bytes);
    expect(() => deserializeSegmentIndex(longer, 'i')).toThrow('section "bm25.docLengths": 4 trailing bytes after the last section');
    const magic = bytes.slice();
    magic[0] = 0x58;
    expect(() => deserializeSegmentIndex(magic, 'i')).toThrow('section "header": bad magic "XSIX", expected LSIX');
    const header = bytes.slice();
    header[13] ^= 1; // documents
    expect(() => deserializeSegmentIndex(header, 'i')).toThrow('section "header": checksum mismatch (corrupted)');
  });

  it('refuses contents that disagree even with valid checksums (a crafted file)', () => {
    const bad = bytes.slice();
    const view = new DataView(bad.buffer);
    const off = view.getUint32(44 + 16 + 4, true); // ivf.rows
    const len = view.getUint32(44 + 16 + 8, true);
    view.setUint32(off, view.getUint32(off + 4, true), true); // a repeated row
    view.setUint32(44 + 16 + 12, crc32c(bad.subarray(off, off + len)), true);
    view.setUint32(156, crc32c(bad.subarray(0, 156)), true);
    expect(() => deserializeSegmentIndex(bad, 'i')).toThrow(/section "ivf.rows": (row \d+ appears twice|list \d+ is not ascending)/);
  });

  it('refuses an index used with another segment or other centroids', () => {
    expect(() => deserializeSegmentIndex(bytes, 'i', { documents: 41 })).toThrow('section "header": built for 40 documents, the segment has 41');
    const other = centroids.slice();
    other[0] += 1e-3;
    expect(() => deserializeSegmentIndex(bytes, 'i', { centroids: other })).toThrow('built with other centroids (centroid CRC32C differs)');
  });
});
