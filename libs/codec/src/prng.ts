/**
 * Portable, deterministic randomness for the codecs (identical on every platform and run).
 *
 * - `SplitMix64` (Steele, Lea, Flood 2014; the reference `splitmix64.c`) with BigInt arithmetic.
 * - `fnv1a64(text)`: FNV-1a 64 over the UTF-8 bytes, used to fold a document id into a seed.
 * - EDEN sign key of block b of document `docId` under collection/segment seed `s`:
 *   `key = s xor fnv1a64(docId) xor b` (all u64); the signs are the bits of SplitMix64(key)'s
 *   outputs, LSB first, 64 per output: bit 0 -> +1, bit 1 -> -1.
 */
const M64 = (1n << 64n) - 1n;

export class SplitMix64 {
  private state: bigint;
  constructor(seed: bigint | number) {
    this.state = BigInt.asUintN(64, BigInt(seed));
  }
  /** Next 64-bit output. */
  next(): bigint {
    this.state = (this.state + 0x9e3779b97f4a7c15n) & M64;
    let z = this.state;
    z = ((z ^ (z >> 30n)) * 0xbf58476d1ce4e5b9n) & M64;
    z = ((z ^ (z >> 27n)) * 0x94d049bb133111ebn) & M64;
    return z ^ (z >> 31n);
  }
  /** Uniform double in [0, 1) from the top 53 bits. */
  nextDouble(): number {
    return Number(this.next() >> 11n) / 2 ** 53;
  }
}

/** FNV-1a 64-bit hash of the UTF-8 bytes of `text`. */
export function fnv1a64(text: string): bigint {
  let h = 0xcbf29ce484222325n;
  for (const b of new TextEncoder().encode(text)) h = ((h ^ BigInt(b)) * 0x100000001b3n) & M64;
  return h;
}

/** The documented sign key: seed xor fnv1a64(docId) xor blockIndex. */
export function signKey(seed: bigint, docHash: bigint, block: number): bigint {
  return BigInt.asUintN(64, seed ^ docHash ^ BigInt(block));
}

/** d random signs (+1 / -1) from SplitMix64(key). Shape: -> d. */
export function rademacher(key: bigint, d: number, out: Float64Array = new Float64Array(d)): Float64Array {
  const g = new SplitMix64(key);
  for (let i = 0; i < d; i += 64) {
    const z = g.next();
    let lo = Number(z & 0xffffffffn);
    let hi = Number(z >> 32n);
    for (let k = 0; k < 64 && i + k < d; k++) {
      const bit = k < 32 ? lo & 1 : hi & 1;
      if (k < 32) lo >>>= 1;
      else hi >>>= 1;
      out[i + k] = bit ? -1 : 1;
    }
  }
  return out;
}
