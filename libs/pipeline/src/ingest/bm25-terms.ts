import { PermanentJobError, batchInfoKey, bm25AnalyzerOf, fromNdjson, s3Keys, type IngestBatchDocumentInfo, type Collection, type IngestDocument } from '@lateral/shared';
import { analyzeTexts } from '@lateral/search';
import type { ObjectStore } from '@lateral/infra';

/** A batch's BM25 terms: term ids and offsets (documents + 1), as buildSegmentIndex's `bm25Terms`. */
export interface IngestBatchTerms {
  tokenIds: Int32Array;
  tokenOffsets: Uint32Array;
}

/**
 * The stored documents' texts of a batch, in the order of its segment: a document's text, or a
 * passage's character range of its source text (info.json's `start` / `end`).
 */
export function storedTexts(docs: readonly IngestDocument[], info: IngestBatchDocumentInfo): string[] {
  return info.documents.map((e) => {
    const text = docs[e.line]?.text;
    if (text === undefined) throw new PermanentJobError(`batch ${info.batchId}: document ${e.id} names line ${e.line}, past the ${docs.length} documents of the batch`);
    return e.start !== undefined && e.end !== undefined ? text.slice(e.start, e.end) : text;
  });
}

/** The `english` analyser's terms of a batch's stored documents (SPEC 3.6). */
export function analysedBatchTerms(docs: readonly IngestDocument[], info: IngestBatchDocumentInfo): IngestBatchTerms {
  return analyzeTexts(storedTexts(docs, info));
}

/**
 * The BM25 terms of a segment's batch in a collection whose analyser is `english`, read from the
 * batch's documents and info (written by the encode job, or by the merge that made the batch) and
 * checked against the segment's ids; undefined for a collection whose BM25 counts the encoder's
 * pieces (the segment's own token ids).
 */
export async function batchBm25Terms(
  store: Pick<ObjectStore, 'get'>,
  collection: Collection,
  ingestBatchId: string,
  docIds: readonly string[],
): Promise<IngestBatchTerms | undefined> {
  if (bm25AnalyzerOf(collection) !== 'english') return undefined;
  const docsKey = s3Keys.batchDocuments(collection.tenantId, collection.id, ingestBatchId);
  const bytes = await store.get(docsKey);
  if (!bytes) throw new PermanentJobError(`the documents of batch ${ingestBatchId} are missing from S3 (${docsKey}): BM25's analysed terms are read from them`);
  const infoKey = batchInfoKey(collection.tenantId, collection.id, ingestBatchId);
  const infoBytes = await store.get(infoKey);
  if (!infoBytes) throw new PermanentJobError(`the document info of batch ${ingestBatchId} is missing from S3 (${infoKey})`);
  const info = JSON.parse(new TextDecoder().decode(infoBytes)) as IngestBatchDocumentInfo;
  if (info.documents.length !== docIds.length || info.documents.some((d, i) => d.id !== docIds[i])) {
    throw new PermanentJobError(`the document info of batch ${ingestBatchId} does not list the ids of its segment in order`);
  }
  return analysedBatchTerms(fromNdjson(bytes), info);
}
