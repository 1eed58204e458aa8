/**
 * Exact rationals over BigInt, for the theory constructions of SPEC section 5 (in float32 they
 * lose all precision once keys pass ~100). Always reduced, denominator > 0. Test support only.
 */
function gcd(a: bigint, b: bigint): bigint {
  if (a < 0n) a = -a;
  if (b < 0n) b = -b;
  while (b !== 0n) [a, b] = [b, a % b];
  return a;
}

export class Rational {
  readonly num: bigint;
  readonly den: bigint;

  constructor(num: bigint | number, den: bigint | number = 1n) {
    let n = BigInt(num), d = BigInt(den);
    if (d === 0n) throw new RangeError('Rational: zero denominator');
    if (d < 0n) { n = -n; d = -d; }
    const g = gcd(n, d) || 1n;
    this.num = n / g;
    this.den = d / g;
  }

  static readonly ZERO = new Rational(0n);
  static readonly ONE = new Rational(1n);
  static of(x: bigint | number | Rational): Rational {
    return x instanceof Rational ? x : new Rational(x);
  }

  add(o: Rational | number | bigint): Rational { const r = Rational.of(o); return new Rational(this.num * r.den + r.num * this.den, this.den * r.den); }
  sub(o: Rational | number | bigint): Rational { const r = Rational.of(o); return new Rational(this.num * r.den - r.num * this.den, this.den * r.den); }
  mul(o: Rational | number | bigint): Rational { const r = Rational.of(o); return new Rational(this.num * r.num, this.den * r.den); }
  div(o: Rational | number | bigint): Rational { const r = Rational.of(o); return new Rational(this.num * r.den, this.den * r.num); }
  neg(): Rational { return new Rational(-this.num, this.den); }
  sign(): -1 | 0 | 1 { return this.num < 0n ? -1 : this.num > 0n ? 1 : 0; }
  cmp(o: Rational | number | bigint): -1 | 0 | 1 { return this.sub(o).sign(); }
  eq(o: Rational | number | bigint): boolean { return this.cmp(o) === 0; }
  lt(o: Rational | number | bigint): boolean { return this.cmp(o) < 0; }
  gt(o: Rational | number | bigint): boolean { return this.cmp(o) > 0; }
  toNumber(): number { return Number(this.num) / Number(this.den); }
  toString(): string { return this.den === 1n ? `${this.num}` : `${this.num}/${this.den}`; }
}

export type RVec = Rational[];

export function rdot(a: RVec, b: RVec): Rational {
  if (a.length !== b.length) throw new RangeError(`rdot: lengths ${a.length} and ${b.length} differ`);
  let s = Rational.ZERO;
  for (let k = 0; k < a.length; k++) s = s.add(a[k].mul(b[k]));
  return s;
}

/** Exact MaxSim: sum_i max_j <q_i, d_j>; the document must be non-empty. */
export function maxsimExact(Q: RVec[], D: RVec[]): Rational {
  let total = Rational.ZERO;
  for (const q of Q) {
    let best: Rational | null = null;
    for (const d of D) {
      const s = rdot(q, d);
      if (best === null || s.gt(best)) best = s;
    }
    if (best === null) throw new RangeError('maxsimExact: empty document');
    total = total.add(best);
  }
  return total;
}

/** Exact Signed MaxSim: argmax over vectors only, lowest j on ties. */
export function signedMaxsimExact(Q: { v: RVec; s: Rational }[], D: { v: RVec; s: Rational }[]): Rational {
  let total = Rational.ZERO;
  for (const q of Q) {
    let best: Rational | null = null;
    let arg = -1;
    D.forEach((d, j) => {
      const s = rdot(q.v, d.v);
      if (best === null || s.gt(best)) { best = s; arg = j; }
    });
    if (best === null) throw new RangeError('signedMaxsimExact: empty document');
    total = total.add(q.s.mul(D[arg].s).mul(best));
  }
  return total;
}

/** Coefficients (constant first) of a polynomial product. */
export function polyMul(a: RVec, b: RVec): RVec {
  const out: RVec = Array.from({ length: a.length + b.length - 1 }, () => Rational.ZERO);
  a.forEach((x, i) => b.forEach((y, j) => { out[i + j] = out[i + j].add(x.mul(y)); }));
  return out;
}

export function polyEval(c: RVec, t: Rational | number): Rational {
  const x = Rational.of(t);
  let acc = Rational.ZERO;
  for (let k = c.length - 1; k >= 0; k--) acc = acc.mul(x).add(c[k]);
  return acc;
}
