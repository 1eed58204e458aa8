import { describe, expect, it } from 'vitest';
import { bm25Search, bm25SearchSteps } from './bm25';
import { denseSearch, denseSearchSteps, mebertSearch, mebertSearchSteps } from './dense';
import { exhaustiveSearch, exhaustiveSearchSteps } from './exhaustive';
import { docMask } from './filters';
import { buildSegmentIndex } from './segment-index';
import { DENSE_DOC_SLICE, DOC_SLICE, XTR_CHUNK_ROWS, runSteps, type Steps } from './steps';
import { makeCorpus, randomUnit, rng, segmentsOf } from './test-utils';
import { searchSegment, type Hit, type SearchSegment } from './types';
import { xtrSearch, xtrSearchSteps } from './xtr';

/**
 * The `*Steps` generators (issue 10: a search over many segments yields between bounded slices)
 * do the synchronous functions' work in slices: one segment larger than a slice (scanned in
 * several steps) must rank exactly as the same documents cut into segments smaller than a slice
 * (never sliced), and every generator returns what its synchronous function returns.
 */

const d = 6;
const documents = DENSE_DOC_SLICE + 3 * DOC_SLICE + 5; // more than one dense slice, many exhaustive slices, a ragged end
const corpus = makeCorpus(71, { documents, dims: d, minLen: 0, maxLen: 5, vocab: 60 });
const centroids = randomUnit(rng(72), 8, d);
const indexed = (segments: SearchSegment[], mask?: (s: SearchSegment) => Uint8Array) => segments.map((segment) => ({ segment, index: buildSegmentIndex(segment, centroids, d), mask: mask?.(segment) }));
const cuts = Array.from({ length: Math.ceil(documents / 200) + 1 }, (_, i) => Math.min(documents, i * 200)); // 200 < DOC_SLICE
// explain rows are token rows of the segment (they differ between cuts); the similarities do not
const plain = (hits: Hit[]) => hits.map((h) => [h.key, h.score, h.explain ? Array.from(h.explain.similarities) : null]);

/** Runs the steps, counting them. */
function counted<T>(steps: Steps<T>): { value: T; steps: number } {
  let n = 0;
  for (;;) {
    const r = steps.next();
    if (r.done) return { value: r.value, steps: n };
    n++;
  }
}

describe('search in steps', () => {
  it('one segment scanned in slices ranks exactly as small segments that are never sliced, in every mode, with a mask', () => {
    const pred = (m: Record<string, unknown> | null) => m === null || (m.year as number) % 4 !== 1;
    const one = indexed(segmentsOf(corpus), (s) => docMask(s, pred));
    const many = indexed(segmentsOf(corpus, cuts), (s) => docMask(s, pred));
    const r = rng(73);
    const n = 5;
    const q = randomUnit(r, n, d);
    const qVec = randomUnit(r, 1, d);
    const terms = [100, 101, 102, 105, 130];
    const cases: [string, (parts: typeof one) => Hit[], (parts: typeof one) => Steps<Hit[]>][] = [
      ['exhaustive', (p) => exhaustiveSearch(p, q, n, 40, { explain: true }), (p) => exhaustiveSearchSteps(p, q, n, 40, { explain: true })],
      ['dense', (p) => denseSearch(p, qVec, 40), (p) => denseSearchSteps(p, qVec, 40)],
      ['mebert', (p) => mebertSearch(p, qVec, 3, 40, { explain: true }), (p) => mebertSearchSteps(p, qVec, 3, 40, { explain: true })],
      ['bm25', (p) => bm25Search(p, terms, 40), (p) => bm25SearchSteps(p, terms, 40)],
      ['xtr', (p) => xtrSearch(p, q, n, centroids, { kPrime: 300, nprobe: 3, topN: 40, explain: true }).hits, function* (p) {
        return (yield* xtrSearchSteps(p, q, n, centroids, { kPrime: 300, nprobe: 3, topN: 40, explain: true })).hits;
      }],
    ];
    for (const [name, sync, steps] of cases) {
      const whole = sync(one);
      expect(whole.length, name).toBe(40);
      expect(plain(sync(many)), name).toEqual(plain(whole));
      expect(plain(runSteps(steps(one))), name).toEqual(plain(whole));
      expect(plain(runSteps(steps(many))), name).toEqual(plain(whole));
    }
  });

  it('yields within a segment larger than a slice and after each segment', () => {
    const one = indexed(segmentsOf(corpus));
    const many = indexed(segmentsOf(corpus, cuts));
    const q = randomUnit(rng(74), 3, d);
    const qVec = randomUnit(rng(75), 1, d);
    // one segment: a step per slice boundary, plus one after the segment
    expect(counted(exhaustiveSearchSteps(one, q, 3, 10)).steps).toBe(Math.ceil(documents / DOC_SLICE));
    expect(counted(denseSearchSteps(one, qVec, 10)).steps).toBe(Math.ceil(documents / DENSE_DOC_SLICE));
    expect(counted(mebertSearchSteps(one, qVec, 2, 10)).steps).toBe(Math.ceil(documents / DOC_SLICE));
    // many segments, none larger than a slice: one step per segment
    expect(counted(denseSearchSteps(many, qVec, 10)).steps).toBe(many.length);
    expect(counted(bm25SearchSteps(many, [100, 101], 10)).steps).toBe(many.length + 1);
    // XTR: each segment query token by query token, then the merge and each segment's aggregation
    expect(counted(xtrSearchSteps(many, q, 3, centroids, { kPrime: 50, nprobe: 2, topN: 10 })).steps).toBeGreaterThan(3 * many.length);
  });

  it('a segment read in document ranges (ME-BERT: their first m vectors), never decoded whole, ranks exactly as its whole decode; XTR reads it in chunks of at most XTR_CHUNK_ROWS rows', () => {
    // more than two XTR chunks of rows (d = 4 keeps it small)
    const big = makeCorpus(76, { documents: 40_000, dims: 4, minLen: 0, maxLen: 8, vocab: 80 });
    const [whole] = segmentsOf(big);
    const T = whole.tokenIds.length;
    expect(T).toBeGreaterThan(2 * XTR_CHUNK_ROWS);
    const off = whole.tokenOffsets;
    const reads: [number, number][] = [];
    let ranges = 0;
    let prefixes = 0;
    const ranged = searchSegment(
      {
        name: whole.name,
        documents: whole.documents,
        dims: whole.dims,
        docIds: [...whole.docIds],
        tokenOffsets: off,
        tokenIds: whole.tokenIds,
        docVectors: whole.docVectors,
        metadata: (i) => whole.metadata(i),
        decodeAll: () => {
          throw new Error('decodeAll must not be called: searches read ranges');
        },
        decodeDocs: (from, to) => {
          reads.push([from, to]);
          ranges++;
          return whole.tokens.slice(off[from] * 4, off[to] * 4);
        },
        decodeDocPrefixes: (from, to, m) => {
          reads.push([from, to]);
          prefixes++;
          const rows: number[] = [];
          for (let i = from; i < to; i++) rows.push(...whole.tokens.subarray(off[i] * 4, (off[i] + Math.min(m, off[i + 1] - off[i])) * 4));
          return Float32Array.from(rows);
        },
      },
      whole.docBase,
    );
    const cents = randomUnit(rng(77), 16, 4);
    const index = buildSegmentIndex(whole, cents, 4);
    const mask = docMask(whole, (m) => m === null || (m.year as number) % 3 !== 0);
    const r = rng(78);
    const q = randomUnit(r, 4, 4);
    const qVec = randomUnit(r, 1, 4);
    const full = (h: Hit[]) => h.map((x) => [x.key, x.score, x.explain ? [Array.from(x.explain.rows), Array.from(x.explain.similarities)] : null]);
    const cases: [string, (seg: SearchSegment) => Hit[], number][] = [
      ['exhaustive', (seg) => exhaustiveSearch([{ segment: seg, mask }], q, 4, 30, { explain: true }), DOC_SLICE],
      ['mebert', (seg) => mebertSearch([{ segment: seg, mask }], qVec, 3, 30, { explain: true }), DOC_SLICE],
      ['xtr', (seg) => xtrSearch([{ segment: seg, index, mask }], q, 4, cents, { kPrime: 2000, nprobe: 4, topN: 30, explain: true }).hits, Infinity],
    ];
    for (const [name, search, maxDocs] of cases) {
      reads.length = 0;
      ranges = prefixes = 0;
      const expected = search(whole);
      expect(expected.length, name).toBe(30);
      expect(full(search(ranged)), name).toEqual(full(expected));
      expect(reads.length, name).toBeGreaterThan(2);
      // ME-BERT reads the first m vectors of each document only, the others whole ranges
      expect(name === 'mebert' ? [ranges, prefixes > 0] : [ranges > 0, prefixes], name).toEqual(name === 'mebert' ? [0, true] : [true, 0]);
      for (const [from, to] of reads) {
        expect(to - from, name).toBeLessThanOrEqual(maxDocs);
        expect(off[to] - off[from], name).toBeLessThanOrEqual(XTR_CHUNK_ROWS);
      }
    }
  });
});
