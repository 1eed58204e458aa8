import type { RotatedQuery } from './eden-codec';

/**
 * Rotated-domain scoring with integer GEMMs (token layout). A document token's EDEN codes are
 * expanded once, when a generation is loaded, to one byte per coordinate: the centroid C[X_k]
 * on an int8 grid (`round(C[X_k] * S)`, S = 127 / max|C|), stored offset by 128 as uint8 so
 * that integer GEMM kernels with a zero point of 128 read it directly, plus one fp32 scale per
 * token, ||z|| / (sqrt(p) S). A query token in the rotated domain is quantised symmetrically
 * to a 7-bit grid (QUERY_MAX) with its own scale. Then
 *   <q_i, x^_j> ~= offset_i + qscale_i * scale_j * sum_k q8_ik (image_jk - 128),
 * exact in integers; the approximation is the two roundings (centroids to the grid, the query
 * to 7 bits), measured by `npm run bench -- score` and bounded in the tests.
 *
 * Operand ranges. x86-64 CPUs without VNNI (AVX2, AVX-512BW) multiply u8 x s8 with vpmaddubsw,
 * which adds each pair of adjacent products into a signed 16-bit lane with saturation; ONNX
 * Runtime's MLAS kernels multiply the raw stored bytes (zero points are corrected afterwards),
 * so every |a_k b_k + a_k+1 b_k+1| over the raw operands must stay <= 32,767 or the sum is
 * silently clipped. With VNNI (vpdpbusd) or AMX the products go straight to 32 bits and any range
 * is exact. The ranges below keep 2 max|u8| max|s8| <= 32,767 whatever instruction runs:
 * - the image as the u8 operand (raw 1..255) x the query as s8 in [-63, 63]: 2 x 255 x 63 = 32,130;
 * - the query as the u8 operand (raw q + 64 in 1..127) x the image as s8 in [-127, 127]:
 *   2 x 127 x 127 = 32,258.
 * The query keeps 7 bits: its rounding (max / 63 per step on a rotated, near-Gaussian vector)
 * stays two orders of magnitude under EDEN's own error at B <= 6, while the image keeps its full
 * 8-bit grid, which carries the coarser error.
 */
export const IMAGE_ZERO_POINT = 128;

/** Largest |q8| of a quantised query coordinate (7 bits, see "Operand ranges"). */
export const QUERY_MAX = 63;

/** Zero point of the query when it is the u8 operand: raw bytes q8 + 64, in 1..127. */
export const QUERY_ZERO_POINT = 64;

/** A signed 16-bit lane: the largest pair sum a u8 x s8 kernel without VNNI adds exactly. */
export const PAIR_SUM_LIMIT = 32767;

/**
 * The largest |a_k b_k + a_k+1 b_k+1| a u8 x s8 GEMM can form from u8 bytes up to `u8Max` and s8
 * values up to `s8Max` in magnitude. Exact on every x86-64 CPU when <= PAIR_SUM_LIMIT.
 */
export function worstPairSum(u8Max: number, s8Max: number): number {
  return 2 * u8Max * s8Max;
}

/** Bits up to which the pipeline scores from the image: the grid adds under 12% to EDEN's own MSE. */
export const IMAGE_MAX_BITS = 6;

export interface QuantizedQuery {
  /** n x p int8 in [-QUERY_MAX, QUERY_MAX], row-major. */
  q8: Int8Array;
  /** n scales: rotated_ik ~= q8_ik * qscale_i. */
  qscale: Float32Array;
  /** n: <q_i, mean>, added after the max (it does not depend on the document token). */
  offsets: Float64Array;
  n: number;
  p: number;
}

/** Symmetric per-token quantisation of a rotated query to [-QUERY_MAX, QUERY_MAX]. Shape: n x p -> n x p int8 + n scales. */
export function quantizeRotatedQuery(query: RotatedQuery, p: number): QuantizedQuery {
  const { n, rotated, offsets } = query;
  const q8 = new Int8Array(n * p);
  const qscale = new Float32Array(n);
  for (let i = 0; i < n; i++) {
    let max = 0;
    for (let k = 0; k < p; k++) max = Math.max(max, Math.abs(rotated[i * p + k]));
    const s = max > 0 ? max / QUERY_MAX : 1;
    qscale[i] = s;
    for (let k = 0; k < p; k++) q8[i * p + k] = Math.max(-QUERY_MAX, Math.min(QUERY_MAX, Math.round(rotated[i * p + k] / s)));
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
