/**
 * CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), table-driven, one byte at a time.
 * Same parameters as iSCSI / ext4 / Snappy framing: init 0xFFFFFFFF, reflected in and out,
 * final xor 0xFFFFFFFF. Check value: crc32c("123456789") = 0xE3069283.
 */
const TABLE: Uint32Array = (() => {
  const t = new Uint32Array(256);
  for (let n = 0; n < 256; n++) {
    let c = n;
    for (let k = 0; k < 8; k++) c = c & 1 ? (c >>> 1) ^ 0x82f63b78 : c >>> 1;
    t[n] = c >>> 0;
  }
  return t;
})();

/** Continues a CRC-32C over `bytes`; start with `crc = 0` (the pre/post inversion is internal). */
export function crc32cUpdate(crc: number, bytes: Uint8Array): number {
  let c = ~crc >>> 0;
  for (let i = 0; i < bytes.length; i++) c = TABLE[(c ^ bytes[i]) & 0xff] ^ (c >>> 8);
  return ~c >>> 0;
}

/** CRC-32C of `bytes` as an unsigned 32-bit number. */
export function crc32c(bytes: Uint8Array): number {
  return crc32cUpdate(0, bytes);
}
