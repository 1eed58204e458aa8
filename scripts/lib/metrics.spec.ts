import { describe, expect, it } from 'vitest';
import {
  binaryJudgments,
  dcgAt,
  hasRelevant,
  idealDcgAt,
  mean,
  ndcgAt,
  orderByScore,
  pairedDifference,
  rankByScore,
  recallAt,
  reciprocalRankAt,
  relevantAtLeast,
} from './metrics';

const log2 = Math.log2;

describe('ndcgAt (linear gain, trec_eval ideal)', () => {
  const qrel = new Map([
    ['a', 3],
    ['b', 1],
    ['c', 4],
  ]);

  it('is 1 for the ideal ranking and 0 when nothing relevant is retrieved', () => {
    expect(ndcgAt(['c', 'a', 'b'], qrel)).toBeCloseTo(1, 12);
    expect(ndcgAt(['x', 'y'], qrel)).toBe(0);
    expect(ndcgAt([], qrel)).toBe(0);
  });

  it('matches a hand-computed graded case: x, a, c retrieved (b not)', () => {
    const dcg = 0 / log2(2) + 3 / log2(3) + 4 / log2(4);
    const idcg = 4 / log2(2) + 3 / log2(3) + 1 / log2(4); // every judged gain, retrieved or not
    expect(dcgAt(['x', 'a', 'c'], qrel)).toBeCloseTo(dcg, 12);
    expect(idealDcgAt(qrel)).toBeCloseTo(idcg, 12);
    expect(ndcgAt(['x', 'a', 'c'], qrel)).toBeCloseTo(0.6089343949810363, 12);
  });

  it('counts judged-0 and negative grades as gain 0 and leaves them out of the ideal (TREC DL qrels)', () => {
    const dl = new Map([
      ['a', 0],
      ['b', 2],
      ['c', -1],
      ['d', 3],
    ]);
    // c (-1 -> 0), b (2), a (0), d (3)
    expect(ndcgAt(['c', 'b', 'a', 'd'], dl)).toBeCloseTo((2 / log2(3) + 3 / log2(5)) / (3 + 2 / log2(3)), 12);
    expect(ndcgAt(['c', 'b', 'a', 'd'], dl)).toBeCloseTo(0.5992429307166866, 12);
  });

  it('takes the ideal DCG over unretrieved relevant documents too', () => {
    const two = new Map([
      ['a', 1],
      ['b', 1],
    ]);
    expect(ndcgAt(['a'], two)).toBeCloseTo(1 / (1 + 1 / log2(3)), 12);
  });

  it('cuts both the ranking and the ideal at k', () => {
    const ranking = [...'0123456789'.split(''), 'c'];
    expect(ndcgAt(ranking, qrel)).toBe(0); // c is 11th
    expect(ndcgAt(ranking, qrel, 11)).toBeCloseTo(4 / log2(12) / idealDcgAt(qrel, 11), 12);
    const twelve = new Map(Array.from({ length: 12 }, (_, i) => [`d${i}`, 1] as [string, number]));
    expect(ndcgAt(Array.from({ length: 10 }, (_, i) => `d${i}`), twelve, 10)).toBeCloseTo(1, 12);
  });

  it('is 0 for a query with no positive judgement', () => {
    expect(ndcgAt(['a'], new Map())).toBe(0);
    expect(ndcgAt(['a'], new Map([['a', 0]]))).toBe(0);
  });

  it('does binary relevance over numeric ids through binaryJudgments', () => {
    const judged = binaryJudgments(new Set([4, 7]));
    expect([...judged]).toEqual([
      [4, 1],
      [7, 1],
    ]);
    expect(ndcgAt([7, 1, 4], judged)).toBeCloseTo((1 + 1 / log2(4)) / (1 + 1 / log2(3)), 12);
  });
});

describe('binary measures', () => {
  const judged = new Map([
    ['a', 3],
    ['b', 2],
    ['c', 1],
    ['d', 0],
    ['e', 2],
  ]);

  it('relevantAtLeast keeps the ids at or above a grade', () => {
    expect([...relevantAtLeast(judged, 2)].sort()).toEqual(['a', 'b', 'e']);
    expect([...relevantAtLeast(judged, 1)].sort()).toEqual(['a', 'b', 'c', 'e']);
  });

  it('recallAt divides the relevant ids found in the first k by all relevant ids', () => {
    const rel = relevantAtLeast(judged, 2); // a, b, e
    expect(recallAt(['x', 'a', 'c', 'b'], rel, 10)).toBeCloseTo(2 / 3, 12);
    expect(recallAt(['x', 'a', 'c', 'b'], rel, 2)).toBeCloseTo(1 / 3, 12);
    expect(recallAt(['a'], new Set<string>(), 10)).toBe(0);
    // overlap with a reference run's top k (positions)
    expect(recallAt([3, 1, 0, 2], new Set([0, 1]), 2)).toBe(0.5);
  });

  it('reciprocalRankAt is 1 / rank of the first relevant id within k', () => {
    const rel = relevantAtLeast(judged, 2);
    expect(reciprocalRankAt(['x', 'c', 'b', 'a'], rel, 10)).toBeCloseTo(1 / 3, 12);
    expect(reciprocalRankAt(['a'], rel, 10)).toBe(1);
    expect(reciprocalRankAt(['x', 'c', 'b'], rel, 2)).toBe(0);
  });

  it('hasRelevant needs one positive judgement', () => {
    expect(hasRelevant(undefined)).toBe(false);
    expect(hasRelevant(new Map([['a', 0]]))).toBe(false);
    expect(hasRelevant(new Map([['a', -1], ['b', 1]]))).toBe(true);
  });
});

describe('ranking helpers', () => {
  it('orderByScore sorts descending and keeps input order on ties; -Infinity last', () => {
    expect(orderByScore(Float64Array.from([1, 3, 3, -Infinity, 2]))).toEqual([1, 2, 4, 0, 3]);
    expect(rankByScore([0.5, 0.9, 0.5], ['p', 'q', 'r'])).toEqual(['q', 'p', 'r']);
  });

  it('mean and the paired difference with its standard error', () => {
    expect(mean([])).toBe(0);
    expect(mean([1, 2, 6])).toBe(3);
    const p = pairedDifference([0.5, 0.7, 0.9], [0.4, 0.7, 0.6]); // diffs 0.1, 0, 0.3
    expect(p.mean).toBeCloseTo(0.13333333333333333, 12);
    expect(p.se).toBeCloseTo(0.08819171036881968, 12); // sqrt(sample variance / 3)
    expect(pairedDifference([0.3], [0.1]).se).toBe(0);
    expect(() => pairedDifference([1, 2], [1])).toThrow(/2 values against 1 reference/);
  });
});
