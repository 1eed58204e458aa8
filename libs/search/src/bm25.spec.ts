import { describe, expect, it } from 'vitest';
import { bm25Query, bm25Search, bm25SegmentSearch, documentFrequency, segmentBm25Stats, sumBm25Stats } from './bm25';
import { sphericalKmeans } from './kmeans';
import { buildSegmentIndex } from './segment-index';
import { docMask } from './filters';
import { makeCorpus, randomCuts, rng, segmentsOf, type Corpus } from './test-utils';
import type { Hit, SearchSegment } from './types';

/**
 * Textbook BM25 (Robertson / Sparck Jones with Lucene's idf), written independently over the
 * union of the documents with plain maps: one score per document with at least one query term.
 */
function textbookBm25(c: Corpus, query: number[], k1 = 0.9, b = 0.4, skip?: (t: number) => boolean): Map<number, number> {
  const docs: Map<number, number>[] = [];
  const lengths: number[] = [];
  let row = 0;
  for (const m of c.lengths) {
    const tf = new Map<number, number>();
    let len = 0;
    for (let j = 0; j < m; j++, row++) {
      const t = c.tokenIds[row];
      if (skip?.(t)) continue;
      tf.set(t, (tf.get(t) ?? 0) + 1);
      len++;
    }
    docs.push(tf);
    lengths.push(len);
  }
  const N = docs.length;
  const avgdl = lengths.reduce((a, x) => a + x, 0) / N;
  const scores = new Map<number, number>();
  for (const t of new Set(query)) {
    const df = docs.filter((d) => d.has(t)).length;
    if (df === 0) continue;
    const idf = Math.log(1 + (N - df + 0.5) / (df + 0.5));
    docs.forEach((d, i) => {
      const tf = d.get(t);
      if (!tf) return;
      const s = (idf * tf * (k1 + 1)) / (tf + k1 * (1 - b + (b * lengths[i]) / avgdl));
      scores.set(i, (scores.get(i) ?? 0) + s);
    });
  }
  return scores;
}

const corpus = makeCorpus(31, { documents: 120, dims: 4, maxLen: 30, vocab: 60 });
const T = corpus.tokenIds.length;
const { centroids } = sphericalKmeans(corpus.vectors, T, 4, 16, { seed: 2 });
const parts = (segments: SearchSegment[], skip?: (t: number) => boolean) =>
  segments.map((segment) => ({ segment, index: buildSegmentIndex(segment, centroids, 4, { bm25Skip: skip }) }));
const one = parts(segmentsOf(corpus));
const queries = (() => {
  const r = rng(4);
  return Array.from({ length: 12 }, () => Array.from({ length: 1 + Math.floor(r() * 6) }, () => 100 + Math.floor(r() * r() * 70)));
})();
const plain = (hits: Hit[]) => hits.map((h) => ({ key: h.key, score: h.score }));

describe('bm25', () => {
  it('equals a textbook BM25 over the union of the documents (1e-9), in full and cut at top-n', () => {
    for (const q of queries) {
      const ref = textbookBm25(corpus, q);
      const hits = bm25Search(one, q, 1000);
      expect(ref.size).toBeGreaterThan(0);
      expect(hits.length).toBe(ref.size);
      for (const h of hits) expect(Math.abs(h.score - ref.get(h.key)!)).toBeLessThan(1e-9);
      const refOrder = [...ref.entries()].sort((a, b) => b[1] - a[1] || a[0] - b[0]).slice(0, 10);
      const top = bm25Search(one, q, 10);
      expect(top.map((h) => h.key)).toEqual(refOrder.map(([k]) => k));
    }
  });

  it('returns exactly the same hits (keys and scores, bit for bit) for the documents cut into many segments', () => {
    const r = rng(9);
    for (const count of [2, 7, 40, 120]) {
      const many = parts(segmentsOf(corpus, randomCuts(r, 120, count)));
      expect(many.length).toBe(count);
      for (const q of queries) {
        for (const n of [1, 5, 50]) expect(plain(bm25Search(many, q, n))).toEqual(plain(bm25Search(one, q, n)));
      }
    }
  });

  it('honours k1, b, skipped token ids and duplicate query terms', () => {
    const skip = (t: number) => t === 101;
    const skipped = parts(segmentsOf(corpus), skip);
    for (const q of queries) {
      const ref = textbookBm25(corpus, q, 1.5, 0.9, skip);
      const hits = bm25Search(skipped, [...q, ...q], 1000, { k1: 1.5, b: 0.9 }, skip);
      expect(hits.length).toBe(ref.size);
      for (const h of hits) expect(Math.abs(h.score - ref.get(h.key)!)).toBeLessThan(1e-9);
    }
    expect(() => bm25Query([1], sumBm25Stats([]), { b: 2 })).toThrow('b must be in [0, 1], got 2');
  });

  it('global statistics are the sums of the segments\' (N, total length, df)', () => {
    const many = parts(segmentsOf(corpus, [0, 10, 11, 70, 120]));
    const sum = sumBm25Stats(many.map((p) => segmentBm25Stats(p.index)));
    const whole = segmentBm25Stats(one[0].index);
    expect(sum.documents).toBe(120);
    expect(sum.totalLength).toBe(whole.totalLength);
    expect(Array.from(sum.terms)).toEqual(Array.from(whole.terms));
    expect(Array.from(sum.df)).toEqual(Array.from(whole.df));
    expect(documentFrequency(sum, 99)).toBe(0);
    const q = bm25Query([103, 103, 99, 100], sum);
    expect(Array.from(q.terms)).toEqual([100, 103]); // deduplicated, sorted, unknown dropped
  });

  it('a mask keeps filtered documents out: the top-n of the kept documents, scored with unchanged statistics', () => {
    const many = parts(segmentsOf(corpus, [0, 30, 90, 120]));
    const pred = (m: Record<string, unknown> | null) => m !== null && m.tag !== 'b';
    const masked = many.map((p) => ({ ...p, mask: docMask(p.segment, pred) }));
    for (const q of queries) {
      const all = bm25Search(many, q, 1000).filter((h) => pred(corpus.metadata[h.key]));
      expect(plain(bm25Search(masked, q, 7))).toEqual(plain(all.slice(0, 7)));
    }
  });

  it('checks the index belongs to the segment and the mask length', () => {
    const q = bm25Query([100], segmentBm25Stats(one[0].index));
    const other = parts(segmentsOf(corpus, [0, 5]))[0];
    expect(() => bm25SegmentSearch(one[0].segment, other.index, q, 3)).toThrow('index has 5 documents, segment "seg-0" has 120');
    expect(() => bm25SegmentSearch(one[0].segment, one[0].index, q, 3, { mask: new Uint8Array(3) })).toThrow('mask has 3 entries, the segment has 120 documents');
  });
});
