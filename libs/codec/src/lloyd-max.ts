/**
 * Lloyd-Max scalar quantizers for N(0, 1) (SPEC section 2, SDR section 3.2): the 2^B centroids
 * minimising E[(y - C[q(y)])^2], computed by Lloyd's algorithm. Cell integrals are closed form
 * in the normal pdf and tail probability (erf / erfc written by hand below), so the only
 * approximation is the iteration's stopping tolerance (1e-13 on the centroids).
 */
const SQRT2 = Math.SQRT2;
const INV_SQRT_PI = 1 / Math.sqrt(Math.PI);

/** erf by its Maclaurin series (|x| < 2.5, ~1e-15 absolute) and erfc's continued fraction beyond. */
export function erf(x: number): number {
  if (x < 0) return -erf(-x);
  if (x >= 2.5) return 1 - erfc(x);
  let term = x;
  let sum = x;
  const x2 = x * x;
  for (let n = 1; n < 200; n++) {
    term *= -x2 / n;
    const add = term / (2 * n + 1);
    sum += add;
    if (Math.abs(add) < 1e-17 * Math.abs(sum)) break;
  }
  return 2 * INV_SQRT_PI * sum;
}

/** erfc = 1 - erf, accurate in the upper tail (relative error ~1e-15 for x >= 2.5). */
export function erfc(x: number): number {
  if (x < 2.5) return 1 - erf(x);
  // erfc(x) = exp(-x^2)/sqrt(pi) * 1/(x + (1/2)/(x + 1/(x + (3/2)/(x + ...)))), modified Lentz.
  const tiny = 1e-300;
  let f = x;
  let c = x;
  let d = 0;
  for (let k = 1; k < 500; k++) {
    const a = k / 2;
    d = x + a * d;
    d = Math.abs(d) < tiny ? tiny : d;
    c = x + a / c;
    c = Math.abs(c) < tiny ? tiny : c;
    d = 1 / d;
    const delta = c * d;
    f *= delta;
    if (Math.abs(delta - 1) < 1e-16) break;
  }
  return (Math.exp(-x * x) * INV_SQRT_PI) / f;
}

/** Standard normal pdf. */
export function normalPdf(x: number): number {
  return Math.exp(-0.5 * x * x) / Math.sqrt(2 * Math.PI);
}

/** Upper tail P(Y > x) of N(0, 1), accurate for large x. */
export function normalTail(x: number): number {
  return 0.5 * erfc(x / SQRT2);
}

/** x with P(Y > x) = p for Y ~ N(0, 1), 0 < p <= 0.5, by bisection (to ~1e-15). */
function normalQuantileUpper(p: number): number {
  let lo = 0;
  let hi = 40;
  for (let i = 0; i < 200 && hi - lo > 1e-15; i++) {
    const mid = (lo + hi) / 2;
    if (normalTail(mid) > p) lo = mid;
    else hi = mid;
  }
  return (lo + hi) / 2;
}

export interface LloydMaxTable {
  bits: number;
  /** 2^B centroids, ascending, symmetric about 0. */
  centroids: Float64Array;
  /** 2^B - 1 decision thresholds (midpoints), ascending. */
  thresholds: Float64Array;
  /** Expected squared error per coordinate for y ~ N(0, 1). */
  mse: number;
  iterations: number;
}

/** Cell [a, b] (0 <= a < b <= Infinity) moments: probability, first moment, second moment. */
function cellMoments(a: number, b: number): [number, number, number] {
  const p = normalTail(a) - (b === Infinity ? 0 : normalTail(b));
  const pa = normalPdf(a);
  const pb = b === Infinity ? 0 : normalPdf(b);
  const m1 = pa - pb;
  const m2 = p + a * pa - (b === Infinity ? 0 : b * pb);
  return [p, m1, m2];
}

const cache = new Map<number, LloydMaxTable>();

/** The Lloyd-Max quantizer for N(0, 1) with 2^bits levels (bits = 1..8), cached. */
export function lloydMax(bits: number): LloydMaxTable {
  if (!Number.isInteger(bits) || bits < 1 || bits > 8) throw new RangeError(`bits must be 1..8, got ${bits}`);
  const hit = cache.get(bits);
  if (hit) return hit;
  const half = 1 << (bits - 1);
  // Work on the positive half (the optimum is symmetric). Start from the high-resolution
  // (Panter-Dite) point density, proportional to pdf^(1/3), i.e. quantiles of N(0, 3).
  const levels = 2 * half;
  const c = new Float64Array(half);
  for (let k = 0; k < half; k++) c[k] = Math.sqrt(3) * normalQuantileUpper((half - 1 - k + 0.5) / levels);
  c.reverse();
  const t = new Float64Array(half + 1);
  // Lloyd's fixed point, Gauss-Seidel order with over-relaxation: plain Lloyd converges
  // linearly at a rate near 1 for many levels (B = 8 needs > 10^5 sweeps); relaxation reaches
  // the same fixed point (c_k = E[Y | cell k], thresholds at midpoints) in a few hundred.
  const omega = bits <= 2 ? 1 : 1.7;
  let it = 0;
  for (; it < 100000; it++) {
    let change = 0;
    for (let k = 0; k < half; k++) {
      const a = k === 0 ? 0 : (c[k - 1] + c[k]) / 2;
      const b = k === half - 1 ? Infinity : (c[k] + c[k + 1]) / 2;
      const [p, m1] = cellMoments(a, b);
      const step = m1 / p - c[k];
      change = Math.max(change, Math.abs(step));
      c[k] += omega * step;
    }
    if (change < 1e-11) break;
  }
  t[0] = 0;
  for (let k = 1; k < half; k++) t[k] = (c[k - 1] + c[k]) / 2;
  t[half] = Infinity;
  let mse = 0;
  for (let k = 0; k < half; k++) {
    const [p, m1, m2] = cellMoments(t[k], t[k + 1]);
    mse += 2 * (m2 - 2 * c[k] * m1 + c[k] * c[k] * p);
  }
  const centroids = new Float64Array(2 * half);
  for (let k = 0; k < half; k++) {
    centroids[half + k] = c[k];
    centroids[half - 1 - k] = -c[k];
  }
  const thresholds = new Float64Array(2 * half - 1);
  for (let k = 0; k < thresholds.length; k++) thresholds[k] = (centroids[k] + centroids[k + 1]) / 2;
  const table: LloydMaxTable = { bits, centroids, thresholds, mse, iterations: it };
  cache.set(bits, table);
  return table;
}

/** Index of the nearest centroid to y (binary search over the thresholds). */
export function nearestCentroid(thresholds: Float64Array, y: number): number {
  let lo = 0;
  let hi = thresholds.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (y > thresholds[mid]) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}
