import { mulberry32 } from '@lateral/shared';
/** Deterministic test data: mulberry32, so failures reproduce from the seed alone. */
export const rng = mulberry32;

/** rows x d uniform in [-1, 1), optionally L2-normalised per row. */
export function randMatrix(r: () => number, rows: number, d: number, normalize = false): Float32Array {
  const out = new Float32Array(rows * d);
  for (let i = 0; i < out.length; i++) out[i] = r() * 2 - 1;
  if (normalize) {
    for (let i = 0; i < rows; i++) {
      let s = 0;
      for (let k = 0; k < d; k++) s += out[i * d + k] ** 2;
      const inv = s > 0 ? 1 / Math.sqrt(s) : 0;
      for (let k = 0; k < d; k++) out[i * d + k] *= inv;
    }
  }
  return out;
}

/** rows x d with small integer entries: many exact ties. */
export function intMatrix(r: () => number, rows: number, d: number, lo = -2, hi = 2): Float32Array {
  const out = new Float32Array(rows * d);
  for (let i = 0; i < out.length; i++) out[i] = lo + Math.floor(r() * (hi - lo + 1));
  return out;
}
