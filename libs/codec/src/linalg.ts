/**
 * Small dense linear algebra for codec fitting (double precision, row-major).
 * Sizes are codec-sized (d <= a few hundred), so plain O(d^3) algorithms are fine.
 */
import { SplitMix64 } from './prng';

/** Column means of X. Shape: n x d -> d. */
export function columnMeans(x: Float32Array | Float64Array, n: number, d: number): Float64Array {
  const mean = new Float64Array(d);
  for (let i = 0; i < n; i++) for (let j = 0; j < d; j++) mean[j] += x[i * d + j];
  for (let j = 0; j < d; j++) mean[j] /= Math.max(n, 1);
  return mean;
}

/** Covariance (X - mean)^T (X - mean) / n. Shape: n x d, d -> d x d. */
export function covariance(x: Float32Array | Float64Array, n: number, d: number, mean: Float64Array): Float64Array {
  const c = new Float64Array(d * d);
  const row = new Float64Array(d);
  for (let i = 0; i < n; i++) {
    for (let j = 0; j < d; j++) row[j] = x[i * d + j] - mean[j];
    for (let a = 0; a < d; a++) {
      const ra = row[a];
      if (ra === 0) continue;
      const base = a * d;
      for (let b = a; b < d; b++) c[base + b] += ra * row[b];
    }
  }
  for (let a = 0; a < d; a++)
    for (let b = a; b < d; b++) {
      const v = c[a * d + b] / Math.max(n, 1);
      c[a * d + b] = v;
      c[b * d + a] = v;
    }
  return c;
}

/**
 * Eigen-decomposition of a symmetric matrix by cyclic Jacobi rotations.
 * Shape: d x d -> values d (descending), vectors d x d (row k = eigenvector of values[k]).
 */
export function symmetricEigen(matrix: Float64Array, d: number, maxSweeps = 60): { values: Float64Array; vectors: Float64Array } {
  const a = matrix.slice();
  const v = new Float64Array(d * d);
  for (let i = 0; i < d; i++) v[i * d + i] = 1;
  let scale = 0;
  for (let i = 0; i < d * d; i++) scale += a[i] * a[i];
  const tol = 1e-22 * Math.max(scale, 1e-300);
  for (let sweep = 0; sweep < maxSweeps; sweep++) {
    let off = 0;
    for (let p = 0; p < d; p++) for (let q = p + 1; q < d; q++) off += a[p * d + q] * a[p * d + q];
    if (off <= tol) break;
    for (let p = 0; p < d; p++) {
      for (let q = p + 1; q < d; q++) {
        const apq = a[p * d + q];
        if (Math.abs(apq) < 1e-300) continue;
        const app = a[p * d + p];
        const aqq = a[q * d + q];
        const theta = (aqq - app) / (2 * apq);
        const t = Math.sign(theta || 1) / (Math.abs(theta) + Math.sqrt(theta * theta + 1));
        const c = 1 / Math.sqrt(t * t + 1);
        const s = t * c;
        for (let k = 0; k < d; k++) {
          const akp = a[k * d + p];
          const akq = a[k * d + q];
          a[k * d + p] = c * akp - s * akq;
          a[k * d + q] = s * akp + c * akq;
        }
        for (let k = 0; k < d; k++) {
          const apk = a[p * d + k];
          const aqk = a[q * d + k];
          a[p * d + k] = c * apk - s * aqk;
          a[q * d + k] = s * apk + c * aqk;
        }
        // v holds eigenvectors as columns during the sweep.
        for (let k = 0; k < d; k++) {
          const vkp = v[k * d + p];
          const vkq = v[k * d + q];
          v[k * d + p] = c * vkp - s * vkq;
          v[k * d + q] = s * vkp + c * vkq;
        }
      }
    }
  }
  const order = Array.from({ length: d }, (_, i) => i).sort((i, j) => a[j * d + j] - a[i * d + i]);
  const values = new Float64Array(d);
  const vectors = new Float64Array(d * d);
  order.forEach((col, k) => {
    values[k] = a[col * d + col];
    for (let i = 0; i < d; i++) vectors[k * d + i] = v[i * d + col];
  });
  return { values, vectors };
}

/** PCA: the top c principal directions. Shape: n x d -> mean d, components c x d (orthonormal rows), variances c. */
export function fitPca(x: Float32Array | Float64Array, n: number, d: number, c: number): { mean: Float64Array; components: Float64Array; variances: Float64Array } {
  const mean = columnMeans(x, n, d);
  const { values, vectors } = symmetricEigen(covariance(x, n, d, mean), d);
  return { mean, components: vectors.slice(0, c * d), variances: values.slice(0, c) };
}

/** Solves A X = B for symmetric positive definite A by Cholesky. Shape: k x k, k x r -> k x r. */
export function choleskySolve(a: Float64Array, k: number, b: Float64Array, r: number): Float64Array {
  const l = new Float64Array(k * k);
  for (let i = 0; i < k; i++) {
    for (let j = 0; j <= i; j++) {
      let s = a[i * k + j];
      for (let p = 0; p < j; p++) s -= l[i * k + p] * l[j * k + p];
      if (i === j) {
        if (s <= 0) throw new Error(`matrix is not positive definite (pivot ${i} = ${s})`);
        l[i * k + i] = Math.sqrt(s);
      } else l[i * k + j] = s / l[j * k + j];
    }
  }
  const x = b.slice();
  for (let col = 0; col < r; col++) {
    for (let i = 0; i < k; i++) {
      let s = x[i * r + col];
      for (let p = 0; p < i; p++) s -= l[i * k + p] * x[p * r + col];
      x[i * r + col] = s / l[i * k + i];
    }
    for (let i = k - 1; i >= 0; i--) {
      let s = x[i * r + col];
      for (let p = i + 1; p < k; p++) s -= l[p * k + i] * x[p * r + col];
      x[i * r + col] = s / l[i * k + i];
    }
  }
  return x;
}

/**
 * Ridge least squares with an intercept: W = argmin ||Y - [U 1] W||^2 + lambda ||W||^2.
 * Shape: U n x s, Y n x d -> W (s + 1) x d (last row = intercept, not penalised).
 */
export function fitLinear(u: Float32Array, s: number, y: Float32Array | Float64Array, d: number, n: number, lambda = 1e-4): Float64Array {
  const k = s + 1;
  const g = new Float64Array(k * k);
  const rhs = new Float64Array(k * d);
  const row = new Float64Array(k);
  for (let i = 0; i < n; i++) {
    for (let a = 0; a < s; a++) row[a] = u[i * s + a];
    row[s] = 1;
    for (let a = 0; a < k; a++) {
      const ra = row[a];
      for (let b = a; b < k; b++) g[a * k + b] += ra * row[b];
      for (let j = 0; j < d; j++) rhs[a * d + j] += ra * y[i * d + j];
    }
  }
  let trace = 0;
  for (let a = 0; a < s; a++) trace += g[a * k + a];
  const ridge = lambda * Math.max(trace / Math.max(s, 1), 1e-12);
  for (let a = 0; a < k; a++) for (let b = 0; b < a; b++) g[a * k + b] = g[b * k + a];
  for (let a = 0; a < s; a++) g[a * k + a] += ridge;
  g[s * k + s] += 1e-12 * Math.max(n, 1);
  return choleskySolve(g, k, rhs, d);
}

/** Squared distance between row i of X (dims d) and row k of C. */
function dist2(x: Float32Array | Float64Array, i: number, c: Float64Array, k: number, d: number): number {
  let s = 0;
  for (let j = 0; j < d; j++) {
    const t = x[i * d + j] - c[k * d + j];
    s += t * t;
  }
  return s;
}

/** Index of the nearest centroid to row i of X. Shape: X n x d, C K x d. */
export function nearestRow(x: Float32Array | Float64Array, i: number, c: Float64Array | Float32Array, kCount: number, d: number): number {
  let best = 0;
  let bestD = Infinity;
  for (let k = 0; k < kCount; k++) {
    let s = 0;
    for (let j = 0; j < d; j++) {
      const t = x[i * d + j] - c[k * d + j];
      s += t * t;
    }
    if (s < bestD) {
      bestD = s;
      best = k;
    }
  }
  return best;
}

/** k-means with k-means++ seeding (SplitMix64(seed)) and `iterations` Lloyd steps. Shape: n x d -> K x d. */
export function kmeans(x: Float32Array | Float64Array, n: number, d: number, kCount: number, seed: bigint, iterations = 8): Float64Array {
  if (n === 0) throw new RangeError('k-means needs at least one point');
  const K = Math.min(kCount, n);
  const g = new SplitMix64(seed);
  const c = new Float64Array(K * d);
  const first = Math.floor(g.nextDouble() * n);
  for (let j = 0; j < d; j++) c[j] = x[first * d + j];
  const best = new Float64Array(n).fill(Infinity);
  for (let k = 1; k < K; k++) {
    let total = 0;
    for (let i = 0; i < n; i++) {
      best[i] = Math.min(best[i], dist2(x, i, c, k - 1, d));
      total += best[i];
    }
    let pick = n - 1;
    let target = g.nextDouble() * total;
    for (let i = 0; i < n; i++) {
      target -= best[i];
      if (target < 0) {
        pick = i;
        break;
      }
    }
    for (let j = 0; j < d; j++) c[k * d + j] = x[pick * d + j];
  }
  const sums = new Float64Array(K * d);
  const counts = new Float64Array(K);
  for (let it = 0; it < iterations; it++) {
    sums.fill(0);
    counts.fill(0);
    for (let i = 0; i < n; i++) {
      const k = nearestRow(x, i, c, K, d);
      counts[k]++;
      for (let j = 0; j < d; j++) sums[k * d + j] += x[i * d + j];
    }
    for (let k = 0; k < K; k++) if (counts[k] > 0) for (let j = 0; j < d; j++) c[k * d + j] = sums[k * d + j] / counts[k];
  }
  return c;
}
