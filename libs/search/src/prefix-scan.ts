import { decodePrefixRows, type Codec, type DocKey, type PrefixSection } from '@lateral/codec';
import type { PrefixScan, RowScorer } from './types';

/**
 * A PrefixScan (SearchSegment.prefixScan) over a segment's prefix section: rows decoded with the
 * segment's codec, or scored from their codes by `rowScorer` (handed the section's codes and norms,
 * it scores them as the segment's row scorer scores the code sections: one row's bytes, one
 * score). Codecs with side information need each token's static row to decode: not here (their
 * segments are scanned through their code sections).
 */
export function prefixScanOf(
  section: PrefixSection,
  codec: Codec,
  dims: number,
  keyOf: (i: number) => DocKey,
  rowScorer?: (q: Float32Array, n: number, rows: { codes: Uint8Array; norms: Uint8Array }) => RowScorer | null,
): PrefixScan {
  if (codec.descriptor.sideInfo) throw new Error('prefixScanOf: a side-information codec decodes with static rows; scan its code sections');
  const { start } = section;
  const documents = start.length - 1;
  const { codes: cb, norms: nb } = section.rowBytes;
  return {
    gather(docs: Uint32Array, count: number): PrefixScan {
      if (!(Number.isInteger(count) && count >= 0 && count <= docs.length)) throw new RangeError(`prefix section: count must be an integer in 0..${docs.length}, got ${count}`);
      const sub = new Uint32Array(count + 1);
      let prev = -1;
      for (let k = 0; k < count; k++) {
        const i = docs[k];
        if (!(i > prev && i < documents)) throw new RangeError(`prefix section: gathered documents must ascend within 0..${documents - 1}, got ${i} at ${k}`);
        prev = i;
        sub[k + 1] = sub[k] + (start[i + 1] - start[i]);
      }
      const rows = sub[count];
      const codes = new Uint8Array(rows * cb);
      const norms = new Uint8Array(rows * nb);
      // Element loops, not subarray + set (a view per document costs more than its few hundred bytes);
      // 32-bit words when the rows are whole words and the section's arrays are aligned.
      copyRows(section.codes, codes, cb, docs, count, start, sub);
      copyRows(section.norms, norms, nb, docs, count, start, sub);
      const picked = docs.slice(0, count);
      return prefixScanOf({ rows: section.rows, rowBytes: section.rowBytes, start: sub, codes, norms }, codec, dims, (k) => keyOf(picked[k]), rowScorer);
    },
    gatherRows(docs: Uint32Array, sub: Uint32Array, rows: Uint32Array, count: number): PrefixScan {
      if (!(Number.isInteger(count) && count >= 0 && count <= docs.length && sub.length >= count + 1 && sub[0] === 0 && sub[count] <= rows.length)) {
        throw new RangeError(`prefix section: gatherRows needs count in 0..${docs.length}, start[0] = 0 and start[count] <= rows (${rows.length}), got count ${count}`);
      }
      for (let k = 0; k < count; k++) {
        const i = docs[k];
        if (!(i < documents)) throw new RangeError(`prefix section: document ${i} is out of range (it has ${documents})`);
        for (let e = sub[k]; e < sub[k + 1]; e++) {
          if (!(rows[e] >= start[i] && rows[e] < start[i + 1])) throw new RangeError(`prefix section: row ${rows[e]} is not a row of document ${i}`);
        }
      }
      const total = sub[count];
      const codes = new Uint8Array(total * cb);
      const norms = new Uint8Array(total * nb);
      copyRowList(section.codes, codes, cb, rows, total);
      copyRowList(section.norms, norms, nb, rows, total);
      const picked = docs.slice(0, count);
      const scan = prefixScanOf({ rows: section.rows, rowBytes: section.rowBytes, start: sub.slice(0, count + 1), codes, norms }, codec, dims, (k) => keyOf(picked[k]), rowScorer);
      return {
        ...scan,
        decodePrefixes: () => {
          throw new Error('prefix section: rows gathered by gatherRows are scored, not decoded (a row need not be its document\'s first)');
        },
      };
    },
    rows: section.rows,
    start,
    rowScorer: (q: Float32Array, n: number) => (rowScorer && n > 0 ? rowScorer(q, n, { codes: section.codes, norms: section.norms }) : null),
    decodePrefixes(from: number, to: number, m: number): Float32Array {
      if (!(Number.isInteger(from) && Number.isInteger(to) && 0 <= from && from <= to && to <= documents)) {
        throw new RangeError(`prefix section: documents [${from}, ${to}) are out of range (it has ${documents})`);
      }
      if (!Number.isInteger(m) || m < 1 || m > section.rows) throw new RangeError(`prefix section: m must be an integer in 1..${section.rows}, got ${m}`);
      let rows = 0;
      for (let i = from; i < to; i++) rows += Math.min(m, start[i + 1] - start[i]);
      const out = new Float32Array(rows * dims);
      let at = 0;
      for (let i = from; i < to; i++) {
        if (start[i + 1] === start[i]) continue;
        const v = decodePrefixRows(codec, section, i, m, dims, keyOf(i));
        out.set(v, at);
        at += v.length;
      }
      return out;
    },
  };
}

/** Rows [start[docs[k]], start[docs[k] + 1]) of `from` (w bytes a row) to rows [sub[k], ...) of `to`, k < count. */
function copyRows(from: Uint8Array, to: Uint8Array, w: number, docs: Uint32Array, count: number, start: Uint32Array, sub: Uint32Array): void {
  if (w % 4 === 0 && from.byteOffset % 4 === 0 && from.byteLength % 4 === 0) {
    const f = new Uint32Array(from.buffer, from.byteOffset, from.byteLength >> 2);
    const t = new Uint32Array(to.buffer, to.byteOffset, to.byteLength >> 2);
    const ww = w >> 2;
    for (let k = 0; k < count; k++) {
      const i = docs[k];
      let a = start[i] * ww;
      const b = start[i + 1] * ww;
      let o = sub[k] * ww;
      while (a < b) t[o++] = f[a++];
    }
    return;
  }
  for (let k = 0; k < count; k++) {
    const i = docs[k];
    let a = start[i] * w;
    const b = start[i + 1] * w;
    let o = sub[k] * w;
    while (a < b) to[o++] = from[a++];
  }
}

/** Rows rows[0 .. total) of `from` (w bytes a row) to rows 0 .. total - 1 of `to`. */
export function copyRowList(from: Uint8Array, to: Uint8Array, w: number, rows: Uint32Array, total: number): void {
  if (w % 4 === 0 && from.byteOffset % 4 === 0 && from.byteLength % 4 === 0) {
    const f = new Uint32Array(from.buffer, from.byteOffset, from.byteLength >> 2);
    const t = new Uint32Array(to.buffer, to.byteOffset, to.byteLength >> 2);
    const ww = w >> 2;
    for (let e = 0, o = 0; e < total; e++) {
      let a = rows[e] * ww;
      const b = a + ww;
      while (a < b) t[o++] = f[a++];
    }
    return;
  }
  for (let e = 0, o = 0; e < total; e++) {
    let a = rows[e] * w;
    const b = a + w;
    while (a < b) to[o++] = from[a++];
  }
}
