import type { RotatedQuery } from './eden-codec';

/**
 * Rotated-domain scoring with integer GEMMs (token layout). A document token's EDEN codes are
 * expanded once, when a generation is loaded, to one byte per coordinate: the centroid C[X_k]
 * on an int8 grid (`round(C[X_k] * S)`, S = 127 / max|C|), stored offset by 128 as uint8 so
 * that integer GEMM kernels with a zero point of 128 read it directly, plus one fp32 scale per
 * token, ||z|| / (sqrt(p) S). A query token in the rotated domain is quantised symmetrically
 * to int8 with its own scale. Then
 *   <q_i, x^_j> ~= offset_i + qscale_i * scale_j * sum_k q8_ik (image_jk - 128),
 * exact in integers; the approximation is the two roundings (centroids to the grid, the query
 * to int8), measured by `npm run bench -- score` and bounded in the tests.
 */
export const IMAGE_ZERO_POINT = 128;

/** Bits up to which the pipeline scores from the image: the grid adds under 12% to EDEN's own MSE. */
export const IMAGE_MAX_BITS = 6;

export interface QuantizedQuery {
  /** n x p int8, row-major. */
  q8: Int8Array;
  /** n scales: rotated_ik ~= q8_ik * qscale_i. */
  qscale: Float32Array;
  /** n: <q_i, mean>, added after the max (it does not depend on the document token). */
  offsets: Float64Array;
  n: number;
  p: number;
}

/** Symmetric per-token int8 quantisation of a rotated query. Shape: n x p -> n x p int8 + n scales. */
export function quantizeRotatedQuery(query: RotatedQuery, p: number): QuantizedQuery {
  const { n, rotated, offsets } = query;
  const q8 = new Int8Array(n * p);
  const qscale = new Float32Array(n);
  for (let i = 0; i < n; i++) {
    let max = 0;
    for (let k = 0; k < p; k++) max = Math.max(max, Math.abs(rotated[i * p + k]));
    const s = max > 0 ? max / 127 : 1;
    qscale[i] = s;
    for (let k = 0; k < p; k++) q8[i * p + k] = Math.max(-127, Math.min(127, Math.round(rotated[i * p + k] / s)));
  }
  return { q8, qscale, offsets, n, p };
}

/**
 * Reference for the integer path: S_ij for query tokens i and the m tokens of one document.
 * image: m x p uint8 (offset 128), scales: m. Shape: -> n x m.
 */
export function scoreImage(q: QuantizedQuery, image: Uint8Array, scales: Float32Array, m: number): Float64Array {
  const { n, p, q8, qscale, offsets } = q;
  const out = new Float64Array(n * m);
  for (let i = 0; i < n; i++) {
    for (let j = 0; j < m; j++) {
      let acc = 0;
      for (let k = 0; k < p; k++) acc += q8[i * p + k] * (image[j * p + k] - IMAGE_ZERO_POINT);
      out[i * m + j] = offsets[i] + qscale[i] * scales[j] * acc;
    }
  }
  return out;
}
