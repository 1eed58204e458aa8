import { describe, expect, it } from 'vitest';
import { PermanentJobError, toNdjson, type IngestBatchDocumentInfo, type Collection } from '@lateral/shared';
import { analyzeTexts, termHash } from '@lateral/search';
import { analysedBatchTerms, batchBm25Terms, storedTexts } from './bm25-terms';

const docs = [
  { id: 'a', text: 'Wings and tails of aircraft' },
  { id: 'b', text: 'first half. second half' },
];
const info: IngestBatchDocumentInfo = {
  batchId: 'b1',
  documents: [
    { id: 'a', line: 0, tokens: 8, truncated: false },
    { id: 'b#0', line: 1, tokens: 4, truncated: false, parent: 'b', passage: 0, start: 0, end: 11 },
    { id: 'b#1', line: 1, tokens: 4, truncated: false, parent: 'b', passage: 1, start: 12, end: 23 },
  ],
};

describe('BM25 terms of a batch', () => {
  it("stored texts: a document's text, a passage's range of its source", () => {
    expect(storedTexts(docs, info)).toEqual(['Wings and tails of aircraft', 'first half.', 'second half']);
  });

  it('analyses every stored document in segment order', () => {
    const t = analysedBatchTerms(docs, info);
    expect(t).toEqual(analyzeTexts(['Wings and tails of aircraft', 'first half.', 'second half']));
    expect(Array.from(t.tokenIds.subarray(0, 3))).toEqual(['wing', 'tail', 'aircraft'].map(termHash));
  });

  it('a line past the batch is a permanent error', () => {
    expect(() => storedTexts(docs.slice(0, 1), info)).toThrow(PermanentJobError);
  });

  const collection = (bm25?: Collection['bm25']) => ({ tenantId: 't', id: 'c', ...(bm25 ? { bm25 } : {}) }) as Collection;
  const store = (objects: Record<string, Uint8Array | string>) => ({
    get: async (key: string) => {
      const v = Object.entries(objects).find(([k]) => key.endsWith(k))?.[1];
      return v === undefined ? null : typeof v === 'string' ? new TextEncoder().encode(v) : v;
    },
  });

  it("reads the batch's documents and info for 'english'; nothing for 'pieces' and records without an analyser", async () => {
    const s = store({ 'b1/documents.ndjson': toNdjson(docs), 'b1/info.json': JSON.stringify(info) });
    const ids = info.documents.map((d) => d.id);
    expect(await batchBm25Terms(s, collection({ analyzer: 'english' }), 'b1', ids)).toEqual(analysedBatchTerms(docs, info));
    expect(await batchBm25Terms(s, collection({ analyzer: 'pieces' }), 'b1', ids)).toBeUndefined();
    expect(await batchBm25Terms(s, collection(), 'b1', ids)).toBeUndefined();
    await expect(batchBm25Terms(s, collection({ analyzer: 'english' }), 'b1', ['a', 'b#1', 'b#0'])).rejects.toThrow(/ids of its segment/);
    await expect(batchBm25Terms(store({}), collection({ analyzer: 'english' }), 'b1', ids)).rejects.toThrow(/missing from S3/);
  });
});
