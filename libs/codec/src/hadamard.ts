/**
 * Normalised fast Walsh-Hadamard transform, in place: x <- H x with H_1 = 1,
 * H_2k = 1/sqrt2 [[H_k, H_k], [H_k, -H_k]]. H is symmetric and orthogonal, so H^-1 = H.
 * Shape: n -> n, n a power of two. O(n log n).
 */
export function fwht(x: Float64Array | Float32Array): void {
  const n = x.length;
  if (n === 0 || (n & (n - 1)) !== 0) throw new RangeError(`Hadamard length must be a power of two, got ${n}`);
  for (let h = 1; h < n; h <<= 1) {
    for (let i = 0; i < n; i += h << 1) {
      for (let j = i; j < i + h; j++) {
        const a = x[j];
        const b = x[j + h];
        x[j] = a + b;
        x[j + h] = a - b;
      }
    }
  }
  const s = 1 / Math.sqrt(n);
  for (let i = 0; i < n; i++) x[i] *= s;
}

/** Smallest power of two >= n (n >= 1). */
export function nextPow2(n: number): number {
  let p = 1;
  while (p < n) p <<= 1;
  return p;
}
