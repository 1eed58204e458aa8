import { z } from 'zod';
import { resourceId } from './ids';

export const MAX_RERANK_QUERIES = 10_000;
export const MAX_CANDIDATES_PER_QUERY = 10_000;
export const MAX_QUERY_CHARS = 4_096;
export const MAX_WAIT_SECONDS = 60;

/** Name of a scorer artifact file under SCORERS_DIR (`<name>.onnx`, or `<name>.json` for lite-flat). */
const artifact = z.string().regex(/^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$/, 'artifact must be a file name under SCORERS_DIR (letters, digits, _ . -)');

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
  z.object({ name: z.literal('knrm'), artifact }).strict(),
  z.object({ name: z.literal('lite'), artifact }).strict(),
  z.object({ name: z.literal('lite-flat'), artifact }).strict(),
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

/** A candidate: a document id, or `{ id, score }` carrying its first-stage score (hybrid needs them). */
export const CandidateSchema = z.union([
  z.string().min(1).max(512),
  z.object({ id: z.string().min(1).max(512), score: z.number() }).strict(),
]);

export const RerankRequestSchema = z
  .object({
    collection: resourceId('collection'),
    queries: z
      .array(
        z
          .object({
            id: z.string().min(1).max(512),
            text: z.string().min(1, 'query text must not be empty').max(MAX_QUERY_CHARS),
            candidates: z.array(CandidateSchema).min(1).max(MAX_CANDIDATES_PER_QUERY),
          })
          .strict(),
      )
      .min(1)
      .max(MAX_RERANK_QUERIES),
    scorer: z.preprocess((v) => (typeof v === 'string' ? { name: v } : v), ScorerSchema).default({ name: 'maxsim', normalize: false }),
    topK: z.number().int().positive().max(MAX_CANDIDATES_PER_QUERY).default(100),
  })
  .strict()
  .superRefine((req, ctx) => {
    if (req.scorer.name !== 'hybrid') return;
    req.queries.forEach((q, qi) =>
      q.candidates.forEach((c, ci) => {
        if (typeof c === 'string') {
          ctx.addIssue({ code: 'custom', path: ['queries', qi, 'candidates', ci], message: 'the hybrid scorer needs every candidate as { id, score } with its first-stage score' });
        }
      }),
    );
  });

export type RerankRequest = z.infer<typeof RerankRequestSchema>;

export interface RerankHit {
  id: string;
  score: number;
}

export interface RerankResult {
  rerankId: string;
  collection: string;
  scorer: ScorerSpec;
  generation: number;
  /**
   * How the generation's token vectors were held when scoring: `rotated-int8` = EDEN token-layout
   * codes expanded to the int8 rotated image (MaxSim by integer GEMMs, other scorers decode their
   * candidates from the codes); `fp32` = decoded vectors. Absent when the collection is empty.
   */
  vectors?: 'rotated-int8' | 'fp32';
  results: { queryId: string; hits: RerankHit[]; missing: string[] }[];
  timings: { totalMs: number; encodeQueriesMs: number; scoreMs: number; loadMs: number };
}
