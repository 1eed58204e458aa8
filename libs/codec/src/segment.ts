import { crc32c } from './crc32c';
import { SegmentCorruptError } from './errors';
import { decodeHalf, encodeHalf } from './float16';
import { bytesOf, viewAs, type Codec, type CodecDescriptor, type DocKey, type EncodedDoc, type EncodedVectors } from './codec';
import { buildPrefixSection, prefixRowBytes, PREFIX_ROWS_MAX, splitPrefixSection, type PrefixRowBytes, type PrefixSection } from './prefix-section';
import { codecFromDescriptor, type CodecArtifact } from './create-codec';
import { POOL_FACTOR_MAX } from './token-pooling';

/** Documents to write into one segment. */
export interface SegmentDocs {
  docIds: string[];
  /** docs + 1 entries, offsets into the token arrays. */
  tokenOffsets: Uint32Array;
  /** T token ids. */
  tokenIds: Int32Array;
  /** T x dims, row-major. */
  vectors: Float32Array;
  dims: number;
  /** docs x dims pooled per-document vectors. */
  docVectors?: Float32Array;
  metadata?: (Record<string, unknown> | null)[];
  /** T x staticDims static token embeddings (sideInfo codecs only; not stored). */
  staticEmbeddings?: Float32Array;
}

export interface WriteSegmentOptions {
  /** 64-bit seed recorded in the header; EDEN derives its random signs from it. Default: the codec's artifact seed, else 0. */
  seed?: bigint | number;
  /** Storage of docVectors; default fp32. */
  docVectors?: 'fp32' | 'fp16';
  /**
   * The token pooling factor the rows were pooled with (token-pooling.ts), recorded in the codec
   * descriptor as `poolFactor` when above 1; default 1 (nothing recorded).
   */
  poolFactor?: number;
  /**
   * ME-BERT's prefix section (format v2, docs/segment-format.md, prefix-section.ts): each
   * document's first min(prefixRows, tokens_i) rows in the codec's own codes (the bytes the code
   * and norm sections hold for them), so ME-BERT scans them without the code sections. Written
   * only for codecs whose rows code on their own (prefixRowBytes: fp32, fp16, int8, EDEN token
   * layout); for the others, and for 0 (default), none, and the segment is written in format v1,
   * byte for byte as before. At most PREFIX_ROWS_MAX.
   */
  prefixRows?: number;
  /**
   * The rows already in `codec`'s codes, as `codec.encode(docs.vectors, ...)` would return them
   * (the compress stage's raw fp16 codes, which a plain fp16 codec stores as they are):
   * docs.vectors is then not read and may be empty. Their lengths are checked against the codec's.
   */
  coded?: EncodedVectors;
}

export interface ReadSegmentOptions {
  /** sideInfo codecs: the static embedding of doc i's tokens (tokens_i x staticDims). */
  staticEmbeddings?: (doc: number, tokenIds: Int32Array) => Float32Array;
}

export interface SegmentReader {
  readonly name: string;
  readonly version: number;
  readonly codec: CodecDescriptor;
  readonly seed: bigint;
  readonly documents: number;
  readonly tokens: number;
  readonly dims: number;
  readonly docIds: string[];
  readonly tokenOffsets: Uint32Array;
  readonly tokenIds: Int32Array;
  readonly docVectors: Float32Array | null;
  metadata(i: number): Record<string, unknown> | null;
  /** tokens_i x dims, reconstructed fp32. */
  decodeDoc(i: number): Float32Array;
  /**
   * The first min(m, tokens_i) rows of doc i, min(m, tokens_i) x dims: equal to the first rows
   * of decodeDoc(i). EDEN's token layout codes every token on its own, so only those tokens are
   * decoded (ME-BERT reads the first m of every document); other codecs decode the document.
   */
  decodeDocPrefix(i: number, m: number): Float32Array;
  /** T x dims. */
  decodeAll(): Float32Array;
  /**
   * EDEN token layout: the codes and norms of every token row (row r's codes at r x the row's
   * bytes, its norm the r-th), for scoring rows straight from their codes (EdenCodec.queryLut);
   * null for other codecs.
   */
  rowCodes(): { codes: Uint8Array; norms: Uint8Array } | null;
  /** The code and norm sections as stored, every document's in order (the reader's own bytes, not copied: read only). */
  codedVectors(): { codes: Uint8Array; norms: Uint8Array };
  /** The coded bytes of doc i (codes and norms), for compressed-domain scoring. */
  encodedDoc(i: number): { codes: Uint8Array; norms: Uint8Array };
  /** How docVectors are stored (the header's format). */
  readonly docVectorFormat: DocVectorFormat;
  /** The stored bytes of doc i's pooled vector (empty when the segment has none): copied as they are by SegmentCopier. */
  docVectorBytes(i: number): Uint8Array;
  /** Bytes per section, plus `header` and `total`. */
  sectionSizes(): Record<string, number>;
  /** Rows per document in the prefix section (format v2's header byte 7); 0: the segment has none (format v1). */
  readonly prefixRows: number;
  /** The prefix section split (codes, norms, each document's first row); null when prefixRows is 0. */
  readonly prefix: PrefixSection | null;
  /** A row's code and norm bytes when the codec codes rows on their own (prefix-section.ts), else null: whether a prefix section can be written. */
  readonly rowBytes: PrefixRowBytes | null;
}

/**
 * The first k of a document's `len` decoded rows (k x dims): EDEN's token layout codes each token
 * on its own, so only those are decoded; other codecs decode the document and keep its first k.
 */
function decodePrefix(codec: Codec, tokenwise: boolean, enc: EncodedDoc, len: number, k: number, dims: number, key: DocKey, side: Float32Array | undefined): Float32Array {
  if (k === len) return codec.decodeDoc(enc, len, dims, key, side);
  if (!tokenwise) return codec.decodeDoc(enc, len, dims, key, side).slice(0, k * dims);
  return codec.decodeDoc(enc, k, dims, key, side?.subarray(0, k * (side.length / len)));
}

export const SEGMENT_MAGIC = 'LSEG';
/** Newest format written: v2 when a segment has a prefix section, else v1 (both read). */
export const SEGMENT_VERSION = 2;
const FIXED_HEADER = 40;
const SECTION_ENTRY = 16;
/** Section ids in file order; v1 always writes the first seven (possibly empty), v2 all eight (PFXV: the prefix section). */
export const SECTION_IDS = ['DIDS', 'TOFF', 'TIDS', 'NORM', 'CODE', 'DVEC', 'META', 'PFXV'] as const;
type SectionId = (typeof SECTION_IDS)[number];
/** Sections of each format version, in file order. */
const VERSION_SECTIONS: Record<number, readonly SectionId[]> = { 1: SECTION_IDS.slice(0, 7), 2: SECTION_IDS };
const SECTION_NAMES: Record<SectionId, string> = {
  DIDS: 'docIds',
  TOFF: 'tokenOffsets',
  TIDS: 'tokenIds',
  NORM: 'norms',
  CODE: 'codes',
  DVEC: 'docVectors',
  META: 'metadata',
  PFXV: 'prefixCodes',
};
/**
 * Byte offset of each section in a segment's object, by section name (docIds, tokenOffsets, ...),
 * from a reader's sectionSizes(): the sections tile the object in SECTION_IDS order after the
 * header. For positioned reads of a local copy (a candidate's codes without the whole object).
 */
export function segmentSectionOffsets(sizes: Record<string, number>): Record<string, number> {
  const out: Record<string, number> = {};
  let at = sizes.header;
  if (!Number.isInteger(at)) throw new RangeError('segmentSectionOffsets: sizes has no header length');
  for (const id of SECTION_IDS) {
    const name = SECTION_NAMES[id];
    out[name] = at;
    at += sizes[name] ?? 0; // a v1 segment has no prefix section
  }
  if (at !== sizes.total) throw new RangeError(`segmentSectionOffsets: sections end at ${at}, the object is ${sizes.total} bytes`);
  return out;
}

const DOC_VECTOR_FORMATS = { none: 0, fp32: 1, fp16: 2 } as const;
export type DocVectorFormat = keyof typeof DOC_VECTOR_FORMATS;

if (new Uint8Array(new Uint16Array([1]).buffer)[0] !== 1) throw new Error('@lateral/codec assumes a little-endian host');

export const utf8 = new TextEncoder();
const utf8Strict = new TextDecoder('utf-8', { fatal: true });

function seedBigInt(seed: bigint | number | undefined): bigint {
  return BigInt.asUintN(64, BigInt(seed ?? 0));
}

/**
 * Serialises documents and their coded vectors into one immutable segment (format v1, see
 * docs/segment-format.md). Every byte is covered by a CRC32C: the header by its own, each
 * section by its entry in the (checksummed) section table.
 */
export function writeSegment(docs: SegmentDocs, codec: Codec, opts: WriteSegmentOptions = {}): Uint8Array {
  const n = docs.docIds.length;
  const { dims, tokenOffsets } = docs;
  if (!Number.isInteger(dims) || dims < 1) throw new RangeError(`dims must be a positive integer, got ${dims}`);
  if (tokenOffsets.length !== n + 1 || tokenOffsets[0] !== 0) throw new RangeError(`tokenOffsets must have docs + 1 = ${n + 1} entries starting at 0`);
  for (let i = 0; i < n; i++) if (tokenOffsets[i + 1] < tokenOffsets[i]) throw new RangeError(`tokenOffsets must be non-decreasing (doc ${i})`);
  const T = tokenOffsets[n];
  if (docs.tokenIds.length !== T) throw new RangeError(`tokenIds has ${docs.tokenIds.length} entries, expected ${T}`);
  if (!opts.coded && docs.vectors.length !== T * dims) throw new RangeError(`vectors has ${docs.vectors.length} values, expected T x dims = ${T * dims}`);
  if (docs.docVectors && docs.docVectors.length !== n * dims) throw new RangeError(`docVectors has ${docs.docVectors.length} values, expected docs x dims = ${n * dims}`);
  if (docs.metadata && docs.metadata.length !== n) throw new RangeError(`metadata has ${docs.metadata.length} entries, expected ${n}`);
  const seed = seedBigInt(opts.seed ?? codec.defaultSeed);
  const keys: DocKey[] = docs.docIds.map((docId) => ({ docId, seed }));
  const encoded = opts.coded ? checkedCoded(opts.coded, codec, tokenOffsets, dims) : codec.encode(docs.vectors, tokenOffsets, dims, keys, docs.staticEmbeddings);

  const dvFormat = docs.docVectors ? (opts.docVectors ?? 'fp32') : 'none';
  const dvec = !docs.docVectors ? new Uint8Array(0) : dvFormat === 'fp16' ? bytesOf(encodeHalf(docs.docVectors)) : bytesOf(docs.docVectors);
  const meta = docs.metadata && docs.metadata.some((m) => m !== null) ? utf8.encode(JSON.stringify(docs.metadata)) : new Uint8Array(0);
  const prefixRows = opts.prefixRows ?? 0;
  if (!Number.isInteger(prefixRows) || prefixRows < 0 || prefixRows > PREFIX_ROWS_MAX) throw new RangeError(`prefixRows must be an integer in 0..${PREFIX_ROWS_MAX}, got ${prefixRows}`);
  // The prefix rows in the codec's own codes (the bytes the code and norm sections hold for them); none for a codec whose rows do not code on their own.
  const rowBytes = prefixRows > 0 ? prefixRowBytes(codec, dims) : null;
  const written = rowBytes ? prefixRows : 0;
  const pfxv = rowBytes ? buildPrefixSection(encoded.codes, encoded.norms, tokenOffsets, prefixRows, rowBytes) : new Uint8Array(0);
  const sections: Record<SectionId, Uint8Array> = {
    DIDS: utf8.encode(JSON.stringify(docs.docIds)),
    TOFF: bytesOf(tokenOffsets),
    TIDS: bytesOf(docs.tokenIds),
    NORM: encoded.norms,
    CODE: encoded.codes,
    DVEC: dvec,
    META: meta,
    PFXV: pfxv,
  };

  const pool = opts.poolFactor ?? 1;
  if (!Number.isInteger(pool) || pool < 1 || pool > POOL_FACTOR_MAX) throw new RangeError(`poolFactor must be an integer in 1..${POOL_FACTOR_MAX}, got ${pool}`);
  if (pool > 1 && codec.descriptor.sideInfo) throw new RangeError('poolFactor > 1 cannot be written with a side-information codec (its rows need one token id each)');
  // poolFactor 1 writes the codec's descriptor alone: the bytes of an unpooled segment do not change.
  const descriptor = utf8.encode(JSON.stringify(pool > 1 ? { ...codec.descriptor, poolFactor: pool } : codec.descriptor));
  return assemble({ documents: n, tokens: T, dims, seed, dvFormat, descriptor, prefixRows: written }, Object.fromEntries(SECTION_IDS.map((id) => [id, [sections[id]]])) as Record<SectionId, Uint8Array[]>);
}

/** WriteSegmentOptions.coded, when its code and norm bytes are what `codec` writes for these documents' token counts. */
function checkedCoded(coded: EncodedVectors, codec: Codec, tokenOffsets: Uint32Array, dims: number): EncodedVectors {
  let codes = 0;
  let norms = 0;
  for (let i = 0; i + 1 < tokenOffsets.length; i++) {
    const b = codec.docBytes(tokenOffsets[i + 1] - tokenOffsets[i], dims);
    codes += b.codes;
    norms += b.norms;
  }
  if (coded.codes.length !== codes || coded.norms.length !== norms) throw new RangeError(`coded vectors have ${coded.codes.length} code and ${coded.norms.length} norm bytes, the codec writes ${codes} and ${norms}`);
  return coded;
}

/**
 * Lays out a segment: the header (fixed fields, section table, descriptor, header CRC), then
 * every section, each the concatenation of its parts (copied once into the output). Format v1
 * (seven sections) when prefixRows is 0, else v2 (eight, the prefix section last; header byte 7
 * holds prefixRows).
 */
export function assemble(
  h: { documents: number; tokens: number; dims: number; seed: bigint; dvFormat: DocVectorFormat; descriptor: Uint8Array; prefixRows: number },
  sections: Record<SectionId, Uint8Array[]>,
): Uint8Array {
  const { descriptor } = h;
  const version = h.prefixRows > 0 ? 2 : 1;
  const ids = VERSION_SECTIONS[version];
  const lengths = ids.map((id) => sections[id].reduce((s, x) => s + x.length, 0));
  const headerLength = FIXED_HEADER + ids.length * SECTION_ENTRY + descriptor.length + 4;
  let total = headerLength;
  for (const len of lengths) total += len;
  if (total > 0xffffffff) throw new RangeError(`segment of ${total} bytes exceeds the 4 GiB limit of format v1`);
  const out = new Uint8Array(total);
  const view = new DataView(out.buffer);
  out.set(utf8.encode(SEGMENT_MAGIC), 0);
  view.setUint16(4, version, true);
  view.setUint8(6, DOC_VECTOR_FORMATS[h.dvFormat]);
  view.setUint8(7, h.prefixRows);
  view.setUint32(8, headerLength, true);
  view.setUint32(12, h.documents, true);
  view.setUint32(16, h.tokens, true);
  view.setUint32(20, h.dims, true);
  view.setBigUint64(24, h.seed, true);
  view.setUint16(32, ids.length, true);
  view.setUint32(36, descriptor.length, true);
  let offset = headerLength;
  ids.forEach((id, k) => {
    const e = FIXED_HEADER + k * SECTION_ENTRY;
    const start = offset;
    for (const part of sections[id]) {
      out.set(part, offset);
      offset += part.length;
    }
    out.set(utf8.encode(id), e);
    view.setUint32(e + 4, start, true);
    view.setUint32(e + 8, lengths[k], true);
    view.setUint32(e + 12, crc32c(out.subarray(start, offset)), true);
  });
  out.set(descriptor, FIXED_HEADER + ids.length * SECTION_ENTRY);
  view.setUint32(headerLength - 4, crc32c(out.subarray(0, headerLength - 4)), true);
  return out;
}

/**
 * Opens a segment, validating the header checksum, every section checksum, that the sections
 * tile the file exactly, and that their contents agree with the header. Anything wrong throws
 * SegmentCorruptError naming the segment and the section. `artifact` is required by fitted codecs.
 */
export function readSegment(bytes: Uint8Array, name: string, artifact?: CodecArtifact, opts: ReadSegmentOptions = {}): SegmentReader {
  const fail = (section: string, detail: string): never => {
    throw new SegmentCorruptError(name, section, detail);
  };
  if (bytes.length < FIXED_HEADER + 4) fail('header', `${bytes.length} bytes is shorter than the fixed header`);
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const magic = String.fromCharCode(bytes[0], bytes[1], bytes[2], bytes[3]);
  if (magic !== SEGMENT_MAGIC) fail('header', `bad magic ${JSON.stringify(magic)}`);
  const headerLength = view.getUint32(8, true);
  if (headerLength < FIXED_HEADER + 4 || headerLength > bytes.length) fail('header', `header length ${headerLength} out of range (file is ${bytes.length} bytes)`);
  const headerCrc = view.getUint32(headerLength - 4, true);
  if (crc32c(bytes.subarray(0, headerLength - 4)) !== headerCrc) fail('header', 'checksum mismatch (truncated or corrupted)');
  // From here on the header bytes are exactly what the writer produced.
  const version = view.getUint16(4, true);
  const ids = VERSION_SECTIONS[version];
  if (!ids) fail('header', `unsupported version ${version}`);
  // v2: header byte 7 is the prefix section's rows per document (v1: reserved, 0).
  const prefixRows = version === 2 ? view.getUint8(7) : 0;
  if (version === 2 && (prefixRows < 1 || prefixRows > PREFIX_ROWS_MAX)) fail('header', `prefix rows ${prefixRows} out of range 1..${PREFIX_ROWS_MAX}`);
  const dvCode = view.getUint8(6);
  const dvFormat = (Object.keys(DOC_VECTOR_FORMATS) as (keyof typeof DOC_VECTOR_FORMATS)[]).find((k) => DOC_VECTOR_FORMATS[k] === dvCode);
  if (dvFormat === undefined) fail('header', `unknown docVectors format ${dvCode}`);
  const documents = view.getUint32(12, true);
  const tokens = view.getUint32(16, true);
  const dims = view.getUint32(20, true);
  if (dims < 1) fail('header', 'dims is 0');
  const seed = view.getBigUint64(24, true);
  const sectionCount = view.getUint16(32, true);
  const descriptorLength = view.getUint32(36, true);
  if (sectionCount !== ids.length) fail('header', `expected ${ids.length} sections in version ${version}, found ${sectionCount}`);
  const descStart = FIXED_HEADER + sectionCount * SECTION_ENTRY;
  if (descStart + descriptorLength + 4 !== headerLength) fail('header', 'descriptor length disagrees with header length');
  let descriptor: CodecDescriptor;
  try {
    descriptor = JSON.parse(utf8Strict.decode(bytes.subarray(descStart, descStart + descriptorLength))) as CodecDescriptor;
  } catch (e) {
    return fail('header', `codec descriptor is not JSON: ${(e as Error).message}`);
  }
  let codec: Codec;
  try {
    // Token pooling is recorded beside the codec's own fields (absent = 1, unpooled).
    const { poolFactor, ...codecFields } = descriptor ?? ({} as CodecDescriptor);
    if (poolFactor !== undefined && (!Number.isInteger(poolFactor) || poolFactor < 2 || poolFactor > POOL_FACTOR_MAX)) {
      throw new Error(`poolFactor ${JSON.stringify(poolFactor)} is not an integer in 2..${POOL_FACTOR_MAX}`);
    }
    if (poolFactor !== undefined && codecFields.sideInfo) throw new Error('poolFactor with side information');
    codec = codecFromDescriptor(codecFields as CodecDescriptor, artifact);
  } catch (e) {
    return fail('header', `codec descriptor unusable: ${(e as Error).message}`);
  }
  if (descriptor.artifact && artifact && artifact.inputDims !== dims) fail('header', `dims ${dims} differ from the artifact's ${artifact.inputDims}`);

  const sec = { PFXV: new Uint8Array(0) } as Record<SectionId, Uint8Array>;
  const sizes: Record<string, number> = { header: headerLength };
  let expected = headerLength;
  ids.forEach((id, k) => {
    const e = FIXED_HEADER + k * SECTION_ENTRY;
    const label = SECTION_NAMES[id];
    const got = String.fromCharCode(bytes[e], bytes[e + 1], bytes[e + 2], bytes[e + 3]);
    if (got !== id) fail(label, `section ${k} is ${JSON.stringify(got)}, expected ${id}`);
    const off = view.getUint32(e + 4, true);
    const len = view.getUint32(e + 8, true);
    if (off !== expected) fail(label, `starts at ${off}, expected ${expected} (sections must tile the file)`);
    if (off + len > bytes.length) fail(label, `ends at ${off + len}, past the end of the ${bytes.length}-byte file (truncated)`);
    sec[id] = bytes.subarray(off, off + len);
    if (crc32c(sec[id]) !== view.getUint32(e + 12, true)) fail(label, 'checksum mismatch');
    sizes[label] = len;
    expected = off + len;
  });
  if (expected !== bytes.length) fail(SECTION_NAMES[ids[ids.length - 1]], `${bytes.length - expected} trailing bytes after the last section`);
  sizes.total = bytes.length;

  // Contents: checksums passed, so these only fail on writer bugs or a mismatched artifact.
  let docIds: unknown;
  try {
    docIds = JSON.parse(utf8Strict.decode(sec.DIDS));
  } catch (e) {
    return fail('docIds', `not JSON: ${(e as Error).message}`);
  }
  if (!Array.isArray(docIds) || docIds.length !== documents || !docIds.every((d) => typeof d === 'string')) fail('docIds', `expected ${documents} strings`);
  if (sec.TOFF.length !== (documents + 1) * 4) fail('tokenOffsets', `${sec.TOFF.length} bytes, expected ${(documents + 1) * 4}`);
  const tokenOffsets = viewAs(sec.TOFF, Uint32Array);
  if (tokenOffsets[0] !== 0 || tokenOffsets[documents] !== tokens) fail('tokenOffsets', `must run from 0 to ${tokens}`);
  for (let i = 0; i < documents; i++) if (tokenOffsets[i + 1] < tokenOffsets[i]) fail('tokenOffsets', `decreasing at doc ${i}`);
  if (sec.TIDS.length !== tokens * 4) fail('tokenIds', `${sec.TIDS.length} bytes, expected ${tokens * 4}`);
  const tokenIds = viewAs(sec.TIDS, Int32Array);
  const codeStart = new Float64Array(documents + 1);
  const normStart = new Float64Array(documents + 1);
  for (let i = 0; i < documents; i++) {
    const b = codec.docBytes(tokenOffsets[i + 1] - tokenOffsets[i], dims);
    codeStart[i + 1] = codeStart[i] + b.codes;
    normStart[i + 1] = normStart[i] + b.norms;
  }
  if (sec.CODE.length !== codeStart[documents]) fail('codes', `${sec.CODE.length} bytes, the codec needs ${codeStart[documents]}`);
  if (sec.NORM.length !== normStart[documents]) fail('norms', `${sec.NORM.length} bytes, the codec needs ${normStart[documents]}`);
  // Copies, and no view into `bytes` is kept (doc vector bytes included): the reader does not hold
  // the object's buffer, so what a cache counts for it (about the object's size) is what it holds.
  const codes = sec.CODE.slice();
  const norms = sec.NORM.slice();
  const dvec = sec.DVEC.slice();
  let docVectors: Float32Array | null = null;
  if (dvFormat === 'none') {
    if (sec.DVEC.length !== 0) fail('docVectors', 'present although the header says none');
  } else {
    const width = dvFormat === 'fp32' ? 4 : 2;
    if (sec.DVEC.length !== documents * dims * width) fail('docVectors', `${sec.DVEC.length} bytes, expected ${documents * dims * width}`);
    docVectors = dvFormat === 'fp32' ? viewAs(sec.DVEC, Float32Array) : decodeHalf(viewAs(sec.DVEC, Uint16Array));
  }
  const rowBytes = prefixRowBytes(codec, dims);
  let prefix: PrefixSection | null = null;
  if (prefixRows > 0) {
    if (!rowBytes) fail('prefixCodes', `a prefix section with a codec whose rows do not code on their own (${descriptor.kind}${descriptor.layout ? ` ${descriptor.layout}` : ''})`);
    try {
      prefix = splitPrefixSection(sec.PFXV.slice(), tokenOffsets, prefixRows, rowBytes!);
    } catch (e) {
      return fail('prefixCodes', (e as Error).message);
    }
  }
  let metadata: (Record<string, unknown> | null)[] | null = null;
  if (sec.META.length > 0) {
    let parsed: unknown;
    try {
      parsed = JSON.parse(utf8Strict.decode(sec.META));
    } catch (e) {
      return fail('metadata', `not JSON: ${(e as Error).message}`);
    }
    if (!Array.isArray(parsed) || parsed.length !== documents || !parsed.every((m) => m === null || (typeof m === 'object' && !Array.isArray(m))))
      fail('metadata', `expected ${documents} objects or nulls`);
    metadata = parsed as (Record<string, unknown> | null)[];
  }

  // The reader's closures are made in their own function: closures share the context of the scope
  // they are made in, and readSegment's holds `bytes` and a DataView over it (the section loop
  // captures them), so closures made here would keep the whole object's buffer alive beside the
  // copies above: about twice what a cache counts for a segment.
  return segmentReader({ name, version, descriptor, codec, seed, documents, tokens, dims, ids: docIds as string[], tokenOffsets, tokenIds, codes, norms, codeStart, normStart, docVectors, dvec, dvFormat: dvFormat!, metadata, sizes, opts, prefixRows, prefix, rowBytes });
}

interface ReaderParts {
  name: string;
  version: number;
  descriptor: CodecDescriptor;
  codec: Codec;
  seed: bigint;
  documents: number;
  tokens: number;
  dims: number;
  ids: string[];
  tokenOffsets: Uint32Array;
  tokenIds: Int32Array;
  codes: Uint8Array;
  norms: Uint8Array;
  codeStart: Float64Array;
  normStart: Float64Array;
  docVectors: Float32Array | null;
  dvec: Uint8Array;
  dvFormat: keyof typeof DOC_VECTOR_FORMATS;
  metadata: (Record<string, unknown> | null)[] | null;
  sizes: Record<string, number>;
  opts: ReadSegmentOptions;
  prefixRows: number;
  prefix: PrefixSection | null;
  rowBytes: PrefixRowBytes | null;
}

/** A SegmentReader over parts already read and checked (copies, no view into the object's bytes). */
function segmentReader(parts: ReaderParts): SegmentReader {
  const { name, version, descriptor, codec, seed, documents, tokens, dims, ids, tokenOffsets, tokenIds, codes, norms, codeStart, normStart, docVectors, dvec, dvFormat, metadata, sizes, opts, prefixRows, prefix, rowBytes } = parts;
  const keyOf = (i: number): DocKey => ({ docId: ids[i], seed });
  const encodedDoc = (i: number) => ({
    codes: codes.subarray(codeStart[i], codeStart[i + 1]),
    norms: norms.subarray(normStart[i], normStart[i + 1]),
  });
  const decodeDoc = (i: number): Float32Array => {
    if (!Number.isInteger(i) || i < 0 || i >= documents) throw new RangeError(`document index ${i} out of range [0, ${documents})`);
    const m = tokenOffsets[i + 1] - tokenOffsets[i];
    const side = descriptor.sideInfo ? sideFor(i) : undefined;
    return codec.decodeDoc(encodedDoc(i), m, dims, keyOf(i), side);
  };
  // EDEN's token layout: token t's codes start at bit t p B and its norm is the t-th, so a prefix decodes on its own.
  const tokenwise = descriptor.kind === 'eden' && descriptor.layout === 'token';
  const decodeDocPrefix = (i: number, m: number): Float32Array => {
    if (!Number.isInteger(m) || m < 0) throw new RangeError(`prefix length must be an integer >= 0, got ${m}`);
    if (!Number.isInteger(i) || i < 0 || i >= documents) throw new RangeError(`document index ${i} out of range [0, ${documents})`);
    const len = tokenOffsets[i + 1] - tokenOffsets[i];
    const k = Math.min(m, len);
    return decodePrefix(codec, tokenwise, encodedDoc(i), len, k, dims, keyOf(i), descriptor.sideInfo ? sideFor(i) : undefined);
  };
  const sideFor = (i: number): Float32Array => {
    if (!opts.staticEmbeddings) throw new Error(`segment "${name}" uses side information: pass opts.staticEmbeddings to readSegment`);
    return opts.staticEmbeddings(i, tokenIds.subarray(tokenOffsets[i], tokenOffsets[i + 1]));
  };
  return {
    name,
    version,
    codec: descriptor,
    seed,
    documents,
    tokens,
    dims,
    docIds: ids,
    tokenOffsets,
    tokenIds,
    docVectors,
    metadata: (i: number) => {
      if (!Number.isInteger(i) || i < 0 || i >= documents) throw new RangeError(`document index ${i} out of range [0, ${documents})`);
      return metadata ? metadata[i] : null;
    },
    decodeDoc,
    decodeDocPrefix,
    rowCodes: () => (tokenwise ? { codes, norms } : null),
    codedVectors: () => ({ codes, norms }),
    decodeAll: () => {
      const out = new Float32Array(tokens * dims);
      // fp16 without side information decodes value by value: the whole code section at once (the same values, no copy per document).
      if (descriptor.kind === 'fp16' && !descriptor.sideInfo && codes.byteOffset % 2 === 0) return decodeHalf(new Uint16Array(codes.buffer, codes.byteOffset, tokens * dims), out);
      for (let i = 0; i < documents; i++) out.set(decodeDoc(i), tokenOffsets[i] * dims);
      return out;
    },
    encodedDoc: (i: number) => {
      if (!Number.isInteger(i) || i < 0 || i >= documents) throw new RangeError(`document index ${i} out of range [0, ${documents})`);
      return encodedDoc(i);
    },
    docVectorFormat: dvFormat,
    docVectorBytes: (i: number) => {
      if (!Number.isInteger(i) || i < 0 || i >= documents) throw new RangeError(`document index ${i} out of range [0, ${documents})`);
      const w = dvFormat === 'none' ? 0 : (dvFormat === 'fp32' ? 4 : 2) * dims;
      return dvec.subarray(i * w, (i + 1) * w);
    },
    sectionSizes: () => ({ ...sizes }),
    prefixRows,
    prefix,
    rowBytes,
  };
}
