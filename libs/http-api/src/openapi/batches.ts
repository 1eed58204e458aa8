/** Batch files, uploads and the Cohere-compatible re-rank (batches.controller.ts, uploads.controller.ts, cohere.controller.ts): tags `batches` and `cohere`. */
import { z } from 'zod';
import { BatchOptionsSchema, BatchRowSchema, BatchStatusSchema, CohereRerankResponseSchema, UploadStoredSchema, type Produces } from '@lateral/shared';
import { CohereRerankSchema, type CohereRerankResponse } from '../rerank/cohere.service';
import type { BatchStatus } from '../batches/batches.service';
import { batchOptionsForms } from './request-forms';
import { errorAnswer as err, json, param, trimmedNotEmpty, type ApiRegistry, type Json } from './registry';

/** The services' answers fit the documented schemas (a compile-time check). */
export type BatchAnswers = [Produces<typeof BatchStatusSchema, BatchStatus>, Produces<typeof CohereRerankResponseSchema, CohereRerankResponse>];

const UPLOAD_NAME = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$/;

/** Requests that show the forms; each one is accepted as written (rules.spec.ts). */
export const BATCH_EXAMPLES = { upload: { summary: 'an upload of yours, re-ranked against a collection', value: { collection: 'papers', input: 'rows.jsonl', topK: 10 } } };

export function registerBatches(api: ApiRegistry): void {
  const status = api.schema('BatchStatus', BatchStatusSchema);
  const cohereResponse = api.schema('CohereRerankResponse', CohereRerankResponseSchema);
  const row = api.input(BatchRowSchema);
  trimmedNotEmpty(row, 'query');
  const rows: Json = { type: 'string', description: 'one JSON object per line', 'x-row-schema': row };
  const options = (api.input(BatchOptionsSchema) as { properties?: Record<string, Json> }).properties ?? {};
  const batch = z.object({ id: param.id('batch id (batch-...)') });

  api.op('batches', 'post', '/v1/batches', {
    summary:
        'Create a batch: a JSONL file, one re-rank row per line ({custom_id, query, candidates, topK?}; `top_k`, the deprecated spelling of topK, is accepted; candidates are ids, {id, score} or {id?, text}), cut into chunk files as it streams in (answered `running` once they and the flow are there), or JSON naming one of your uploads (answered `validating`: a plan job cuts it). Rows are validated one by one: a bad row fails alone, named by its line and custom_id.',
    // With a JSONL body the options come as query parameters (their live values: built models, artifacts).
    parameters: Object.entries(options).map(([name, s]) => ({ name, in: 'query' as const, required: false, schema: s, description: 'with a JSONL body: the batch option of that name' })),
    request: {
      body: {
        required: true,
        content: {
          'application/jsonl': { schema: rows },
          'application/x-ndjson': { schema: { type: 'string' } },
          'application/json': {
            // The options' forms (a collection, or a model for text rows), each with the upload it names.
            schema: api.input(z.union(batchOptionsForms({ input: z.string().regex(UPLOAD_NAME).describe("the name of one of your uploads (PUT /v1/uploads/{name}), e.g. 'rows.jsonl'; no object key can be named") }))),
            examples: BATCH_EXAMPLES,
          },
        },
      },
    },
    responses: {
      '202': json('accepted; poll GET /v1/batches/{id} (Location header)', status),
      '400': err('not JSONL (none of the first 100 lines is a JSON object), empty, bad options, unknown model, or an input that is not one of your uploads'),
      '404': err('unknown collection, or no upload of yours with the name `input` gives'),
      '409': err("`model` is not the collection's model"),
      '413': err('file over BATCH_MAX_BYTES'),
      '503': err('Redis or S3 unavailable'),
    },
  });
  api.op('batches', 'put', '/v1/uploads/{name}', {
    summary:
        "Upload a JSONL batch file to your own uploads (replaced when the name exists), streamed to S3, up to BATCH_MAX_BYTES. A batch names it as its input: POST /v1/batches with {\"input\": \"<name>\"}.",
    request: {
      params: z.object({ name: z.string().regex(UPLOAD_NAME).describe("the upload's name, e.g. rows.jsonl") }),
      body: { required: true, content: { 'application/jsonl': { schema: rows }, 'application/x-ndjson': { schema: { type: 'string' } } } },
    },
    responses: {
      '201': json('stored (Location header)', api.output(UploadStoredSchema)),
      '400': err('not JSONL, empty, compressed, or a bad name'),
      '413': err('file over BATCH_MAX_BYTES'),
      '415': err('not application/jsonl or application/x-ndjson'),
      '503': err('S3 unavailable'),
    },
  });
  api.op('batches', 'get', '/v1/batches/{id}', {
    summary:
      'State (validating, running, completed, failed, cancelled), row counts, progress and ETA, texts encoded / reused, time per part, the result location. With `wait`: answered once the batch is completed, failed or cancelled, or when `wait` runs out (then still validating or running).',
    request: { params: batch, query: z.object({ wait: param.wait(api.maxWaitSeconds) }) },
    responses: {
      '200': json('status', status),
      '400': err('`wait` not a number of seconds between 0 and RERANK_MAX_WAIT_SECONDS'),
      '404': err('unknown batch'),
      '503': err('Redis or S3 unavailable, or the record unreadable for the moment (retry)'),
    },
  });
  api.op('batches', 'post', '/v1/batches/{id}/cancel', {
    summary: 'Cancel a batch: chunks not yet started skip their rows; no result file is written',
    request: { params: batch },
    responses: { '200': json('cancelled', status), '404': err('unknown batch'), '409': err('already completed or failed'), '503': err('Redis or S3 unavailable (retry)') },
  });
  api.op('batches', 'get', '/v1/batches/{id}/results', {
    summary: 'The result file, streamed: one JSON line per input row in the input order, {custom_id, line, hits: [{id, score}], missing?} or {custom_id, line, error: {message, issues?}}',
    request: { params: batch },
    responses: { '200': { description: 'JSONL', content: { 'application/x-ndjson': { schema: { type: 'string' } } } }, '404': err('unknown batch'), '409': err('not completed'), '503': err('Redis or S3 unavailable (retry)') },
  });

  // Cohere's request: `model` a built model or one of Cohere's names (`rerank-*`, served by COHERE_MODEL).
  const cohereRequest = api.input(CohereRerankSchema) as { properties: Record<string, Json> };
  trimmedNotEmpty(cohereRequest, 'query');
  cohereRequest.properties.model = { anyOf: [cohereRequest.properties.model, { type: 'string', pattern: '^rerank-[A-Za-z0-9_.-]{0,121}$', description: "one of Cohere's model names: scored by COHERE_MODEL" }] };
  const cohere = (summary: string) => ({
    summary,
    // No example: a valid one is a real encode and score, which the contract's examples phase would run.
    request: { body: { required: true, content: { 'application/json': { schema: cohereRequest } } } },
    responses: {
      '200': json('re-ranked', cohereResponse),
      '400': err('bad input or unknown model (named)'),
      '503': err('the re-rank job failed, or Redis / S3 unavailable'),
      '504': err('not finished within RERANK_MAX_WAIT_SECONDS; the message names GET /v1/rerank/{id}'),
    },
  });
  api.op(
    'cohere',
    'post',
    '/v1/compat/cohere/rerank',
    cohere(
    "Cohere-compatible rerank (also served at /v1/compat/cohere/v1/rerank and /v2/rerank): documents are re-ranked as text candidates and answered in Cohere's shape within RERANK_MAX_WAIT_SECONDS. `model` is a local model (GET /v1/models) or one of Cohere's names (`rerank-english-v3.0`, `rerank-v3.5`, any `rerank-*`), which maps to COHERE_MODEL; `meta.model` says which local model scored. relevance_score is the scorer's raw score (MaxSim), not a probability.",),
  );
  // the paths Cohere's clients build from a base URL ending in /v1/compat/cohere (v1 and v2 APIs)
  api.op('cohere', 'post', '/v1/compat/cohere/v1/rerank', cohere('Cohere-compatible rerank, as a v1 client calls it (same as POST /v1/compat/cohere/rerank)'));
  api.op('cohere', 'post', '/v1/compat/cohere/v2/rerank', cohere('Cohere-compatible rerank, as a v2 client calls it (same as POST /v1/compat/cohere/rerank)'));
}
