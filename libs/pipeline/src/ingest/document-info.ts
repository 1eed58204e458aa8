import { passageId, type IngestBatchDocumentInfo, type Collection, type IngestDocument, type StoredDocumentInfo } from '@lateral/shared';
import type { EncodedText } from '@lateral/model';
import { splitPassages } from './passages';

/** The tokenizer calls document preparation needs (TokenEncoder's tokenizer and countTokens). */
export interface DocumentTokenizer {
  countTokens(text: string, kind: 'doc', maxTokens?: number): number;
  tokenizer: { contentIds(text: string): ArrayLike<number>; specialCount(kind: 'doc'): number };
}

/** A batch's documents as they are encoded: whole, or split into passages. */
export interface PreparedDocuments {
  ids: string[];
  texts: string[];
  metadata: (Record<string, unknown> | null)[];
  /** Per stored document, what info.json records besides its tokens. */
  info: Omit<StoredDocumentInfo, 'tokens' | 'truncated'>[];
}

/**
 * In a collection with `passages`, a document longer than maxDocTokens becomes passages
 * `id#0`, `id#1`, ... (windows of maxDocTokens with the configured overlap), each carrying its
 * parent's metadata; other documents, and every document of a collection without passages,
 * are encoded whole.
 */
export function prepareDocuments(docs: IngestDocument[], collection: Pick<Collection, 'maxDocTokens' | 'passages'>, enc: DocumentTokenizer): PreparedDocuments {
  const out: PreparedDocuments = { ids: [], texts: [], metadata: [], info: [] };
  docs.forEach((d, line) => {
    const metadata = d.metadata ?? null;
    if (collection.passages) {
      const full = enc.countTokens(d.text, 'doc');
      if (full > collection.maxDocTokens) {
        const room = collection.maxDocTokens - enc.tokenizer.specialCount('doc');
        const windows = splitPassages(d.text, (s) => enc.tokenizer.contentIds(s).length, room, Math.min(collection.passages.overlap, Math.floor(room / 2)));
        windows.forEach((w, n) => {
          out.ids.push(passageId(d.id, n));
          out.texts.push(d.text.slice(w.start, w.end));
          out.metadata.push(metadata);
          out.info.push({ id: passageId(d.id, n), line, originalTokens: full, parent: d.id, passage: n, start: w.start, end: w.end });
        });
        return;
      }
    }
    out.ids.push(d.id);
    out.texts.push(d.text);
    out.metadata.push(metadata);
    out.info.push({ id: d.id, line });
  });
  return out;
}

/** info.json of a batch: tokens and truncation per stored document (the original length of truncated ones). */
export function batchDocumentInfo(ingestBatchId: string, prepared: PreparedDocuments, encoded: EncodedText[], enc: Pick<DocumentTokenizer, 'countTokens'>): IngestBatchDocumentInfo {
  return {
    batchId: ingestBatchId,
    documents: prepared.info.map((info, i) => {
      const e = encoded[i];
      const originalTokens = info.originalTokens ?? (e.truncated ? enc.countTokens(prepared.texts[i], 'doc') : undefined);
      return { ...info, tokens: e.length, truncated: e.truncated, ...(originalTokens !== undefined ? { originalTokens } : {}) };
    }),
  };
}
