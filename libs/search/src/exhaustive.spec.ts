import { describe, expect, it } from 'vitest';
import { maxsim } from '@lateral/scoring';
import { exhaustiveSearch, exhaustiveSegmentSearch } from './exhaustive';
import { docMask } from './filters';
import { intMatrixCorpus, makeCorpus, randomCuts, randomUnit, rng, segmentsOf } from './test-utils';
import type { Hit } from './types';

const d = 10;
const corpus = makeCorpus(61, { documents: 80, dims: d, maxLen: 13, minLen: 0 });
const one = segmentsOf(corpus).map((segment) => ({ segment }));
const starts = [0];
corpus.lengths.forEach((m, i) => starts.push(starts[i] + m));
const plain = (hits: Hit[]) => hits.map((h) => [h.key, h.score]);

describe('exhaustive MaxSim', () => {
  it('equals @lateral/scoring maxsim bit for bit, for every query length (odd and even), normalised or not', () => {
    for (const n of [1, 2, 3, 8]) {
      const q = randomUnit(rng(n), n, d);
      for (const normalize of [false, true]) {
        const hits = exhaustiveSearch(one, q, n, 1000, { normalize });
        const ref = corpus.lengths
          .map((m, doc) => ({ doc, m, s: maxsim(q, n, corpus.vectors.subarray(starts[doc] * d, starts[doc + 1] * d), m, d, { normalize }) }))
          .filter((x) => x.m > 0) // empty documents (-Infinity) are not returned
          .sort((a, b) => b.s - a.s || a.doc - b.doc);
        expect(plain(hits)).toEqual(ref.map((x) => [x.doc, x.s]));
      }
    }
  });

  it('explain: per query token the lowest row achieving the max, and that similarity', () => {
    const { corpus: ties, q, n } = intMatrixCorpus();
    const seg = segmentsOf(ties)[0];
    const hits = exhaustiveSegmentSearch(seg, q, n, 100, { explain: true });
    const D = ties.dims;
    hits.explain!.forEach((ex, h) => {
      const doc = hits.docs[h];
      for (let i = 0; i < n; i++) {
        let best = -Infinity, arg = -1;
        for (let r = seg.tokenOffsets[doc]; r < seg.tokenOffsets[doc + 1]; r++) {
          let s = 0;
          for (let t = 0; t < D; t++) s += q[i * D + t] * seg.tokens[r * D + t];
          if (s > best) { best = s; arg = r; }
        }
        expect(ex.rows[i]).toBe(arg);
        expect(ex.similarities[i]).toBe(best);
      }
    });
  });

  it('many segments == one segment, bit for bit; a mask keeps filtered documents out', () => {
    const r = rng(7);
    const n = 5;
    const q = randomUnit(r, n, d);
    for (const parts of [3, 17, 80]) {
      const many = segmentsOf(corpus, randomCuts(r, 80, parts)).map((segment) => ({ segment }));
      expect(plain(exhaustiveSearch(many, q, n, 15, { explain: true }))).toEqual(plain(exhaustiveSearch(one, q, n, 15)));
    }
    const pred = (m: Record<string, unknown> | null) => m !== null && (m.year as number) >= 2005;
    const masked = segmentsOf(corpus, [0, 40, 80]).map((segment) => ({ segment, mask: docMask(segment, pred) }));
    expect(plain(exhaustiveSearch(masked, q, n, 10))).toEqual(plain(exhaustiveSearch(one, q, n, 1000).filter((h) => pred(corpus.metadata[h.key])).slice(0, 10)));
  });

  it('returns nothing for an empty query or segment, and names a bad query shape', () => {
    expect(exhaustiveSegmentSearch(one[0].segment, new Float32Array(0), 0, 5).docs.length).toBe(0);
    expect(() => exhaustiveSegmentSearch(one[0].segment, new Float32Array(7), 1, 5)).toThrow('q has length 7, expected n x d = 1 x 10 = 10');
  });
});
