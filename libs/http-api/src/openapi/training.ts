/** Judgments and training (judgments.controller.ts): tag `training`. */
import { z } from 'zod';
import { FUSION_FIT_LAMBDAS, FusionFitRequestSchema, FusionFitResultSchema, JudgedQuerySchema, JudgmentsJsonSchema, MIN_TRAIN_QUERIES } from '@lateral/shared';
import { JudgmentSetSchema, JudgmentsSummarySchema, TrainAcceptedSchema, TrainCancelSchema, TrainStatusSchema, type Produces } from '@lateral/shared';
import type { JudgmentsSummary, TrainStatus } from '../judgments/judgments.service';
import { TrainRequestForm } from './request-forms';
import { errorAnswer, errors, json, param, type ApiRegistry } from './registry';

/** The services' answers fit the documented schemas (a compile-time check). */
export type JudgmentsAnswers = [Produces<typeof JudgmentsSummarySchema, JudgmentsSummary>, Produces<typeof TrainStatusSchema, TrainStatus>];

/** Requests that show the forms; each one is accepted as written (rules.spec.ts). */
export const JUDGMENTS_EXAMPLES = { json: { summary: 'judged queries (grade 0: judged not relevant)', value: { queries: [{ id: 'q1', text: 'supersonic wing flutter', judgments: [{ doc: 'd1', grade: 2 }, { doc: 'd2', grade: 0 }] }] } } };
export const TRAIN_EXAMPLES = {
  lite: { summary: 'LITE (small), seeded', value: { head: 'lite', size: 'small', maxEpochs: 20, seed: 1 } },
  residual: { summary: 'LITE as a correction on MaxSim', value: { head: 'lite', residual: true } },
};
export const FUSION_FIT_EXAMPLES = {
  defaults: { summary: "the newest judgment set, base xtr, every normalisation and the default weights", value: {} },
  grid: { summary: 'a named set and a smaller grid', value: { judgments: 'js-20260101000000000-abcd1234', normalizations: ['minmax'], lambdas: [0, 0.3, 0.7, 1.5] } },
};
const COMMON = { 503: 'Redis or S3 unreachable, or not answering in time under load (error overloaded); Retry-After' };

export function registerTraining(api: ApiRegistry): void {
  const id = param.id('collection id');
  const trainId = z.object({ trainId: param.id('training run id (tr-…)') });
  const common = errors(400, 404, [503, COMMON[503]]);

  api.op('training', 'post', '/v1/collections/{id}/judgments', {
    summary: 'Store relevance judgments of a collection (JSON, NDJSON, or TREC qrels + topics) in S3',
    description:
        'JSON: an array of judged queries `{ id, text, judgments: [{ doc, grade }] }` or `{ queries: [...] }`; NDJSON (`application/x-ndjson`): one judged query per line; TREC: `{ "qrels": "qid 0 docid grade\\n…", "topics": "<top><num>…</num><title>…</title></top>… or qid<TAB>text lines" }`. Grade 0 = judged not relevant. Judged document ids the collection has not accepted are listed in `unknownDocuments`, not refused. Each POST stores a new set (`js-…`, newest last).',
    request: {
      params: z.object({ id }),
      body: {
        required: true,
        content: {
          'application/json': { schema: api.input(JudgmentsJsonSchema), examples: JUDGMENTS_EXAMPLES },
          'application/x-ndjson': { schema: api.input(JudgedQuerySchema) },
        },
      },
    },
    responses: { '201': json('stored', api.output(JudgmentsSummarySchema)), ...common },
  });
  api.op('training', 'get', '/v1/collections/{id}/judgments/{judgmentsId}', {
    summary: 'A stored judgment set',
    request: { params: z.object({ id, judgmentsId: param.id() }) },
    responses: { '200': json('the set', api.output(JudgmentSetSchema)), ...common },
  });
  api.op('training', 'post', '/v1/collections/{id}/train', {
    summary: "Train a learned head (LITE default or small, or K-NRM) on the collection's judgments, or an AESI codec on its token vectors: 202 with the run id",
    description: `Runs on the train queue (scorer workers, one at a time). Needs at least ${MIN_TRAIN_QUERIES} judged queries with a positive judgment of a document in the collection (400 naming the minimum otherwise). The result is a versioned scorer artifact \`{collection}.{head}[-small][-residual].v{N}\` in S3 and SCORERS_DIR, named in re-rank requests as \`{"name": "lite" | "knrm", "artifact": "…"}\`. With \`residual: true\` (LITE only; 400 naming \`residual\` otherwise) LITE is trained as a correction on MaxSim: score = w x MaxSim + LITE, starting from MaxSim's own ranking, which early stopping keeps unless a trained epoch ranks the held-out queries better. With \`head: "aesi"\` (no judgments needed; the model must declare static embeddings) it fits SDR's autoencoder with side information (\`codeDims\`, \`width\`, \`bits\`, \`sampleTokens\`, \`batchTokens\`) on a seeded sample of the collection's raw token vectors; the result is a trained codec \`{collection}.aesi-c{codeDims}-h{width}.v{N}\` in S3 (\`codecs/trained/\`, with its training curve and held-out error beside it), used by \`POST /v1/collections/{id}/recompress\` with \`{"codec": {"kind": "eden", "sideInfo": true, "dims": codeDims, "trained": name}}\`.`,
    request: { params: z.object({ id }), body: { required: true, content: { 'application/json': { schema: api.input(TrainRequestForm), examples: TRAIN_EXAMPLES } } } },
    responses: { '202': json('queued', api.output(TrainAcceptedSchema)), ...common, '409': errorAnswer('the collection has no judgments yet, no judgment set named `judgments`, or too few trainable queries (the message names the minimum)') },
  });
  api.op('training', 'post', '/v1/collections/{id}/fusion/fit', {
    summary: "Fit hybrid search's fusion weight on a judgment set of the collection and store it in the collection record",
    description: `Searches the set's judged queries (those with a positive judgment of a document the collection has) through the search queue, once with the base (\`xtr\` by default) and once with BM25, each's top \`depth\` (the two lists a hybrid search fuses), then fuses them for every normalisation (minmax, zscore, none) and weight of the grid (default ${FUSION_FIT_LAMBDAS.join(', ')}, plus each normalisation's default weight) and scores nDCG@10 (linear gain, the judgments' grades). The best setting wins (ties: the service's default, minmax 0.7; per normalisation, its default weight) and is stored as the collection's \`fusion\`: a later linear hybrid search that names no \`lambda\` fuses with the fitted normalisation and weight (naming only \`normalization\`: that normalisation's fitted weight); a request's own \`lambda\` still wins, and the search result's \`mode\` says what ran. Answers when the searches are done (at most 900 s, 503 after). \`DELETE /v1/collections/{id}/fusion\` goes back to the defaults.`,
    request: { params: z.object({ id }), body: { required: false, content: { 'application/json': { schema: api.input(FusionFitRequestSchema), examples: FUSION_FIT_EXAMPLES } } } },
    responses: {
      '200': json('the grid, the parts, the default setting and the stored fusion', api.output(FusionFitResultSchema)),
      ...common,
      '409': errorAnswer('the collection has no judgments or no judgment set named `judgments`, none of the set\'s queries judges a document it has, or no judged query got a hit (nothing committed yet)'),
    },
  });
  api.op('training', 'delete', '/v1/collections/{id}/fusion', {
    summary: "Drop the collection's fitted fusion: hybrid searches go back to the service's defaults",
    request: { params: z.object({ id }) },
    responses: { '200': json('dropped (or there was none)', api.output(z.object({ collection: z.string(), fusion: z.null() }))), ...common },
  });
  api.op('training', 'get', '/v1/train/{trainId}', {
    summary: 'Status of a training run: epochs, loss, ETA while it runs; the report when done',
    request: { params: trainId },
    responses: { '200': json('status', api.output(TrainStatusSchema)), ...common },
  });
  api.op('training', 'delete', '/v1/train/{trainId}', {
    summary: 'Cancel a training run: a queued run is removed, a running one stops at its next step (status `cancelled`)',
    request: { params: trainId },
    responses: { '202': json('cancelled or cancelling (or already finished: nothing to cancel)', api.output(TrainCancelSchema)), ...common },
  });
}
