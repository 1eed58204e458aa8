import { crc32 } from 'node:zlib';
import { SegmentCorruptError } from '@lateral/codec';
import { assignNearest, type AssignFn } from '../kmeans';
import { centroidsChecksum } from '../segment-index';
import { assertWarpCodec, encodeWarpResidualInto, warpCodeBytes, warpCodecChecksum, type WarpBits, type WarpCodec } from './codec';

/**
 * A segment's centroid-major search layout (SPEC 3.5, ARCHITECTURE "Serving v2"): for each
 * centroid of the collection's IVF, the segment's tokens assigned to it, together, ascending by
 * local document (then token row): their local document ids and their packed residual codes
 * against that centroid. Serialised (docs/segment-format.md, "Search layout (centroid-major)"),
 * one list is one contiguous, separately checksummed byte range, found from a small directory
 * (per centroid: token count and CRC-32), so a query reads and verifies only the lists it probes.
 */

export const WARP_LAYOUT_MAGIC = 'LWRP';
export const WARP_LAYOUT_VERSION = 1;
/** Fixed header bytes (the directory follows). */
export const WARP_HEADER_BYTES = 64;
/** Directory bytes per centroid: count u32, crc32 u32. */
export const WARP_DIRECTORY_ENTRY_BYTES = 8;
/** Documents a segment may have for 16-bit local document ids. */
export const WARP_U16_DOCUMENTS = 65536;

/** One centroid's list in one segment: count entries, docs ascending. */
export interface WarpList {
  count: number;
  /** count local document ids */
  docs: Uint16Array | Uint32Array;
  /** count x bytesPerToken packed residual codes */
  codes: Uint8Array;
  /**
   * The same codes as u32 words (little-endian platforms, bytesPerToken a multiple of 4):
   * count x bytesPerToken / 4. The engine's fast path reads 4 code bytes per load.
   */
  words?: Uint32Array;
}

const LITTLE_ENDIAN = new Uint8Array(new Uint32Array([1]).buffer)[0] === 1;

/** The u32 view of a list's codes when the fast path applies (copied when unaligned). */
export function warpCodeWords(codes: Uint8Array, bytesPerToken: number): Uint32Array | undefined {
  if (!LITTLE_ENDIAN || bytesPerToken % 4 !== 0) return undefined;
  if ((codes.byteOffset & 3) === 0) return new Uint32Array(codes.buffer, codes.byteOffset, codes.length >> 2);
  return new Uint32Array(codes.slice().buffer);
}

/**
 * What the engine reads from one segment: the list of a probed centroid, the same entries for the
 * same centroid for as long as the source lives (the resident scan keeps where each source's
 * lists sit in the WebAssembly module by source and centroid).
 */
export interface WarpListSource {
  list(centroid: number): WarpList;
  /** Sources of the same identity hold the same lists (WarpResidentSource.identity of @lateral/simd); absent: the source itself. */
  readonly identity?: object;
}

/** What a layout's header says, shared by the layout as built and its directory as read. */
export interface WarpLayoutHeader {
  dims: number;
  bits: WarpBits;
  centroidCount: number;
  documents: number;
  tokens: number;
  bytesPerToken: number;
  docIdBytes: 2 | 4;
  centroidsChecksum: number;
  codecChecksum: number;
}

/** A segment's search layout in memory (as built, before serialisation). */
export interface WarpLayout extends WarpLayoutHeader {
  /** K + 1: list c holds entries [listOffsets[c], listOffsets[c + 1]) */
  listOffsets: Uint32Array;
  /** T local document ids, list-major */
  docs: Uint16Array | Uint32Array;
  /** T x bytesPerToken codes, list-major */
  codes: Uint8Array;
}

export interface BuildWarpLayoutInput {
  /** T x dims token vectors of the segment, in document order */
  vectors: Float32Array;
  dims: number;
  /** documents + 1 offsets into the token rows */
  tokenOffsets: Uint32Array;
  /** K x dims, the collection's IVF centroids */
  centroids: Float32Array;
  /** the collection's residual codec (same dims) */
  codec: WarpCodec;
  /** T centroid indices, when already computed (e.g. by an ONNX Runtime GEMM); else `assign` */
  assignment?: Uint32Array;
  /** default assignNearest */
  assign?: AssignFn;
  /** centroidsChecksum(centroids), when the caller has it */
  centroidsChecksum?: number;
}

/**
 * Builds a segment's layout: each token row goes to the list of its nearest centroid (a
 * counting sort, stable, so within a list rows stay in document order) and is encoded there.
 */
export function buildWarpLayout(input: BuildWarpLayoutInput): WarpLayout {
  const fn = 'buildWarpLayout';
  const { vectors, dims: d, tokenOffsets, centroids, codec } = input;
  if (!Number.isInteger(d) || d < 1) throw new RangeError(`${fn}: dims must be an integer >= 1, got ${d}`);
  if (codec.dims !== d) throw new RangeError(`${fn}: codec has dims ${codec.dims}, the vectors ${d}`);
  assertWarpCodec(fn, codec);
  if (centroids.length === 0 || centroids.length % d !== 0) throw new RangeError(`${fn}: centroids has length ${centroids.length}, expected K x dims with K >= 1`);
  const K = centroids.length / d;
  const D = tokenOffsets.length - 1;
  if (D < 0) throw new RangeError(`${fn}: tokenOffsets must have documents + 1 entries`);
  const T = tokenOffsets[D];
  if (vectors.length !== T * d) throw new RangeError(`${fn}: vectors has length ${vectors.length}, expected T x dims = ${T} x ${d}`);
  for (let i = 0; i < D; i++) if (tokenOffsets[i + 1] < tokenOffsets[i]) throw new RangeError(`${fn}: tokenOffsets must be non-decreasing (at document ${i})`);
  let assignment = input.assignment;
  if (assignment) {
    if (assignment.length !== T) throw new RangeError(`${fn}: assignment has ${assignment.length} entries, expected T = ${T}`);
    for (let r = 0; r < T; r++) if (assignment[r] >= K) throw new RangeError(`${fn}: assignment[${r}] = ${assignment[r]} is not a centroid (K = ${K})`);
  } else {
    assignment = T === 0 ? new Uint32Array(0) : (input.assign ?? assignNearest)(vectors, T, centroids, K, d).index;
  }
  const listOffsets = new Uint32Array(K + 1);
  for (let r = 0; r < T; r++) listOffsets[assignment[r] + 1]++;
  for (let c = 0; c < K; c++) listOffsets[c + 1] += listOffsets[c];
  const bpt = warpCodeBytes(d, codec.bits);
  const docIdBytes = D <= WARP_U16_DOCUMENTS ? 2 : 4;
  const docs = docIdBytes === 2 ? new Uint16Array(T) : new Uint32Array(T);
  const codes = new Uint8Array(T * bpt);
  const cursor = listOffsets.slice(0, K);
  for (let doc = 0; doc < D; doc++) {
    for (let r = tokenOffsets[doc]; r < tokenOffsets[doc + 1]; r++) {
      const c = assignment[r];
      const e = cursor[c]++;
      docs[e] = doc;
      encodeWarpResidualInto(codec, vectors, r * d, centroids, c * d, codes, e * bpt);
    }
  }
  return {
    dims: d, bits: codec.bits, centroidCount: K, documents: D, tokens: T, bytesPerToken: bpt, docIdBytes,
    centroidsChecksum: input.centroidsChecksum ?? centroidsChecksum(centroids), codecChecksum: warpCodecChecksum(codec),
    listOffsets, docs, codes,
  };
}

/** The lists of an in-memory layout (views, no copy). */
export function warpLayoutLists(layout: WarpLayout): WarpListSource {
  const { listOffsets, docs, codes, bytesPerToken: bpt, centroidCount: K } = layout;
  return {
    list(c: number): WarpList {
      if (!(Number.isInteger(c) && c >= 0 && c < K)) throw new RangeError(`warp layout: centroid ${c} is out of range (K = ${K})`);
      const a = listOffsets[c], b = listOffsets[c + 1];
      const listCodes = codes.subarray(a * bpt, b * bpt);
      return { count: b - a, docs: docs.subarray(a, b), codes: listCodes, words: warpCodeWords(listCodes, bpt) };
    },
  };
}

const pad8 = (x: number) => Math.ceil(x / 8) * 8;

/** Bytes of a list of `count` entries in the serialised form: ids padded to 8, then codes padded to 8. */
export function warpListBytes(count: number, docIdBytes: number, bytesPerToken: number): number {
  return pad8(count * docIdBytes) + pad8(count * bytesPerToken);
}

/** Bytes of the header and directory for K centroids: what a reader fetches first. */
export function warpDirectoryBytes(K: number): number {
  return WARP_HEADER_BYTES + pad8(K * WARP_DIRECTORY_ENTRY_BYTES);
}

/**
 * Serialises a layout (docs/segment-format.md, "Search layout (centroid-major)"): header,
 * directory, then each centroid's list in centroid order.
 */
export function serializeWarpLayout(layout: WarpLayout): Uint8Array {
  const K = layout.centroidCount;
  const { docIdBytes, bytesPerToken: bpt, listOffsets } = layout;
  const dataOffset = warpDirectoryBytes(K);
  let dataLength = 0;
  for (let c = 0; c < K; c++) dataLength += warpListBytes(listOffsets[c + 1] - listOffsets[c], docIdBytes, bpt);
  const out = new Uint8Array(dataOffset + dataLength);
  const view = new DataView(out.buffer);
  let at = dataOffset;
  for (let c = 0; c < K; c++) {
    const a = listOffsets[c], b = listOffsets[c + 1];
    const count = b - a;
    const start = at;
    for (let e = a; e < b; e++, at += docIdBytes) {
      if (docIdBytes === 2) view.setUint16(at, layout.docs[e], true);
      else view.setUint32(at, layout.docs[e], true);
    }
    out.set(layout.codes.subarray(a * bpt, b * bpt), start + pad8(count * docIdBytes));
    at = start + warpListBytes(count, docIdBytes, bpt);
    view.setUint32(WARP_HEADER_BYTES + c * WARP_DIRECTORY_ENTRY_BYTES, count, true);
    view.setUint32(WARP_HEADER_BYTES + c * WARP_DIRECTORY_ENTRY_BYTES + 4, crc32(out.subarray(start, at)) >>> 0, true);
  }
  for (let i = 0; i < 4; i++) out[i] = WARP_LAYOUT_MAGIC.charCodeAt(i);
  view.setUint32(4, WARP_LAYOUT_VERSION, true);
  view.setUint32(8, layout.dims, true);
  out[12] = layout.bits;
  out[13] = docIdBytes;
  view.setUint32(16, K, true);
  view.setUint32(20, layout.documents, true);
  view.setUint32(24, layout.tokens, true);
  view.setUint32(28, bpt, true);
  view.setUint32(32, layout.centroidsChecksum, true);
  view.setUint32(36, layout.codecChecksum, true);
  view.setUint32(40, dataOffset, true);
  view.setUint32(44, dataLength % 2 ** 32, true);
  view.setUint32(48, Math.floor(dataLength / 2 ** 32), true);
  view.setUint32(52, crc32(out.subarray(WARP_HEADER_BYTES, dataOffset)) >>> 0, true);
  view.setUint32(60, crc32(out.subarray(0, 60)) >>> 0, true);
  return out;
}

/**
 * A layout failed validation: the header or directory (section `header`, `directory`) or one
 * list's range (section `list <centroid>`). Like a corrupt segment: never retried; a search
 * answers from the other segments, degraded.
 */
export class WarpLayoutCorruptError extends SegmentCorruptError {
  constructor(
    layout: string,
    section: string,
    detail: string,
    /** the centroid whose list is corrupt; -1 for the header or directory */
    readonly centroid = -1,
  ) {
    super(layout, section, detail);
    this.name = 'WarpLayoutCorruptError';
    this.message = `search layout "${layout}" is corrupt in section "${section}": ${detail}`;
  }
}

/** What a reader may require of a layout (the collection's IVF and codec version). */
export interface WarpLayoutExpectations {
  centroidsChecksum?: number;
  codecChecksum?: number;
  centroidCount?: number;
  dims?: number;
  bits?: number;
  documents?: number;
}

/** A layout's header and directory, verified: kept in memory for every segment. */
export interface WarpDirectory extends WarpLayoutHeader {
  name: string;
  /** K entry counts */
  counts: Uint32Array;
  /** K CRC-32s, one per list range */
  checksums: Uint32Array;
  /** K + 1 absolute byte offsets: list c is bytes [offsets[c], offsets[c + 1]) of the object */
  offsets: Float64Array;
  /** bytes of the whole object */
  byteLength: number;
}

/**
 * Parses and verifies a layout's header and directory from its first bytes (at least
 * warpDirectoryBytes(K); the whole object also works). Throws WarpLayoutCorruptError naming
 * `name` and the section.
 */
export function parseWarpDirectory(bytes: Uint8Array, name: string, expect: WarpLayoutExpectations = {}): WarpDirectory {
  const fail = (section: string, detail: string): never => {
    throw new WarpLayoutCorruptError(name, section, detail);
  };
  if (bytes.length < WARP_HEADER_BYTES) fail('header', `${bytes.length} bytes is shorter than the ${WARP_HEADER_BYTES}-byte header (truncated)`);
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const magic = String.fromCharCode(bytes[0], bytes[1], bytes[2], bytes[3]);
  if (magic !== WARP_LAYOUT_MAGIC) fail('header', `bad magic ${JSON.stringify(magic)}, expected ${WARP_LAYOUT_MAGIC}`);
  if ((crc32(bytes.subarray(0, 60)) >>> 0) !== view.getUint32(60, true)) fail('header', 'checksum mismatch (corrupted)');
  const version = view.getUint32(4, true);
  if (version !== WARP_LAYOUT_VERSION) fail('header', `version ${version} is not supported (this reader reads ${WARP_LAYOUT_VERSION})`);
  const dims = view.getUint32(8, true);
  const bits = bytes[12];
  const docIdBytes = bytes[13];
  const K = view.getUint32(16, true);
  const documents = view.getUint32(20, true);
  const tokens = view.getUint32(24, true);
  const bpt = view.getUint32(28, true);
  const dataOffset = view.getUint32(40, true);
  const dataLength = view.getUint32(44, true) + view.getUint32(48, true) * 2 ** 32;
  if (bits !== 2 && bits !== 4) fail('header', `bits ${bits} is not 2 or 4`);
  if (docIdBytes !== 2 && docIdBytes !== 4) fail('header', `document id width ${docIdBytes} is not 2 or 4`);
  if (docIdBytes === 2 && documents > WARP_U16_DOCUMENTS) fail('header', `${documents} documents do not fit 16-bit ids`);
  if (dims < 1 || bpt !== warpCodeBytes(dims, bits)) fail('header', `bytes per token ${bpt} does not match dims ${dims} x ${bits} bits`);
  if (K < 1 || dataOffset !== warpDirectoryBytes(K)) fail('header', `data offset ${dataOffset} does not match K = ${K}`);
  if (bytes.length < dataOffset) fail('directory', `${bytes.length} bytes is shorter than the header and directory (${dataOffset}; truncated)`);
  if ((crc32(bytes.subarray(WARP_HEADER_BYTES, dataOffset)) >>> 0) !== view.getUint32(52, true)) fail('directory', 'checksum mismatch (corrupted)');
  const counts = new Uint32Array(K);
  const checksums = new Uint32Array(K);
  const offsets = new Float64Array(K + 1);
  offsets[0] = dataOffset;
  let total = 0;
  for (let c = 0; c < K; c++) {
    const e = WARP_HEADER_BYTES + c * WARP_DIRECTORY_ENTRY_BYTES;
    counts[c] = view.getUint32(e, true);
    checksums[c] = view.getUint32(e + 4, true);
    total += counts[c];
    offsets[c + 1] = offsets[c] + warpListBytes(counts[c], docIdBytes, bpt);
  }
  // checksums passed: these catch writer bugs and crafted files
  if (total !== tokens) fail('directory', `list counts sum to ${total}, the header says ${tokens} tokens`);
  if (offsets[K] - dataOffset !== dataLength) fail('directory', `lists take ${offsets[K] - dataOffset} bytes, the header says ${dataLength}`);
  const dir: WarpDirectory = {
    name, dims, bits: bits as WarpBits, centroidCount: K, documents, tokens, bytesPerToken: bpt, docIdBytes: docIdBytes as 2 | 4,
    centroidsChecksum: view.getUint32(32, true), codecChecksum: view.getUint32(36, true), counts, checksums, offsets, byteLength: offsets[K],
  };
  const expected: [keyof WarpLayoutExpectations, number][] = [
    ['centroidsChecksum', dir.centroidsChecksum], ['codecChecksum', dir.codecChecksum], ['centroidCount', K], ['dims', dims], ['bits', bits], ['documents', documents],
  ];
  for (const [key, got] of expected) {
    const want = expect[key];
    if (want !== undefined && want !== got) fail('header', `${key} is ${got}, expected ${want} (built for another collection, IVF or codec version?)`);
  }
  return dir;
}

/** The byte range [offset, offset + length) of centroid c's list in the object. */
export function warpListRange(dir: WarpDirectory, c: number): { offset: number; length: number } {
  if (!(Number.isInteger(c) && c >= 0 && c < dir.centroidCount)) throw new RangeError(`warpListRange: centroid ${c} is out of range (K = ${dir.centroidCount})`);
  return { offset: dir.offsets[c], length: dir.offsets[c + 1] - dir.offsets[c] };
}

/**
 * Centroid c's list from exactly its byte range (a ranged read, or a subarray of the whole
 * object), verified against the directory's CRC-32: a mismatch throws WarpLayoutCorruptError
 * (section `list <c>`). The views share `range`'s memory when its alignment allows.
 */
export function readWarpList(dir: WarpDirectory, c: number, range: Uint8Array): WarpList {
  const { offset, length } = warpListRange(dir, c);
  const section = `list ${c}`;
  if (range.length !== length) throw new WarpLayoutCorruptError(dir.name, section, `range has ${range.length} bytes, the directory says ${length} (bytes ${offset}..${offset + length}; truncated?)`, c);
  if ((crc32(range) >>> 0) !== dir.checksums[c]) throw new WarpLayoutCorruptError(dir.name, section, `checksum mismatch in bytes ${offset}..${offset + length} (corrupted)`, c);
  return listView(dir, c, range);
}

function listView(dir: WarpDirectory, c: number, range: Uint8Array): WarpList {
  const count = dir.counts[c];
  const w = dir.docIdBytes;
  const docBytes = count * w;
  let docs: Uint16Array | Uint32Array;
  if ((range.byteOffset & (w - 1)) === 0) docs = w === 2 ? new Uint16Array(range.buffer, range.byteOffset, count) : new Uint32Array(range.buffer, range.byteOffset, count);
  else {
    // a ranged read into an unaligned buffer: copy the ids (codes stay a view)
    const copy = range.slice(0, docBytes);
    docs = w === 2 ? new Uint16Array(copy.buffer, 0, count) : new Uint32Array(copy.buffer, 0, count);
  }
  const at = pad8(docBytes);
  const codes = range.subarray(at, at + count * dir.bytesPerToken);
  return { count, docs, codes, words: warpCodeWords(codes, dir.bytesPerToken) };
}

/** A whole layout object in memory: directory verified on open, each list on its first read. */
export interface WarpLayoutReader extends WarpListSource {
  directory: WarpDirectory;
  /** lists verified so far */
  readonly verified: number;
}

/**
 * Opens a serialised layout held whole (tests, a scorer that cached the object): the header and
 * directory are verified now; a list's range is verified when it is first read, and only then
 * (unread ranges are never touched).
 */
export function openWarpLayout(bytes: Uint8Array, name: string, expect: WarpLayoutExpectations = {}): WarpLayoutReader {
  const directory = parseWarpDirectory(bytes, name, expect);
  if (bytes.length !== directory.byteLength) {
    throw new WarpLayoutCorruptError(name, 'directory', `object has ${bytes.length} bytes, the directory says ${directory.byteLength} (truncated?)`);
  }
  const K = directory.centroidCount;
  // Each list's views, kept once verified: a scorer holding the layout reads the same lists query after query.
  const views: (WarpList | undefined)[] = new Array(K);
  let verified = 0;
  return {
    directory,
    get verified() {
      return verified;
    },
    list(c: number): WarpList {
      const kept = views[c];
      if (kept) return kept;
      const { offset, length } = warpListRange(directory, c);
      const list = readWarpList(directory, c, bytes.subarray(offset, offset + length));
      views[c] = list;
      verified++;
      return list;
    },
  };
}

/**
 * The collection-wide list sizes (K): the sum over segments of each centroid's count. WARP's
 * imputation must use these, not one segment's (SPEC 3.5 trap).
 */
export function warpListSizes(segments: readonly { counts?: Uint32Array; listOffsets?: Uint32Array; centroidCount: number }[]): Float64Array {
  if (segments.length === 0) return new Float64Array(0);
  const K = segments[0].centroidCount;
  const out = new Float64Array(K);
  for (const s of segments) {
    if (s.centroidCount !== K) throw new RangeError(`warpListSizes: segments have ${s.centroidCount} and ${K} centroids`);
    if (s.counts) for (let c = 0; c < K; c++) out[c] += s.counts[c];
    else if (s.listOffsets) for (let c = 0; c < K; c++) out[c] += s.listOffsets[c + 1] - s.listOffsets[c];
    else throw new RangeError('warpListSizes: a segment has neither counts (a directory) nor listOffsets (a layout)');
  }
  return out;
}
