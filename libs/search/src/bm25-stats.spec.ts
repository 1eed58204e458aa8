import { describe, expect, it } from 'vitest';
import { SegmentCorruptError } from '@lateral/codec';
import { adjustBm25Stats, Bm25TermStats, deserializeBm25Stats, documentsBm25Stats, segmentBm25Stats, serializeBm25Stats, sumBm25Stats, type Bm25Stats } from './bm25';
import { buildBm25Postings } from './segment-index';
import { rng } from './test-utils';

/** A segment's BM25 postings over random terms (some negative: analysed term ids are signed hashes). */
function segment(seed: number, documents: number) {
  const r = rng(seed);
  const offsets = new Uint32Array(documents + 1);
  const ids: number[] = [];
  for (let i = 0; i < documents; i++) {
    const len = Math.floor(r() * 9);
    for (let j = 0; j < len; j++) ids.push(Math.floor(60 * r() * r()) - 20);
    offsets[i + 1] = ids.length;
  }
  return { documents, bm25: buildBm25Postings(Int32Array.from(ids), offsets) };
}

const plain = (s: Bm25Stats) => ({ documents: s.documents, totalLength: s.totalLength, terms: Array.from(s.terms), df: Array.from(s.df) });

describe('BM25 generation statistics', () => {
  it('LB25 round-trips, and a flipped byte or a cut is refused', () => {
    const s = segmentBm25Stats(segment(1, 50));
    const bytes = serializeBm25Stats(s, 7);
    const back = deserializeBm25Stats(bytes, 'g7');
    expect(back.generation).toBe(7);
    expect(plain(back.stats)).toEqual(plain(s));
    const bad = bytes.slice();
    bad[30] ^= 1;
    expect(() => deserializeBm25Stats(bad, 'g7')).toThrow(SegmentCorruptError);
    expect(() => deserializeBm25Stats(bytes.subarray(0, bytes.length - 4), 'g7')).toThrow(/truncated/);
    expect(plain(deserializeBm25Stats(serializeBm25Stats(sumBm25Stats([]), 1), 'g1').stats)).toEqual({ documents: 0, totalLength: 0, terms: [], df: [] });
  });

  it('some documents of a segment: all of them is the segment; any subset is what the postings of those documents give', () => {
    const seg = segment(2, 40);
    expect(plain(documentsBm25Stats(seg, Array.from({ length: 40 }, (_, i) => i)))).toEqual(plain(segmentBm25Stats(seg)));
    const docs = [3, 5, 5, 17, 39];
    const sub = documentsBm25Stats(seg, docs);
    const { terms, postingOffsets, postingDocs, docLengths } = seg.bm25;
    const df = new Map<number, number>();
    for (let u = 0; u < terms.length; u++) for (let p = postingOffsets[u]; p < postingOffsets[u + 1]; p++) if (docs.includes(postingDocs[p])) df.set(terms[u], (df.get(terms[u]) ?? 0) + 1);
    const sorted = [...df.keys()].sort((a, b) => a - b);
    expect(plain(sub)).toEqual({ documents: 4, totalLength: [3, 5, 17, 39].reduce((a, d) => a + docLengths[d], 0), terms: sorted, df: sorted.map((t) => df.get(t)) });
    expect(() => documentsBm25Stats(seg, [40])).toThrow(RangeError);
  });

  it('carried forward: adding and removing segments and documents gives the sums over what is left', () => {
    const a = segment(3, 30), b = segment(4, 20), c = segment(5, 25);
    const ab = sumBm25Stats([segmentBm25Stats(a), segmentBm25Stats(b)]);
    // b leaves, c comes, documents 0..9 of a are deleted
    const next = adjustBm25Stats(ab, [segmentBm25Stats(c)], [segmentBm25Stats(b), documentsBm25Stats(a, [0, 1, 2, 3, 4, 5, 6, 7, 8, 9])]);
    const expected = sumBm25Stats([documentsBm25Stats(a, Array.from({ length: 20 }, (_, i) => i + 10)), segmentBm25Stats(c)]);
    expect(plain(next)).toEqual(plain(expected));
    expect(() => adjustBm25Stats(segmentBm25Stats(a), [], [segmentBm25Stats(b)])).toThrow(RangeError);
  });

  it("a query's counts over live documents equal the generation statistics of those documents", () => {
    const seg = segment(6, 30);
    const live = new Uint8Array(30).fill(1);
    for (const d of [1, 4, 9, 20]) live[d] = 0;
    const terms = [-20, -5, 0, 3, 11, 39, 1000];
    const counter = new Bm25TermStats(terms);
    counter.add(seg, live);
    const s = counter.stats();
    const all = documentsBm25Stats(seg, Array.from({ length: 30 }, (_, i) => i).filter((d) => live[d] === 1));
    expect(s.documents).toBe(all.documents);
    expect(s.totalLength).toBe(all.totalLength);
    Array.from(s.terms).forEach((t, u) => {
      const at = Array.from(all.terms).indexOf(t);
      expect(s.df[u]).toBe(at >= 0 ? all.df[at] : 0);
    });
    // without a mask: every document, as before
    const every = new Bm25TermStats(terms);
    every.add(seg);
    expect(every.stats().documents).toBe(30);
  });
});
