/** OpenAPI paths of judgments and training (judgments.controller.ts), from the zod schemas that validate them. */
import { z } from 'zod';
import { dropLive, liveValues } from './openapi-live-values';
import { ID_PATTERN, JudgedQuerySchema, JudgmentsJsonSchema, MIN_TRAIN_QUERIES } from '@lateral/shared';
import { TrainRequestForm } from './request-forms';
import { JudgmentSetSchema, JudgmentsSummarySchema, TrainAcceptedSchema, TrainCancelSchema, TrainStatusSchema, type Produces } from '@lateral/shared';
import type { JudgmentsSummary, TrainStatus } from './judgments/judgments.service';

/** The services' answers fit the documented schemas (a compile-time check). */
export type JudgmentsAnswers = [Produces<typeof JudgmentsSummarySchema, JudgmentsSummary>, Produces<typeof TrainStatusSchema, TrainStatus>];

const strip = (j: Record<string, unknown>) => {
  delete j.$schema;
  return j;
};
/** Live values (built models, artifacts) filled in by openapi.ts's override when the document is built. */
const schema = (s: z.ZodType) => strip(z.toJSONSchema(s, { io: 'input', unrepresentable: 'any', override: (ctx) => liveValues(ctx.jsonSchema as Record<string, unknown>) }) as Record<string, unknown>);
const out = (s: z.ZodType) => strip(z.toJSONSchema(s, { io: 'output', unrepresentable: 'any', override: (ctx) => dropLive(ctx.jsonSchema as Record<string, unknown>) }) as Record<string, unknown>);
const error = { $ref: '#/components/schemas/Error' };
const errors = (...codes: number[]) =>
  Object.fromEntries(codes.map((c) => [String(c), { description: { 400: 'bad input (the message and details name the field and the limit)', 404: 'unknown resource', 503: 'Redis or S3 unreachable, or not answering in time under load (error overloaded); Retry-After' }[c] ?? 'error', content: { 'application/json': { schema: error } } }]));
const ok = (description: string, s: Record<string, unknown>) => ({ description, content: { 'application/json': { schema: s } } });
const idParam = { name: 'id', in: 'path', required: true, schema: { type: 'string', pattern: ID_PATTERN.source }, description: 'collection id' };
const trainIdParam = { name: 'trainId', in: 'path', required: true, schema: { type: 'string', pattern: ID_PATTERN.source }, description: 'training run id (tr-…)' };

export const trainingOpenApiPaths = () => ({
  '/v1/collections/{id}/judgments': {
    post: {
      summary: 'Store relevance judgments of a collection (JSON, NDJSON, or TREC qrels + topics) in S3',
      description:
        'JSON: an array of judged queries `{ id, text, judgments: [{ doc, grade }] }` or `{ queries: [...] }`; NDJSON (`application/x-ndjson`): one judged query per line; TREC: `{ "qrels": "qid 0 docid grade\\n…", "topics": "<top><num>…</num><title>…</title></top>… or qid<TAB>text lines" }`. Grade 0 = judged not relevant. Judged document ids the collection has not accepted are listed in `unknownDocuments`, not refused. Each POST stores a new set (`js-…`, newest last).',
      parameters: [idParam],
      requestBody: {
        required: true,
        content: {
          'application/json': { schema: schema(JudgmentsJsonSchema), example: { queries: [{ id: 'q1', text: 'supersonic wing flutter', judgments: [{ doc: 'd1', grade: 2 }, { doc: 'd2', grade: 0 }] }] } },
          'application/x-ndjson': { schema: schema(JudgedQuerySchema) },
        },
      },
      responses: { '201': ok('stored', out(JudgmentsSummarySchema)), ...errors(400, 404, 503) },
    },
  },
  '/v1/collections/{id}/judgments/{judgmentsId}': {
    get: {
      summary: 'A stored judgment set',
      parameters: [idParam, { name: 'judgmentsId', in: 'path', required: true, schema: { type: 'string', pattern: ID_PATTERN.source } }],
      responses: { '200': ok('the set', out(JudgmentSetSchema)), ...errors(400, 404, 503) },
    },
  },
  '/v1/collections/{id}/train': {
    post: {
      summary: 'Train a learned head (LITE default or small, or K-NRM) on the collection\'s judgments, or an AESI codec on its token vectors: 202 with the run id',
      description: `Runs on the train queue (scorer workers, one at a time). Needs at least ${MIN_TRAIN_QUERIES} judged queries with a positive judgment of a document in the collection (400 naming the minimum otherwise). The result is a versioned scorer artifact \`{collection}.{head}[-small][-residual].v{N}\` in S3 and SCORERS_DIR, named in re-rank requests as \`{"name": "lite" | "knrm", "artifact": "…"}\`. With \`residual: true\` (LITE only; 400 naming \`residual\` otherwise) LITE is trained as a correction on MaxSim: score = w x MaxSim + LITE, starting from MaxSim's own ranking, which early stopping keeps unless a trained epoch ranks the held-out queries better. With \`head: "aesi"\` (no judgments needed; the model must declare static embeddings) it fits SDR's autoencoder with side information (\`codeDims\`, \`width\`, \`bits\`, \`sampleTokens\`, \`batchTokens\`) on a seeded sample of the collection's raw token vectors; the result is a trained codec \`{collection}.aesi-c{codeDims}-h{width}.v{N}\` in S3 (\`codecs/trained/\`, with its training curve and held-out error beside it), used by \`POST /v1/collections/{id}/recompress\` with \`{"codec": {"kind": "eden", "sideInfo": true, "dims": codeDims, "trained": name}}\`.`,
      parameters: [idParam],
      requestBody: { required: true, content: { 'application/json': { schema: schema(TrainRequestForm), example: { head: 'lite', size: 'small', maxEpochs: 20, seed: 1 } } } },
      responses: { '202': ok('queued', out(TrainAcceptedSchema)), ...errors(400, 404, 503), '409': ok('the collection has no judgments yet, or too few trainable queries (the message names the minimum)', error) },
    },
  },
  '/v1/train/{trainId}': {
    get: {
      summary: 'Status of a training run: epochs, loss, ETA while it runs; the report when done',
      parameters: [trainIdParam],
      responses: { '200': ok('status', out(TrainStatusSchema)), ...errors(400, 404, 503) },
    },
    delete: {
      summary: 'Cancel a training run: a queued run is removed, a running one stops at its next step (status `cancelled`)',
      parameters: [trainIdParam],
      responses: { '202': ok('cancelled or cancelling (or already finished: nothing to cancel)', out(TrainCancelSchema)), ...errors(400, 404, 503) },
    },
  },
});
