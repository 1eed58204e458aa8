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
export const MAX_AESI_SAMPLE_TOKENS = 500_000;

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

/**
 * The TREC forms as the OpenAPI document states them (judgments.parse.ts parses them): qrels lines
 * `qid iter docid grade` (printable ASCII tokens, an integer grade; blank and `#` lines skipped),
 * topics as `qid<TAB>text` lines (the text with a printable character; TREC `<top>` records are
 * also read, see the description). Every judged qid needs a topic: a rule between the two fields
 * that JSON Schema cannot state (scripts/contract-hooks.py gives generated bodies their topics).
 */
const QRELS_LINE = '[!-"$-~][!-~]{0,511}[ \\t]+[!-~]+[ \\t]+[!-~]{1,512}[ \\t]+-?[0-9]{1,9}[ \\t]*';
export const QRELS_FORM = `^(?:[ \\t]*(?:#[^\\n]*|${QRELS_LINE})?\\r?\\n)*${QRELS_LINE}\\r?\\n?$`;
export const TOPICS_FORM = '^(?:[^\\t\\n<]{1,512}\\t[^\\n<]{0,2000}[!-;=?-~][^\\n<]{0,2000}\\n)*[^\\t\\n<]{1,512}\\t[^\\n<]{0,2000}[!-;=?-~][^\\n<]{0,2000}\\n?$';

export const JudgmentsJsonSchema = z.union([
  z.array(JudgedQuerySchema).min(1).max(MAX_JUDGED_QUERIES),
  z.object({ queries: z.array(JudgedQuerySchema).min(1).max(MAX_JUDGED_QUERIES) }).strict(),
  /** TREC: qrels lines `qid 0 docid grade` and topics as `<top><num>...<title>...` records or `qid<TAB>text` lines. */
  z.object({ qrels: z.string().min(1).meta({ pattern: QRELS_FORM }), topics: z.string().min(1).meta({ pattern: TOPICS_FORM }) }).strict(),
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
    /** lite / knrm: a scorer fitted on judgments; aesi: SDR's autoencoder codec fitted on the collection's token vectors (no judgments) */
    head: z.enum(['lite', 'knrm', 'aesi']),
    /** LITE's size: default (L1 30, L2 200, m1 360, m2 2400) or small (L2 50, m2 768) */
    size: z.enum(['default', 'small']).default('default'),
    /**
     * LITE only: a residual on MaxSim, score = w x MaxSim + LITE (w learned; LITE's correction
     * starts at zero, so training starts at MaxSim's ranking and keeps it unless an epoch ranks the
     * held-out queries better). The artifact is named `{collection}.lite[-small]-residual.v{N}`.
     */
    residual: z.boolean().default(false),
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
    /** aesi: code size c (the codec's dims) */
    codeDims: z.number().int().min(2).max(1024).default(16),
    /** aesi: intermediate width h (1536 in the paper; smaller trains faster) */
    width: z.number().int().min(8).max(4096).default(1536),
    /** aesi: EDEN bits of the code in the codec the run writes (recompress may pick others) */
    bits: z.number().int().min(1).max(8).default(6),
    /** aesi: token vectors sampled (seeded) from the collection's raw vectors; a share valFraction of them is held out */
    sampleTokens: z.number().int().min(50).max(MAX_AESI_SAMPLE_TOKENS).default(20_000),
    /** aesi: tokens per Adam step */
    batchTokens: z.number().int().min(8).max(4096).default(256),
  })
  .strict()
  .superRefine((r, ctx) => {
    if (r.residual && r.head !== 'lite') ctx.addIssue({ code: 'custom', path: ['residual'], message: `residual applies to head 'lite' only, not '${r.head}'` });
  });
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
  /** LITE trained as a residual on MaxSim (its artifact takes each candidate's MaxSim as `base`) */
  residual?: boolean;
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
  /** LITE: the MaxSim warm start before the ranking epochs (steps, distillation loss, held-out nDCG@10 after it) */
  warmStart?: { steps: number; loss: number; valNdcg10: number; seconds: number };
  /** sha256 (hex) of the artifact's bytes: scorers verify the copy they fetch from S3 against it */
  sha256?: string;
}

/** What a train job with head 'aesi' leaves beside the trained codec (codecs/trained/{name}.training.json). */
export interface AesiTrainReport {
  trainId: string;
  /** the trained codec's name: recompress with codec.trained = this */
  trainedCodec: string;
  head: 'aesi';
  version: number;
  collection: string;
  generation: number;
  model: string;
  /** the settings the trained codec is stored with (a recompress request may change bits, layout, norms) */
  codec: Record<string, unknown>;
  bestEpoch: number;
  /** per epoch: training MSE, held-out MSE and relative error sum ||v - v'||^2 / sum ||v||^2 */
  curve: { epoch: number; trainMse: number; valMse: number; valRelError: number; seconds: number }[];
  heldOut: { tokens: number; mse: number; relError: number };
  data: Record<string, unknown>;
  options: Record<string, unknown>;
  seconds: number;
  createdAt: string;
}

/** Name of a trained AESI codec: `{collection}.aesi-c{codeDims}-h{width}.v{version}`. */
export function aesiCodecName(collection: string, codeDims: number, width: number, version: number): string {
  return `${collection}.aesi-c${codeDims}-h${width}.v${version}`;
}

export const trainingKeys = {
  judgments: (tenantId: string, collectionId: string, id: string) => `tenants/${safe('tenant id', tenantId)}/collections/${safe('collection id', collectionId)}/judgments/${safe('judgments id', id)}.json`,
  judgmentsPrefix: (tenantId: string, collectionId: string) => `tenants/${safe('tenant id', tenantId)}/collections/${safe('collection id', collectionId)}/judgments/`,
  trainRequest: (tenantId: string, id: string) => `tenants/${safe('tenant id', tenantId)}/train/${safe('train id', id)}/request.json`,
  /** versioned artifacts of a collection: heads/{artifact}.onnx and heads/{artifact}.training.json */
  headArtifact: (tenantId: string, collectionId: string, artifact: string) => `tenants/${safe('tenant id', tenantId)}/collections/${safe('collection id', collectionId)}/heads/${safe('artifact', artifact)}.onnx`,
  headReport: (tenantId: string, collectionId: string, artifact: string) => `tenants/${safe('tenant id', tenantId)}/collections/${safe('collection id', collectionId)}/heads/${safe('artifact', artifact)}.training.json`,
  /** trained AESI codecs of a collection: codecs/trained/{name}.codec and {name}.training.json (recompress names them as codec.trained) */
  trainedCodec: (tenantId: string, collectionId: string, name: string) => `tenants/${safe('tenant id', tenantId)}/collections/${safe('collection id', collectionId)}/codecs/trained/${safe('trained codec', name)}.codec`,
  trainedCodecReport: (tenantId: string, collectionId: string, name: string) => `tenants/${safe('tenant id', tenantId)}/collections/${safe('collection id', collectionId)}/codecs/trained/${safe('trained codec', name)}.training.json`,
  trainedCodecsPrefix: (tenantId: string, collectionId: string) => `tenants/${safe('tenant id', tenantId)}/collections/${safe('collection id', collectionId)}/codecs/trained/`,
  headsPrefix: (tenantId: string, collectionId: string) => `tenants/${safe('tenant id', tenantId)}/collections/${safe('collection id', collectionId)}/heads/`,
  trainJob: (tenantId: string, id: string) => `${safe('tenant id', tenantId)}~train~${safe('train id', id)}`,
  /** Redis flag set by DELETE /v1/train/{id}; the job checks it between steps */
  cancelFlag: (prefix: string, tenantId: string, id: string) => `${prefix}:t:${safe('tenant id', tenantId)}:train-cancel:${safe('train id', id)}`,
};

/**
 * Artifact name of a trained head: `{collection}.{head}[-small][-residual].v{version}` (a file name
 * under SCORERS_DIR that re-rank requests name as `scorer.artifact`).
 */
export function headArtifactName(collection: string, head: 'lite' | 'knrm', size: 'default' | 'small', version: number, residual = false): string {
  if (residual && head !== 'lite') throw new RangeError(`headArtifactName: residual applies to LITE only, not ${head}`);
  return `${collection}.${head}${head === 'lite' && size === 'small' ? '-small' : ''}${residual ? '-residual' : ''}.v${version}`;
}
