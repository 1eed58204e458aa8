import { z } from 'zod';

/*
 * What a collection record keeps of a fusion fit (`Collection.fusion`; fusion.ts has the rest): a
 * leaf module, so that collection.ts can name it without importing the search contracts.
 */

export const HYBRID_NORMALIZATIONS = ['minmax', 'zscore', 'none'] as const;
export type HybridNormalization = (typeof HYBRID_NORMALIZATIONS)[number];
/** What a collection record keeps of a fit (`Collection.fusion`). */
export const FittedFusionSchema = z.object({
  judgmentsId: z.string(),
  fittedAt: z.string(),
  base: z.enum(['xtr', 'dense', 'exhaustive']),
  depth: z.number().int(),
  queries: z.number().int().min(0).describe('judged queries the weights were chosen on'),
  normalization: z.enum(HYBRID_NORMALIZATIONS).describe('the best normalisation: used by a linear hybrid search that names neither a normalisation nor a lambda'),
  lambda: z.number().describe('the best weight (with `normalization`)'),
  'ndcg@10': z.number().describe('nDCG@10 of the best setting on the judged queries'),
  lambdas: z
    .object({ minmax: z.number(), zscore: z.number(), none: z.number() })
    .partial()
    .describe('the best weight per normalisation tried: used by a linear hybrid search that names that normalisation and no lambda'),
});
export type FittedFusion = z.infer<typeof FittedFusionSchema>;

