/**
 * IEEE 754 binary16 conversion, written by hand (Node 20 has no Math.f16round / Float16Array).
 * float32 -> float16 rounds to nearest, ties to even; overflow goes to +-Infinity, values below
 * half the smallest subnormal (2^-25) go to +-0, NaN stays NaN (quiet). float16 -> float32 is exact.
 */
import { fromHalfBits } from '@lateral/simd';

/** The float16 with bits `h` as a number (exact): one definition, in @lateral/simd, whose kernels read fp16 norms too. */
export { fromHalfBits };

const f32 = new Float32Array(1);
const u32 = new Uint32Array(f32.buffer);

/** Bits of the float16 nearest to `x` (after x is first rounded to float32). */
export function toHalfBits(x: number): number {
  f32[0] = x;
  return halfOfBits(u32[0]);
}

let decodeTable: Float32Array | null = null;
function table(): Float32Array {
  if (decodeTable === null) {
    decodeTable = new Float32Array(65536);
    for (let h = 0; h < 65536; h++) decodeTable[h] = fromHalfBits(h);
  }
  return decodeTable;
}

/** The float16 bits nearest to the float32 with bits `b` (encodeHalf reads a batch's bits in place: no store and load per value). */
function halfOfBits(b: number): number {
  const sign = (b >>> 16) & 0x8000;
  const exp = (b >>> 23) & 0xff;
  const mant = b & 0x7fffff;
  const e = exp - 127 + 15;
  if (e > 0 && e < 0x1f) {
    // the common case: a normal half
    let v = (e << 10) | (mant >>> 13);
    const rem = mant & 0x1fff;
    if (rem > 0x1000 || (rem === 0x1000 && (v & 1) === 1)) v++; // carry may give 0x7c00 = Inf
    return sign | v;
  }
  if (exp === 0xff) return sign | 0x7c00 | (mant !== 0 ? 0x200 | (mant >>> 13) : 0);
  if (e >= 0x1f) return sign | 0x7c00;
  // Subnormal half: k * 2^-24 with k = M * 2^(e-14), M = mantissa with its implicit bit.
  if (e < -10) return sign;
  const m = mant | 0x800000;
  const shift = 14 - e;
  let k = m >>> shift;
  const rem = m & ((1 << shift) - 1);
  const half = 1 << (shift - 1);
  if (rem > half || (rem === half && (k & 1) === 1)) k++;
  return sign | k; // k may reach 0x400: the carry lands in the exponent, which is correct
}

/** Shape: n -> n. */
export function encodeHalf(values: Float32Array): Uint16Array {
  const out = new Uint16Array(values.length);
  // the values' bits, read in place (a Float32Array is always 4-byte aligned)
  const bits = new Uint32Array(values.buffer, values.byteOffset, values.length);
  for (let i = 0; i < bits.length; i++) out[i] = halfOfBits(bits[i]);
  return out;
}

/** Shape: n -> n. */
export function decodeHalf(bits: Uint16Array, out: Float32Array = new Float32Array(bits.length)): Float32Array {
  const t = table();
  for (let i = 0; i < bits.length; i++) out[i] = t[bits[i]];
  return out;
}

/** Rounds every element of `values` to the nearest float16 value. Shape: n -> n. */
export function roundToHalf(values: Float32Array): Float32Array {
  return decodeHalf(encodeHalf(values));
}

/**
 * Whether any of `bits` is a NaN half. Every other half survives decodeHalf then encodeHalf bit for
 * bit (decoding is exact, and the nearest half to a half is itself); a NaN comes back as 0x7e00,
 * its sign and payload lost.
 */
export function containsNaNHalf(bits: Uint16Array): boolean {
  for (let i = 0; i < bits.length; i++) if ((bits[i] & 0x7c00) === 0x7c00 && (bits[i] & 0x3ff) !== 0) return true;
  return false;
}
