import { describe, expect, it } from 'vitest';
import { IMAGE_ZERO_POINT, PAIR_SUM_LIMIT, QUERY_MAX, QUERY_ZERO_POINT, quantizeRotatedQuery, worstPairSum } from './rotated-image';
import { createCodec, EdenCodec, lloydMax } from './index';

/** vpmaddubsw then vpmaddwd: u8 x s8 products added in pairs into saturating int16 lanes, then into int32. */
function dotLikeAvx2(a: Uint8Array, b: Int8Array): number {
  let acc = 0;
  for (let k = 0; k < a.length; k += 2) {
    const pair = a[k] * b[k] + (k + 1 < a.length ? a[k + 1] * b[k + 1] : 0);
    acc += Math.max(-32768, Math.min(32767, pair));
  }
  return acc;
}

const exactDot = (a: Uint8Array, b: Int8Array) => a.reduce((s, v, k) => s + v * b[k], 0);

describe('rotated image operand ranges', () => {
  it('keep every pair sum of both GEMM orientations inside a signed 16-bit lane', () => {
    // image as u8 (raw 1..255 around zero point 128) x query as s8
    expect(worstPairSum(IMAGE_ZERO_POINT + 127, QUERY_MAX)).toBeLessThanOrEqual(PAIR_SUM_LIMIT);
    // query as u8 (raw q + 64) x image as s8 in [-127, 127]
    expect(worstPairSum(QUERY_ZERO_POINT + QUERY_MAX, 127)).toBeLessThanOrEqual(PAIR_SUM_LIMIT);
    // the former full-range query did not fit
    expect(worstPairSum(255, 127)).toBeGreaterThan(PAIR_SUM_LIMIT);
  });

  it('a saturating pair-sum dot product equals the exact one at the worst operands of the new ranges, not the old', () => {
    const p = 128;
    const image = new Uint8Array(p).fill(IMAGE_ZERO_POINT + 127);
    const query = new Int8Array(p).fill(QUERY_MAX);
    expect(dotLikeAvx2(image, query)).toBe(exactDot(image, query));
    const queryU8 = new Uint8Array(p).fill(QUERY_ZERO_POINT + QUERY_MAX);
    const imageS8 = new Int8Array(p).fill(-127);
    expect(dotLikeAvx2(queryU8, imageS8)).toBe(exactDot(queryU8, imageS8));
    const old = new Int8Array(p).fill(127);
    expect(dotLikeAvx2(image, old)).not.toBe(exactDot(image, old));
  });

  it('quantises any query, spikes and ties included, into [-QUERY_MAX, QUERY_MAX] with the max at the edge', () => {
    const p = 16;
    const rows = [
      Float32Array.from({ length: p }, (_, k) => (k === 3 ? 1e6 : 1e-3 * k)),
      Float32Array.from({ length: p }, (_, k) => (k % 2 ? -1 : 1)),
      new Float32Array(p),
      Float32Array.from({ length: p }, (_, k) => Math.sin(k * 1.7) * 3.2),
    ];
    const rotated = new Float64Array(rows.length * p);
    rows.forEach((r, i) => rotated.set(r, i * p));
    const qq = quantizeRotatedQuery({ n: rows.length, rotated, offsets: new Float64Array(rows.length) }, p);
    for (let i = 0; i < rows.length; i++) {
      const row = Array.from(qq.q8.subarray(i * p, (i + 1) * p));
      expect(Math.max(...row.map(Math.abs))).toBe(i === 2 ? 0 : QUERY_MAX);
      for (let k = 0; k < p; k++) expect(Math.abs(qq.q8[i * p + k] * qq.qscale[i] - rows[i][k])).toBeLessThanOrEqual(qq.qscale[i] / 2 + 1e-6 * Math.abs(rows[i][k]));
    }
  });

  it.each([1, 2, 4, 6, 8])('expands codes to image bytes in 1..255 (B = %i)', (bits) => {
    const codec = createCodec({ kind: 'eden', bits, layout: 'token', norms: 'fp32', sideInfo: false }) as EdenCodec;
    const lut = lloydMax(bits).centroids.map((c) => IMAGE_ZERO_POINT + Math.round(c * codec.imageScale));
    expect(Math.min(...lut)).toBeGreaterThanOrEqual(1);
    expect(Math.max(...lut)).toBeLessThanOrEqual(255);
  });
});
