/** OpenAPI paths of judgments and training (judgments.controller.ts), from the zod schemas that validate them. */
import { z } from 'zod';
import { ID_PATTERN, JudgedQuerySchema, JudgmentsJsonSchema, MIN_TRAIN_QUERIES, TrainRequestSchema } from '@lateral/shared';

const schema = (s: z.ZodType) => z.toJSONSchema(s, { io: 'input', unrepresentable: 'any' }) as Record<string, unknown>;
const error = { $ref: '#/components/schemas/Error' };
const errors = (...codes: number[]) =>
  Object.fromEntries(codes.map((c) => [String(c), { description: { 400: 'bad input (the message and details name the field and the limit)', 404: 'unknown resource', 503: 'Redis or S3 unreachable' }[c] ?? 'error', content: { 'application/json': { schema: error } } }]));
const ok = (description: string, s: Record<string, unknown> = { type: 'object' }) => ({ description, content: { 'application/json': { schema: s } } });
const idParam = { name: 'id', in: 'path', required: true, schema: { type: 'string', pattern: ID_PATTERN.source }, description: 'collection id' };
const trainIdParam = { name: 'trainId', in: 'path', required: true, schema: { type: 'string', pattern: ID_PATTERN.source }, description: 'training run id (tr-…)' };

const summary = {
  type: 'object',
  properties: {
    judgmentsId: { type: 'string' },
    collection: { type: 'string' },
    queries: { type: 'integer' },
    judgments: { type: 'integer' },
    positives: { type: 'integer' },
    trainableQueries: { type: 'integer', description: 'queries with a positive judgment of a document the collection has' },
    unknownDocuments: { type: 'array', items: { type: 'string' }, description: 'judged ids the collection has not accepted (first 1,000); not an error' },
    unknownDocumentsTotal: { type: 'integer' },
  },
};

const trainStatus = {
  type: 'object',
  properties: {
    trainId: { type: 'string' },
    collection: { type: 'string' },
    status: { type: 'string', enum: ['queued', 'running', 'completed', 'failed', 'cancelled'] },
    progress: {
      type: ['object', 'number', 'null'],
      description: 'stage (loading, first-stage, training, writing), percent, epoch, maxEpochs, step, stepsPerEpoch, loss (mean of the epoch so far), etaSeconds, curve',
    },
    result: { type: 'object', description: 'the training report (also `{artifact}.training.json` beside the artifact): artifact, version, bestEpoch, curve [{epoch, trainLoss, valNdcg10, seconds}], heldOut {queries, ndcg10, maxsimNdcg10}, data, options' },
    error: { type: 'string', description: 'why it failed: a diverged run names the epoch and the last finite loss' },
  },
};

export const TRAINING_OPENAPI_PATHS = {
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
      responses: { '201': ok('stored', summary), ...errors(400, 404, 503) },
    },
  },
  '/v1/collections/{id}/judgments/{judgmentsId}': {
    get: {
      summary: 'A stored judgment set',
      parameters: [idParam, { name: 'judgmentsId', in: 'path', required: true, schema: { type: 'string', pattern: ID_PATTERN.source } }],
      responses: { '200': ok('the set'), ...errors(400, 404, 503) },
    },
  },
  '/v1/collections/{id}/train': {
    post: {
      summary: 'Train a learned head (LITE default or small, or K-NRM) on the collection\'s judgments: 202 with the run id',
      description: `Runs on the train queue (scorer workers, one at a time). Needs at least ${MIN_TRAIN_QUERIES} judged queries with a positive judgment of a document in the collection (400 naming the minimum otherwise). The result is a versioned scorer artifact \`{collection}.{head}[-small].v{N}\` in S3 and SCORERS_DIR, named in re-rank requests as \`{"name": "lite" | "knrm", "artifact": "…"}\`.`,
      parameters: [idParam],
      requestBody: { required: true, content: { 'application/json': { schema: schema(TrainRequestSchema), example: { head: 'lite', size: 'small', maxEpochs: 20, seed: 1 } } } },
      responses: { '202': ok('queued', { type: 'object', properties: { trainId: { type: 'string' }, judgmentsId: { type: 'string' }, status: { type: 'string' }, trainableQueries: { type: 'integer' } } }), ...errors(400, 404, 503) },
    },
  },
  '/v1/train/{trainId}': {
    get: {
      summary: 'Status of a training run: epochs, loss, ETA while it runs; the report when done',
      parameters: [trainIdParam],
      responses: { '200': ok('status', trainStatus), ...errors(400, 404, 503) },
    },
    delete: {
      summary: 'Cancel a training run: a queued run is removed, a running one stops at its next step (status `cancelled`)',
      parameters: [trainIdParam],
      responses: { '202': ok('cancelled or cancelling', { type: 'object', properties: { trainId: { type: 'string' }, status: { type: 'string', enum: ['cancelled', 'cancelling', 'completed', 'failed'] } } }), ...errors(400, 404, 503) },
    },
  },
};
