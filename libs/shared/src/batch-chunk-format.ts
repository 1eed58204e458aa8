import { crc32 } from 'node:zlib';
import type { BatchChunkEntry, BatchRow, BatchRowError } from './batches';
import { DistinctTexts } from './batch-rows';
import { isTextCandidate } from './rerank';

/*
 * The binary chunk file of a batch (written since the columnar format; older chunk files are JSONL,
 * see batch-rows.ts, and are still read). Columns instead of an object per row and candidate, and
 * each distinct candidate list of a chunk stored once: the rows of a batch that re-rank the same
 * candidates for many queries (the common bulk case) share one list, which the chunk job resolves
 * once. Little-endian throughout:
 *
 *   magic "\0LCHK" (5 bytes; a JSONL chunk file starts with '{'), version (1 byte), 2 bytes zero
 *   u32 texts, entries, lists, candidates, metaBytes, flags (bit 0: textsIn present), crc32
 *   (CRC-32 of every byte after this fixed 36-byte header)
 *   texts x 32 bytes      the chunk's distinct texts' sha256, raw (ChunkHeader.textHashes)
 *   texts x i32           textsIn (only with flag bit 0): the chunk whose texts file holds each text
 *   entries x u32         line numbers
 *   entries x i32         list of each entry, -1 for a row that failed validation (its error in meta)
 *   entries x u32         the row's own topK, 0 for none
 *   (lists + 1) x u32     where each list's candidates start (the last: candidates)
 *   candidates x u8       kind: 0 an id (a string), 1 { id, score }, 2 a text { id?, t, score? }
 *   candidates x i32      t: the text's place in the texts (kind 2), else -1
 *   candidates x f64      score, NaN for none
 *   metaBytes             UTF-8 JSON ChunkMeta: the strings (custom_ids, queries, candidate ids) and row errors
 */

const MAGIC = [0x00, 0x4c, 0x43, 0x48, 0x4b];
const VERSION = 1;
const FIXED = 36;
const FLAG_TEXTS_IN = 1;
const KIND_ID = 0;
const KIND_SCORED_ID = 1;
const KIND_TEXT = 2;

/** Whether a chunk file is in the binary format (else JSONL, written before it). */
export const isBinaryChunk = (bytes: Uint8Array): boolean => bytes.byteLength >= MAGIC.length && MAGIC.every((b, i) => bytes[i] === b);

/** The strings of a binary chunk file, as one JSON object. */
interface ChunkMeta {
  /** Per entry. */
  customIds: (string | null)[];
  /** Per entry ('' for a failed row). */
  queries: string[];
  /** Per candidate: its id, null for a text without one. */
  candidateIds: (string | null)[];
  /** [entry, error] of each failed row. */
  errors: [number, BatchRowError][];
}

/** A candidate of a decoded list: as a request gives it, a text named by its place in textHashes. */
export type ColumnCandidate = string | { id: string; score: number } | { id?: string; t: number; score?: number };

/** A decoded binary chunk file. */
export interface DecodedChunk {
  textHashes: string[];
  textsIn: number[] | null;
  /** Each entry: a valid row naming its list, or a failed row's error. */
  entries: ({ line: number; custom_id: string; query: string; topK?: number; list: number } | Extract<BatchChunkEntry, { error: unknown }>)[];
  /** Each distinct candidate list, once. */
  lists: ColumnCandidate[][];
}

/** A chunk file that cannot be read: it names what is wrong (the caller adds which file). */
export class ChunkFormatError extends Error {}

/**
 * A chunk's rows as they are cut, columns and each distinct candidate list once, encoded by
 * `encode`. A list's texts are added to `texts` when the list is first seen.
 */
export class ChunkColumns {
  readonly texts = new DistinctTexts();
  private readonly lines: number[] = [];
  private readonly entryLists: number[] = [];
  private readonly topKs: number[] = [];
  private readonly customIds: (string | null)[] = [];
  private readonly queries: string[] = [];
  private readonly errors: [number, BatchRowError][] = [];
  /** The lists by their length, first, middle and last candidate; each list's candidates as its first row gave them. */
  private readonly listsBy = new Map<string, number[]>();
  private readonly listRows: BatchRow['candidates'][] = [];
  /** Each candidates array added so far -> its list. */
  private readonly listOf = new Map<BatchRow['candidates'], number>();
  private readonly listStarts: number[] = [0];
  private readonly kinds: number[] = [];
  private readonly ts: number[] = [];
  private readonly scores: number[] = [];
  private readonly candidateIds: (string | null)[] = [];

  /** Entries added. */
  get size(): number {
    return this.lines.length;
  }

  /** Adds a validated row, or a row's error. */
  add(entry: BatchChunkEntry): void {
    const at = this.lines.length;
    this.lines.push(entry.line);
    this.customIds.push(entry.custom_id);
    if ('error' in entry) {
      this.entryLists.push(-1);
      this.topKs.push(0);
      this.queries.push('');
      this.errors.push([at, entry.error]);
      return;
    }
    this.entryLists.push(this.list(entry.row.candidates));
    this.topKs.push(entry.row.topK ?? 0);
    this.queries.push(entry.row.query);
  }

  /**
   * The list's place, added when no earlier row of the chunk has the same candidates: the lists
   * with the same length, first, middle and last candidate are compared whole (a repeated list
   * costs a comparison, not a look-up of each of its texts). The very array of an earlier row (rows
   * sharing a remembered list: RepeatedCandidates) is found by itself, with no key built.
   */
  private list(candidates: BatchRow['candidates']): number {
    const known = this.listOf.get(candidates);
    if (known !== undefined) return known;
    const l = this.newList(candidates);
    this.listOf.set(candidates, l);
    return l;
  }

  private newList(candidates: BatchRow['candidates']): number {
    const n = candidates.length;
    const pre = `${n}|${headOf(candidates[0])}|${headOf(candidates[n >> 1])}|${headOf(candidates[n - 1])}`;
    let same = this.listsBy.get(pre);
    if (same) {
      for (const l of same) if (sameCandidates(this.listRows[l], candidates)) return l;
    } else this.listsBy.set(pre, (same = []));
    const l = this.listRows.length;
    same.push(l);
    this.listRows.push(candidates);
    for (const c of candidates) {
      if (typeof c === 'string') {
        this.kinds.push(KIND_ID);
        this.ts.push(-1);
        this.scores.push(NaN);
        this.candidateIds.push(c);
      } else if (isTextCandidate(c)) {
        this.kinds.push(KIND_TEXT);
        this.ts.push(this.texts.indexOf(c.text));
        this.scores.push(c.score ?? NaN);
        this.candidateIds.push(c.id ?? null);
      } else {
        this.kinds.push(KIND_SCORED_ID);
        this.ts.push(-1);
        this.scores.push(c.score);
        this.candidateIds.push(c.id);
      }
    }
    this.listStarts.push(this.kinds.length);
    return l;
  }

  /** The chunk file: these rows, naming the texts by `textHashes` (hex sha256, in `texts`' order) and, when given, where each text's file is (`textsIn`). */
  encode(textHashes: readonly string[], textsIn: readonly number[] | null): Uint8Array {
    const meta: ChunkMeta = { customIds: this.customIds, queries: this.queries, candidateIds: this.candidateIds, errors: this.errors };
    return encodeChunk(
      {
        textHashes,
        textsIn,
        lines: this.lines,
        entryLists: this.entryLists,
        topKs: this.topKs,
        listStarts: this.listStarts,
        kinds: this.kinds,
        ts: this.ts,
        scores: this.scores,
      },
      meta,
    );
  }
}

/** A short key of a candidate: its kind and its id or text's first characters. */
const headOf = (c: BatchRow['candidates'][number]): string => (typeof c === 'string' ? `s${c}` : isTextCandidate(c) ? `t${c.text.slice(0, 24)}` : `i${c.id}`);

type AnyCandidate = { id?: string; text?: string; score?: number };
/** Whether two candidate lists are the same: kinds, texts, ids and scores (Object.is: -0 is not 0). */
function sameCandidates(a: BatchRow['candidates'], b: BatchRow['candidates']): boolean {
  if (a === b) return true;
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) {
    const x = a[i];
    const y = b[i];
    if (typeof x === 'string' || typeof y === 'string') {
      if (x !== y) return false;
      continue;
    }
    const p = x as AnyCandidate;
    const q = y as AnyCandidate;
    if (p.text !== q.text || p.id !== q.id || !Object.is(p.score, q.score)) return false;
  }
  return true;
}

interface Columns {
  textHashes: readonly string[];
  textsIn: readonly number[] | null;
  lines: readonly number[];
  entryLists: readonly number[];
  topKs: readonly number[];
  listStarts: readonly number[];
  kinds: readonly number[];
  ts: readonly number[];
  scores: readonly number[];
}

function encodeChunk(c: Columns, meta: ChunkMeta): Uint8Array {
  const nTexts = c.textHashes.length;
  const nEntries = c.lines.length;
  const nLists = c.listStarts.length - 1;
  const nCandidates = c.kinds.length;
  const metaBytes = Buffer.from(JSON.stringify(meta), 'utf8');
  const size = FIXED + nTexts * 32 + (c.textsIn ? nTexts * 4 : 0) + nEntries * 12 + (nLists + 1) * 4 + nCandidates * 13 + metaBytes.byteLength;
  const buf = Buffer.alloc(size);
  MAGIC.forEach((b, i) => (buf[i] = b));
  buf[5] = VERSION;
  let o = 8;
  for (const v of [nTexts, nEntries, nLists, nCandidates, metaBytes.byteLength, c.textsIn ? FLAG_TEXTS_IN : 0]) o = buf.writeUInt32LE(v, o);
  o = FIXED;
  for (const h of c.textHashes) {
    if (buf.write(h, o, 32, 'hex') !== 32 || h.length !== 64) throw new Error(`text hash '${h.slice(0, 80)}' is not a sha256 in hex`);
    o += 32;
  }
  if (c.textsIn) for (const n of c.textsIn) o = buf.writeInt32LE(n, o);
  for (const v of c.lines) o = buf.writeUInt32LE(v, o);
  for (const v of c.entryLists) o = buf.writeInt32LE(v, o);
  for (const v of c.topKs) o = buf.writeUInt32LE(v, o);
  for (const v of c.listStarts) o = buf.writeUInt32LE(v, o);
  for (const v of c.kinds) buf[o++] = v;
  for (const v of c.ts) o = buf.writeInt32LE(v, o);
  for (const v of c.scores) o = buf.writeDoubleLE(v, o);
  metaBytes.copy(buf, o);
  buf.writeUInt32LE(crc32(buf.subarray(FIXED)), 32);
  return buf;
}

/** Reads the fixed header and checks the file's size and checksum; the sections' offsets. */
function layout(bytes: Uint8Array) {
  if (!isBinaryChunk(bytes)) throw new ChunkFormatError('not a binary chunk file (its first bytes are not the chunk magic)');
  if (bytes.byteLength < FIXED) throw new ChunkFormatError(`truncated: ${bytes.byteLength} bytes, shorter than the ${FIXED}-byte header`);
  const buf = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  if (buf[5] !== VERSION) throw new ChunkFormatError(`format version ${buf[5]}, this reader knows version ${VERSION}`);
  const [nTexts, nEntries, nLists, nCandidates, metaBytes, flags, crc] = [8, 12, 16, 20, 24, 28, 32].map((at) => buf.readUInt32LE(at));
  const textsIn = (flags & FLAG_TEXTS_IN) !== 0;
  const size = FIXED + nTexts * 32 + (textsIn ? nTexts * 4 : 0) + nEntries * 12 + (nLists + 1) * 4 + nCandidates * 13 + metaBytes;
  if (size !== buf.byteLength) throw new ChunkFormatError(`its header describes ${size} bytes, the file has ${buf.byteLength} (truncated or corrupt)`);
  if (crc32(buf.subarray(FIXED)) !== crc) throw new ChunkFormatError('checksum mismatch (corrupt)');
  return { buf, nTexts, nEntries, nLists, nCandidates, metaBytes, textsIn };
}

/** A copy of a section as a typed array (the file's bytes need not be aligned). */
function section<T extends Int32Array | Uint32Array | Float64Array>(buf: Buffer, at: number, n: number, Type: { new (b: ArrayBuffer): T; BYTES_PER_ELEMENT: number }): T {
  // Uint8Array's slice copies (Buffer's would share the file's memory, at any alignment).
  return new Type(Uint8Array.prototype.slice.call(buf, at, at + n * Type.BYTES_PER_ELEMENT).buffer);
}

/** The text hashes a binary chunk file names and where each text's file is (textsIn; null: all in its own): only its first sections are decoded. */
export function binaryChunkTexts(bytes: Uint8Array): { textHashes: string[]; textsIn: number[] | null } {
  return textsOf(layout(bytes));
}

function textsOf({ buf, nTexts, textsIn }: ReturnType<typeof layout>): { textHashes: string[]; textsIn: number[] | null } {
  const textHashes: string[] = new Array(nTexts);
  for (let i = 0; i < nTexts; i++) textHashes[i] = buf.toString('hex', FIXED + 32 * i, FIXED + 32 * (i + 1));
  const inFiles = textsIn ? Array.from(section(buf, FIXED + nTexts * 32, nTexts, Int32Array)) : null;
  if (inFiles?.some((n) => n < 0)) throw new ChunkFormatError('textsIn names a negative chunk');
  return { textHashes, textsIn: inFiles };
}

/** Decodes a binary chunk file; throws ChunkFormatError naming what is wrong (never returns a row that points outside the file). */
export function decodeBinaryChunk(bytes: Uint8Array): DecodedChunk {
  const lay = layout(bytes);
  const { textHashes, textsIn } = textsOf(lay);
  const { buf, nTexts, nEntries, nLists, nCandidates, metaBytes } = lay;
  let o = FIXED + nTexts * 32 + (textsIn ? nTexts * 4 : 0);
  const lines = section(buf, o, nEntries, Uint32Array);
  const entryLists = section(buf, (o += nEntries * 4), nEntries, Int32Array);
  const topKs = section(buf, (o += nEntries * 4), nEntries, Uint32Array);
  const starts = section(buf, (o += nEntries * 4), nLists + 1, Uint32Array);
  o += (nLists + 1) * 4;
  const kinds = buf.subarray(o, o + nCandidates);
  const ts = section(buf, (o += nCandidates), nCandidates, Int32Array);
  const scores = section(buf, (o += nCandidates * 4), nCandidates, Float64Array);
  o += nCandidates * 8;
  let meta: ChunkMeta;
  try {
    meta = JSON.parse(buf.toString('utf8', o, o + metaBytes)) as ChunkMeta;
  } catch (err) {
    throw new ChunkFormatError(`its strings are not JSON (${(err as Error).message})`);
  }
  if (!meta || !Array.isArray(meta.customIds) || !Array.isArray(meta.queries) || !Array.isArray(meta.candidateIds) || !Array.isArray(meta.errors)) throw new ChunkFormatError('its strings lack customIds, queries, candidateIds or errors');
  if (meta.customIds.length !== nEntries || meta.queries.length !== nEntries || meta.candidateIds.length !== nCandidates) throw new ChunkFormatError(`its strings name ${meta.customIds.length} custom_ids, ${meta.queries.length} queries and ${meta.candidateIds.length} candidate ids for ${nEntries} entries and ${nCandidates} candidates`);
  if (starts[0] !== 0 || starts[nLists] !== nCandidates) throw new ChunkFormatError('its lists do not cover its candidates');
  const lists: ColumnCandidate[][] = new Array(nLists);
  for (let l = 0; l < nLists; l++) {
    const from = starts[l];
    const to = starts[l + 1];
    if (to < from) throw new ChunkFormatError(`list ${l} ends before it starts`);
    const list: ColumnCandidate[] = new Array(to - from);
    for (let i = from; i < to; i++) {
      const id = meta.candidateIds[i];
      const score = scores[i];
      if (kinds[i] === KIND_TEXT) {
        const t = ts[i];
        if (!(t >= 0 && t < nTexts)) throw new ChunkFormatError(`candidate ${i} names text ${t}, which the chunk's ${nTexts} text hashes do not hold`);
        const c: { id?: string; t: number; score?: number } = id === null ? { t } : { id, t };
        if (!Number.isNaN(score)) c.score = score;
        list[i - from] = c;
      } else if (typeof id !== 'string') throw new ChunkFormatError(`candidate ${i} is given by id but has none`);
      else if (kinds[i] === KIND_ID) list[i - from] = id;
      else if (kinds[i] === KIND_SCORED_ID) list[i - from] = { id, score };
      else throw new ChunkFormatError(`candidate ${i} has kind ${kinds[i]}`);
    }
    lists[l] = list;
  }
  const errors = new Map(meta.errors);
  const entries: DecodedChunk['entries'] = new Array(nEntries);
  for (let e = 0; e < nEntries; e++) {
    const list = entryLists[e];
    const customId = meta.customIds[e];
    if (list === -1) {
      const error = errors.get(e);
      if (!error) throw new ChunkFormatError(`entry ${e} failed but its error is missing`);
      entries[e] = { line: lines[e], custom_id: customId, error };
    } else if (!(list >= 0 && list < nLists) || typeof customId !== 'string') throw new ChunkFormatError(`entry ${e} names list ${list} of ${nLists}, or has no custom_id`);
    else entries[e] = topKs[e] > 0 ? { line: lines[e], custom_id: customId, query: meta.queries[e], topK: topKs[e], list } : { line: lines[e], custom_id: customId, query: meta.queries[e], list };
  }
  return { textHashes, textsIn, entries, lists };
}
