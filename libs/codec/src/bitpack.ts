/**
 * B-bit codes (B = 1..8) packed into a little-endian bit stream: code i occupies bits
 * [i B, (i+1) B) with bit k of the stream being bit (k mod 8) of byte floor(k / 8).
 */

/** Bytes needed for n codes of `bits` bits. */
export function packedBytes(n: number, bits: number): number {
  return Math.ceil((n * bits) / 8);
}

/** ORs n = codes.length codes into `out` starting at bit `bitOffset` (out must be zeroed there). */
export function packCodes(codes: Uint8Array, bits: number, out: Uint8Array, bitOffset = 0): void {
  const mask = (1 << bits) - 1;
  for (let i = 0; i < codes.length; i++) {
    const pos = bitOffset + i * bits;
    const byte = pos >>> 3;
    const v = (codes[i] & mask) << (pos & 7);
    out[byte] |= v & 0xff;
    if ((pos & 7) + bits > 8) out[byte + 1] |= v >>> 8;
  }
}

/** Reads n codes of `bits` bits from `packed` starting at bit `bitOffset`. Shape: -> n. */
export function unpackCodes(packed: Uint8Array, bits: number, n: number, bitOffset = 0, out: Uint8Array = new Uint8Array(n)): Uint8Array {
  const mask = (1 << bits) - 1;
  for (let i = 0; i < n; i++) {
    const pos = bitOffset + i * bits;
    const byte = pos >>> 3;
    const sh = pos & 7;
    let v = packed[byte] >>> sh;
    if (sh + bits > 8) v |= packed[byte + 1] << (8 - sh);
    out[i] = v & mask;
  }
  return out;
}
