/** Documents (collections.controller.ts, deletes.controller.ts): ingest, follow, read, delete. Tag `documents`. */
import { z } from 'zod';
import {
  DEFAULT_DOCUMENT_LIST_LIMIT,
  DeletePendingSchema,
  DeleteResultSchema,
  DocumentIdPageSchema,
  IngestionAcceptedSchema,
  IngestionFinishedSchema,
  IngestionStatusSchema,
  MAX_DELETE_IDS,
  MAX_DOCUMENT_LIST_LIMIT,
  StageCountsSchema,
  StoredDocumentSchema,
} from '@lateral/shared';
import { CURSOR_PATTERN } from '../documents/documents.service';
import { DeleteDocumentsForm } from './request-forms';
import { errorAnswer, errors, json, location, NOT_ONLY_WHITESPACE, param, type ApiRegistry } from './registry';

/** documents.ts validateDocuments: ids unique within one request, text not only whitespace, at most MAX_DOCUMENT_BYTES. */
const DocumentForm = z
  .object({
    id: param.docId().describe('unique within the request; at most 512 bytes of UTF-8, no control character'),
    text: z.string().regex(NOT_ONLY_WHITESPACE).describe('not only whitespace; at most MAX_DOCUMENT_BYTES bytes (UTF-8)'),
    metadata: z.record(z.string(), z.unknown()).optional(),
  })
  .strict()
  .meta({ id: 'Document' });

/** Requests that show the forms; each one is accepted as written (rules.spec.ts). */
export const INGEST_EXAMPLES = {
  array: { summary: 'a JSON array of documents', value: [{ id: 'd1', text: 'Supersonic wing flutter at low aspect ratio.', metadata: { year: 1961, kind: 'report' } }, { id: 'd2', text: 'Heat transfer in laminar boundary layers.' }] },
  object: { summary: 'the object form, waiting up to 2 s for the ingestion', value: { documents: [{ id: 'd3', text: 'Shock wave and boundary layer interaction.' }], wait: 2 } },
};
export const DELETE_EXAMPLES = {
  ids: { summary: 'by ids', value: { ids: ['d1', 'd2'] } },
  filter: { summary: 'by a filter on metadata', value: { filter: { must: [{ key: 'kind', match: { value: 'draft' } }] } } },
};

export function registerDocuments(api: ApiRegistry): void {
  const id = param.id('collection id (400 naming path.id when it does not match)');
  const wait = z.object({ wait: param.wait(api.maxWaitSeconds) });
  const doc = z.object({ id, docId: param.docId() });
  api.schema('Stages', StageCountsSchema);
  const ingestion = api.schema('Ingestion', IngestionAcceptedSchema);
  const status = api.schema('IngestionStatus', IngestionStatusSchema);
  const deleted = api.schema('DeleteResult', DeleteResultSchema);
  const pending = api.schema('DeletePending', DeletePendingSchema);
  const stored = api.schema('StoredDocument', StoredDocumentSchema);
  const page = api.schema('DocumentIdPage', DocumentIdPageSchema);
  const deleteAnswers = { '200': json('deleted', deleted), '202': json('still in the commit queue', pending) };

  api.op('documents', 'get', '/v1/collections/{id}/documents', {
    summary: 'Live document ids of the current generation, sorted, one page at a time',
    description: `An id ingested again counts once; passages are listed by their ids (\`docId#n\`). \`limit\`: 1..${MAX_DOCUMENT_LIST_LIMIT} (default ${DEFAULT_DOCUMENT_LIST_LIMIT}); \`cursor\`: the \`nextCursor\` of the previous page, unchanged (absent on the last page). 400 names \`limit\` or \`cursor\`.`,
    request: {
      params: z.object({ id }),
      query: z.object({
        limit: z.union([z.number().int().min(1).max(MAX_DOCUMENT_LIST_LIMIT).default(DEFAULT_DOCUMENT_LIST_LIMIT), z.string().max(0).describe('empty: the default')]).optional(),
        cursor: z.string().regex(CURSOR_PATTERN).max(4096).optional().describe('opaque: nextCursor of the previous page'),
      }),
    },
    responses: { '200': json('one page of ids', page), ...errors(400, [404, 'no collection with this id'], 503) },
  });
  api.op('documents', 'post', '/v1/collections/{id}/documents', {
    summary: 'Ingest documents (JSON array, {documents: [...], wait?}, or NDJSON). Written to S3 before the answer.',
    description:
      '202 with the accepted ingestion (and `Location`: its status). With `wait` (query, or the body field of the object form; seconds, <= RERANK_MAX_WAIT_SECONDS) the answer waits for the ingestion: 200 with its final status (the 202 fields plus IngestionStatus) when it is done or failed in time, else 202 as without `wait`. In a collection with `passages`, `#` is reserved in document ids.',
    request: {
      params: z.object({ id }),
      query: wait,
      body: {
        required: true,
        content: {
          'application/json': {
            schema: api.input(z.union([z.array(DocumentForm).min(1), z.object({ documents: z.array(DocumentForm).min(1), wait: z.number().min(0).max(api.maxWaitSeconds).optional() }).strict()])),
            examples: INGEST_EXAMPLES,
          },
          'application/x-ndjson': { schema: { type: 'string', description: 'one Document JSON object per line' } },
        },
      },
    },
    responses: {
      '200': json('finished within wait: the accepted ingestion and its final status', api.output(IngestionFinishedSchema)),
      '202': { ...json('accepted (or not done within wait); poll the ingestion status', ingestion), headers: location('the ingestion status') },
      ...errors(400, [404, 'no collection with this id'], 413, 415, [503, "Redis or S3 unreachable; or ingest back-pressure: a collection with a WARP search layout whose current generation holds more than INGEST_WARP_SEGMENTS_FACTOR x MERGE_WARP_MAX_SEGMENTS segments in a shard while background merges (MERGE_AFTER_COMMIT) catch up (error 'overloaded'; the message names the segments, the batches in flight and the bound; nothing was accepted); Retry-After"]),
      '409': errorAnswer("an id holds '#', which a collection with passages reserves for passage ids (the message names them)"),
    },
  });
  api.op('documents', 'get', '/v1/collections/{id}/documents/{docId}', {
    summary: 'One live document, read back from S3: text, metadata, tokens, truncation, the generation and segment holding it',
    description:
      'A passage (`docId#n`, collections with `passages`) answers its own text with `parent`; the id of a document split into passages answers its whole text with `passages`. 404 names the id (a document of an ingestion still in progress is not live yet).',
    request: { params: doc },
    responses: { '200': json('the document', stored), ...errors(400, [404, 'no such collection, or the id is not a live document (the message names the ingestion when one still in progress accepted it)'], 503) },
  });
  api.op('documents', 'delete', '/v1/collections/{id}/documents/{docId}', {
    summary: 'Delete one document: commits a generation with its tombstone (through the commit queue); 200 once committed',
    description:
      'After the 200 the document is never returned by re-rank or search and `documents` no longer counts it. 404 names the id when it is not a live document. `wait` (default 30 s, <= RERANK_MAX_WAIT_SECONDS): longer than that, 202 with the status URL. A delete and an ingest of the same id: the one committed later wins (an ingestion is acknowledged when its state is `done`).',
    request: { params: doc, query: wait },
    responses: { ...deleteAnswers, ...errors(400, 404, 503) },
  });
  api.op('documents', 'post', '/v1/collections/{id}/documents/delete', {
    summary: `Delete documents by ids (at most ${MAX_DELETE_IDS}) or by a search filter: one generation with their tombstones; 200 once committed`,
    description:
      'Exactly one of `ids` or `filter` (the search filter language). Ids that are not live documents are listed in `notFound` (not an error). Nothing live to delete: 200 with `committed: false`. `wait` as for the single delete.',
    request: { params: z.object({ id }), query: wait, body: { required: true, content: { 'application/json': { schema: api.input(DeleteDocumentsForm), examples: DELETE_EXAMPLES } } } },
    responses: { ...deleteAnswers, ...errors(400, 404, 503) },
  });
  api.op('documents', 'get', '/v1/collections/{id}/deletes/{deleteId}', {
    summary: 'A delete that answered 202: its result once committed',
    request: { params: z.object({ id, deleteId: param.id() }) },
    responses: { ...deleteAnswers, ...errors(404, 503) },
  });
  api.op('documents', 'get', '/v1/collections/{id}/ingestions/{ingestionId}', {
    summary: 'Ingestion progress: documents per stage',
    description:
      'Derived from S3 per batch (raw vectors, segments, the current generation, failure records): a job delivered twice counts once, and the status survives a Redis that lost its data. `done` means every document is in the current generation.',
    request: { params: z.object({ id, ingestionId: param.id() }) },
    responses: { '200': json('status', status), ...errors([404, 'no such collection, or no such ingestion in it'], 503) },
  });
}
