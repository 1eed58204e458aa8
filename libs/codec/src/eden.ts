import { fwht } from './hadamard';
import { nearestCentroid, type LloydMaxTable } from './lloyd-max';

/**
 * EDEN (SDR section 3.2, appendix A; SPEC section 2) on one block of d = 2^k coordinates:
 *   encode: y = (sqrt(d) / ||x||) H Dg x,  X_i = argmin_k |y_i - C_k|,  keep X and ||x||;
 *   decode: x^ = Dg H ((||x|| / sqrt d) C[X]).
 * H is the normalised Walsh-Hadamard transform, Dg = diag(signs), C the Lloyd-Max centroids
 * of N(0, 1). No bias correction (the paper found it hurts ranking). A zero block stores
 * norm 0 and codes 0 and decodes to exactly zero.
 */

/** Shape: x d, signs d -> codes d (written); returns ||x||. `scratch`: d. */
export function edenEncodeBlock(x: ArrayLike<number>, signs: Float64Array, table: LloydMaxTable, codes: Uint8Array, scratch: Float64Array = new Float64Array(signs.length)): number {
  const d = signs.length;
  let sq = 0;
  for (let i = 0; i < d; i++) {
    const v = x[i];
    sq += v * v;
    scratch[i] = v * signs[i];
  }
  const norm = Math.sqrt(sq);
  if (norm === 0 || !Number.isFinite(norm)) {
    codes.fill(0, 0, d);
    return norm === 0 ? 0 : NaN;
  }
  fwht(scratch);
  const scale = Math.sqrt(d) / norm;
  for (let i = 0; i < d; i++) codes[i] = nearestCentroid(table.thresholds, scratch[i] * scale);
  return norm;
}

/** Shape: codes d, signs d -> out d. */
export function edenDecodeBlock(codes: Uint8Array, norm: number, signs: Float64Array, table: LloydMaxTable, out: Float64Array = new Float64Array(signs.length)): Float64Array {
  const d = signs.length;
  if (norm === 0 || !Number.isFinite(norm)) {
    out.fill(0, 0, d);
    return out;
  }
  const scale = norm / Math.sqrt(d);
  for (let i = 0; i < d; i++) out[i] = table.centroids[codes[i]] * scale;
  fwht(out);
  for (let i = 0; i < d; i++) out[i] *= signs[i];
  return out;
}

/** H Dg q: a query block moved into the rotated domain. Shape: d -> d. */
export function edenRotate(q: ArrayLike<number>, signs: Float64Array, out: Float64Array = new Float64Array(signs.length)): Float64Array {
  for (let i = 0; i < signs.length; i++) out[i] = (i < q.length ? q[i] : 0) * signs[i];
  fwht(out);
  return out;
}

/** <q, x^> = (||x|| / sqrt d) <H Dg q, C[X]> without decoding. Shape: rotated d, codes d -> scalar. */
export function edenDotRotated(rotated: Float64Array, codes: Uint8Array, norm: number, table: LloydMaxTable): number {
  if (norm === 0 || !Number.isFinite(norm)) return 0;
  let s = 0;
  for (let i = 0; i < rotated.length; i++) s += rotated[i] * table.centroids[codes[i]];
  return (s * norm) / Math.sqrt(rotated.length);
}
