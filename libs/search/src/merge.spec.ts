import { describe, expect, it } from 'vitest';
import { compareRanked, kWayMerge, mergeHits } from './merge';
import type { SegmentHits } from './types';
import { rng } from './test-utils';

function sortedList(r: () => number, len: number, keyBase: number) {
  const e = Array.from({ length: len }, (_, i) => ({ s: Math.floor(r() * 5) / 4, k: keyBase + Math.floor(r() * 50), sub: i }));
  e.sort((a, b) => compareRanked(a.s, a.k, b.s, b.k, a.sub, b.sub));
  return { scores: Float64Array.from(e, (x) => x.s), keys: Float64Array.from(e, (x) => x.k), sub: Uint32Array.from(e, (x) => x.sub) };
}

describe('kWayMerge', () => {
  it('equals concatenation + sort by (score desc, key asc, sub asc, list asc), cut at n', () => {
    const r = rng(3);
    for (let trial = 0; trial < 20; trial++) {
      const lists = Array.from({ length: 1 + Math.floor(r() * 7) }, (_, l) => sortedList(r, Math.floor(r() * 30), l * 10));
      const all = lists.flatMap((li, l) => Array.from(li.scores, (s, p) => ({ s, k: li.keys[p], sub: li.sub[p], l, p })));
      all.sort((a, b) => compareRanked(a.s, a.k, b.s, b.k, a.sub, b.sub) || a.l - b.l);
      const n = Math.floor(r() * 80);
      const m = kWayMerge(lists, n);
      expect(m.list.length).toBe(Math.min(n, all.length));
      expect(Array.from(m.list)).toEqual(all.slice(0, n).map((e) => e.l));
      expect(Array.from(m.pos)).toEqual(all.slice(0, n).map((e) => e.p));
    }
  });

  it('refuses a list out of order, naming it', () => {
    const good = { scores: [3, 2], keys: [0, 0] };
    const bad = { scores: [1, 2], keys: [5, 6] };
    expect(() => kWayMerge([good, bad], 4)).toThrow('list 1 is not in (score desc, key asc) order at entries 0, 1');
    expect(() => kWayMerge([{ scores: [1], keys: [] }], 1)).toThrow('list 0 has 1 scores, 0 keys');
  });

  it('compareRanked puts NaN last and breaks score ties by key then sub', () => {
    expect(compareRanked(1, 5, 0, 1)).toBeLessThan(0);
    expect(compareRanked(1, 5, 1, 6)).toBeLessThan(0);
    expect(compareRanked(1, 5, 1, 5, 2, 1)).toBeGreaterThan(0);
    expect(compareRanked(NaN, 0, -Infinity, 9)).toBeGreaterThan(0);
    expect(compareRanked(-Infinity, 0, NaN, 9)).toBeLessThan(0);
  });
});

describe('mergeHits', () => {
  it('merges per-segment top-n into the global top-n with global keys and explanations', () => {
    const a: SegmentHits = { docBase: 0, docs: Uint32Array.of(2, 0), scores: Float64Array.of(0.9, 0.5), explain: [
      { rows: Int32Array.of(7), similarities: Float64Array.of(0.9) },
      { rows: Int32Array.of(1), similarities: Float64Array.of(0.5) },
    ] };
    const b: SegmentHits = { docBase: 10, docs: Uint32Array.of(1, 3), scores: Float64Array.of(0.9, 0.7), explain: [
      { rows: Int32Array.of(4), similarities: Float64Array.of(0.9) },
      { rows: Int32Array.of(9), similarities: Float64Array.of(0.7) },
    ] };
    const hits = mergeHits([b, a], 3);
    expect(hits.map((h) => [h.segment, h.doc, h.key, h.score])).toEqual([[1, 2, 2, 0.9], [0, 1, 11, 0.9], [0, 3, 13, 0.7]]);
    expect(Array.from(hits[0].explain!.rows)).toEqual([7]);
    expect(mergeHits([], 5)).toEqual([]);
  });
});
