import { describe, expect, it } from 'vitest';
import { knrm, knrmFeatures, KNRM_MU, similarityMatrix } from './knrm';
import { liteForward, liteReference, liteFlat, litePaddedSimilarity, liteShapes, type LiteWeights } from './lite';
import { signedMaxsim } from './signed-maxsim';
import { xtrAggregate, type XtrRetrieved } from './xtr';
import { dedupMaxByDoc, mebert } from './mebert';
import { hybridLinear, normalizeScores, rrf } from './hybrid';
import { negationWeights } from './negation';
import { maxsim } from './maxsim';
import { intMatrix, randMatrix, rng } from './test-utils';

const f = (xs: number[]) => Float32Array.from(xs);

export function randomLite(seed: number, L1: number, L2: number, m1: number, m2: number): LiteWeights {
  const r = rng(seed);
  const shapes = liteShapes(L1, L2, m1, m2);
  const w = { L1, L2, m1, m2 } as LiteWeights;
  for (const [k, len] of Object.entries(shapes)) {
    const a = new Float32Array(len);
    const fan = k.startsWith('W') ? len / (k === 'W1' ? m2 : k === 'W2' ? L2 : k === 'W3' ? m1 : L1) : 1;
    for (let i = 0; i < len; i++) a[i] = k.startsWith('g') ? 1 + 0.1 * (r() - 0.5) : (r() * 2 - 1) / Math.sqrt(fan);
    (w as unknown as Record<string, Float32Array>)[k] = a;
  }
  return w;
}

describe('knrm', () => {
  it('exact-match kernel counts exact matches; features match a hand computation', () => {
    // S = [[1, 0.9]]: kernel mu=1 (sigma 1e-3) sees exp(0) + exp(-0.01/2e-6) ~ 1; mu=0.9 sees exp(-0.01/0.02) + 1
    const phi = knrmFeatures(f([1, 0.9]), 1, 2);
    expect(phi[0]).toBeCloseTo(Math.log(1), 10);
    expect(phi[1]).toBeCloseTo(Math.log(1 + Math.exp(-0.5)), 6);
    // mu = -0.9 is far from both (K ~ e^-162 < 1e-10): log clamped at log(1e-10)
    expect(phi[10]).toBe(Math.log(1e-10));
    expect(KNRM_MU).toHaveLength(11);
  });
  it('score = tanh(w . phi + b), bounded, and errors on a wrong weight count', () => {
    const r = rng(1);
    const q = randMatrix(r, 3, 4, true), d = randMatrix(r, 5, 4, true);
    const w = Array.from({ length: 11 }, () => r() - 0.5);
    const phi = knrmFeatures(similarityMatrix(q, 3, d, 5, 4), 3, 5);
    const z = phi.reduce((s, p, k) => s + p * w[k], 0.25);
    expect(knrm(q, 3, d, 5, 4, { w, b: 0.25 })).toBeCloseTo(Math.tanh(z), 12);
    expect(() => knrm(q, 3, d, 5, 4, { w: [1, 2], b: 0 })).toThrow('knrm: w has length 2, expected 11');
    expect(Number.isFinite(knrm(q, 3, new Float32Array(0), 0, 4, { w, b: 0 }))).toBe(true);
  });
});

describe('lite', () => {
  it('pads with similarity 0 and truncates to L1 x L2', () => {
    const q = f([1, 0, 0, 1, 1, 1]); // n = 3
    const d = f([2, 0, 0, 3]); // m = 2
    const S = litePaddedSimilarity(q, 3, d, 2, 2, 2, 3); // L1 = 2 (truncate q), L2 = 3 (pad doc)
    expect(Array.from(S)).toEqual([2, 0, 0, 0, 3, 0]);
  });
  it('output layer LayerNorm with zero gain reduces to w . broadcast(be4) (hand value)', () => {
    const w = randomLite(2, 3, 4, 5, 6);
    w.g4.fill(0);
    w.be4.set([1, -2, 0.5]);
    const r = rng(3);
    const score = liteReference(randMatrix(r, 3, 8), 3, randMatrix(r, 4, 8), 4, 8, w);
    let expected = 0;
    for (let i = 0; i < 3; i++) for (let j = 0; j < 4; j++) expected += w.w[i * 4 + j] * w.be4[i];
    expect(score).toBeCloseTo(expected, 5);
  });
  it('matches an independent matrix-form forward pass (1e-9 relative)', () => {
    const [L1, L2, m1, m2] = [4, 6, 5, 7];
    const w = randomLite(4, L1, L2, m1, m2);
    const r = rng(5);
    const S = randMatrix(r, L1, L2);
    const ln = (x: number[], g: Float32Array, b: Float32Array) => {
      const mu = x.reduce((a, c) => a + c, 0) / x.length;
      const v = x.reduce((a, c) => a + (c - mu) ** 2, 0) / x.length;
      return x.map((c, k) => ((c - mu) / Math.sqrt(v + 1e-5)) * g[k] + b[k]);
    };
    const lin = (W: Float32Array, b: Float32Array, x: number[], out: number) =>
      Array.from({ length: out }, (_, o) => Math.max(0, x.reduce((a, c, k) => a + W[o * x.length + k] * c, b[o])));
    const rows = Array.from({ length: L1 }, (_, i) => Array.from(S.subarray(i * L2, i * L2 + L2)));
    const S1 = rows.map((row) => ln(lin(w.W2, w.b2, ln(lin(w.W1, w.b1, row, m2), w.g1, w.be1), L2), w.g2, w.be2));
    let expected = 0;
    for (let j = 0; j < L2; j++) {
      const col = S1.map((row) => row[j]);
      const out = ln(lin(w.W4, w.b4, ln(lin(w.W3, w.b3, col, m1), w.g3, w.be3), L1), w.g4, w.be4);
      out.forEach((v, i) => { expected += w.w[i * L2 + j] * v; });
    }
    const got = liteForward(S, w);
    expect(Math.abs(got - expected)).toBeLessThan(1e-9 * Math.max(1, Math.abs(expected)));
  });
  it('is position-dependent and ignores tokens past L2', () => {
    const w = randomLite(6, 3, 4, 5, 6);
    const r = rng(7);
    const q = randMatrix(r, 3, 8, true), d = randMatrix(r, 6, 8, true);
    expect(liteReference(q, 3, d, 6, 8, w)).toBe(liteReference(q, 3, d.subarray(0, 32), 4, 8, w));
    const swapped = new Float32Array(d.subarray(0, 32));
    swapped.set(d.subarray(8, 16), 0); swapped.set(d.subarray(0, 8), 8);
    expect(liteReference(q, 3, swapped, 4, 8, w)).not.toBe(liteReference(q, 3, d.subarray(0, 32), 4, 8, w));
  });
  it('residual on MaxSim: maxsimWeight x MaxSim over every token (past L1 and L2) + LITE', () => {
    const w = { ...randomLite(9, 3, 4, 5, 6), maxsimWeight: 0.75 };
    const r = rng(9);
    const q = randMatrix(r, 5, 8, true), d = randMatrix(r, 6, 8, true);
    const { maxsimWeight, ...plain } = w;
    const want = maxsimWeight * maxsim(q, 5, d, 6, 8) + liteReference(q, 5, d, 6, 8, plain);
    expect(Math.abs(liteReference(q, 5, d, 6, 8, w) - want)).toBeLessThan(1e-12);
    // the MaxSim term sees the 5th query token and the 6th document token LITE truncates away
    expect(maxsim(q, 5, d, 6, 8)).not.toBeCloseTo(maxsim(q.subarray(0, 24), 3, d.subarray(0, 32), 4, 8), 6);
    expect(() => liteReference(q, 5, d, 6, 8, { ...w, maxsimWeight: NaN })).toThrow('liteReference: weights.maxsimWeight must be a finite number');
  });
  it('names shapes in its errors', () => {
    const w = randomLite(8, 3, 4, 5, 6);
    expect(() => liteReference(f([1]), 1, f([1]), 1, 1, { ...w, W2: new Float32Array(3) })).toThrow('liteReference: weights.W2 has length 3, expected 24 for L1=3 L2=4 m1=5 m2=6');
    expect(() => liteForward(new Float32Array(5), w)).toThrow('liteForward: S has length 5, expected L1 x L2 = 3 x 4 = 12');
  });
  it('liteFlat: a . ReLU(W vec(S) + b), hand value', () => {
    // L1 = 1, L2 = 2, S = [2, 0] (doc padded), hidden 2
    const wts = { L1: 1, L2: 2, hidden: 2, W: f([1, 5, -1, 0]), b: f([0.5, 1]), a: f([2, 3]) };
    // h = ReLU([2.5, -1]) = [2.5, 0] -> 5
    expect(liteFlat(f([1, 0]), 1, f([2, 0]), 1, 2, wts)).toBe(5);
    expect(() => liteFlat(f([1, 0]), 1, f([2, 0]), 1, 2, { ...wts, a: f([1]) })).toThrow('liteFlat: weights.a has length 1, expected hidden = 2');
  });
});

describe('signedMaxsim', () => {
  it('argmax over vectors only, lowest j on ties', () => {
    // both doc tokens tie at 1; lowest j (weight -1) wins
    expect(signedMaxsim(f([1]), f([1]), 1, f([1, 1]), f([-1, 1]), 2, 1)).toBe(-1);
    expect(signedMaxsim(f([1]), f([1]), 1, f([1, 1]), f([1, -1]), 2, 1)).toBe(1);
    // weight not folded: the larger-similarity token is chosen even if its weight makes it negative
    expect(signedMaxsim(f([1]), f([2]), 1, f([1, 3]), f([1, -1]), 2, 1)).toBe(-6);
  });
  it('masks padding: m real rows only; empty doc -Infinity', () => {
    expect(signedMaxsim(f([-1]), f([1]), 1, f([1]), f([1]), 1, 1)).toBe(-1);
    expect(signedMaxsim(f([-1]), f([1]), 1, new Float32Array(0), new Float32Array(0), 0, 1)).toBe(-Infinity);
    expect(() => signedMaxsim(f([1]), f([1, 1]), 1, f([1]), f([1]), 1, 1)).toThrow('signedMaxsim: qWeights has length 2, expected n = 1');
  });
});

/** Brute-force token retrieval: every query token's top-k' over all tokens of all docs. */
function retrieve(q: Float32Array, n: number, docs: Float32Array[], d: number, kPrime: number): XtrRetrieved[] {
  const lists: XtrRetrieved[] = [];
  for (let i = 0; i < n; i++) {
    const hits: { doc: number; s: number; pos: number }[] = [];
    let pos = 0;
    docs.forEach((doc, c) => {
      for (let j = 0; j < doc.length / d; j++) {
        let s = 0;
        for (let k = 0; k < d; k++) s += q[i * d + k] * doc[j * d + k];
        hits.push({ doc: c, s, pos: pos++ });
      }
    });
    hits.sort((a, b) => b.s - a.s || a.pos - b.pos);
    const top = hits.slice(0, kPrime);
    lists.push({ docs: Uint32Array.from(top.map((h) => h.doc)), scores: Float64Array.from(top.map((h) => h.s)) });
  }
  return lists;
}

describe('xtrAggregate', () => {
  it('7. every token retrieved (k\' = all) equals maxsim / n exactly (integer vectors)', () => {
    const r = rng(21);
    for (let t = 0; t < 50; t++) {
      const d = 1 + (t % 4), n = 1 + (t % 5);
      const q = intMatrix(r, n, d);
      const docs = Array.from({ length: 1 + (t % 6) }, (_, c) => intMatrix(r, 1 + ((c + t) % 5), d));
      const total = docs.reduce((s, x) => s + x.length / d, 0);
      const res = xtrAggregate(retrieve(q, n, docs, d, total));
      expect(res.docs.length).toBe(docs.length);
      res.docs.forEach((c, idx) => expect(res.scores[idx]).toBe(maxsim(q, n, docs[c], docs[c].length / d, d) / n));
    }
  });
  it('every token retrieved equals maxsim / n within 1e-12 on random float vectors', () => {
    const r = rng(22);
    const d = 16, n = 8;
    const q = randMatrix(r, n, d, true);
    const docs = Array.from({ length: 20 }, (_, c) => randMatrix(r, 1 + (c % 9), d, true));
    const res = xtrAggregate(retrieve(q, n, docs, d, 1e9));
    res.docs.forEach((c, idx) => expect(Math.abs(res.scores[idx] - maxsim(q, n, docs[c], docs[c].length / d, d) / n)).toBeLessThan(1e-12));
  });
  it('imputes the k\'-th score for query tokens that missed a document (hand value)', () => {
    const res = xtrAggregate([
      { docs: [7, 3, 7], scores: [0.9, 0.8, 0.5] }, // m_0 = 0.5; doc 7 best 0.9, doc 3 0.8
      { docs: [3, 9], scores: [0.6, 0.4] }, // m_1 = 0.4
    ]);
    expect(Array.from(res.docs)).toEqual([7, 3, 9]);
    expect(Array.from(res.imputed)).toEqual([0.5, 0.4]);
    expect(res.scores[0]).toBeCloseTo((0.9 + 0.4) / 2, 12);
    expect(res.scores[1]).toBeCloseTo((0.8 + 0.6) / 2, 12);
    expect(res.scores[2]).toBeCloseTo((0.5 + 0.4) / 2, 12);
  });
  it('matches a Map-based reference through table growth, duplicates and large document ids', () => {
    const r = rng(23);
    const n = 40;
    const lists: XtrRetrieved[] = Array.from({ length: n }, (_, i) => {
      const k = 5 + (i % 13);
      const docs = Array.from({ length: k }, () => (r() < 0.3 ? 0xfffffffe - Math.floor(r() * 5) : Math.floor(r() * 500)));
      let sc = 1;
      const scores = docs.map(() => (sc -= r() * 0.1));
      return { docs, scores };
    });
    const m = lists.map((l) => l.scores[l.scores.length - 1] as number);
    const best = new Map<number, Map<number, number>>();
    lists.forEach((l, i) => (l.docs as number[]).forEach((doc, j) => {
      const row = best.get(doc) ?? new Map<number, number>();
      if (!row.has(i)) row.set(i, l.scores[j] as number);
      best.set(doc, row);
    }));
    const res = xtrAggregate(lists);
    expect(res.docs.length).toBe(best.size);
    expect(Array.from(res.docs)).toEqual([...best.keys()]); // order of first retrieval
    res.docs.forEach((doc, c) => {
      const row = best.get(doc)!;
      const expected = m.reduce((acc, mi, i) => acc + (row.has(i) ? row.get(i)! : mi), 0) / n;
      expect(Math.abs(res.scores[c] - expected)).toBeLessThan(1e-12);
    });
  });

  it('rejects unsorted lists and mismatched lengths', () => {
    expect(() => xtrAggregate([{ docs: [1, 2], scores: [0.1, 0.2] }])).toThrow("query token 0's list must be in descending score order, but scores[0] = 0.1 < scores[1] = 0.2");
    expect(() => xtrAggregate([{ docs: [1], scores: [0.1, 0.2] }])).toThrow("query token 0 has 1 docs but 2 scores");
    expect(() => xtrAggregate([{ docs: [1.5], scores: [0.1] }])).toThrow('query token 0: docs[0] = 1.5 is not an integer in [0, 2^32 - 1)');
  });
});

describe('mebert', () => {
  it('uses the first m vectors only', () => {
    const doc = f([1, 0, 0, 1, 5, 5]);
    expect(mebert(f([1, 1]), doc, 3, 2, 2)).toBe(1);
    expect(mebert(f([1, 1]), doc, 3, 2, 8)).toBe(10);
    expect(mebert(f([1, 1]), new Float32Array(0), 0, 2, 4)).toBe(-Infinity);
    expect(() => mebert(f([1]), doc, 3, 2, 2)).toThrow('mebert: q has length 1, expected d = 2');
  });
  it('9. searching m*K vectors and deduplicating equals brute force max_j <q, d_j>', () => {
    const r = rng(31);
    const d = 8, mv = 4, K = 5;
    for (let t = 0; t < 20; t++) {
      const q = randMatrix(r, 1, d, true);
      const docs = Array.from({ length: 30 }, (_, c) => randMatrix(r, 1 + (c % 7), d, true));
      // vector index: first-m vectors of every doc
      const owners: number[] = [], scores: number[] = [];
      docs.forEach((doc, c) => {
        for (let j = 0; j < Math.min(mv, doc.length / d); j++) {
          let s = 0;
          for (let k = 0; k < d; k++) s += q[k] * doc[j * d + k];
          owners.push(c); scores.push(s);
        }
      });
      const ord = scores.map((_, h) => h).sort((a, b) => scores[b] - scores[a] || a - b).slice(0, mv * K);
      const got = dedupMaxByDoc(ord.map((h) => owners[h]), ord.map((h) => scores[h]), K);
      const brute = docs.map((doc, c) => ({ doc: c, score: mebert(q, doc, doc.length / d, d, mv) }))
        .sort((a, b) => b.score - a.score || a.doc - b.doc).slice(0, K);
      expect(got.map((g) => g.doc)).toEqual(brute.map((b) => b.doc));
      got.forEach((g, i) => expect(g.score).toBe(brute[i].score));
    }
  });
});

describe('hybrid and rrf', () => {
  it('normalises explicitly', () => {
    expect(Array.from(normalizeScores(f([1, 3, 2]), 'minmax'))).toEqual([0, 1, 0.5]);
    expect(Array.from(normalizeScores(f([1, 3]), 'zscore'))).toEqual([-1, 1]);
    expect(Array.from(normalizeScores(f([2, 2]), 'minmax'))).toEqual([0, 0]);
    expect(Array.from(normalizeScores(f([1, NaN, 3]), 'minmax'))).toEqual([0, 0, 1]);
    expect(Array.from(hybridLinear(f([1, 3, 2]), f([10, 0, 5]), 0.5, 'minmax'))).toEqual([0.5, 1, 0.75]);
    expect(Array.from(hybridLinear(f([1, 2]), f([10, 20]), 0.1, 'none'))).toEqual([2, 4]);
    expect(() => hybridLinear(f([1]), f([1, 2]), 1, 'none')).toThrow('hybridLinear: first has length 1 but second has length 2');
    expect(() => hybridLinear(f([1]), f([1]), 1, 'softmax' as 'none')).toThrow("normalization must be 'none', 'minmax' or 'zscore'");
  });
  it('rrf uses k = 60 and 1-based ranks', () => {
    const out = rrf([['a', 'b', 'c'], ['b', 'd']]);
    expect(out.map((x) => x.id)).toEqual(['b', 'a', 'd', 'c']);
    expect(out[0].score).toBeCloseTo(1 / 62 + 1 / 61, 15);
    expect(out[1].score).toBeCloseTo(1 / 61, 15);
    expect(out[2].score).toBeCloseTo(1 / 62, 15);
    expect(out[3].score).toBeCloseTo(1 / 63, 15);
    expect(() => rrf([['a', 'a']])).toThrow('appears twice');
  });
});

describe('negationWeights (heuristic)', () => {
  const w = (s: string) => Array.from(negationWeights(s.split(' ')));
  it('marks the scope of a cue with -1', () => {
    expect(w('apples but not bananas')).toEqual([1, 1, 1, -1]);
    expect(w('a cake without sugar or milk , please')).toEqual([1, 1, 1, -1, -1, -1, 1, 1]);
    expect(w('who likes cats and never dogs')).toEqual([1, 1, 1, 1, 1, -1]);
    expect(w('no meat except fish')).toEqual([1, -1, 1, -1]);
    expect(w("people who don't like jazz but like rock")).toEqual([1, 1, 1, -1, -1, 1, 1, 1]);
    expect(w('[CLS] not red [SEP] blue')).toEqual([1, 1, -1, 1, 1]);
    expect(w('not swim ##ming')).toEqual([1, -1, -1]);
    expect(w('red blue')).toEqual([1, 1]);
  });
});
