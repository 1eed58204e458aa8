import { describe, expect, it } from 'vitest';
import { dedupMaxByDoc, denseBatch, mebert } from '@lateral/scoring';
import { denseSearch, denseSegmentSearch, mebertSearch, mebertSegmentSearch } from './dense';
import { docMask } from './filters';
import { makeCorpus, randomCuts, randomUnit, rng, segmentsOf } from './test-utils';
import { searchSegment, type Hit, type SearchSegment } from './types';
import { createCodec, decodeHalf, encodeHalf, fitCodec, readSegment, writeSegment } from '@lateral/codec';
import { CodecSettingsSchema } from '@lateral/shared';

const d = 12;
const corpus = makeCorpus(51, { documents: 150, dims: d, maxLen: 10, minLen: 0 });
const one = segmentsOf(corpus).map((segment) => ({ segment }));
const plain = (hits: Hit[]) => hits.map((h) => [h.key, h.score]);
const starts = [0];
corpus.lengths.forEach((m, i) => starts.push(starts[i] + m));

describe('dense', () => {
  it('equals brute-force inner products with the pooled vectors (scoring\'s denseBatch), ties to the lower key', () => {
    const q = randomUnit(rng(1), 1, d);
    const ref = Array.from(denseBatch(q, corpus.docVectors, d), (s, doc) => ({ doc, s }));
    const hits = denseSearch(one, q, 150);
    expect(hits.map((h) => h.key)).toEqual([...ref].sort((a, b) => b.s - a.s || a.doc - b.doc).map((r) => r.doc));
    for (const h of hits) expect(Math.abs(h.score - ref[h.key].s)).toBeLessThan(1e-6); // denseBatch returns float32
    // exact ties: the same query against duplicated vectors
    const dup = segmentsOf({ ...corpus, docVectors: corpus.docVectors.map((_, i) => corpus.docVectors[(i % d)]) }).map((segment) => ({ segment }));
    expect(denseSearch(dup, q, 5).map((h) => h.key)).toEqual([0, 1, 2, 3, 4]);
  });

  it('many segments == one segment, bit for bit', () => {
    const r = rng(2);
    for (const parts of [2, 9, 150]) {
      const many = segmentsOf(corpus, randomCuts(r, 150, parts)).map((segment) => ({ segment }));
      for (let t = 0; t < 5; t++) {
        const q = randomUnit(r, 1, d);
        for (const n of [1, 10, 200]) expect(plain(denseSearch(many, q, n))).toEqual(plain(denseSearch(one, q, n)));
      }
    }
  });

  it('a mask keeps filtered documents out: the kept documents\' top-n', () => {
    const pred = (m: Record<string, unknown> | null) => m?.tag === 'a';
    const parts = segmentsOf(corpus, [0, 50, 51, 150]).map((segment) => ({ segment, mask: docMask(segment, pred) }));
    const q = randomUnit(rng(3), 1, d);
    const all = denseSearch(one, q, 150).filter((h) => pred(corpus.metadata[h.key]));
    expect(plain(denseSearch(parts, q, 8))).toEqual(plain(all.slice(0, 8)));
  });

  it('names what is wrong', () => {
    expect(() => denseSegmentSearch(one[0].segment, new Float32Array(3), 1)).toThrow('qVec has length 3, expected d = 12');
    const noVectors = { ...one[0].segment, docVectors: null };
    expect(() => denseSegmentSearch(noVectors, new Float32Array(d), 1)).toThrow('segment "seg-0" has no document vectors');
  });
});

describe('mebert', () => {
  it('equals scoring\'s mebert per document and the search-then-dedup of all first-m vectors (SPEC 5.9)', () => {
    const q = randomUnit(rng(4), 1, d);
    for (const m of [1, 3, 8]) {
      const perDoc = corpus.lengths.map((len, doc) => mebert(q, corpus.vectors.subarray(starts[doc] * d, starts[doc + 1] * d), len, d, m));
      // every first-m vector as its own entry, deduplicated by document
      const owners: number[] = [];
      const scores: number[] = [];
      corpus.lengths.forEach((len, doc) => {
        for (let j = 0; j < Math.min(len, m); j++) {
          owners.push(doc);
          let s = 0;
          for (let t = 0; t < d; t++) s += q[t] * corpus.vectors[(starts[doc] + j) * d + t];
          scores.push(s);
        }
      });
      const dedup = dedupMaxByDoc(owners, scores);
      const hits = mebertSearch(one, q, m, 1000, { explain: true });
      expect(hits.length).toBe(corpus.lengths.filter((len) => len > 0).length); // empty documents never score
      expect(hits.map((h) => h.key)).toEqual(dedup.map((x) => x.doc));
      for (const h of hits) {
        expect(h.score).toBe(perDoc[h.key]);
        const row = h.explain!.rows[0];
        expect(row - one[0].segment.tokenOffsets[h.doc]).toBeLessThan(m);
        expect(h.explain!.similarities[0]).toBe(h.score);
      }
    }
  });

  it('many segments == one segment; a mask keeps filtered documents out', () => {
    const r = rng(5);
    const q = randomUnit(r, 1, d);
    const many = segmentsOf(corpus, randomCuts(r, 150, 12)).map((segment) => ({ segment }));
    expect(plain(mebertSearch(many, q, 4, 20))).toEqual(plain(mebertSearch(one, q, 4, 20)));
    const pred = (m: Record<string, unknown> | null) => m !== null && (m.n as number) % 2 === 0;
    const masked = many.map((p) => ({ ...p, mask: docMask(p.segment, pred) }));
    expect(plain(mebertSearch(masked, q, 4, 20))).toEqual(plain(mebertSearch(one, q, 4, 1000).filter((h) => pred(corpus.metadata[h.key])).slice(0, 20)));
    expect(() => mebertSegmentSearch(one[0].segment, q, 0, 3)).toThrow('mVecs must be an integer >= 1, got 0');
  });
});

describe('mebert over a prefix section (segment format v2)', () => {
  // EDEN 4-bit codes (decoded rows differ from the originals), long enough for several scan steps (8,192 prefix rows each).
  const big = makeCorpus(61, { documents: 3200, dims: d, maxLen: 9, minLen: 0 });
  const settings = CodecSettingsSchema.parse({ kind: 'eden', bits: 4 });
  const artifact = fitCodec(settings, big.vectors, d, { seed: 3n });
  const eden = createCodec(settings, artifact);
  const cuts = [0, 1, 1700, 3200];
  const bstarts = [0];
  big.lengths.forEach((m, i) => bstarts.push(bstarts[i] + m));
  /** The corpus's segments as the pipeline writes them: with a prefix section of `rows` (0: none, format v1). */
  const segments = (rows: number): { segment: SearchSegment }[] =>
    cuts.slice(1).map((b, s) => {
      const a = cuts[s];
      const tokenOffsets = Uint32Array.from({ length: b - a + 1 }, (_, i) => bstarts[a + i] - bstarts[a]);
      const bytes = writeSegment(
        { docIds: big.docIds.slice(a, b), tokenOffsets, tokenIds: big.tokenIds.slice(bstarts[a], bstarts[b]), vectors: big.vectors.slice(bstarts[a] * d, bstarts[b] * d), dims: d, metadata: big.metadata.slice(a, b) },
        eden,
        { prefixRows: rows },
      );
      return { segment: searchSegment(readSegment(bytes, `seg-${s}`, artifact), a) };
    });
  const v1 = segments(0);
  const v2 = segments(4);

  it('reads the section: scores equal the code path within fp16 rounding, and equal float64 sums over the fp16 rows exactly', () => {
    expect(v1.every((p) => p.segment.prefixVectors === null)).toBe(true);
    expect(v2.every((p) => p.segment.prefixVectors?.rows === 4)).toBe(true);
    const all = big.lengths.filter((len) => len > 0).length;
    // Each document's first 4 decoded rows (the code path's vectors), rounded to fp16.
    const pref = big.lengths.map((_, key) => {
      const s = cuts.findIndex((c, i) => c <= key && key < cuts[i + 1]);
      const local = key - cuts[s];
      return decodeHalf(encodeHalf(v1[s].segment.docPrefixTokens(local, local + 1, 4)));
    });
    for (let t = 0; t < 2; t++) {
      const q = randomUnit(rng(70 + t), 1, d);
      for (const m of [1, 2, 3, 4]) {
        const before = mebertSearch(v1, q, m, 4000, { explain: true });
        const after = mebertSearch(v2, q, m, 4000, { explain: true });
        expect(after.length).toBe(all);
        expect(before.length).toBe(all);
        const was = new Map(before.map((h) => [h.key, h]));
        for (const h of after) {
          const seg = v2[h.segment].segment;
          const local = h.doc;
          const len = big.lengths[h.key];
          const k = Math.min(m, len);
          // The reference: each of the first k decoded rows rounded to fp16, float64 sums in dimension order, the first best row.
          const rows = pref[h.key];
          let best = -Infinity;
          let arg = -1;
          let bound = 0; // |<q, x> - <q, fp16(x)>| <= sum_t |q_t x_t| 2^-11, per row
          for (let j = 0; j < k; j++) {
            let s = 0;
            let mag = 0;
            for (let u = 0; u < d; u++) {
              s += q[u] * rows[j * d + u];
              mag += Math.abs(q[u] * rows[j * d + u]);
            }
            bound = Math.max(bound, mag * 2 ** -11);
            if (s > best) {
              best = s;
              arg = j;
            }
          }
          expect(h.score).toBe(best);
          expect(h.explain!.rows[0]).toBe(seg.tokenOffsets[local] + arg);
          expect(Math.abs(h.score - was.get(h.key)!.score)).toBeLessThanOrEqual(bound * 1.01 + 1e-12);
        }
        // The same documents lead, but for near ties within fp16 rounding: the top 10 by the code path's scores.
        const top = (hs: Hit[]) => hs.slice(0, 10).map((h) => h.key);
        const tenth = before[9].score;
        const clear = top(before).filter((key) => was.get(key)!.score > tenth + 1e-3);
        for (const key of clear) expect(top(after)).toContain(key);
      }
    }
  });

  it('m above the section\'s rows, or a mask, or many segments: the answers a code scan gives', () => {
    const r = rng(80);
    const q = randomUnit(r, 1, d);
    // m = 5 > 4 stored: read from the codes, bit for bit what a v1 segment answers.
    expect(plain(mebertSearch(v2, q, 5, 300))).toEqual(plain(mebertSearch(v1, q, 5, 300)));
    // A mask keeps filtered documents out of the section's scan as of the code path's.
    const pred = (m: Record<string, unknown> | null) => m !== null && (m.n as number) % 3 === 0;
    const masked = v2.map((p) => ({ ...p, mask: docMask(p.segment, pred) }));
    const keys = mebertSearch(masked, q, 4, 50).map((h) => h.key);
    expect(keys.every((k) => pred(big.metadata[k]))).toBe(true);
    expect(keys).toEqual(mebertSearch(v2, q, 4, 4000).filter((h) => pred(big.metadata[h.key])).slice(0, 50).map((h) => h.key));
    // The steps (one per ~8,192 rows) give what one pass gives: the section scanned whole as one segment.
    const whole = segments(4).length; // 3 segments
    expect(whole).toBe(3);
    const oneSeg = (() => {
      const bytes = writeSegment({ docIds: big.docIds, tokenOffsets: Uint32Array.from(bstarts), tokenIds: big.tokenIds, vectors: big.vectors, dims: d }, eden, { prefixRows: 4 });
      return [{ segment: searchSegment(readSegment(bytes, 'one', artifact), 0) }];
    })();
    expect(oneSeg[0].segment.prefixVectors!.bits.length / d).toBeGreaterThan(8192); // two steps
    expect(plain(mebertSearch(oneSeg, q, 4, 100))).toEqual(plain(mebertSearch(v2, q, 4, 100)));
  });
});
