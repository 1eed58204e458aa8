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
export interface IngestBatchDocumentInfo {
  /** The ingest batch's id (stored name). */
  batchId: string;
  documents: StoredDocumentInfo[];
}

/** Key of a batch's document info, beside its documents.ndjson. */
export const batchInfoKey = (tenantId: string, collectionId: string, ingestBatchId: string) => s3Keys.batchDocuments(tenantId, collectionId, ingestBatchId).replace(/documents\.ndjson$/, 'info.json');

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
  .refine((a) => new Set(a).size === a.length, 'include lists a field twice')
  .meta({ uniqueItems: true });

/**
 * `group: "parent"`: passages of one document count as one hit, the document's id with the best
 * passage's score (`passage` names that passage). In a collection without passages every
 * document is its own parent, so grouping changes nothing.
 */
export const GroupSchema = z.enum(['parent'], { error: "group must be 'parent' (hits grouped by their parent document)" });
export type GroupBy = z.infer<typeof GroupSchema>;

/** What `include` adds to a hit (and `group: "parent"` / passages add: `parent`, `passage`). */
export const HitDocumentFieldsSchema = z.object({
  text: z.string().optional().describe("with include: ['text'] (a passage's own text)"),
  metadata: z.record(z.string(), z.unknown()).nullable().optional().describe("with include: ['metadata']: null when the document has none (a passage carries its parent's)"),
  /** The parent document of a passage hit. */
  parent: z.string().optional().describe('a passage hit (collections with passages): its parent document'),
  /** Grouped hits: the id of the best-scoring passage. */
  passage: z.string().optional().describe("group: 'parent': the best-scoring passage, whose score the hit carries"),
});
export type HitDocumentFields = z.infer<typeof HitDocumentFieldsSchema>;

export const MAX_DOCUMENT_LIST_LIMIT = 1000;
/** Truncated documents an ingestion's status names (it counts them all). */
export const TRUNCATED_IDS_SHOWN = 20;
export const DEFAULT_DOCUMENT_LIST_LIMIT = 100;

/** GET /v1/collections/{id}/documents/{docId}. */
export const StoredDocumentSchema = z.object({
  id: z.string(),
  collection: z.string(),
  text: z.string(),
  metadata: z.record(z.string(), z.unknown()).nullable().describe('null when the document has none'),
  /** Token vectors stored (null for documents encoded before 0.3, which recorded none). */
  tokens: z.number().int().nullable().describe('token vectors stored (special tokens in, skiplist tokens out); a split document: the sum over its passages; null for documents encoded before this was recorded'),
  truncated: z.boolean().nullable().describe("content tokens were cut to the collection's maxDocTokens (null: not recorded)"),
  originalTokens: z.number().int().optional().describe("the model's sequence length of the whole text: present when it was truncated or split"),
  /** Passages: the parent document. A split document: the ids of its passages. */
  parent: z.string().optional().describe('a passage: its parent document'),
  passages: z.array(z.string()).optional().describe('a document split into passages: their ids'),
  generation: z.number().int().describe('the current generation it was read from'),
  segment: z.object({ batchId: z.string(), key: z.string(), codecVersion: z.number().int() }).describe('the segment holding it (a split document: its first passage)'),
});
export type StoredDocument = z.infer<typeof StoredDocumentSchema>;

/** GET /v1/collections/{id}/documents: live ids, sorted, one page. */
export const DocumentIdPageSchema = z.object({
  collection: z.string(),
  generation: z.number().int(),
  documents: z.array(z.string()),
  /** Opaque: pass it as `cursor` for the next page; absent on the last page. */
  nextCursor: z.string().optional().describe('opaque: pass it as `cursor` for the next page; absent on the last page'),
});
export type DocumentIdPage = z.infer<typeof DocumentIdPageSchema>;
