import { z } from 'zod';
import { LIVE, modelId, resourceId } from './ids';
import { GroupSchema, IncludeSchema, type HitDocumentFields } from './documents';
import { CallbackUrlSchema } from './webhooks';
import type { UnavailableSegment } from './degraded';

export const MAX_RERANK_QUERIES = 10_000;
export const MAX_CANDIDATES_PER_QUERY = 10_000;
/** Candidates in one re-rank request, all queries together (a bigger job goes through a batch file). */
export const MAX_RERANK_CANDIDATES = 1_000_000;
export const MAX_QUERY_CHARS = 4_096;
export const MAX_WAIT_SECONDS = 60;

/** Name of a scorer artifact file under SCORERS_DIR (`<name>.onnx`, or `<name>.json` for lite-flat). */
const artifact = z.string().regex(/^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$/, 'artifact must be a file name under SCORERS_DIR (letters, digits, _ . -)');
/** The artifacts a scorer can name: an operator file in SCORERS_DIR, or a trained head (`{collection}.{head}.v{N}`, in S3). */
const artifactOf = (live: 'knrm-artifacts' | 'lite-artifacts' | 'lite-flat-artifacts') => artifact.meta({ [LIVE]: live });

/** Every scorer of SPEC section 1, selectable per request with its parameters. */
export const ScorerSchema = z.discriminatedUnion('name', [
  z.object({ name: z.literal('maxsim'), normalize: z.boolean().default(false) }).strict(),
  z.object({ name: z.literal('dense') }).strict(),
  z
    .object({
      name: z.literal('maxsim-topk'),
      k: z.union([z.literal(1), z.literal(2), z.literal(4), z.literal(8)]).default(2),
      reduce: z.enum(['sum', 'mean']).default('sum'),
    })
    .strict(),
  z.object({ name: z.literal('knrm'), artifact: artifactOf('knrm-artifacts') }).strict(),
  z.object({ name: z.literal('lite'), artifact: artifactOf('lite-artifacts') }).strict(),
  z.object({ name: z.literal('lite-flat'), artifact: artifactOf('lite-flat-artifacts') }).strict(),
  z
    .object({
      name: z.literal('signed-maxsim'),
      /** `model`: the model's token_weights output; `heuristic`: the rule-based negation head; `auto`: model if it has one. */
      weights: z.enum(['auto', 'model', 'heuristic']).default('auto'),
    })
    .strict(),
  z.object({ name: z.literal('xtr'), kPrime: z.number().int().min(1).max(1_000_000).default(1000) }).strict(),
  z.object({ name: z.literal('mebert'), m: z.number().int().min(1).max(64).default(4) }).strict(),
  z
    .object({
      name: z.literal('hybrid'),
      /** The late-interaction or dense score combined with the candidates' first-stage scores. */
      base: z.enum(['maxsim', 'dense']).default('maxsim'),
      fusion: z.enum(['linear', 'rrf']).default('linear'),
      /** score = base + lambda * first_stage (after normalisation), for fusion = linear. */
      lambda: z.number().min(-1000).max(1000),
      normalization: z.enum(['none', 'minmax', 'zscore']).default('minmax'),
      rrfK: z.number().int().min(1).max(10_000).default(60),
    })
    .strict(),
]);
export type ScorerSpec = z.infer<typeof ScorerSchema>;
export const SCORER_NAMES = ['maxsim', 'dense', 'maxsim-topk', 'knrm', 'lite', 'lite-flat', 'signed-maxsim', 'xtr', 'mebert', 'hybrid'] as const;
export type ScorerName = (typeof SCORER_NAMES)[number];

/** Longest candidate text (characters); batch rows are also held to MAX_DOCUMENT_BYTES. */
export const MAX_CANDIDATE_TEXT_CHARS = 100_000;

/** A candidate given by its text (encoded by the encoder pool, cached per model and text hash); `score` for hybrid. */
export const TextCandidateSchema = z
  .object({
    id: z.string().min(1).max(512).optional(),
    text: z.string().min(1, 'candidate text must not be empty').max(MAX_CANDIDATE_TEXT_CHARS, `candidate text is over ${MAX_CANDIDATE_TEXT_CHARS} characters`),
    score: z.number().optional(),
  })
  .strict();
export type TextCandidate = z.infer<typeof TextCandidateSchema>;

/**
 * A candidate: a document id, `{ id, score }` carrying its first-stage score (hybrid needs them),
 * or `{ id?, text, score? }` (a text; without an id its hits are named `#<position in the list>`).
 */
export const CandidateSchema = z.union([
  z.string().min(1).max(512),
  z.object({ id: z.string().min(1).max(512), score: z.number() }).strict(),
  TextCandidateSchema,
]);
export type Candidate = z.infer<typeof CandidateSchema>;

export const isTextCandidate = (c: Candidate): c is TextCandidate => typeof c === 'object' && 'text' in c;
/** The id a candidate's hits carry: its id, or `#<position>` for a text given without one. */
export const candidateId = (c: Candidate, position: number): string => (typeof c === 'string' ? c : (c.id ?? `#${position}`));

export const RerankRequestSchema = z
  .object({
    /** Collection of id candidates; optional when every candidate is a text (then `model` is required). */
    collection: resourceId('collection').optional(),
    /** Model directory (under MODELS_DIR) of a request without a collection; must equal the collection's model when both are given. */
    model: modelId().optional(),
    queries: z
      .array(
        z
          .object({
            id: z.string().min(1).max(512),
            text: z.string().min(1, 'query text must not be empty').max(MAX_QUERY_CHARS),
            candidates: z.array(CandidateSchema).min(1).max(MAX_CANDIDATES_PER_QUERY, `at most ${MAX_CANDIDATES_PER_QUERY} candidates per query (MAX_CANDIDATES_PER_QUERY)`),
          })
          .strict(),
      )
      .min(1)
      .max(MAX_RERANK_QUERIES, `at most ${MAX_RERANK_QUERIES} queries per re-rank request (MAX_RERANK_QUERIES)`),
    scorer: z.preprocess((v) => (typeof v === 'string' ? { name: v } : v), ScorerSchema).default({ name: 'maxsim', normalize: false }),
    topK: z.number().int().positive().max(MAX_CANDIDATES_PER_QUERY, `topK is at most ${MAX_CANDIDATES_PER_QUERY} (MAX_CANDIDATES_PER_QUERY)`).default(100),
    /** Fields read back from S3 onto every hit: `text`, `metadata`. */
    include: IncludeSchema.optional(),
    /** `parent`: passages of one document count once, with the best passage's score. */
    group: GroupSchema.optional(),
    /** Webhook: POSTed the job's summary when it completes or fails (signed; host must be in WEBHOOK_ALLOWED_HOSTS). */
    callback: CallbackUrlSchema.optional(),
  })
  .strict()
  .superRefine((req, ctx) => {
    const total = req.queries.reduce((s, q) => s + q.candidates.length, 0);
    if (total > MAX_RERANK_CANDIDATES) {
      ctx.addIssue({ code: 'custom', path: ['queries'], message: `${total} candidates in one request, over MAX_RERANK_CANDIDATES (${MAX_RERANK_CANDIDATES}) across all queries: split the request, or send a batch file (POST /v1/batches)` });
    }
    if (req.collection === undefined) {
      if (req.model === undefined) ctx.addIssue({ code: 'custom', path: ['model'], message: 'model is required when the request names no collection' });
      req.queries.forEach((q, qi) =>
        q.candidates.forEach((c, ci) => {
          if (!isTextCandidate(c)) ctx.addIssue({ code: 'custom', path: ['queries', qi, 'candidates', ci], message: 'a candidate given by id needs a collection: name one, or give the candidate as { text }' });
        }),
      );
    }
    if (req.scorer.name !== 'hybrid') return;
    req.queries.forEach((q, qi) =>
      q.candidates.forEach((c, ci) => {
        if (typeof c === 'string' || (isTextCandidate(c) && c.score === undefined)) {
          ctx.addIssue({ code: 'custom', path: ['queries', qi, 'candidates', ci], message: 'the hybrid scorer needs every candidate as { id, score } with its first-stage score' });
        }
      }),
    );
  });

export type RerankRequest = z.infer<typeof RerankRequestSchema>;

export interface RerankHit extends HitDocumentFields {
  id: string;
  score: number;
}

/** Text candidates of a re-rank job: how many distinct texts the encoder pool encoded, and how many it found already encoded. */
export interface TextCandidateStats {
  candidates: number;
  encoded: number;
  reused: number;
}

export interface RerankResult {
  rerankId: string;
  /** Absent when the request named none (text candidates only). */
  collection?: string;
  /** The model that encoded the queries (and the text candidates). */
  model?: string;
  /** Present when the request had text candidates. */
  texts?: TextCandidateStats;
  scorer: ScorerSpec;
  generation: number;
  /**
   * How the generation's token vectors were held when scoring: `rotated-int8` = EDEN token-layout
   * codes expanded to the int8 rotated image (MaxSim by integer GEMMs, other scorers decode their
   * candidates from the codes); `fp32` = decoded vectors. Absent when the collection is empty.
   */
  vectors?: 'rotated-int8' | 'fp32';
  /**
   * `pending`: the `missing` ids that an ingestion still in progress accepted (not live yet, rather than unknown).
   * `unavailable`: candidates live in the generation but held by a segment that cannot be read (see `unavailableSegments`); not scored, not in `missing`.
   */
  results: { queryId: string; hits: RerankHit[]; missing: string[]; pending?: string[]; unavailable?: string[] }[];
  /** Present (true) when segments the candidates live in could not be read: the hits come from the others. */
  degraded?: true;
  unavailableSegments?: UnavailableSegment[];
  timings: { totalMs: number; encodeQueriesMs: number; scoreMs: number; loadMs: number };
}
