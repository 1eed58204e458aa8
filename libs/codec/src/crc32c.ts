/**
 * CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), table-driven, slicing-by-8: eight bytes
 * per step through eight 256-entry tables (table k advances a byte's CRC by k more zero bytes), the
 * head and tail one byte at a time. Same parameters as iSCSI / ext4 / Snappy framing: init
 * 0xFFFFFFFF, reflected in and out, final xor 0xFFFFFFFF. Check value: crc32c("123456789") =
 * 0xE3069283. Every segment, index and head is checksummed when written and when read, so this
 * loop is on the ingest's path (4-5x fewer operations per byte than one byte at a time).
 */
const TABLES: Uint32Array = (() => {
  const t = new Uint32Array(8 * 256);
  for (let n = 0; n < 256; n++) {
    let c = n;
    for (let k = 0; k < 8; k++) c = c & 1 ? (c >>> 1) ^ 0x82f63b78 : c >>> 1;
    t[n] = c >>> 0;
  }
  for (let n = 0; n < 256; n++) {
    let c = t[n];
    for (let k = 1; k < 8; k++) {
      c = t[c & 0xff] ^ (c >>> 8);
      t[k * 256 + n] = c >>> 0;
    }
  }
  return t;
})();

const LITTLE_ENDIAN = new Uint8Array(new Uint32Array([1]).buffer)[0] === 1;

/** Continues a CRC-32C over `bytes`; start with `crc = 0` (the pre/post inversion is internal). */
export function crc32cUpdate(crc: number, bytes: Uint8Array): number {
  const t = TABLES;
  let c = ~crc >>> 0;
  let i = 0;
  const n = bytes.length;
  // Bytes up to a 4-byte boundary one at a time, then 8 at a time as two little-endian words.
  for (; i < n && ((bytes.byteOffset + i) & 3) !== 0; i++) c = t[(c ^ bytes[i]) & 0xff] ^ (c >>> 8);
  const words = (n - i) >>> 3;
  if (words > 0 && LITTLE_ENDIAN) {
    const w = new Uint32Array(bytes.buffer, bytes.byteOffset + i, words * 2);
    for (let j = 0; j < w.length; j += 2) {
      const lo = c ^ w[j];
      const hi = w[j + 1];
      c =
        t[1792 + (lo & 0xff)] ^
        t[1536 + ((lo >>> 8) & 0xff)] ^
        t[1280 + ((lo >>> 16) & 0xff)] ^
        t[1024 + (lo >>> 24)] ^
        t[768 + (hi & 0xff)] ^
        t[512 + ((hi >>> 8) & 0xff)] ^
        t[256 + ((hi >>> 16) & 0xff)] ^
        t[hi >>> 24];
    }
    i += words * 8;
  }
  for (; i < n; i++) c = t[(c ^ bytes[i]) & 0xff] ^ (c >>> 8);
  return ~c >>> 0;
}

/** CRC-32C of `bytes` as an unsigned 32-bit number. */
export function crc32c(bytes: Uint8Array): number {
  return crc32cUpdate(0, bytes);
}
