import { hash, randomUUID } from 'node:crypto';
import { BatchRowSchema, type BatchChunkEntry, type BatchRow } from './batches';
import { MAX_CANDIDATES_PER_QUERY, MAX_CANDIDATE_TEXT_CHARS, MAX_QUERY_CHARS, isTextCandidate, type Candidate } from './rerank';

/*
 * Rows of a batch file and the chunk files they are cut into: pure functions shared by the two
 * places that plan a batch (the API while an upload streams in, and the plan job for a batch that
 * names an upload), so both validate and cut alike.
 */

/** sha256 of a candidate text (UTF-8), in hex: the text's name in the text cache (one-shot: a Hash object per text cost 6x more). */
export const textHash = (text: string): string => hash('sha256', text, 'hex');

/** A line of a batch file: its text, or its UTF-8 bytes (ByteLineSplitter's lines), read as decodeLine decodes them. */
export type BatchLine = string | Uint8Array;

/** Decodes a line's bytes as the stream's TextDecoder would (invalid bytes as U+FFFD; a byte order mark inside the stream kept). */
const lineDecoder = new TextDecoder('utf-8', { ignoreBOM: true });
export const decodeLine = (line: BatchLine): string => (typeof line === 'string' ? line : lineDecoder.decode(line));

/** Whether a line is blank (String.prototype.trim leaves nothing): bytes are decoded only when a non-ASCII byte comes before anything else. */
export function isBlankLine(line: BatchLine): boolean {
  if (typeof line === 'string') return line.trim().length === 0;
  for (let i = 0; i < line.byteLength; i++) {
    const c = line[i];
    if (c === 0x20 || (c >= 0x09 && c <= 0x0d)) continue;
    return c < 0x80 ? false : decodeLine(line).trim().length === 0;
  }
  return true;
}

/**
 * Validates a row. Every problem names its line and custom_id; the row fails alone. `repeats`:
 * one per planner, always given the same `opts` (a list it checked under them is not checked again).
 */
export function validateRow(
  line: BatchLine,
  lineNo: number,
  seen: Map<string, number>,
  opts: { hasCollection: boolean; maxTextBytes: number },
  repeats?: RepeatedCandidates,
): BatchChunkEntry {
  let value: unknown = repeats?.parse(line) ?? undefined;
  if (value === undefined) {
    const text = decodeLine(line);
    try {
      value = JSON.parse(text);
    } catch (err) {
      return { line: lineNo, custom_id: null, error: { message: `line ${lineNo}: not JSON (${(err as Error).message})` } };
    }
    repeats?.learn(text, value);
  }
  if (!value || typeof value !== 'object' || Array.isArray(value)) return { line: lineNo, custom_id: null, error: { message: `line ${lineNo}: not a JSON object` } };
  const cid = (value as { custom_id?: unknown }).custom_id;
  const customId = typeof cid === 'string' && cid.length > 0 ? cid : null;
  const where = `line ${lineNo}${customId ? ` (custom_id "${customId.slice(0, 80)}")` : ''}`;
  if (customId === null) return { line: lineNo, custom_id: null, error: { message: `${where}: custom_id is missing (a non-empty string)`, issues: [{ field: 'custom_id', message: 'required' }] } };
  const earlier = seen.get(customId);
  if (earlier !== undefined) {
    return { line: lineNo, custom_id: customId, error: { message: `${where}: duplicate custom_id (first at line ${earlier})`, issues: [{ field: 'custom_id', message: `duplicate of line ${earlier}` }] } };
  }
  seen.set(customId, lineNo);
  // A repeated list (the same array as an earlier row's, RepeatedCandidates) that passed every check below under these opts: not checked again.
  const listChecked = repeats?.checked((value as { candidates?: unknown }).candidates, opts) ?? false;
  let row = plainBatchRow(value, listChecked);
  const plain = row !== null;
  if (!row) {
    const parsed = BatchRowSchema.safeParse(value);
    if (!parsed.success) {
      const issues = parsed.error.issues.map((i) => ({ field: i.path.join('.') || '(row)', message: i.message }));
      return { line: lineNo, custom_id: customId, error: { message: `${where}: ${issues.map((i) => `${i.field}: ${i.message}`).join('; ')}`, issues } };
    }
    row = parsed.data;
  }
  if (plain && listChecked) return { line: lineNo, custom_id: customId, row };
  const issues: { field: string; message: string }[] = [];
  row.candidates.forEach((c, ci) => {
    if (isTextCandidate(c)) {
      // UTF-8 takes at most 3 bytes per UTF-16 unit: most texts need no count.
      const bytes = c.text.length * 3 <= opts.maxTextBytes ? 0 : Buffer.byteLength(c.text);
      if (bytes > opts.maxTextBytes) issues.push({ field: `candidates.${ci}.text`, message: `text is ${bytes} bytes, over MAX_DOCUMENT_BYTES (${opts.maxTextBytes})` });
    } else if (!opts.hasCollection) {
      issues.push({ field: `candidates.${ci}`, message: 'a candidate given by id needs the batch to name a collection; give it as { text }' });
    }
  });
  if (issues.length > 0) return { line: lineNo, custom_id: customId, error: { message: `${where}: ${issues.map((i) => `${i.field}: ${i.message}`).join('; ')}`, issues } };
  if (plain) repeats?.markChecked(row.candidates, opts);
  return { line: lineNo, custom_id: customId, row };
}

/**
 * Rows that repeat an earlier row's candidates, read without parsing the candidates again (a bulk
 * batch re-ranks the same candidate lists for many queries: JSON.parse of their texts was most of
 * an upload's cost). The raw text of a row's `candidates` value is remembered as written; a later
 * line holding the same text right after its `"candidates":` parses the rest of its line with a
 * placeholder in that place and takes the earlier (already parsed) candidates. Exact: the text is
 * remembered only when it parses alone as a JSON array and the rest of its line parses with the
 * placeholder as the row's top-level candidates, and a later line is taken only when the rest of
 * it does the same, so the row read is the one JSON.parse would give. Learns lists of at least 64
 * characters, up to 64 lists and then only while lists repeat; holds at most `maxChars` characters
 * of them (and their UTF-8 bytes). A line given as bytes is compared as bytes (the list's UTF-8
 * encoding, byte for byte: the text it decodes to is the list's) and only the rest of it is
 * decoded, so a repeated list is neither decoded nor parsed. It also remembers which remembered
 * lists validateRow found valid (`checked`), so their candidates are not checked again.
 */
export class RepeatedCandidates {
  private static readonly HEAD = 64;
  private static readonly TRIAL = 64;
  /** A string no row holds (a fresh random id): the placeholder of the candidates value. */
  private readonly placeholder = `lateral-candidates-${randomUUID()}`;
  private readonly byHead = new Map<string, Known[]>();
  /** The same lists by the first HEAD bytes of their UTF-8 encoding (as latin1). */
  private readonly byHeadBytes = new Map<string, Known[]>();
  /** Lists validateRow found valid, with the options it checked them under. */
  private readonly valid = new WeakMap<object, object>();
  private chars = 0;
  private learned = 0;
  private hits = 0;

  constructor(private readonly maxChars = 8 << 20) {}

  /** The row of a line that repeats remembered candidates (its rest parsed, the candidates shared); undefined otherwise. */
  parse(line: BatchLine): object | undefined {
    if (this.learned === 0) return undefined;
    if (typeof line !== 'string') return this.parseBytes(Buffer.from(line.buffer, line.byteOffset, line.byteLength));
    const at = candidatesAt(line);
    if (at < 0) return undefined;
    const known = this.byHead.get(line.slice(at, at + RepeatedCandidates.HEAD));
    if (!known) return undefined;
    for (const k of known) {
      // Compared as a slice (startsWith with a position compared char by char: 30x slower on these texts).
      if (line.slice(at, at + k.text.length) !== k.text) continue;
      const rest = this.rest(line, at, k.text.length);
      if (!rest) return undefined;
      rest.candidates = k.candidates;
      this.hits++;
      return rest;
    }
    return undefined;
  }

  /** parse() of a line's bytes: the list compared as bytes, only the line's rest decoded. */
  private parseBytes(line: Buffer): object | undefined {
    const key = line.indexOf(CANDIDATES_KEY);
    if (key < 0) return undefined;
    let at = key + CANDIDATES_KEY.byteLength;
    while (at < line.byteLength && (line[at] === 0x20 || line[at] === 0x09)) at++;
    const known = this.byHeadBytes.get(line.toString('latin1', at, at + RepeatedCandidates.HEAD));
    if (!known) return undefined;
    for (const k of known) {
      const end = at + k.bytes.byteLength;
      if (end > line.byteLength || line.compare(k.bytes, 0, k.bytes.byteLength, at, end) !== 0) continue;
      // Cut before '[' and after ']' (ASCII bytes, which no UTF-8 sequence holds): the rest decodes as it does within the whole line.
      const rest = this.restOf(decodeLine(line.subarray(0, at)), decodeLine(line.subarray(end)));
      if (!rest) return undefined;
      rest.candidates = k.candidates;
      this.hits++;
      return rest;
    }
    return undefined;
  }

  /** Whether validateRow found this list (one of those remembered) valid under these options. */
  checked(list: unknown, opts: object): boolean {
    return typeof list === 'object' && list !== null && this.valid.get(list) === opts;
  }

  /** validateRow found this list valid under these options (only a remembered list is ever given again). */
  markChecked(list: object, opts: object): void {
    this.valid.set(list, opts);
  }

  /** Remembers the candidates of a line that parsed as `value` (see the class); a list shorter than HEAD characters is not worth it. */
  learn(line: string, value: unknown): void {
    if (this.chars >= this.maxChars || (this.learned >= RepeatedCandidates.TRIAL && this.hits < this.learned)) return;
    const at = candidatesAt(line);
    if (at < 0 || line.charCodeAt(at) !== 0x5b) return;
    const end = arrayEnd(line, at);
    if (end < 0) return;
    if (end - at < RepeatedCandidates.HEAD) return;
    const text = line.slice(at, end);
    try {
      // Only a text that is a whole array by itself is remembered (what makes a later line's reading exact).
      if (!Array.isArray(JSON.parse(text))) return;
    } catch {
      return;
    }
    // Its place is the row's top-level candidates: value's are the ones this text holds (kept, so the first row shares them too).
    const candidates = (value as { candidates?: unknown }).candidates;
    if (!Array.isArray(candidates) || !this.rest(line, at, text.length)) return;
    const head = text.slice(0, RepeatedCandidates.HEAD);
    const known = this.byHead.get(head);
    if (known?.some((k) => k.text === text)) return;
    const k: Known = { text, bytes: Buffer.from(text, 'utf8'), candidates };
    if (known) known.push(k);
    else this.byHead.set(head, [k]);
    const headBytes = k.bytes.toString('latin1', 0, RepeatedCandidates.HEAD);
    const knownBytes = this.byHeadBytes.get(headBytes);
    if (knownBytes) knownBytes.push(k);
    else this.byHeadBytes.set(headBytes, [k]);
    this.chars += text.length;
    this.learned++;
  }

  /** The line parsed with the placeholder for its `length` characters at `at`, when that place is the row's top-level candidates value. */
  private rest(line: string, at: number, length: number): Record<string, unknown> | null {
    return this.restOf(line.slice(0, at), line.slice(at + length));
  }

  /** The line `before` + the placeholder + `after` parsed, when the placeholder's place is the row's top-level candidates value. */
  private restOf(before: string, after: string): Record<string, unknown> | null {
    let rest: unknown;
    try {
      rest = JSON.parse(`${before}"${this.placeholder}"${after}`);
    } catch {
      return null;
    }
    if (!rest || typeof rest !== 'object' || Array.isArray(rest) || (rest as { candidates?: unknown }).candidates !== this.placeholder) return null;
    return rest as Record<string, unknown>;
  }
}

/** A remembered candidate list: its text as written, its UTF-8 bytes, its parsed candidates. */
interface Known {
  text: string;
  bytes: Buffer;
  candidates: unknown[];
}

const CANDIDATES_KEY = Buffer.from('"candidates":');

/** Where the value after a line's first `"candidates":` starts (blanks skipped), or -1. */
function candidatesAt(line: string): number {
  const key = line.indexOf('"candidates":');
  if (key < 0) return -1;
  let at = key + 13;
  while (at < line.length && (line.charCodeAt(at) === 0x20 || line.charCodeAt(at) === 0x09)) at++;
  return at;
}

/** The end (exclusive) of the JSON array starting at `at`: brackets counted outside strings; -1 when it does not end. */
function arrayEnd(s: string, at: number): number {
  let depth = 0;
  for (let i = at; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c === 0x22) {
      // Skip the string: its closing quote is the next one not escaped by an odd run of backslashes.
      let q = i;
      for (;;) {
        q = s.indexOf('"', q + 1);
        if (q < 0) return -1;
        let b = q - 1;
        while (s.charCodeAt(b) === 0x5c) b--;
        if ((q - 1 - b) % 2 === 0) break;
      }
      i = q;
    } else if (c === 0x5b || c === 0x7b) depth++;
    else if ((c === 0x5d || c === 0x7d) && --depth === 0) return i + 1;
  }
  return -1;
}

const ROW_KEYS = new Set(['custom_id', 'query', 'candidates', 'topK', 'top_k']);
const hasOnly = (o: object, keys: readonly string[]) => {
  for (const k in o) if (!keys.includes(k)) return false;
  return true;
};
const boundedString = (v: unknown, max: number): v is string => typeof v === 'string' && v.length >= 1 && v.length <= max;
const hitCount = (v: unknown) => v === undefined || (typeof v === 'number' && Number.isInteger(v) && v > 0 && v <= MAX_CANDIDATES_PER_QUERY);

/**
 * A row as BatchRowSchema outputs it, without zod, when the row is plainly valid (the common
 * case: zod's union of candidate shapes costs more than the rest of planning); null when anything
 * is off, and the caller asks BatchRowSchema, whose issues name what. Accepts only what the
 * schema accepts (batch.processor.spec.ts compares the two). `candidatesChecked`: the candidates
 * array already passed this check (a repeated list, RepeatedCandidates.checked): not walked again.
 */
export function plainBatchRow(value: object, candidatesChecked = false): BatchRow | null {
  for (const k in value) if (!ROW_KEYS.has(k)) return null;
  const r = value as Record<string, unknown>;
  if (!boundedString(r.custom_id, 512) || typeof r.query !== 'string') return null;
  const query = r.query.trim();
  if (query.length < 1 || query.length > MAX_QUERY_CHARS) return null;
  const candidates = r.candidates;
  if (!Array.isArray(candidates) || candidates.length < 1 || candidates.length > MAX_CANDIDATES_PER_QUERY) return null;
  if (!candidatesChecked && !plainCandidates(candidates)) return null;
  if (!hitCount(r.topK) || !hitCount(r.top_k) || ('topK' in r && r.topK === undefined) || ('top_k' in r && r.top_k === undefined)) return null;
  if (r.topK !== undefined && r.top_k !== undefined && r.topK !== r.top_k) return null;
  const topK = (r.topK ?? r.top_k) as number | undefined;
  const row = { custom_id: r.custom_id, query, candidates: candidates as BatchRow['candidates'] };
  return topK === undefined ? row : { ...row, topK };
}

/** plainBatchRow's check of the candidates: each one plainly valid. */
function plainCandidates(candidates: unknown[]): boolean {
  for (const c of candidates) {
    if (typeof c === 'string') {
      if (c.length < 1 || c.length > 512) return false;
      continue;
    }
    if (!c || typeof c !== 'object' || Array.isArray(c)) return false;
    const o = c as Record<string, unknown>;
    if ('text' in o) {
      if (!hasOnly(o, ['id', 'text', 'score']) || !boundedString(o.text, MAX_CANDIDATE_TEXT_CHARS)) return false;
      if (o.id !== undefined && !boundedString(o.id, 512)) return false;
      if (o.score !== undefined && (typeof o.score !== 'number' || !Number.isFinite(o.score))) return false;
      if (('id' in o && o.id === undefined) || ('score' in o && o.score === undefined)) return false;
    } else if (!hasOnly(o, ['id', 'score']) || !boundedString(o.id, 512) || typeof o.score !== 'number' || !Number.isFinite(o.score)) return false;
  }
  return true;
}

/*
 * JSONL chunk files, as batches were cut before the binary chunk format (batch-chunk-format.ts,
 * what BatchChunkWriter writes now); still read. The first line is a header naming the chunk's
 * distinct candidate texts by their sha256 (ChunkHeader.textHashes, in the order of the chunk's texts file, which the encode-texts
 * job reads); each row's text candidates are written as `{ id?, t, score? }` with `t` the text's
 * place in that list, so a chunk job reads no text, hashes none and parses no row again.
 */

/**
 * A chunk's texts file (its encode-texts job's input): the distinct texts with their hashes, so
 * the job hashes none again; of a batch's texts, those no earlier chunk's file holds (ChunkHeader's
 * textsIn). The texts file of a re-rank request is a plain array of texts.
 */
export interface ChunkTexts {
  textHashes: string[];
  texts: string[];
}

/**
 * The header line of a chunk file. `textsIn` (absent: every text is in this chunk's own texts
 * file): for each of textHashes, the chunk whose texts file holds the text. A batch writes each
 * distinct text once, in the texts file of the first chunk naming it; later chunks point there.
 */
export interface ChunkHeader {
  textHashes: string[];
  textsIn?: number[];
}

/** A text candidate in a chunk file: its place in the header's textHashes. */
export interface ChunkTextCandidate {
  id?: string;
  t: number;
  score?: number;
}

/**
 * A chunk's distinct candidate texts in first-seen order, each with its place. Looked up by a short
 * key (a text's first KEY_CHARS characters) and then compared whole, so a text of hundreds of
 * characters is not hashed whole for every row naming it (a map keyed by the texts themselves cost
 * a batch upload a third as much as parsing its JSON). Texts whose keys collide are kept in a map
 * of their own, keyed by the whole text: no key ever holds a list to scan.
 */
export class DistinctTexts {
  private static readonly KEY_CHARS = 24;
  /** Short key to the place of the one text with that key, or to a map of the several texts with it. */
  private readonly byKey = new Map<string, number | Map<string, number>>();
  readonly texts: string[] = [];

  get size(): number {
    return this.texts.length;
  }

  /** The text's place, added at the end when it is new. */
  indexOf(text: string): number {
    const key = text.slice(0, DistinctTexts.KEY_CHARS);
    const at = this.byKey.get(key);
    if (at === undefined) {
      this.byKey.set(key, this.texts.length);
      return this.texts.push(text) - 1;
    }
    if (typeof at === 'number') {
      if (this.texts[at] === text) return at;
      this.byKey.set(key, new Map([[this.texts[at], at], [text, this.texts.length]]));
      return this.texts.push(text) - 1;
    }
    const i = at.get(text);
    if (i !== undefined) return i;
    at.set(text, this.texts.length);
    return this.texts.push(text) - 1;
  }
}

/** A valid row as a JSONL chunk file holds it: each text candidate replaced by its place in `texts` (the chunk's distinct texts, added here). */
export function compactEntry(entry: Extract<BatchChunkEntry, { row: BatchRow }>, texts: DistinctTexts): { line: number; custom_id: string; row: Omit<BatchRow, 'candidates'> & { candidates: (Candidate | ChunkTextCandidate)[] } } {
  const candidates = entry.row.candidates.map((c): Candidate | ChunkTextCandidate => {
    if (!isTextCandidate(c)) return c;
    const at = texts.indexOf(c.text);
    const out: ChunkTextCandidate = c.id === undefined ? { t: at } : { id: c.id, t: at };
    if (c.score !== undefined) out.score = c.score;
    return out;
  });
  return { line: entry.line, custom_id: entry.custom_id, row: { ...entry.row, candidates } };
}
