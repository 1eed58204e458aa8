/**
 * # Segment index format (LSIX v1)
 *
 * One immutable object per segment, stored beside it (e.g. `<segment key>.idx`), written once by
 * the `index` job and never modified. It holds what search needs beyond the segment itself: the
 * token IVF (inverted lists of the segment's token rows per centroid) and the BM25 postings over
 * the segment's token ids. Dense and ME-BERT read the segment's own `docVectors` and token rows.
 * The centroids are not in it: they belong to the collection and codec version (fitted once);
 * the header records their count and CRC32C so an index is never used with other centroids.
 *
 * All integers little-endian. Every byte is covered by a CRC32C (Castagnoli, as in segments):
 * the header and section table by the header CRC, each section by its table entry.
 *
 * | offset | size | field |
 * |---|---|---|
 * | 0 | 4 | magic `LSIX` (ASCII) |
 * | 4 | 2 | format version, 1 |
 * | 6 | 2 | section count S (7 in v1) |
 * | 8 | 4 | header length H = 48 + 16 S (so 160 in v1), including the header CRC |
 * | 12 | 4 | documents D (must equal the segment's) |
 * | 16 | 4 | token rows T (must equal the segment's) |
 * | 20 | 4 | dims d of the centroids |
 * | 24 | 4 | centroid count K |
 * | 28 | 4 | CRC32C of the K x d float32 centroids (little-endian bytes) the index was built with |
 * | 32 | 4 | BM25 distinct terms U |
 * | 36 | 4 | BM25 postings P (distinct (term, document) pairs) |
 * | 40 | 4 | BM25 total length: sum of the document lengths (u32) |
 * | 44 | 16 S | section table, one entry per section in file order: id (4 ASCII bytes), offset (u32), length in bytes (u32), CRC32C of the section bytes (u32) |
 * | H - 4 | 4 | CRC32C of bytes [0, H - 4) |
 *
 * Sections follow the header in this order and tile the file exactly (the first starts at H, each
 * starts where the previous ends, the last ends at the end of the file). Every section is an
 * array of 4-byte elements, so all are 4-byte aligned:
 *
 * | id | name | type | length (elements) | content |
 * |---|---|---|---|---|
 * | `IVFO` | ivf.listOffsets | u32 | K + 1 | CSR offsets into ivf.rows: centroid c owns rows[listOffsets[c] .. listOffsets[c+1]) ; starts at 0, non-decreasing, ends at T |
 * | `IVFR` | ivf.rows | u32 | T | token rows of the segment grouped by nearest centroid (max inner product, ties to the lower centroid), ascending within a list; every row exactly once |
 * | `TERM` | bm25.terms | i32 | U | distinct indexed token ids, strictly increasing |
 * | `POFF` | bm25.postingOffsets | u32 | U + 1 | CSR offsets into the postings: term terms[u] owns [postingOffsets[u] .. postingOffsets[u+1]); df = the difference |
 * | `PDOC` | bm25.postingDocs | u32 | P | local document index, strictly increasing within a term, < D |
 * | `PTFS` | bm25.postingTfs | u32 | P | term frequency in that document, >= 1 |
 * | `DLEN` | bm25.docLengths | u32 | D | document length: indexed tokens (token ids not skipped at build time); sums to the header's total length and to the sum of the tfs |
 *
 * Global BM25 statistics are sums over segments:
 * N = sum of D, total length = sum of the header field, df(term) = sum of the per-segment dfs.
 * A reader refuses, naming the section: a short file, a wrong magic or version, a header CRC
 * mismatch, a section whose id, offset, length or CRC disagrees, trailing bytes, and contents
 * that disagree with the header (offsets not monotone, rows out of range or repeated, terms
 * unsorted, lengths that do not add up). Optionally it checks the index against the segment
 * (D, T) and the centroids (K, d, CRC) it is about to be used with.
 */
import { crc32c, SegmentCorruptError } from '@lateral/codec';
import { assignNearest, type AssignFn } from './kmeans';
import type { SearchSegment } from './types';

export const SEGMENT_INDEX_MAGIC = 'LSIX';
export const SEGMENT_INDEX_VERSION = 1;
const FIXED_HEADER = 44;
const SECTION_ENTRY = 16;
export const SEGMENT_INDEX_SECTIONS = ['IVFO', 'IVFR', 'TERM', 'POFF', 'PDOC', 'PTFS', 'DLEN'] as const;
type SectionId = (typeof SEGMENT_INDEX_SECTIONS)[number];
const SECTION_NAMES: Record<SectionId, string> = {
  IVFO: 'ivf.listOffsets',
  IVFR: 'ivf.rows',
  TERM: 'bm25.terms',
  POFF: 'bm25.postingOffsets',
  PDOC: 'bm25.postingDocs',
  'PTFS': 'bm25.postingTfs',
  DLEN: 'bm25.docLengths',
};
const HEADER_LENGTH = FIXED_HEADER + SEGMENT_INDEX_SECTIONS.length * SECTION_ENTRY + 4;

/** A token IVF over one segment's token rows (CSR by centroid). */
export interface TokenIvf {
  /** K + 1 */
  listOffsets: Uint32Array;
  /** T token rows, grouped by centroid, ascending within a list */
  rows: Uint32Array;
}

/** BM25 postings of one segment over token ids. */
export interface Bm25Postings {
  /** U distinct term ids, strictly increasing */
  terms: Int32Array;
  /** U + 1 */
  postingOffsets: Uint32Array;
  /** P local documents, increasing within a term */
  postingDocs: Uint32Array;
  /** P term frequencies */
  postingTfs: Uint32Array;
  /** D indexed tokens per document */
  docLengths: Uint32Array;
  /** sum of docLengths */
  totalLength: number;
}

export interface SegmentIndex {
  documents: number;
  tokens: number;
  dims: number;
  centroidCount: number;
  /** CRC32C of the centroids' float32 bytes */
  centroidsCrc: number;
  ivf: TokenIvf;
  bm25: Bm25Postings;
}

export interface BuildSegmentIndexOptions {
  /** nearest centroid of every token row (T), when the caller computed it (e.g. with a GEMM); default assignNearest over seg.tokens */
  assignments?: Uint32Array;
  /** replaces assignNearest when `assignments` is not given */
  assign?: AssignFn;
  /** token ids left out of BM25 (special tokens, punctuation); they count in no document length. The query side must skip the same ids. */
  bm25Skip?: (tokenId: number) => boolean;
  /**
   * The documents' original terms for BM25 when the segment's rows are not one per token (token
   * pooling, `codec.poolFactor`: each row is a mean of several tokens): token ids and offsets
   * (documents + 1) from the raw, unpooled vectors. Default: the segment's own token ids.
   */
  bm25Terms?: { tokenIds: Int32Array; tokenOffsets: Uint32Array };
}

/** Thrown for a corrupted or truncated index; a SegmentCorruptError, so jobs do not retry it. */
export class SegmentIndexCorruptError extends SegmentCorruptError {
  constructor(indexName: string, section: string, detail: string) {
    super(indexName, section, detail);
    this.name = 'SegmentIndexCorruptError';
    this.message = `segment index "${indexName}" is corrupt in section "${section}": ${detail}`;
  }
}

/** CRC32C of K x d float32 centroids, as recorded in an index header. */
export function centroidsChecksum(centroids: Float32Array): number {
  return crc32c(new Uint8Array(centroids.buffer, centroids.byteOffset, centroids.byteLength));
}

/**
 * Builds the per-segment index: (a) token IVF, each token row in the list of its nearest
 * centroid (centroids: K x d, unit rows; d must be the segment's dims); (b) BM25 postings over
 * token ids. O(T K d) for the assignment (unless given), O(T log U) for the postings.
 */
export function buildSegmentIndex(seg: SearchSegment, centroids: Float32Array, d: number, opts: BuildSegmentIndexOptions = {}): SegmentIndex {
  if (d !== seg.dims) throw new RangeError(`buildSegmentIndex: centroids have d = ${d}, segment "${seg.name}" has dims ${seg.dims}`);
  if (!Number.isInteger(d) || d < 1 || centroids.length % d !== 0 || centroids.length === 0) {
    throw new RangeError(`buildSegmentIndex: centroids has length ${centroids.length}, expected K x d with K >= 1, d = ${d}`);
  }
  const K = centroids.length / d;
  const D = seg.documents;
  const T = seg.tokenIds.length;
  if (seg.tokenOffsets.length !== D + 1 || seg.tokenOffsets[D] !== T) throw new RangeError(`buildSegmentIndex: tokenOffsets must have documents + 1 = ${D + 1} entries ending at T = ${T}`);
  const terms = opts.bm25Terms;
  if (terms && (terms.tokenOffsets.length !== D + 1 || terms.tokenOffsets[D] !== terms.tokenIds.length)) {
    throw new RangeError(`buildSegmentIndex: bm25Terms.tokenOffsets must have documents + 1 = ${D + 1} entries ending at its ${terms.tokenIds.length} token ids`);
  }

  // (a) IVF: counting sort of rows by centroid keeps rows ascending within a list
  let assignments = opts.assignments;
  if (assignments) {
    if (assignments.length !== T) throw new RangeError(`buildSegmentIndex: assignments has ${assignments.length} entries, expected T = ${T}`);
    for (let r = 0; r < T; r++) if (assignments[r] >= K) throw new RangeError(`buildSegmentIndex: assignments[${r}] = ${assignments[r]} is not a centroid (K = ${K})`);
  } else {
    assignments = T === 0 ? new Uint32Array(0) : (opts.assign ?? assignNearest)(seg.tokens, T, centroids, K, d).index;
  }
  const listOffsets = new Uint32Array(K + 1);
  for (let r = 0; r < T; r++) listOffsets[assignments[r] + 1]++;
  for (let c = 0; c < K; c++) listOffsets[c + 1] += listOffsets[c];
  const cursor = listOffsets.slice(0, K);
  const rows = new Uint32Array(T);
  for (let r = 0; r < T; r++) rows[cursor[assignments[r]]++] = r;

  return {
    documents: D,
    tokens: T,
    dims: d,
    centroidCount: K,
    centroidsCrc: centroidsChecksum(centroids),
    ivf: { listOffsets, rows },
    bm25: opts.bm25Terms ? buildBm25Postings(opts.bm25Terms.tokenIds, opts.bm25Terms.tokenOffsets, opts.bm25Skip) : buildBm25Postings(seg.tokenIds, seg.tokenOffsets, opts.bm25Skip),
  };
}

/** BM25 postings from token ids (T) and tokenOffsets (D + 1). */
export function buildBm25Postings(tokenIds: Int32Array, tokenOffsets: Uint32Array, skip?: (tokenId: number) => boolean): Bm25Postings {
  const D = tokenOffsets.length - 1;
  const T = tokenIds.length;
  const keep = new Uint8Array(T);
  for (let r = 0; r < T; r++) keep[r] = skip && skip(tokenIds[r]) ? 0 : 1;
  const kept: number[] = [];
  for (let r = 0; r < T; r++) if (keep[r]) kept.push(tokenIds[r]);
  const sorted = Int32Array.from(kept).sort();
  let U = 0;
  for (let i = 0; i < sorted.length; i++) if (i === 0 || sorted[i] !== sorted[i - 1]) sorted[U++] = sorted[i];
  const terms = sorted.slice(0, U);
  // term index of every kept row
  const termOf = new Int32Array(T).fill(-1);
  for (let r = 0; r < T; r++) if (keep[r]) termOf[r] = lowerBound(terms, tokenIds[r]);
  const docLengths = new Uint32Array(D);
  const lastDoc = new Int32Array(U).fill(-1);
  const df = new Uint32Array(U + 1);
  let totalLength = 0;
  for (let i = 0; i < D; i++) {
    for (let r = tokenOffsets[i]; r < tokenOffsets[i + 1]; r++) {
      const u = termOf[r];
      if (u < 0) continue;
      docLengths[i]++;
      if (lastDoc[u] !== i) {
        lastDoc[u] = i;
        df[u + 1]++;
      }
    }
    totalLength += docLengths[i];
  }
  const postingOffsets = df;
  for (let u = 0; u < U; u++) postingOffsets[u + 1] += postingOffsets[u];
  const P = postingOffsets[U];
  const postingDocs = new Uint32Array(P);
  const postingTfs = new Uint32Array(P);
  const cursor = postingOffsets.slice(0, U);
  const slot = new Uint32Array(U);
  lastDoc.fill(-1);
  for (let i = 0; i < D; i++) {
    for (let r = tokenOffsets[i]; r < tokenOffsets[i + 1]; r++) {
      const u = termOf[r];
      if (u < 0) continue;
      if (lastDoc[u] !== i) {
        lastDoc[u] = i;
        const p = cursor[u]++;
        slot[u] = p;
        postingDocs[p] = i;
        postingTfs[p] = 1;
      } else postingTfs[slot[u]]++;
    }
  }
  return { terms, postingOffsets, postingDocs, postingTfs, docLengths, totalLength };
}

/** First index i with a[i] >= x (a sorted ascending). */
export function lowerBound(a: Int32Array, x: number): number {
  let lo = 0, hi = a.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (a[mid] < x) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

function bytesOf(a: Uint32Array | Int32Array): Uint8Array {
  return new Uint8Array(a.buffer, a.byteOffset, a.byteLength);
}

/** Serialises an index to LSIX v1 (format at the top of this file). */
export function serializeSegmentIndex(index: SegmentIndex): Uint8Array {
  const { ivf, bm25 } = index;
  if (bm25.totalLength > 0xffffffff) throw new RangeError(`serializeSegmentIndex: total length ${bm25.totalLength} exceeds the u32 field of format v1`);
  const sections: Record<SectionId, Uint8Array> = {
    IVFO: bytesOf(ivf.listOffsets),
    IVFR: bytesOf(ivf.rows),
    TERM: bytesOf(bm25.terms),
    POFF: bytesOf(bm25.postingOffsets),
    PDOC: bytesOf(bm25.postingDocs),
    'PTFS': bytesOf(bm25.postingTfs),
    DLEN: bytesOf(bm25.docLengths),
  };
  let total = HEADER_LENGTH;
  for (const id of SEGMENT_INDEX_SECTIONS) total += sections[id].length;
  if (total > 0xffffffff) throw new RangeError(`serializeSegmentIndex: ${total} bytes exceeds the 4 GiB limit of format v1`);
  const out = new Uint8Array(total);
  const view = new DataView(out.buffer);
  for (let i = 0; i < 4; i++) out[i] = SEGMENT_INDEX_MAGIC.charCodeAt(i);
  view.setUint16(4, SEGMENT_INDEX_VERSION, true);
  view.setUint16(6, SEGMENT_INDEX_SECTIONS.length, true);
  view.setUint32(8, HEADER_LENGTH, true);
  view.setUint32(12, index.documents, true);
  view.setUint32(16, index.tokens, true);
  view.setUint32(20, index.dims, true);
  view.setUint32(24, index.centroidCount, true);
  view.setUint32(28, index.centroidsCrc >>> 0, true);
  view.setUint32(32, bm25.terms.length, true);
  view.setUint32(36, bm25.postingDocs.length, true);
  view.setUint32(40, bm25.totalLength, true);
  let offset = HEADER_LENGTH;
  SEGMENT_INDEX_SECTIONS.forEach((id, k) => {
    const e = FIXED_HEADER + k * SECTION_ENTRY;
    const bytes = sections[id];
    for (let i = 0; i < 4; i++) out[e + i] = id.charCodeAt(i);
    view.setUint32(e + 4, offset, true);
    view.setUint32(e + 8, bytes.length, true);
    view.setUint32(e + 12, crc32c(bytes), true);
    out.set(bytes, offset);
    offset += bytes.length;
  });
  view.setUint32(HEADER_LENGTH - 4, crc32c(out.subarray(0, HEADER_LENGTH - 4)), true);
  return out;
}

export interface IndexExpectations {
  /** the segment it will serve: documents and token rows must match */
  documents?: number;
  tokens?: number;
  /** the collection's centroids (K x d): count, dims and CRC must match */
  centroids?: Float32Array;
  dims?: number;
}

/**
 * Opens an LSIX v1 index, checking every checksum and the contents against the header (and,
 * when given, against the segment and centroids it is meant for). Any problem throws
 * SegmentIndexCorruptError naming `name` and the section (`header`, `ivf.rows`, ...).
 * The arrays are copies (aligned), independent of `bytes`.
 */
export function deserializeSegmentIndex(bytes: Uint8Array, name: string, expect: IndexExpectations = {}): SegmentIndex {
  const fail = (section: string, detail: string): never => {
    throw new SegmentIndexCorruptError(name, section, detail);
  };
  if (bytes.length < FIXED_HEADER + 4) fail('header', `${bytes.length} bytes is shorter than the ${FIXED_HEADER + 4}-byte fixed header (truncated)`);
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const magic = String.fromCharCode(bytes[0], bytes[1], bytes[2], bytes[3]);
  if (magic !== SEGMENT_INDEX_MAGIC) fail('header', `bad magic ${JSON.stringify(magic)}, expected ${SEGMENT_INDEX_MAGIC}`);
  const headerLength = view.getUint32(8, true);
  if (headerLength < FIXED_HEADER + 4 || headerLength > bytes.length) fail('header', `header length ${headerLength} out of range (file is ${bytes.length} bytes; truncated?)`);
  if (crc32c(bytes.subarray(0, headerLength - 4)) !== view.getUint32(headerLength - 4, true)) fail('header', 'checksum mismatch (corrupted)');
  const version = view.getUint16(4, true);
  if (version !== SEGMENT_INDEX_VERSION) fail('header', `unsupported version ${version} (this reader knows ${SEGMENT_INDEX_VERSION})`);
  const sectionCount = view.getUint16(6, true);
  if (sectionCount !== SEGMENT_INDEX_SECTIONS.length || headerLength !== HEADER_LENGTH) fail('header', `expected ${SEGMENT_INDEX_SECTIONS.length} sections and a ${HEADER_LENGTH}-byte header, found ${sectionCount} and ${headerLength}`);
  const D = view.getUint32(12, true);
  const T = view.getUint32(16, true);
  const d = view.getUint32(20, true);
  const K = view.getUint32(24, true);
  const centroidsCrc = view.getUint32(28, true);
  const U = view.getUint32(32, true);
  const P = view.getUint32(36, true);
  const totalLength = view.getUint32(40, true);
  if (d < 1 || K < 1) fail('header', `dims ${d} and centroid count ${K} must be >= 1`);

  const expectedLength: Record<SectionId, number> = { IVFO: K + 1, IVFR: T, TERM: U, POFF: U + 1, PDOC: P, 'PTFS': P, DLEN: D };
  const raw = {} as Record<SectionId, Uint8Array>;
  let expected = headerLength;
  SEGMENT_INDEX_SECTIONS.forEach((id, k) => {
    const e = FIXED_HEADER + k * SECTION_ENTRY;
    const label = SECTION_NAMES[id];
    const got = String.fromCharCode(bytes[e], bytes[e + 1], bytes[e + 2], bytes[e + 3]);
    if (got !== id) fail(label, `table entry ${k} is ${JSON.stringify(got)}, expected ${JSON.stringify(id)}`);
    const off = view.getUint32(e + 4, true);
    const len = view.getUint32(e + 8, true);
    if (off !== expected) fail(label, `starts at ${off}, expected ${expected} (sections must tile the file)`);
    if (off + len > bytes.length) fail(label, `ends at ${off + len}, past the end of the ${bytes.length}-byte file (truncated)`);
    if (len !== expectedLength[id] * 4) fail(label, `${len} bytes, the header implies ${expectedLength[id]} x 4 = ${expectedLength[id] * 4}`);
    raw[id] = bytes.subarray(off, off + len);
    if (crc32c(raw[id]) !== view.getUint32(e + 12, true)) fail(label, 'checksum mismatch (corrupted)');
    expected = off + len;
  });
  if (expected !== bytes.length) fail(SECTION_NAMES.DLEN, `${bytes.length - expected} trailing bytes after the last section`);

  const u32 = (id: SectionId) => new Uint32Array(raw[id].slice().buffer);
  const listOffsets = u32('IVFO');
  const rows = u32('IVFR');
  const terms = new Int32Array(raw.TERM.slice().buffer);
  const postingOffsets = u32('POFF');
  const postingDocs = u32('PDOC');
  const postingTfs = u32('PTFS');
  const docLengths = u32('DLEN');

  // contents (checksums passed: these catch writer bugs and crafted files)
  if (listOffsets[0] !== 0 || listOffsets[K] !== T) fail(SECTION_NAMES.IVFO, `must run from 0 to T = ${T}`);
  for (let c = 0; c < K; c++) if (listOffsets[c + 1] < listOffsets[c]) fail(SECTION_NAMES.IVFO, `decreasing at centroid ${c}`);
  const seen = new Uint8Array(T);
  for (let c = 0; c < K; c++) {
    for (let p = listOffsets[c]; p < listOffsets[c + 1]; p++) {
      const r = rows[p];
      if (r >= T) fail(SECTION_NAMES.IVFR, `row ${r} at ${p} is out of range (T = ${T})`);
      if (seen[r]) fail(SECTION_NAMES.IVFR, `row ${r} appears twice`);
      seen[r] = 1;
      if (p > listOffsets[c] && rows[p - 1] >= r) fail(SECTION_NAMES.IVFR, `list ${c} is not ascending at ${p}`);
    }
  }
  for (let u = 1; u < U; u++) if (terms[u] <= terms[u - 1]) fail(SECTION_NAMES.TERM, `not strictly increasing at ${u}`);
  if (postingOffsets[0] !== 0 || postingOffsets[U] !== P) fail(SECTION_NAMES.POFF, `must run from 0 to P = ${P}`);
  let tfSum = 0;
  for (let u = 0; u < U; u++) {
    const a = postingOffsets[u], b = postingOffsets[u + 1];
    if (b <= a) fail(SECTION_NAMES.POFF, `term ${terms[u]} has no postings (offsets must increase)`);
    for (let p = a; p < b; p++) {
      if (postingDocs[p] >= D) fail(SECTION_NAMES.PDOC, `document ${postingDocs[p]} at ${p} is out of range (D = ${D})`);
      if (p > a && postingDocs[p] <= postingDocs[p - 1]) fail(SECTION_NAMES.PDOC, `term ${terms[u]}'s documents are not strictly increasing at ${p}`);
      if (postingTfs[p] < 1) fail(SECTION_NAMES['PTFS'], `tf 0 at ${p}`);
      tfSum += postingTfs[p];
    }
  }
  let lengthSum = 0;
  for (let i = 0; i < D; i++) lengthSum += docLengths[i];
  if (lengthSum !== totalLength) fail(SECTION_NAMES.DLEN, `lengths sum to ${lengthSum}, the header says ${totalLength}`);
  if (tfSum !== totalLength) fail(SECTION_NAMES['PTFS'], `term frequencies sum to ${tfSum}, the document lengths to ${totalLength}`);

  if (expect.documents !== undefined && expect.documents !== D) fail('header', `built for ${D} documents, the segment has ${expect.documents}`);
  if (expect.tokens !== undefined && expect.tokens !== T) fail('header', `built for ${T} token rows, the segment has ${expect.tokens}`);
  if (expect.dims !== undefined && expect.dims !== d) fail('header', `built for dims ${d}, expected ${expect.dims}`);
  if (expect.centroids) {
    if (expect.centroids.length !== K * d) fail('header', `built for ${K} x ${d} centroids, given ${expect.centroids.length} values`);
    if (centroidsChecksum(expect.centroids) !== centroidsCrc) fail('header', 'built with other centroids (centroid CRC32C differs)');
  }
  return {
    documents: D,
    tokens: T,
    dims: d,
    centroidCount: K,
    centroidsCrc,
    ivf: { listOffsets, rows },
    bm25: { terms, postingOffsets, postingDocs, postingTfs, docLengths, totalLength },
  };
}
