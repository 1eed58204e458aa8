import { z } from 'zod';
import { s3Keys } from './keys';

/** A document as accepted by the API and read by the encoder (one NDJSON line per document in S3). */
export interface IngestDocument {
  id: string;
  text: string;
  metadata?: Record<string, unknown>;
}

export function toNdjson(docs: IngestDocument[]): string {
  return docs.map((d) => JSON.stringify(d)).join('\n') + '\n';
}

export function fromNdjson(body: Uint8Array): IngestDocument[] {
  return new TextDecoder()
    .decode(body)
    .split('\n')
    .filter((l) => l.length > 0)
    .map((l) => JSON.parse(l) as IngestDocument);
}

// ---- what the encoder stored for each document (batches/{batch}/info.json) ----------------------

/**
 * One stored document of a batch, in segment order: a whole document, or one passage of a
 * document split at ingest (collections created with `passages`).
 */
export interface StoredDocumentInfo {
  /** The stored id: the document's id, or `parent#n` for passage n of `parent`. */
  id: string;
  /** 0-based line of the source document in the batch's documents.ndjson. */
  line: number;
  /** Token vectors stored for it (special tokens included, skiplist tokens removed). */
  tokens: number;
  /** Content tokens were cut to fit the collection's maxDocTokens. */
  truncated: boolean;
  /** The model's sequence length of the whole source text (special tokens included): set when it was truncated or split. */
  originalTokens?: number;
  /** Passages only: the source document's id, the passage's number and its UTF-16 character range in the source text. */
  parent?: string;
  passage?: number;
  start?: number;
  end?: number;
}

/** Written by the encode job before the batch's raw vectors: what each stored document became. */
export interface BatchDocumentInfo {
  batchId: string;
  documents: StoredDocumentInfo[];
}

/** Key of a batch's document info, beside its documents.ndjson. */
export const batchInfoKey = (t: string, c: string, batch: string) => s3Keys.batchDocuments(t, c, batch).replace(/documents\.ndjson$/, 'info.json');

/** Passage ids are `parent#n`; in a collection with passages '#' is reserved in document ids. */
export const PASSAGE_SEPARATOR = '#';
export const passageId = (parent: string, n: number) => `${parent}${PASSAGE_SEPARATOR}${n}`;
/** The parent of a passage id (`a#3` -> `a`), or null when `id` is not of that form. */
export function parentOf(id: string): string | null {
  const m = /^(.*)#(0|[1-9]\d*)$/s.exec(id);
  return m ? m[1] : null;
}

// ---- reading documents back --------------------------------------------------------------------

/** Fields a hit can carry besides id and score (`include` on re-rank and search requests). */
export const HIT_FIELDS = ['text', 'metadata'] as const;
export type HitField = (typeof HIT_FIELDS)[number];
export const IncludeSchema = z
  .array(z.enum(HIT_FIELDS, { error: `include values must be one of: ${HIT_FIELDS.join(', ')}` }))
  .max(HIT_FIELDS.length)
  .refine((a) => new Set(a).size === a.length, 'include lists a field twice');

/**
 * `group: "parent"`: passages of one document count as one hit, the document's id with the best
 * passage's score (`passage` names that passage). In a collection without passages every
 * document is its own parent, so grouping changes nothing.
 */
export const GroupSchema = z.enum(['parent'], { error: "group must be 'parent' (hits grouped by their parent document)" });
export type GroupBy = z.infer<typeof GroupSchema>;

/** What `include` adds to a hit (and `group: "parent"` / passages add: `parent`, `passage`). */
export interface HitDocumentFields {
  text?: string;
  metadata?: Record<string, unknown> | null;
  /** The parent document of a passage hit. */
  parent?: string;
  /** Grouped hits: the id of the best-scoring passage. */
  passage?: string;
}

export const MAX_DOCUMENT_LIST_LIMIT = 1000;
/** Truncated documents an ingestion's status names (it counts them all). */
export const TRUNCATED_IDS_SHOWN = 20;
export const DEFAULT_DOCUMENT_LIST_LIMIT = 100;

/** GET /v1/collections/{id}/documents/{docId}. */
export interface StoredDocument {
  id: string;
  collection: string;
  text: string;
  metadata: Record<string, unknown> | null;
  /** Token vectors stored (null for documents encoded before 0.3, which recorded none). */
  tokens: number | null;
  truncated: boolean | null;
  originalTokens?: number;
  /** Passages: the parent document. A split document: the ids of its passages. */
  parent?: string;
  passages?: string[];
  generation: number;
  segment: { batchId: string; key: string; codecVersion: number };
}

/** GET /v1/collections/{id}/documents: live ids, sorted, one page. */
export interface DocumentIdPage {
  collection: string;
  generation: number;
  documents: string[];
  /** Opaque: pass it as `cursor` for the next page; absent on the last page. */
  nextCursor?: string;
}
