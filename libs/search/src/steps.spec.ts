import { describe, expect, it } from 'vitest';
import { bm25Search, bm25SearchSteps } from './bm25';
import { denseSearch, denseSearchSteps, mebertSearch, mebertSearchSteps } from './dense';
import { exhaustiveSearch, exhaustiveSearchSteps } from './exhaustive';
import { docMask } from './filters';
import { buildSegmentIndex } from './segment-index';
import { DENSE_DOC_SLICE, DOC_SLICE, runSteps, type Steps } from './steps';
import { makeCorpus, randomUnit, rng, segmentsOf } from './test-utils';
import type { Hit, SearchSegment } from './types';
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
});
