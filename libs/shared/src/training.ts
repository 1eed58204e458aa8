/**
 * Learned heads trained in the service: relevance judgments (stored in S3 per collection) and the
 * train request (LITE, default or small, and K-NRM fitted on them). Contracts only.
 */
import { z } from 'zod';
import { assertResourceId as safe, documentId, resourceId } from './ids';

/** Fewest judged queries (each with a positive and a non-positive candidate) a training run accepts: some to train, 2 held out. */
export const MIN_TRAIN_QUERIES = 10;
export const MAX_JUDGED_QUERIES = 100_000;
export const MAX_JUDGMENTS_PER_QUERY = 10_000;
export const MAX_TRAIN_EPOCHS = 200;

/** One judged query: its text (as a re-rank request would send it) and graded documents (grade 0 = judged not relevant). */
export const JudgedQuerySchema = z
  .object({
    id: z.string().min(1).max(512),
    text: z.string().min(1, 'query text must not be empty').max(4096, 'query text is over 4096 characters'),
    judgments: z
      .array(z.object({ doc: documentId('judgments[].doc'), grade: z.number().int().min(0).max(100) }).strict())
      .min(1, 'a judged query needs at least one judgment')
      .max(MAX_JUDGMENTS_PER_QUERY, `at most ${MAX_JUDGMENTS_PER_QUERY} judgments per query`),
  })
  .strict();
export type JudgedQuery = z.infer<typeof JudgedQuerySchema>;

export const JudgmentsJsonSchema = z.union([
  z.array(JudgedQuerySchema).min(1).max(MAX_JUDGED_QUERIES),
  z.object({ queries: z.array(JudgedQuerySchema).min(1).max(MAX_JUDGED_QUERIES) }).strict(),
  /** TREC: qrels lines `qid 0 docid grade` and topics as `<top><num>...<title>...` records or `qid<TAB>text` lines. */
  z.object({ qrels: z.string().min(1), topics: z.string().min(1) }).strict(),
]);

/** What S3 holds for one judgment set (tenants/{t}/collections/{c}/judgments/{id}.json). */
export interface JudgmentSet {
  judgmentsId: string;
  collection: string;
  createdAt: string;
  queries: JudgedQuery[];
  /** judged document ids that the collection had not accepted when the set was stored */
  unknownDocuments: string[];
}

export const TrainRequestSchema = z
  .object({
    head: z.enum(['lite', 'knrm']),
    /** LITE's size: default (L1 30, L2 200, m1 360, m2 2400) or small (L2 50, m2 768) */
    size: z.enum(['default', 'small']).default('default'),
    /** judgment set; default: the collection's latest */
    judgments: resourceId('judgments').optional(),
    seed: z.number().int().min(0).max(2 ** 31 - 1).default(1),
    maxEpochs: z.number().int().min(1).max(MAX_TRAIN_EPOCHS).default(20),
    patience: z.number().int().min(1).max(50).default(3),
    learningRate: z.number().positive().max(1).optional(),
    negatives: z.number().int().min(1).max(32).default(3),
    /** first-stage (MaxSim) candidates per query: hard negatives and the held-out re-ranking depth */
    depth: z.number().int().min(5).max(1000).default(50),
    valFraction: z.number().min(0.05).max(0.5).default(0.2),
  })
  .strict();
export type TrainRequest = z.infer<typeof TrainRequestSchema>;

/** The stored request of one training run, read by the train job. */
export interface StoredTrainRequest extends TrainRequest {
  trainId: string;
  collection: string;
  judgmentsId: string;
  createdAt: string;
}

/** What a train job leaves beside the artifact (training.json). */
export interface TrainReport {
  trainId: string;
  artifact: string;
  head: 'lite' | 'knrm';
  size?: 'default' | 'small';
  version: number;
  collection: string;
  generation: number;
  model: string;
  judgmentsId: string;
  bestEpoch: number;
  curve: { epoch: number; trainLoss: number; valNdcg10: number; seconds: number }[];
  heldOut: { queries: number; ndcg10: number; maxsimNdcg10: number };
  data: Record<string, unknown>;
  options: Record<string, unknown>;
  seconds: number;
  createdAt: string;
}

export const trainingKeys = {
  judgments: (t: string, c: string, id: string) => `tenants/${safe('tenant id', t)}/collections/${safe('collection id', c)}/judgments/${safe('judgments id', id)}.json`,
  judgmentsPrefix: (t: string, c: string) => `tenants/${safe('tenant id', t)}/collections/${safe('collection id', c)}/judgments/`,
  trainRequest: (t: string, id: string) => `tenants/${safe('tenant id', t)}/train/${safe('train id', id)}/request.json`,
  /** versioned artifacts of a collection: heads/{artifact}.onnx and heads/{artifact}.training.json */
  headArtifact: (t: string, c: string, artifact: string) => `tenants/${safe('tenant id', t)}/collections/${safe('collection id', c)}/heads/${safe('artifact', artifact)}.onnx`,
  headReport: (t: string, c: string, artifact: string) => `tenants/${safe('tenant id', t)}/collections/${safe('collection id', c)}/heads/${safe('artifact', artifact)}.training.json`,
  headsPrefix: (t: string, c: string) => `tenants/${safe('tenant id', t)}/collections/${safe('collection id', c)}/heads/`,
  trainJob: (t: string, id: string) => `${safe('tenant id', t)}~train~${safe('train id', id)}`,
  /** Redis flag set by DELETE /v1/train/{id}; the job checks it between steps */
  cancelFlag: (prefix: string, t: string, id: string) => `${prefix}:t:${safe('tenant id', t)}:train-cancel:${safe('train id', id)}`,
};

/**
 * Artifact name of a trained head: `{collection}.{head}[-small].v{version}` (a file name under
 * SCORERS_DIR that re-rank requests name as `scorer.artifact`).
 */
export function headArtifactName(collection: string, head: 'lite' | 'knrm', size: 'default' | 'small', version: number): string {
  return `${collection}.${head}${head === 'lite' && size === 'small' ? '-small' : ''}.v${version}`;
}
