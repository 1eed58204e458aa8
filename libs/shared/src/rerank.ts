import { z } from 'zod';
import { resourceId } from './ids';

export const MAX_RERANK_QUERIES = 10_000;
export const MAX_CANDIDATES_PER_QUERY = 10_000;
export const MAX_QUERY_CHARS = 4_096;
export const MAX_WAIT_SECONDS = 60;

/**
 * Scorers selectable per request. The scoring issue adds the remaining ones
 * (maxsim-topk, knrm, lite, lite-flat, signed-maxsim, xtr, mebert, hybrid).
 */
export const ScorerSchema = z.union([
  z.object({ name: z.literal('maxsim'), normalize: z.boolean().default(false) }).strict(),
  z.object({ name: z.literal('dense') }).strict(),
]);
export type ScorerSpec = z.infer<typeof ScorerSchema>;
export const SCORER_NAMES = ['maxsim', 'dense'] as const;

export const RerankRequestSchema = z
  .object({
    collection: resourceId('collection'),
    queries: z
      .array(
        z
          .object({
            id: z.string().min(1).max(512),
            text: z.string().min(1, 'query text must not be empty').max(MAX_QUERY_CHARS),
            candidates: z.array(z.string().min(1).max(512)).min(1).max(MAX_CANDIDATES_PER_QUERY),
          })
          .strict(),
      )
      .min(1)
      .max(MAX_RERANK_QUERIES),
    scorer: z.preprocess((v) => (typeof v === 'string' ? { name: v } : v), ScorerSchema).default({ name: 'maxsim', normalize: false }),
    topK: z.number().int().positive().max(MAX_CANDIDATES_PER_QUERY).default(100),
  })
  .strict();

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
  results: { queryId: string; hits: RerankHit[]; missing: string[] }[];
  timings: { totalMs: number; encodeQueriesMs: number; scoreMs: number; loadMs: number };
}
