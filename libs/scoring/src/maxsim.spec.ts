import { describe, expect, it } from 'vitest';
import { maxsim, maxsimBatch, maxsimOfSimilarities, maxsimTopK } from './maxsim';
import { similarityMatrix } from './knrm';
import { dense, denseBatch, meanPool } from './dense';
import { topK } from './topk';
import { intMatrix, randMatrix, rng } from './test-utils';

const f = (xs: number[]) => Float32Array.from(xs);

/** Concatenate documents into the CSR layout of maxsimBatch. */
function csr(docs: Float32Array[], d: number): { docs: Float32Array; offsets: Uint32Array } {
  const offsets = new Uint32Array(docs.length + 1);
  let t = 0;
  docs.forEach((doc, c) => { t += doc.length / d; offsets[c + 1] = t; });
  const all = new Float32Array(t * d);
  let p = 0;
  for (const doc of docs) { all.set(doc, p); p += doc.length; }
  return { docs: all, offsets };
}

describe('maxsimOfSimilarities', () => {
  it('equals maxsim on the similarity matrix of integer data, with its empty-set rules and shape check', () => {
    const r = rng(5);
    for (const [n, m] of [[3, 7], [1, 1], [4, 0], [0, 3]] as const) {
      const q = intMatrix(r, n, 6);
      const doc = intMatrix(r, m, 6);
      expect(maxsimOfSimilarities(similarityMatrix(q, n, doc, m, 6), n, m)).toBe(maxsim(q, n, doc, m, 6));
      if (n > 0 && m > 0) expect(maxsimOfSimilarities(similarityMatrix(q, n, doc, m, 6), n, m, { normalize: true })).toBe(maxsim(q, n, doc, m, 6, { normalize: true }));
    }
    expect(() => maxsimOfSimilarities(new Float32Array(5), 2, 3)).toThrow(/expected n x m/);
  });
});

describe('maxsim (reference)', () => {
  it('matches a hand-computed value', () => {
    // Q = [[1,0],[0,1]], D = [[0.5,0.5],[1,-1],[-1,2]]
    // S = [[0.5,1,-1],[0.5,-1,2]] -> max rows 1 + 2 = 3
    const q = f([1, 0, 0, 1]);
    const doc = f([0.5, 0.5, 1, -1, -1, 2]);
    expect(maxsim(q, 2, doc, 3, 2)).toBe(3);
    expect(maxsim(q, 2, doc, 3, 2, { normalize: true })).toBe(1.5);
  });

  it('never treats a missing slot as similarity 0: all-negative rows stay negative', () => {
    const q = f([1, 0]);
    const doc = f([-1, 0, -2, 0]);
    expect(maxsim(q, 1, doc, 2, 2)).toBe(-1);
  });

  it('scores an empty document -Infinity and an empty query 0', () => {
    expect(maxsim(f([1, 0]), 1, new Float32Array(0), 0, 2)).toBe(-Infinity);
    expect(maxsim(f([1, 0]), 1, new Float32Array(0), 0, 2, { normalize: true })).toBe(-Infinity);
    expect(maxsim(new Float32Array(0), 0, f([1, 0]), 1, 2)).toBe(0);
    expect(maxsim(new Float32Array(0), 0, f([1, 0]), 1, 2, { normalize: true })).toBe(0);
  });

  it('names shapes in its errors', () => {
    expect(() => maxsim(f([1, 2, 3]), 2, f([1, 2]), 1, 2)).toThrow('maxsim: q has length 3, expected n x d = 2 x 2 = 4');
    expect(() => maxsim(f([1, 2]), 1, f([1, 2, 3]), 2, 2)).toThrow('maxsim: doc has length 3, expected m x d = 2 x 2 = 4');
    expect(() => maxsim(f([1, 2]), 1, f([1, 2]), 1, 0)).toThrow('maxsim: d must be an integer >= 1, got 0');
    expect(() => maxsim(f([1, 2]), 1.5, f([1, 2]), 1, 2)).toThrow('maxsim: n must be an integer >= 0, got 1.5');
  });
});

describe('maxsimBatch (fast kernel) against the reference', () => {
  // Both accumulate in float64; the only difference is summation order and the float32 output.
  const rel = 1e-6;
  const close = (a: number, b: number) => {
    if (!Number.isFinite(b)) return expect(a).toBe(b);
    expect(Math.abs(a - b)).toBeLessThanOrEqual(rel * Math.max(1, Math.abs(b)));
  };

  for (const [n, d] of [[1, 1], [1, 128], [2, 3], [3, 7], [5, 16], [32, 128], [7, 33]] as const) {
    it(`random n=${n} d=${d}, documents of 0..13 tokens`, () => {
      const r = rng(n * 1000 + d);
      const docs: Float32Array[] = [];
      for (let c = 0; c < 30; c++) docs.push(randMatrix(r, c % 14, d, true));
      const q = randMatrix(r, n, d, true);
      const b = csr(docs, d);
      for (const normalize of [false, true]) {
        const got = maxsimBatch(q, n, b.docs, b.offsets, d, { normalize });
        docs.forEach((doc, c) => close(got[c], maxsim(q, n, doc, doc.length / d, d, { normalize })));
      }
    });
  }

  it('adversarial: integer entries with ties, all-negative similarities, single-token queries, empty candidates', () => {
    const r = rng(7);
    for (let trial = 0; trial < 50; trial++) {
      const d = 1 + (trial % 5);
      const n = 1 + (trial % 6);
      const q = intMatrix(r, n, d);
      const docs = Array.from({ length: 9 }, (_, c) => (c === 3 || c === 8 ? new Float32Array(0) : intMatrix(r, 1 + ((c * 3 + trial) % 11), d, -3, -1)));
      const b = csr(docs, d);
      const got = maxsimBatch(q, n, b.docs, b.offsets, d);
      // integers: exact agreement
      docs.forEach((doc, c) => expect(got[c]).toBe(maxsim(q, n, doc, doc.length / d, d)));
      expect(got[3]).toBe(-Infinity);
    }
  });

  it('no candidates and no query tokens', () => {
    expect(maxsimBatch(f([1, 0]), 1, new Float32Array(0), Uint32Array.of(0), 2)).toEqual(new Float32Array(0));
    expect(Array.from(maxsimBatch(new Float32Array(0), 0, f([1, 0]), Uint32Array.of(0, 1), 2))).toEqual([0]);
  });

  it('names shapes in its errors', () => {
    expect(() => maxsimBatch(f([1, 0]), 1, f([1, 0, 1]), Uint32Array.of(0, 1), 2)).toThrow('maxsimBatch: docs has length 3, expected T x d with d = 2');
    expect(() => maxsimBatch(f([1, 0]), 1, f([1, 0, 1, 1]), Uint32Array.of(0, 1), 2)).toThrow('maxsimBatch: offsets[1] = 1 must equal the number of document token rows T = 2');
    expect(() => maxsimBatch(f([1, 0]), 1, f([1, 0, 1, 1]), Uint32Array.of(0, 2, 1, 2), 2)).toThrow('offsets must be non-decreasing, offsets[1] = 2 > offsets[2] = 1');
    expect(() => maxsimBatch(f([1, 0]), 1, f([1, 0]), Uint32Array.of(1, 1), 2)).toThrow('maxsimBatch: offsets[0] must be 0, got 1');
    expect(() => maxsimBatch(f([1, 0, 1]), 2, f([1, 0]), Uint32Array.of(0, 1), 2)).toThrow('maxsimBatch: q has length 3, expected n x d = 2 x 2 = 4');
  });
});

describe('maxsimTopK', () => {
  const q = f([1, 0]);
  const doc = f([3, 0, 1, 0, 2, 0, -1, 0]); // similarities 3, 1, 2, -1
  it('sums or averages the k best per query token', () => {
    expect(maxsimTopK(q, 1, doc, 4, 2, 1)).toBe(3);
    expect(maxsimTopK(q, 1, doc, 4, 2, 2)).toBe(5);
    expect(maxsimTopK(q, 1, doc, 4, 2, 2, 'mean')).toBe(2.5);
    expect(maxsimTopK(q, 1, doc, 4, 2, 4)).toBe(5);
    expect(maxsimTopK(q, 1, doc, 4, 2, 8)).toBe(5); // only 4 real tokens, padding never counted
    expect(maxsimTopK(q, 1, doc, 4, 2, 8, 'mean')).toBe(1.25);
    expect(maxsimTopK(q, 1, new Float32Array(0), 0, 2, 4)).toBe(-Infinity);
  });
  it('k = 1 equals maxsim on random data', () => {
    const r = rng(3);
    for (let t = 0; t < 20; t++) {
      const qq = randMatrix(r, 4, 8), dd = randMatrix(r, 1 + t, 8);
      expect(maxsimTopK(qq, 4, dd, 1 + t, 8, 1)).toBe(maxsim(qq, 4, dd, 1 + t, 8));
      expect(maxsimTopK(qq, 4, dd, 1 + t, 8, 1, 'mean')).toBe(maxsim(qq, 4, dd, 1 + t, 8));
    }
  });
  it('rejects other k', () => {
    expect(() => maxsimTopK(q, 1, doc, 4, 2, 3 as 1)).toThrow('maxsimTopK: k must be one of 1, 2, 4, 8, got 3');
  });
});

describe('meanPool and dense', () => {
  it('pools and normalises', () => {
    const v = f([1, 0, 0, 1]);
    expect(Array.from(meanPool(v, 2, 2, false))).toEqual([0.5, 0.5]);
    const p = meanPool(v, 2, 2);
    expect(p[0]).toBeCloseTo(Math.SQRT1_2, 6);
    expect(Array.from(meanPool(new Float32Array(0), 0, 3))).toEqual([0, 0, 0]);
    expect(Array.from(meanPool(f([1, 1, -1, -1]), 2, 2))).toEqual([0, 0]);
  });
  it('dense is the inner product, and errors name both lengths', () => {
    expect(dense(f([1, 2, 3]), f([4, 5, 6]))).toBe(32);
    expect(() => dense(f([1, 2]), f([1, 2, 3]))).toThrow('dense: qVec has d = 2 but dVec has d = 3');
    expect(Array.from(denseBatch(f([1, 2]), f([1, 1, 2, 0]), 2))).toEqual([3, 2]);
    expect(() => meanPool(f([1, 2, 3]), 2, 2)).toThrow('meanPool: vectors has length 3, expected m x d = 2 x 2 = 4');
  });
});

describe('topK', () => {
  it('orders by score, ties by input order, NaN last', () => {
    const s = f([1, 3, 3, NaN, -Infinity, 2, 3]);
    const ids = ['a', 'b', 'c', 'd', 'e', 'f', 'g'];
    expect(topK(s, ids, 10).map((h) => h.id)).toEqual(['b', 'c', 'g', 'f', 'a', 'e', 'd']);
    expect(topK(s, ids, 2)).toEqual([{ id: 'b', score: 3 }, { id: 'c', score: 3 }]);
    expect(topK(s, ids, 0)).toEqual([]);
  });
  it('selecting a few of many gives the first k of the whole order (ties, NaN, -0 and infinities included)', () => {
    let seed = 7;
    const rnd = () => ((seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31);
    const pool = [NaN, -Infinity, Infinity, -0, 0, 1, 1, 2.5, -3];
    for (let trial = 0; trial < 300; trial++) {
      const C = 1 + Math.floor(rnd() * 120);
      const s = Float32Array.from({ length: C }, () => (rnd() < 0.4 ? pool[Math.floor(rnd() * pool.length)] : Math.round(rnd() * 20) / 4));
      const ids = Array.from({ length: C }, (_, i) => `d${i}`);
      // The reference: every index sorted by the documented order, then cut.
      const all = Array.from({ length: C }, (_, i) => i).sort((a, b) => {
        const na = Number.isNaN(s[a]), nb = Number.isNaN(s[b]);
        if (na || nb) return na === nb ? a - b : na ? 1 : -1;
        return s[a] !== s[b] ? s[b] - s[a] : a - b;
      });
      for (const k of [1, 2, 10, 32, 33, C - 1, C, C + 5]) {
        if (k < 0) continue;
        expect(topK(s, ids, k).map((h) => h.id), `C ${C} k ${k}`).toEqual(all.slice(0, k).map((i) => ids[i]));
      }
    }
  });
  it('errors', () => {
    expect(() => topK(f([1]), ['a', 'b'], 1)).toThrow('topK: scores has length 1 but ids has length 2');
    expect(() => topK(f([1]), ['a'], -1)).toThrow('topK: k must be an integer >= 0, got -1');
  });
});
