import { z } from 'zod';
import { dropLive, liveValues } from './openapi-live-values';
import { BatchOptionsSchema, BatchRowSchema, BatchStatusSchema, CohereRerankResponseSchema, UploadStoredSchema, type Produces } from '@lateral/shared';
import { CohereRerankSchema, type CohereRerankResponse } from './rerank/cohere.service';
import { batchOptionsForms } from './request-forms';
import type { BatchStatus } from './batches/batches.service';

/** The services' answers fit the documented schemas (a compile-time check). */
export type BatchAnswers = [Produces<typeof BatchStatusSchema, BatchStatus>, Produces<typeof CohereRerankResponseSchema, CohereRerankResponse>];

const strip = (j: Record<string, unknown>) => {
  delete j.$schema;
  return j;
};
/** Live values (built models, artifacts) filled in by openapi.ts's override when the document is built. */
const schema = (s: z.ZodType) => strip(z.toJSONSchema(s, { io: 'input', unrepresentable: 'any', override: (ctx) => liveValues(ctx.jsonSchema as Record<string, unknown>) }) as Record<string, unknown>);
const out = (s: z.ZodType) => strip(z.toJSONSchema(s, { io: 'output', unrepresentable: 'any', override: (ctx) => dropLive(ctx.jsonSchema as Record<string, unknown>) }) as Record<string, unknown>);
const err = (description: string) => ({ description, content: { 'application/json': { schema: { $ref: '#/components/schemas/Error' } } } });
const json = (description: string, s: Record<string, unknown>) => ({ description, content: { 'application/json': { schema: s } } });
const batchId = { name: 'id', in: 'path', required: true, schema: { type: 'string' }, description: 'batch id (batch-...)' };
const options = schema(BatchOptionsSchema) as { properties?: Record<string, Record<string, unknown>> };

/** Cohere's request: `model` a built model or one of Cohere's names (`rerank-*`, served by COHERE_MODEL). */
function cohereRequest(): Record<string, unknown> {
  const body = schema(CohereRerankSchema) as { properties: Record<string, Record<string, unknown>> };
  body.properties.model = { anyOf: [body.properties.model, { type: 'string', pattern: '^rerank-[A-Za-z0-9_.-]{0,121}$', description: "one of Cohere's model names: scored by COHERE_MODEL" }] };
  return body;
}

/** The Cohere-compatible operation, served at three paths (built with the document: its live models). */
const cohere = () => ({
  summary:
    "Cohere-compatible rerank (also served at /v1/compat/cohere/v1/rerank and /v2/rerank): documents are re-ranked as text candidates and answered in Cohere's shape within RERANK_MAX_WAIT_SECONDS. `model` is a local model (GET /v1/models) or one of Cohere's names (`rerank-english-v3.0`, `rerank-v3.5`, any `rerank-*`), which maps to COHERE_MODEL; `meta.model` says which local model scored. relevance_score is the scorer's raw score (MaxSim), not a probability.",
  requestBody: { required: true, content: { 'application/json': { schema: cohereRequest() } } },
  responses: {
    '200': json('re-ranked', { $ref: '#/components/schemas/CohereRerankResponse' }),
    '400': err('bad input or unknown model (named)'),
    '503': err('the re-rank job failed, or Redis / S3 unavailable'),
    '504': err('not finished within RERANK_MAX_WAIT_SECONDS; the message names GET /v1/rerank/{id}'),
  },
});

/** OpenAPI paths of batch files (issue 15) and the Cohere-compatible endpoint. */
export const batchOpenApiPaths = () => {
  const COHERE = cohere();
  return {
  '/v1/batches': {
    post: {
      summary:
        'Create a batch: a JSONL file, one re-rank row per line ({custom_id, query, candidates, topK?}; `top_k`, the deprecated spelling of topK, is accepted; candidates are ids, {id, score} or {id?, text}), cut into chunk files as it streams in (answered `running` once they and the flow are there), or JSON naming one of your uploads (answered `validating`: a plan job cuts it). Rows are validated one by one: a bad row fails alone, named by its line and custom_id.',
      parameters: Object.entries(options.properties ?? {}).map(([name, s]) => ({ name, in: 'query', required: false, schema: s, description: 'with a JSONL body: the batch option of that name' })),
      requestBody: {
        required: true,
        content: {
          'application/jsonl': { schema: { type: 'string', description: 'one JSON object per line', 'x-row-schema': schema(BatchRowSchema) } },
          'application/x-ndjson': { schema: { type: 'string' } },
          'application/json': {
            // The options' forms (a collection, or a model for text rows), each with the upload it names.
            schema: schema(z.union(batchOptionsForms({ input: z.string().regex(/^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$/).describe("the name of one of your uploads (PUT /v1/uploads/{name}), e.g. 'rows.jsonl'; no object key can be named") }))),
          },
        },
      },
      responses: {
        '202': json('accepted; poll GET /v1/batches/{id} (Location header)', { $ref: '#/components/schemas/BatchStatus' }),
        '400': err('not JSONL (none of the first 100 lines is a JSON object), empty, bad options, unknown model, or an input that is not one of your uploads'),
        '404': err('unknown collection, or no upload of yours with the name `input` gives'),
        '409': err('`model` is not the collection\'s model'),
        '413': err('file over BATCH_MAX_BYTES'),
        '503': err('Redis or S3 unavailable'),
      },
    },
  },
  '/v1/uploads/{name}': {
    put: {
      summary:
        "Upload a JSONL batch file to your own uploads (replaced when the name exists), streamed to S3, up to BATCH_MAX_BYTES. A batch names it as its input: POST /v1/batches with {\"input\": \"<name>\"}.",
      parameters: [{ name: 'name', in: 'path', required: true, schema: { type: 'string', pattern: '^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$' }, description: "the upload's name, e.g. rows.jsonl" }],
      requestBody: { required: true, content: { 'application/jsonl': { schema: { type: 'string', description: 'one JSON object per line', 'x-row-schema': schema(BatchRowSchema) } }, 'application/x-ndjson': { schema: { type: 'string' } } } },
      responses: {
        '201': json('stored (Location header)', out(UploadStoredSchema)),
        '400': err('not JSONL, empty, compressed, or a bad name'),
        '413': err('file over BATCH_MAX_BYTES'),
        '415': err('not application/jsonl or application/x-ndjson'),
        '503': err('S3 unavailable'),
      },
    },
  },
  '/v1/batches/{id}': {
    get: {
      summary: 'State (validating, running, completed, failed, cancelled), row counts, progress and ETA, texts encoded / reused, time per part, the result location',
      parameters: [batchId],
      responses: { '200': json('status', { $ref: '#/components/schemas/BatchStatus' }), '404': err('unknown batch'), '503': err('Redis or S3 unavailable, or the record unreadable for the moment (retry)') },
    },
  },
  '/v1/batches/{id}/cancel': {
    post: {
      summary: 'Cancel a batch: chunks not yet started skip their rows; no result file is written',
      parameters: [batchId],
      responses: { '200': json('cancelled', { $ref: '#/components/schemas/BatchStatus' }), '404': err('unknown batch'), '409': err('already completed or failed'), '503': err('Redis or S3 unavailable (retry)') },
    },
  },
  '/v1/batches/{id}/results': {
    get: {
      summary: 'The result file, streamed: one JSON line per input row in the input order, {custom_id, line, hits: [{id, score}], missing?} or {custom_id, line, error: {message, issues?}}',
      parameters: [batchId],
      responses: { '200': { description: 'JSONL', content: { 'application/x-ndjson': { schema: { type: 'string' } } } }, '404': err('unknown batch'), '409': err('not completed'), '503': err('Redis or S3 unavailable (retry)') },
    },
  },
  '/v1/compat/cohere/rerank': { post: COHERE },
  // the paths Cohere's clients build from a base URL ending in /v1/compat/cohere (v1 and v2 APIs)
  '/v1/compat/cohere/v1/rerank': { post: { ...COHERE, summary: 'Cohere-compatible rerank, as a v1 client calls it (same as POST /v1/compat/cohere/rerank)' } },
  '/v1/compat/cohere/v2/rerank': { post: { ...COHERE, summary: 'Cohere-compatible rerank, as a v2 client calls it (same as POST /v1/compat/cohere/rerank)' } },
  };
};

export const BATCH_OPENAPI_SCHEMAS = {
  BatchStatus: out(BatchStatusSchema),
  CohereRerankResponse: out(CohereRerankResponseSchema),
};
