import type { Codec, DocKey } from './codec';

/**
 * ME-BERT's prefix section (segment format v2, docs/segment-format.md): each document's first
 * min(rows, tokens_i) token rows in the segment's own codes, the very bytes its code and norm
 * sections hold for those rows, documents in order: all the rows' codes, then all their norms.
 * It costs rows / tokens_i of a document's coded bytes, and a scan of it scores or decodes the
 * same bytes a scan of the code sections would, so the answers are the same bit for bit.
 *
 * Only codecs that code every row on its own in a fixed number of bytes have one (fp32, fp16,
 * int8, EDEN's token layout): there a document's first k rows are the first k row-widths of its
 * codes and norms and decode alone. EDEN's cross layout (AESI's) codes blocks across tokens and a
 * residual segment stores all of a document's centroid ids before its residuals: no prefix of
 * their bytes decodes on its own, so their segments are written without the section (format v1)
 * and ME-BERT scans their code sections.
 */

/** Most rows per document a prefix section may hold (ME-BERT's m is at most 64). */
export const PREFIX_ROWS_MAX = 64;

/** Bytes of one row's codes and of its norm. */
export interface PrefixRowBytes {
  codes: number;
  norms: number;
}

/** The prefix section of one segment, split (views of the section's bytes). */
export interface PrefixSection {
  /** Rows per document at most (the header's prefix rows). */
  readonly rows: number;
  readonly rowBytes: PrefixRowBytes;
  /** documents + 1 entries: document i's rows are section rows [start[i], start[i + 1]). */
  readonly start: Uint32Array;
  /** start[documents] x rowBytes.codes: row r's codes at r x rowBytes.codes. */
  readonly codes: Uint8Array;
  /** start[documents] x rowBytes.norms: row r's norm at r x rowBytes.norms. */
  readonly norms: Uint8Array;
}

/**
 * A row's code and norm bytes when `codec` codes every row on its own in fixed bytes (so a
 * document's first k rows are the first k row-widths of its codes and norms), else null: the
 * codecs whose segments can carry a prefix section.
 */
export function prefixRowBytes(codec: Codec, dims: number): PrefixRowBytes | null {
  const d = codec.descriptor;
  const rowwise = d.kind === 'fp32' || d.kind === 'fp16' || d.kind === 'int8' || (d.kind === 'eden' && d.layout === 'token');
  if (!rowwise) return null;
  const one = codec.docBytes(1, dims);
  // Bit-packed rows must end on a byte (EDEN: p x bits a multiple of 8, true for p >= 8).
  for (const k of [2, 3, 5, 8]) {
    const b = codec.docBytes(k, dims);
    if (b.codes !== k * one.codes || b.norms !== k * one.norms) return null;
  }
  return one;
}

/** Each document's first row in a prefix section of `rows` rows per document (documents + 1 entries; the last: the section's rows). */
export function prefixStarts(tokenOffsets: Uint32Array, rows: number): Uint32Array {
  const n = tokenOffsets.length - 1;
  const start = new Uint32Array(n + 1);
  for (let i = 0; i < n; i++) start[i + 1] = start[i] + Math.min(rows, tokenOffsets[i + 1] - tokenOffsets[i]);
  return start;
}

/** Bytes of a prefix section: its rows x (code + norm bytes of a row). */
export function prefixSectionBytes(tokenOffsets: Uint32Array, rows: number, rowBytes: PrefixRowBytes): number {
  const n = tokenOffsets.length - 1;
  let r = 0;
  for (let i = 0; i < n; i++) r += Math.min(rows, tokenOffsets[i + 1] - tokenOffsets[i]);
  return r * (rowBytes.codes + rowBytes.norms);
}

/**
 * Copies each document's first min(rows, tokens_i) rows out of document-major codes and norms of
 * a row-wise codec (row t of the segment at t x the row's bytes): the prefix section's bytes.
 */
export function buildPrefixSection(codes: Uint8Array, norms: Uint8Array, tokenOffsets: Uint32Array, rows: number, rowBytes: PrefixRowBytes): Uint8Array {
  const start = prefixStarts(tokenOffsets, rows);
  const n = tokenOffsets.length - 1;
  const R = start[n];
  const out = new Uint8Array(R * (rowBytes.codes + rowBytes.norms));
  const normBase = R * rowBytes.codes;
  for (let i = 0; i < n; i++) {
    const k = start[i + 1] - start[i];
    if (k === 0) continue;
    const t = tokenOffsets[i];
    out.set(codes.subarray(t * rowBytes.codes, (t + k) * rowBytes.codes), start[i] * rowBytes.codes);
    out.set(norms.subarray(t * rowBytes.norms, (t + k) * rowBytes.norms), normBase + start[i] * rowBytes.norms);
  }
  return out;
}

/** Splits a prefix section's bytes; RangeError (naming the sizes) when their length disagrees with the documents. */
export function splitPrefixSection(bytes: Uint8Array, tokenOffsets: Uint32Array, rows: number, rowBytes: PrefixRowBytes): PrefixSection {
  const start = prefixStarts(tokenOffsets, rows);
  const R = start[start.length - 1];
  const want = R * (rowBytes.codes + rowBytes.norms);
  if (bytes.length !== want) {
    throw new RangeError(`${bytes.length} bytes, expected ${want} (${R} rows of ${rowBytes.codes} code and ${rowBytes.norms} norm bytes, ${rows} per document at most)`);
  }
  return { rows, rowBytes, start, codes: bytes.subarray(0, R * rowBytes.codes), norms: bytes.subarray(R * rowBytes.codes, want) };
}

/**
 * Document i's first min(m, its stored rows) rows decoded from the section (k x dims): the same
 * values as the first k rows of its codes decoded. `side` (side-information codecs): the static
 * rows of at least those tokens.
 */
export function decodePrefixRows(codec: Codec, s: PrefixSection, i: number, m: number, dims: number, key: DocKey, side?: Float32Array, sideDims = 0): Float32Array {
  const a = s.start[i];
  const k = Math.min(m, s.start[i + 1] - a);
  const { codes, norms } = s.rowBytes;
  return codec.decodeDoc({ codes: s.codes.subarray(a * codes, (a + k) * codes), norms: s.norms.subarray(a * norms, (a + k) * norms) }, k, dims, key, side?.subarray(0, k * sideDims));
}
