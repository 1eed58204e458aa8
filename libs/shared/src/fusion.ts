import { z } from 'zod';
import { resourceId } from './ids';
import { DEFAULT_HYBRID_LAMBDA, MAX_K_PRIME, MAX_NPROBE, MAX_SEARCH_TOP_K, type SearchMode, type SearchRequest } from './search';
import { FittedFusionSchema, HYBRID_NORMALIZATIONS, type FittedFusion, type HybridNormalization } from './fusion-record';

export { FittedFusionSchema, HYBRID_NORMALIZATIONS, type FittedFusion, type HybridNormalization };

/**
 * Hybrid search's fusion weight, fitted per collection on its judgments (issue 32 item 7):
 * `POST /v1/collections/{id}/fusion/fit` searches the judged queries once with the base and once
 * with BM25, fuses the two lists with every weight of a grid under each normalisation, and stores
 * the best in the collection record (`fusion`). A linear hybrid search that names no `lambda`
 * then fuses with it (resolveHybridMode). Contracts only; the fit runs in the API
 * (libs/http-api/src/judgments/fusion-fit.service.ts).
 */

/** The normalisation of a linear hybrid that names neither a normalisation nor a weight, on a collection without a fitted fusion. */
export const DEFAULT_HYBRID_NORMALIZATION: HybridNormalization = 'minmax';

/** The weights a fit tries by default (each with every normalisation); 0 is the base alone. */
export const FUSION_FIT_LAMBDAS = [0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1, 1.25, 1.5, 2, 3, 5] as const;
export const MAX_FUSION_FIT_LAMBDAS = 64;

export const FusionFitRequestSchema = z
  .object({
    /** The judgment set (default: the collection's newest). */
    judgments: resourceId('judgments').optional().describe("the judgment set to fit on (default: the collection's newest)"),
    base: z.enum(['xtr', 'dense', 'exhaustive']).default('xtr').describe('the hybrid base the weight is fitted with (default xtr)'),
    depth: z.number().int().min(1).max(MAX_SEARCH_TOP_K).default(100).describe("hits each part contributes to the union (default 100, hybrid's default)"),
    kPrime: z.number().int().min(1).max(MAX_K_PRIME).default(1000),
    nprobe: z.number().int().min(1).max(MAX_NPROBE).default(32),
    k1: z.number().min(0).max(10).default(0.9),
    b: z.number().min(0).max(1).default(0.4),
    lambdas: z
      .array(z.number().min(0).max(1000))
      .min(1)
      .max(MAX_FUSION_FIT_LAMBDAS, `at most ${MAX_FUSION_FIT_LAMBDAS} lambdas`)
      .optional()
      .describe(`BM25 weights to try (default ${FUSION_FIT_LAMBDAS.join(', ')}); the default weight of each normalisation is always tried`),
    normalizations: z
      .array(z.enum(HYBRID_NORMALIZATIONS))
      .min(1)
      .max(HYBRID_NORMALIZATIONS.length)
      .optional()
      .describe('normalisations to try (default all: minmax, zscore, none)'),
  })
  .strict();
export type FusionFitRequest = z.infer<typeof FusionFitRequestSchema>;

type HybridMode = Extract<SearchMode, { name: 'hybrid' }>;

/**
 * The fusion a hybrid search runs with: the request's lambda and normalisation where it names them;
 * else the collection's fitted ones (`fitted`: the best normalisation when the request names
 * neither, the best weight of the request's normalisation when it names only that); else the
 * service's defaults (minmax, DEFAULT_HYBRID_LAMBDA of the normalisation). A lambda named without
 * a normalisation keeps meaning a min-max weight. RRF takes no weight: only its normalisation
 * (unused) is filled in.
 */
export function resolveHybridMode(mode: HybridMode, fitted?: Pick<FittedFusion, 'normalization' | 'lambdas'> | null): HybridMode & { normalization: HybridNormalization } {
  const normalization = mode.normalization ?? (mode.lambda === undefined && mode.fusion === 'linear' && fitted ? fitted.normalization : DEFAULT_HYBRID_NORMALIZATION);
  if (mode.fusion !== 'linear') return { ...mode, normalization };
  const lambda = mode.lambda ?? fitted?.lambdas[normalization] ?? DEFAULT_HYBRID_LAMBDA[normalization];
  return { ...mode, normalization, lambda };
}

/** The request with its hybrid mode resolved against the collection's fitted fusion (other modes unchanged). */
export function withCollectionFusion<R extends Pick<SearchRequest, 'mode'>>(req: R, collection: { fusion?: Pick<FittedFusion, 'normalization' | 'lambdas'> }): R {
  return req.mode.name === 'hybrid' ? { ...req, mode: resolveHybridMode(req.mode, collection.fusion) } : req;
}

/** One setting of a fit's grid and its nDCG@10 over the judged queries. */
export const FusionFitPointSchema = z.object({ normalization: z.enum(HYBRID_NORMALIZATIONS), lambda: z.number(), 'ndcg@10': z.number() });

/** POST /v1/collections/{id}/fusion/fit (200). */
export const FusionFitResultSchema = z.object({
  collection: z.string(),
  judgmentsId: z.string(),
  queries: z.number().int().min(0).describe('judged queries evaluated: those with a positive judgment of a document the collection has'),
  skippedQueries: z.number().int().min(0).describe('judged queries left out (no positive judgment of a known document)'),
  parts: z.object({ base: z.number(), bm25: z.number() }).describe("nDCG@10 of each part alone (its top `depth`)"),
  default: FusionFitPointSchema.describe("the service's default fusion (minmax, DEFAULT_HYBRID_LAMBDA) on the same queries"),
  grid: z.array(FusionFitPointSchema).describe('every setting tried, in grid order (normalisation, then lambda ascending)'),
  fusion: FittedFusionSchema.describe('what the collection record now holds'),
  searchMs: z.number().describe("wall time of the two searches (the fusions' own time is negligible)"),
});
export type FusionFitResult = z.infer<typeof FusionFitResultSchema>;
