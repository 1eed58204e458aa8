import { describe, expect, it } from 'vitest';
import { TopK } from './select';
import { rng } from './test-utils';

/** Reference: sort (score desc, id asc), take k. */
function reference(scores: number[], k: number) {
  return scores
    .map((s, id) => ({ s, id }))
    .filter((e) => !Number.isNaN(e.s))
    .sort((a, b) => (a.s !== b.s ? b.s - a.s : a.id - b.id))
    .slice(0, k);
}

describe('TopK', () => {
  it('keeps the k best (score desc, id asc) under many ties, in any push order', () => {
    const r = rng(11);
    for (const k of [0, 1, 2, 5, 17, 100, 400]) {
      const scores = Array.from({ length: 300 }, () => Math.floor(r() * 7) - 3); // heavy ties
      const order = Array.from({ length: 300 }, (_, i) => i).sort(() => r() - 0.5);
      const top = new TopK(k, 300);
      for (const id of order) top.push(scores[id], id);
      const { scores: s, ids } = top.drain();
      const ref = reference(scores, k);
      expect(Array.from(ids)).toEqual(ref.map((e) => e.id));
      expect(Array.from(s)).toEqual(ref.map((e) => e.s));
    }
  });

  it('exposes the floor once full, ignores NaN, handles -Infinity and a capacity below k', () => {
    const top = new TopK(3, 2);
    expect(top.k).toBe(2);
    top.push(NaN, 0);
    top.push(-Infinity, 1);
    expect(top.floor).toBe(-Infinity);
    top.push(0.5, 2);
    expect(top.floor).toBe(-Infinity);
    top.push(0.25, 3);
    expect(top.floor).toBe(0.25);
    const { scores, ids } = top.drain();
    expect(Array.from(ids)).toEqual([2, 3]);
    expect(Array.from(scores)).toEqual([0.5, 0.25]);
    expect(top.size).toBe(0);
    expect(() => new TopK(-1)).toThrow('k must be an integer >= 0, got -1');
  });
});
