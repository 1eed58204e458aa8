import { describe, expect, it } from 'vitest';
import { decodeHalf, encodeHalf, fromHalfBits, toHalfBits } from './float16';
import { rng } from './test-utils';

describe('float16', () => {
  it('converts hand-checked values', () => {
    const cases: [number, number][] = [
      [0, 0x0000],
      [-0, 0x8000],
      [1, 0x3c00],
      [-2, 0xc000],
      [0.5, 0x3800],
      [65504, 0x7bff], // largest finite
      [65519.99, 0x7bff],
      [65520, 0x7c00], // halfway to 2^16: ties to even -> Infinity
      [1e9, 0x7c00],
      [-Infinity, 0xfc00],
      [2 ** -14, 0x0400], // smallest normal
      [2 ** -24, 0x0001], // smallest subnormal
      [2 ** -25, 0x0000], // tie between 0 and 2^-24 -> even (0)
      [1.5 * 2 ** -25, 0x0001],
      [3 * 2 ** -25, 0x0002], // tie between 1 and 2 subnormal units -> even (2)
      [1 + 2 ** -11, 0x3c00], // tie -> even mantissa
      [1 + 3 * 2 ** -11, 0x3c02], // tie -> even mantissa (rounds up)
      [1 + 2 ** -11 + 2 ** -20, 0x3c01], // just above the tie
      [0.1, 0x2e66],
      [1 / 3, 0x3555],
      [2 ** -14 - 2 ** -25, 0x0400], // tie between largest subnormal and smallest normal -> even (normal)
    ];
    for (const [x, h] of cases) expect(toHalfBits(x), `toHalfBits(${x})`).toBe(h);
    expect(Number.isNaN(fromHalfBits(toHalfBits(NaN)))).toBe(true);
    expect(fromHalfBits(0x7bff)).toBe(65504);
    expect(fromHalfBits(0x0001)).toBe(2 ** -24);
    expect(fromHalfBits(0xfc00)).toBe(-Infinity);
  });

  it('round-trips every finite float16 exactly', () => {
    for (let h = 0; h < 65536; h++) {
      const exp = (h >>> 10) & 0x1f;
      if (exp === 0x1f && (h & 0x3ff) !== 0) continue; // NaN payloads
      expect(toHalfBits(fromHalfBits(h))).toBe(h);
    }
  });

  it('rounds random floats to the nearest float16 (ties to even), checked by brute force', () => {
    const r = rng(7);
    for (let i = 0; i < 20000; i++) {
      const x = Math.fround((r() - 0.5) * 2 ** Math.floor(r() * 40 - 28));
      const h = toHalfBits(x);
      const y = fromHalfBits(h);
      // Neighbours of h in magnitude must be no closer; on a tie h must be even.
      const mag = h & 0x7fff;
      for (const nm of [mag - 1, mag + 1]) {
        if (nm < 0 || nm > 0x7bff) continue;
        const z = fromHalfBits((h & 0x8000) | nm);
        const dz = Math.abs(z - x);
        const dy = Math.abs(y - x);
        expect(dz >= dy, `x=${x} h=${h.toString(16)}`).toBe(true);
        if (dz === dy) expect(mag & 1).toBe(0);
      }
    }
  });

  it('encodes and decodes arrays', () => {
    const v = Float32Array.from([1, -0.5, 3.14159, 1e-6]);
    const back = decodeHalf(encodeHalf(v));
    for (let i = 0; i < v.length; i++) expect(Math.abs(back[i] - v[i])).toBeLessThanOrEqual(Math.max(Math.abs(v[i]) * 2 ** -11, 2 ** -25));
  });
  it('encodeHalf (from the values\' bits) equals toHalfBits on every exponent, NaNs, and a view at an offset', () => {
    const r = rng(29);
    const bits = new Uint32Array(1 << 16);
    // every float32 exponent with random signs and mantissas (normals, subnormals, overflow, Inf, NaN payloads)
    for (let i = 0; i < bits.length; i++) bits[i] = ((i & 0x1ff) << 23) | Math.floor(r() * 2 ** 23);
    bits[0] = 0x7fc00000; // quiet NaN
    bits[1] = 0xff800001; // signalling NaN, negative
    bits[2] = 0x80000000; // -0
    const values = new Float32Array(bits.buffer);
    const expected = Array.from(values, (x) => toHalfBits(x));
    expect(Array.from(encodeHalf(values))).toEqual(expected);
    expect(Array.from(encodeHalf(values.subarray(3, 1003)))).toEqual(expected.slice(3, 1003));
  });
});
