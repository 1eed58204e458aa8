import { describe, expect, it } from 'vitest';
import { crc32c, crc32cUpdate } from './crc32c';

const ascii = (s: string) => new TextEncoder().encode(s);

describe('crc32c', () => {
  it('matches the Castagnoli check value', () => {
    expect(crc32c(ascii('123456789'))).toBe(0xe3069283);
  });
  it('matches the RFC 3720 (iSCSI) B.4 vectors', () => {
    expect(crc32c(new Uint8Array(0))).toBe(0);
    expect(crc32c(new Uint8Array(32))).toBe(0x8a9136aa);
    expect(crc32c(new Uint8Array(32).fill(0xff))).toBe(0x62a8ab43);
    expect(crc32c(Uint8Array.from({ length: 32 }, (_, i) => i))).toBe(0x46dd794e);
    expect(crc32c(Uint8Array.from({ length: 32 }, (_, i) => 31 - i))).toBe(0x113fdb5c);
  });
  it('can be computed incrementally', () => {
    const b = ascii('The quick brown fox jumps over the lazy dog');
    expect(crc32cUpdate(crc32cUpdate(0, b.subarray(0, 10)), b.subarray(10))).toBe(crc32c(b));
    expect(crc32c(b)).toBe(0x22620404);
  });
  it('slicing-by-8 equals the bytewise definition at every length and alignment', () => {
    const bytewise = (b: Uint8Array) => {
      let c = 0xffffffff;
      for (const x of b) {
        c ^= x;
        for (let k = 0; k < 8; k++) c = c & 1 ? (c >>> 1) ^ 0x82f63b78 : c >>> 1;
      }
      return ~c >>> 0;
    };
    const buf = Uint8Array.from({ length: 300 }, (_, i) => (i * 2654435761) >>> 24);
    for (let off = 0; off < 8; off++) for (let len = 0; len <= 67; len++) expect(crc32c(buf.subarray(off, off + len)), `offset ${off}, length ${len}`).toBe(bytewise(buf.subarray(off, off + len)));
    expect(crc32cUpdate(crc32cUpdate(0, buf.subarray(1, 150)), buf.subarray(150))).toBe(bytewise(buf.subarray(1)));
  });
});
