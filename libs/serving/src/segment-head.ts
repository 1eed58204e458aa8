import { crc32c, segmentSectionOffsets, type CodecDescriptor, type SegmentReader } from '@lateral/codec';

/**
 * What a scorer keeps of a segment when it reads candidates' bytes by ranges (SegmentCache with
 * rangeReads): ids, token offsets, where each document's codes, norms and pooled vector lie in the
 * object, and the codec that wrote it. Made from one checked read of the whole object.
 */
export interface SegmentHeadData {
  /** Bytes of the object it describes (a local copy of another size is not this object). */
  objectBytes: number;
  documents: number;
  dims: number;
  seed: bigint;
  codec: CodecDescriptor;
  docIds: readonly string[];
  tokenOffsets: Uint32Array;
  /** Per document (D + 1), byte offsets of its codes and norms within their sections. */
  codeStart: Float64Array;
  normStart: Float64Array;
  /** Byte offsets of the codes, norms and doc-vector sections in the object. */
  codeAt: number;
  normAt: number;
  dvecAt: number;
  /** Bytes of one document's pooled vector in the object (0: none), and their format. */
  dvWidth: number;
  dvFormat: 'none' | 'fp16' | 'fp32';
  /** ME-BERT's prefix section: rows per document (0: none, a segment written before it) and its byte offset in the object. */
  pfxRows: number;
  pfxAt: number;
}

/** A segment's head from its (checked) reader. */
export function segmentHeadData(reader: SegmentReader, objectBytes: number): SegmentHeadData {
  const D = reader.documents;
  const codeStart = new Float64Array(D + 1);
  const normStart = new Float64Array(D + 1);
  for (let i = 0; i < D; i++) {
    const e = reader.encodedDoc(i);
    codeStart[i + 1] = codeStart[i] + e.codes.byteLength;
    normStart[i + 1] = normStart[i] + e.norms.byteLength;
  }
  const at = segmentSectionOffsets(reader.sectionSizes());
  return {
    objectBytes,
    documents: D,
    dims: reader.dims,
    seed: reader.seed,
    codec: reader.codec,
    docIds: reader.docIds,
    tokenOffsets: reader.tokenOffsets,
    codeStart,
    normStart,
    codeAt: at.codes,
    normAt: at.norms,
    dvecAt: at.docVectors,
    dvWidth: reader.docVectorFormat === 'none' ? 0 : (reader.docVectorFormat === 'fp32' ? 4 : 2) * reader.dims,
    dvFormat: reader.docVectorFormat,
    pfxRows: reader.prefixRows,
    pfxAt: reader.prefixRows > 0 ? at.prefixCodes : 0,
  };
}

/**
 * A head as bytes, kept beside the segment's local copy so a scorer that starts again over the
 * same disk cache reads heads, not every segment whole (a cold re-rank over a large collection).
 * Layout: `LHD1`, u32 JSON length, the JSON (scalars, codec, ids; `pfxRows` / `pfxAt` absent in heads
 * written before prefix sections, read as none), zero padding to 8 bytes, the
 * token offsets (u32 x (D + 1)), padding to 8, the code and norm starts (f64 x (D + 1) each), and a
 * CRC32C of everything before it (u32). Little-endian.
 */
export function serializeSegmentHead(h: SegmentHeadData): Uint8Array {
  const json = new TextEncoder().encode(
    JSON.stringify({ objectBytes: h.objectBytes, documents: h.documents, dims: h.dims, seed: h.seed.toString(), codec: h.codec, codeAt: h.codeAt, normAt: h.normAt, dvecAt: h.dvecAt, dvWidth: h.dvWidth, dvFormat: h.dvFormat, pfxRows: h.pfxRows, pfxAt: h.pfxAt, docIds: h.docIds }),
  );
  const n = h.documents + 1;
  const offAt = align8(8 + json.byteLength);
  const startsAt = align8(offAt + 4 * n);
  const total = startsAt + 16 * n + 4;
  const out = new Uint8Array(total);
  const view = new DataView(out.buffer);
  out.set(MAGIC, 0);
  view.setUint32(4, json.byteLength, true);
  out.set(json, 8);
  new Uint32Array(out.buffer, offAt, n).set(h.tokenOffsets);
  new Float64Array(out.buffer, startsAt, n).set(h.codeStart);
  new Float64Array(out.buffer, startsAt + 8 * n, n).set(h.normStart);
  view.setUint32(total - 4, crc32c(out.subarray(0, total - 4)), true);
  return out;
}

/** The head serializeSegmentHead wrote, or null when the bytes are not one (wrong magic, CRC or lengths): the caller then rebuilds it. */
export function parseSegmentHead(bytes: Uint8Array): SegmentHeadData | null {
  if (bytes.byteLength < 12 || MAGIC.some((b, i) => bytes[i] !== b)) return null;
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  if (view.getUint32(bytes.byteLength - 4, true) !== crc32c(bytes.subarray(0, bytes.byteLength - 4))) return null;
  const jsonLength = view.getUint32(4, true);
  if (8 + jsonLength > bytes.byteLength) return null;
  let meta: Omit<SegmentHeadData, 'seed' | 'tokenOffsets' | 'codeStart' | 'normStart' | 'pfxRows' | 'pfxAt'> & { seed: string; pfxRows?: number; pfxAt?: number };
  try {
    meta = JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(bytes.subarray(8, 8 + jsonLength)));
  } catch {
    return null;
  }
  const n = meta.documents + 1;
  const offAt = align8(8 + jsonLength);
  const startsAt = align8(offAt + 4 * n);
  if (!Number.isInteger(meta.documents) || meta.documents < 0 || !Array.isArray(meta.docIds) || meta.docIds.length !== meta.documents || startsAt + 16 * n + 4 !== bytes.byteLength) return null;
  // Copies: the head outlives the bytes it was read from (and their buffer may not be 8-aligned).
  const copy = <T extends Uint32Array | Float64Array>(Ctor: { new (b: ArrayBuffer): T }, at: number, count: number, width: number): T => new Ctor(bytes.slice(at, at + count * width).buffer);
  // A head written before prefix sections (no pfxRows) describes a segment without one.
  const pfxRows = meta.pfxRows ?? 0;
  if (!Number.isInteger(pfxRows) || pfxRows < 0 || (pfxRows > 0 && !Number.isInteger(meta.pfxAt))) return null;
  return {
    ...meta,
    pfxRows,
    pfxAt: pfxRows > 0 ? meta.pfxAt! : 0,
    seed: BigInt(meta.seed),
    tokenOffsets: copy(Uint32Array, offAt, n, 4),
    codeStart: copy(Float64Array, startsAt, n, 8),
    normStart: copy(Float64Array, startsAt + 8 * n, n, 8),
  };
}

const MAGIC = new Uint8Array([0x4c, 0x48, 0x44, 0x31]); // LHD1
const align8 = (x: number) => (x + 7) & ~7;
