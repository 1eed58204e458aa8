/**
 * SPEC section 5, items 1-6, in exact BigInt rational arithmetic. Where the constructed vectors
 * are small integers (exact in float32 and float64) the production kernels are checked too.
 */
import { describe, expect, it } from 'vitest';
import { maxsimExact, polyEval, polyMul, Rational, type RVec, signedMaxsimExact } from './rational';
import { maxsim } from './maxsim';
import { signedMaxsim } from './signed-maxsim';
import { rng } from './test-utils';

const R = (x: number | bigint) => new Rational(x);
type Sparse = Map<number, number>;
const sp = (o: Record<number, number>): Sparse => new Map(Object.entries(o).map(([k, v]) => [Number(k), v]));

/** phi(x) = (1, x, x^2) */
const phi = (x: number): RVec => [R(1), R(x), R(x * x)];
/** c(d, w) = (w - C d^2, 2 C d, -C) with C = w + 1 */
const cvec = (d: number, w: Rational): RVec => {
  const C = w.add(1);
  return [w.sub(C.mul(d * d)), C.mul(2 * d), C.neg()];
};
const zero3: RVec = [R(0), R(0), R(0)];

function encodeNonNeg(u: Sparse, v: Sparse): { U: RVec[]; V: RVec[] } {
  const U = [...u].map(([i, ui]) => phi(i).map((x) => x.mul(ui)));
  const V = [...v].map(([i, vi]) => cvec(i, R(vi)));
  V.push(zero3);
  return { U, V };
}
const innerSparse = (u: Sparse, v: Sparse) => [...u].reduce((s, [i, ui]) => s.add(R(ui).mul(v.get(i) ?? 0)), Rational.ZERO);
const toF32 = (rows: RVec[]) => Float32Array.from(rows.flat().map((x) => x.toNumber()));

function randomSparse(r: () => number, maxKey: number, nnz: number, signed: boolean): Sparse {
  const m = new Map<number, number>();
  while (m.size < nnz) {
    const mag = Math.floor(r() * 9);
    m.set(Math.floor(r() * maxKey), signed && r() < 0.5 ? -mag : mag);
  }
  return m;
}

describe('1. MaxSim reproduces a non-negative sparse inner product', () => {
  it('example u = {2:3, 5:1}, v = {2:4, 7:2} gives 12', () => {
    const { U, V } = encodeNonNeg(sp({ 2: 3, 5: 1 }), sp({ 2: 4, 7: 2 }));
    expect(maxsimExact(U, V).toString()).toBe('12');
    // the same integers through the float kernel: exact
    expect(maxsim(toF32(U), U.length, toF32(V), V.length, 3)).toBe(12);
  });

  it('holds for random non-negative sparse vectors, keys up to 10^6 (exact)', () => {
    const r = rng(11);
    for (let t = 0; t < 200; t++) {
      const maxKey = t < 100 ? 20 : 1_000_000;
      const u = randomSparse(r, maxKey, 1 + (t % 5), false);
      const v = randomSparse(r, maxKey, 1 + (t % 7), false);
      if (t % 3 === 0) for (const k of u.keys()) if (r() < 0.5) v.set(k, Math.floor(r() * 9)); // force overlaps
      const { U, V } = encodeNonNeg(u, v);
      expect(maxsimExact(U, V).eq(innerSparse(u, v))).toBe(true);
    }
  });
});

describe('2. Theorem 3.2: MaxSim with a zero document vector is non-negative', () => {
  it('<-e1, e1> = -1 is impossible once 0 is in the document', () => {
    const U = [[R(-1), R(0)]];
    const V = [[R(1), R(0)], [R(0), R(0)]];
    expect(maxsimExact(U, V).sign()).toBe(0);
    expect(maxsim(Float32Array.of(-1, 0), 1, Float32Array.of(1, 0, 0, 0), 2, 2)).toBe(0);
    // without the zero vector the plain score is -1, which is why padding must never be a zero vector
    expect(maxsim(Float32Array.of(-1, 0), 1, Float32Array.of(1, 0), 1, 2)).toBe(-1);
  });
  it('random integer queries against any document containing 0 score >= 0 (exact)', () => {
    const r = rng(12);
    for (let t = 0; t < 200; t++) {
      const d = 1 + (t % 4);
      const rand = () => R(Math.floor(r() * 21) - 10);
      const U = Array.from({ length: 1 + (t % 5) }, () => Array.from({ length: d }, rand));
      const V = Array.from({ length: t % 6 }, () => Array.from({ length: d }, rand));
      V.splice(Math.floor(r() * (V.length + 1)), 0, Array.from({ length: d }, () => R(0)));
      expect(maxsimExact(U, V).sign()).toBeGreaterThanOrEqual(0);
    }
  });
});

function encodeSigned(u: Sparse, v: Sparse) {
  const sgn = (x: number) => R(x < 0 ? -1 : 1);
  const Q = [...u].map(([i, ui]) => ({ v: phi(i).map((x) => x.mul(Math.abs(ui))), s: sgn(ui) }));
  const D = [...v].map(([i, vi]) => ({ v: cvec(i, R(Math.abs(vi))), s: sgn(vi) }));
  D.push({ v: zero3, s: R(1) });
  return { Q, D };
}
const f32 = (xs: { v: RVec; s: Rational }[]) => ({ v: toF32(xs.map((x) => x.v)), s: Float32Array.from(xs.map((x) => x.s.toNumber())) });

describe('3. Signed MaxSim reproduces any real sparse inner product', () => {
  it('example u = {2:-3, 5:1}, v = {2:4, 5:-2, 7:2} gives -14', () => {
    const { Q, D } = encodeSigned(sp({ 2: -3, 5: 1 }), sp({ 2: 4, 5: -2, 7: 2 }));
    expect(signedMaxsimExact(Q, D).toString()).toBe('-14');
    const q = f32(Q), d = f32(D);
    expect(signedMaxsim(q.v, q.s, Q.length, d.v, d.s, D.length, 3)).toBe(-14);
  });
  it('holds for random real (integer-valued) sparse vectors (exact)', () => {
    const r = rng(13);
    for (let t = 0; t < 200; t++) {
      const maxKey = t < 100 ? 15 : 100_000;
      const u = randomSparse(r, maxKey, 1 + (t % 5), true);
      const v = randomSparse(r, maxKey, 1 + (t % 6), true);
      if (t % 2 === 0) for (const k of u.keys()) if (r() < 0.6) v.set(k, Math.floor(r() * 17) - 8);
      const { Q, D } = encodeSigned(u, v);
      expect(signedMaxsimExact(Q, D).eq(innerSparse(u, v))).toBe(true);
    }
  });
  it('with all weights +1 equals MaxSim (exact and float kernels)', () => {
    const r = rng(14);
    for (let t = 0; t < 100; t++) {
      const d = 1 + (t % 5), n = 1 + (t % 4), m = 1 + (t % 7);
      const ints = (len: number) => Array.from({ length: len }, () => Math.floor(r() * 7) - 3);
      const qv = ints(n * d), dv = ints(m * d);
      const rows = (xs: number[], k: number) => Array.from({ length: k }, (_, i) => xs.slice(i * d, i * d + d).map(R));
      const Q = rows(qv, n).map((v) => ({ v, s: R(1) })), D = rows(dv, m).map((v) => ({ v, s: R(1) }));
      expect(signedMaxsimExact(Q, D).eq(maxsimExact(Q.map((x) => x.v), D.map((x) => x.v)))).toBe(true);
      const qf = Float32Array.from(qv), df = Float32Array.from(dv);
      expect(signedMaxsim(qf, new Float32Array(n).fill(1), n, df, new Float32Array(m).fill(1), m, d)).toBe(maxsim(qf, n, df, m, d));
    }
  });
});

describe('4. sign flips and monotonicity', () => {
  it('negating every document sign negates Signed MaxSim; adding a token never lowers MaxSim but can lower Signed MaxSim', () => {
    const r = rng(15);
    let signedDecreased = false;
    for (let t = 0; t < 300; t++) {
      const d = 1 + (t % 3);
      const rand = () => R(Math.floor(r() * 11) - 5);
      const Q = Array.from({ length: 1 + (t % 4) }, () => ({ v: Array.from({ length: d }, rand), s: R(r() < 0.5 ? -1 : 1) }));
      const D = Array.from({ length: 1 + (t % 5) }, () => ({ v: Array.from({ length: d }, rand), s: R(r() < 0.5 ? -1 : 1) }));
      const flipped = D.map((x) => ({ v: x.v, s: x.s.neg() }));
      expect(signedMaxsimExact(Q, flipped).eq(signedMaxsimExact(Q, D).neg())).toBe(true);
      const extra = { v: Array.from({ length: d }, rand), s: R(r() < 0.5 ? -1 : 1) };
      const plainBefore = maxsimExact(Q.map((x) => x.v), D.map((x) => x.v));
      const plainAfter = maxsimExact(Q.map((x) => x.v), [...D, extra].map((x) => x.v));
      expect(plainAfter.cmp(plainBefore)).toBeGreaterThanOrEqual(0);
      if (signedMaxsimExact(Q, [...D, extra]).lt(signedMaxsimExact(Q, D))) signedDecreased = true;
    }
    expect(signedDecreased).toBe(true);
    // a concrete witness: q = (1), s = +1; doc {(1), +1} scores 1, adding {(2), -1} moves the argmax and scores -2
    const Q = [{ v: [R(1)], s: R(1) }];
    expect(signedMaxsimExact(Q, [{ v: [R(1)], s: R(1) }]).toString()).toBe('1');
    expect(signedMaxsimExact(Q, [{ v: [R(1)], s: R(1) }, { v: [R(2)], s: R(-1) }]).toString()).toBe('-2');
  });
});

/** Lemma 5.1: coefficients of p_S(t) = x_S(t) - C y_S(t)^2, C = 1 + sum w (SPEC 5.5). */
function orPolynomial(S: [number, number][]): RVec {
  let x: RVec = [R(0)];
  for (const [di, wi] of S) {
    let basis: RVec = [R(1)];
    let denom = R(1);
    for (const [dj] of S) {
      if (dj === di) continue;
      basis = polyMul(basis, [R(-dj), R(1)]);
      denom = denom.mul(di - dj);
    }
    const term = basis.map((c) => c.mul(wi).div(denom));
    x = Array.from({ length: Math.max(x.length, term.length) }, (_, k) => (x[k] ?? R(0)).add(term[k] ?? R(0)));
  }
  let y: RVec = [R(1)];
  for (const [d] of S) y = polyMul(y, [R(-d), R(1)]);
  const C = R(1 + S.reduce((s, [, w]) => s + w, 0));
  const y2 = polyMul(y, y).map((c) => c.mul(C));
  return Array.from({ length: y2.length }, (_, k) => (x[k] ?? R(0)).sub(y2[k]));
}
const phiM = (d: number, M: number): RVec => Array.from({ length: M }, (_, k) => R(BigInt(d) ** BigInt(k)));
const pad = (c: RVec, M: number): RVec => [...c, ...Array.from({ length: M - c.length }, () => R(0))];
function maxOr(S: [number, number][], D: Map<number, number>): Rational {
  let best = R(0);
  for (const [d, wq] of S) if (D.has(d)) { const s = R(wq).mul(D.get(d)!); if (s.gt(best)) best = s; }
  return best;
}
function groupedMaxsim(groups: [number, number][][], D: Map<number, number>): Rational {
  const M = 2 * Math.max(...groups.map((g) => g.length)) + 1;
  const Q = groups.map((g) => pad(orPolynomial(g), M));
  const V = [...D].map(([d, w]) => phiM(d, M).map((x) => x.mul(w)));
  V.push(Array.from({ length: M }, () => R(0)));
  return maxsimExact(Q, V);
}

describe('5. Fuzzy OR polynomials', () => {
  it('p_S equals w on the keys and is < 0 on every other integer key (0..200 tested)', () => {
    const r = rng(16);
    for (let t = 0; t < 40; t++) {
      const size = 1 + (t % 4);
      const keys = new Set<number>();
      while (keys.size < size) keys.add(Math.floor(r() * 30));
      const S: [number, number][] = [...keys].map((k) => [k, Math.floor(r() * 10)]);
      const p = orPolynomial(S);
      expect(p.length).toBe(2 * size + 1);
      for (const [d, w] of S) expect(polyEval(p, d).eq(w)).toBe(true);
      for (let k = 0; k <= 200; k++) if (!keys.has(k)) expect(polyEval(p, k).sign()).toBe(-1);
    }
  });
  it('MaxSim of group vectors against w phi_M(d) plus 0 is the sum of weighted max-ORs', () => {
    const r = rng(17);
    for (let t = 0; t < 60; t++) {
      const groups: [number, number][][] = Array.from({ length: 1 + (t % 3) }, (_, g) => {
        const keys = new Set<number>();
        while (keys.size < 1 + ((t + g) % 3)) keys.add(Math.floor(r() * 12));
        return [...keys].map((k) => [k, Math.floor(r() * 5)] as [number, number]);
      });
      const D = new Map<number, number>();
      for (let j = 0; j < t % 6; j++) D.set(Math.floor(r() * 12), Math.floor(r() * 5));
      const expected = groups.reduce((s, g) => s.add(maxOr(g, D)), R(0));
      expect(groupedMaxsim(groups, D).eq(expected)).toBe(true);
    }
  });
});

describe('6. Positive CNF', () => {
  it('(1 or 2) and 3 scores 0,1,1,1,1,2,2,2 on {}, {1}, {2}, {3}, {1,2}, {1,3}, {2,3}, {1,2,3}', () => {
    const groups: [number, number][][] = [[[1, 1], [2, 1]], [[3, 1]]];
    const docs = [[], [1], [2], [3], [1, 2], [1, 3], [2, 3], [1, 2, 3]];
    const scores = docs.map((keys) => groupedMaxsim(groups, new Map(keys.map((k) => [k, 1]))).toString());
    expect(scores).toEqual(['0', '1', '1', '1', '1', '2', '2', '2']);
    const satisfied = docs.map((k) => (k.includes(1) || k.includes(2)) && k.includes(3));
    expect(scores.map((s) => s === '2')).toEqual(satisfied);
  });
});

describe('Rational', () => {
  it('reduces and compares exactly', () => {
    expect(new Rational(6, -4).toString()).toBe('-3/2');
    expect(new Rational(1, 3).add(new Rational(1, 6)).toString()).toBe('1/2');
    expect(new Rational(1, 3).gt(new Rational(333333, 1000000))).toBe(true);
    expect(() => new Rational(1, 0)).toThrow('zero denominator');
  });
});
