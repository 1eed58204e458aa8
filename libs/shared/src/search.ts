import { z } from 'zod';
import { resourceId } from './ids';
import { MAX_QUERY_CHARS, ScorerSchema } from './rerank';
import { GroupSchema, IncludeSchema, type HitDocumentFields } from './documents';
import { CallbackUrlSchema } from './webhooks';
import type { UnavailableSegment } from './degraded';

export const MAX_SEARCH_QUERIES = 1_000;
export const MAX_SEARCH_TOP_K = 1_000;
export const MAX_K_PRIME = 100_000;
export const MAX_NPROBE = 65_536;
export const MAX_T_PRIME = 10_000_000;
/**
 * Mode xtr (and hybrid's xtr part) on a WARP search layout without `exact`: WARP's first 32 hits
 * re-scored by exact MaxSim. Measured on the full Vaswani collection (docs/benchmarks.md, "WARP";
 * docs/scaling.md): WARP alone 0.965x exhaustive MaxSim's nDCG@10 at nprobe 32; its first 32 hits
 * re-scored 0.993x at nprobe 8 (WARP_DEFAULT_NPROBE). The stage reads only those documents' codes
 * and scores them in the WebAssembly module (SegmentCache.documentScores; without the module,
 * their decoded rows in one GEMM MaxSim call).
 */
export const WARP_DEFAULT_EXACT = 32;

/**
 * IVF lists probed per query token by mode xtr (and hybrid's xtr part) over a WARP search layout
 * when the request names no nprobe; the plain IVF path keeps XTR's 32 (the schema's default).
 * Chosen by measurement on the full Vaswani collection (docs/benchmarks.md, "WARP"): with the exact
 * stage (WARP_DEFAULT_EXACT) nprobe 8 reached 0.993x exhaustive MaxSim's nDCG@10 (nprobe 32:
 * 0.990x) for a quarter of the lists scanned.
 */
export const WARP_DEFAULT_NPROBE = 8;

/**
 * A parsed search mode with WARP's defaults where the request (`rawMode`: the request body's
 * `mode` as sent) named none: nprobe WARP_DEFAULT_NPROBE for mode xtr and hybrid over xtr. For a
 * collection with a WARP search layout; any other mode is returned as it is.
 */
export function withWarpDefaults(mode: SearchMode, rawMode: unknown): SearchMode {
  const named = typeof rawMode === 'object' && rawMode !== null && (rawMode as Record<string, unknown>).nprobe !== undefined;
  if (named) return mode;
  if (mode.name === 'xtr' || (mode.name === 'hybrid' && mode.base === 'xtr')) return { ...mode, nprobe: WARP_DEFAULT_NPROBE };
  return mode;
}

/**
 * ME-BERT's default m, and the rows per document that coded segments store apart for it (their
 * prefix section, docs/segment-format.md): a query with m up to this scans that section; a larger
 * m, or a segment written without one, reads the first m rows from the segment's codes.
 */
export const MEBERT_PREFIX_ROWS = 4;

/** First-stage retrieval modes over a whole collection (SPEC section 3), each with its parameters. */
export const SearchModeSchema = z.discriminatedUnion('name', [
  z
    .object({
      name: z.literal('xtr'),
      /** Document tokens each query token retrieves (over the whole collection). */
      kPrime: z.number().int().min(1).max(MAX_K_PRIME).default(1000),
      /** IVF lists probed per query token. */
      nprobe: z
        .number()
        .int()
        .min(1)
        .max(MAX_NPROBE)
        .default(32)
        .describe('IVF lists probed per query token; absent: 32, or WARP_DEFAULT_NPROBE on a collection with a WARP search layout (docs/scaling.md)'),
      /**
       * WARP search layouts only: t' of WARP's imputation, in tokens (a query token's missing
       * similarity is the score of the centroid at which the collection-wide sizes of its best
       * centroids, summed in score order, reach t'). Absent: the engine's default (warpTPrime).
       */
      tPrime: z.number().int().min(1).max(MAX_T_PRIME).optional(),
      /**
       * WARP search layouts only: WARP's first `exact` hits per query re-scored with exact MaxSim
       * (divided by the query's tokens, XTR's scale) from the segments' document-ordered codes and
       * ranked by it; the hits after them keep WARP's order and scores. 0: off. Absent:
       * WARP_DEFAULT_EXACT (0).
       */
      exact: z.number().int().min(0).max(MAX_SEARCH_TOP_K).optional().describe("WARP search layouts: WARP's first `exact` hits per query re-scored by exact MaxSim / query tokens and ranked by it; 0: off; absent: WARP_DEFAULT_EXACT"),
    })
    .strict(),
  z.object({ name: z.literal('bm25'), k1: z.number().min(0).max(10).default(0.9), b: z.number().min(0).max(1).default(0.4) }).strict(),
  z.object({ name: z.literal('dense') }).strict(),
  z.object({ name: z.literal('mebert'), m: z.number().int().min(1).max(64).default(MEBERT_PREFIX_ROWS) }).strict(),
  /** Exact MaxSim over every document: the reference the approximate modes are measured against. */
  z.object({ name: z.literal('exhaustive') }).strict(),
  z
    .object({
      name: z.literal('hybrid'),
      /** The late-interaction or dense mode fused with BM25. */
      base: z.enum(['xtr', 'dense', 'exhaustive']).default('xtr'),
      fusion: z.enum(['linear', 'rrf']).default('linear'),
      /** score = base + lambda * bm25 after normalisation (fusion = linear). Absent: the collection's fitted weight, else DEFAULT_HYBRID_LAMBDA for the normalisation (resolveHybridMode, fusion.ts). */
      lambda: z.number().min(-1000).max(1000).optional(),
      /** Absent: minmax, or the collection's fitted normalisation when the request names no lambda either (resolveHybridMode). */
      normalization: z
        .enum(['none', 'minmax', 'zscore'])
        .optional()
        .describe("'minmax', 'zscore' or 'none'; absent: minmax, or the collection's fitted normalisation (POST /v1/collections/{id}/fusion/fit) when lambda is absent too"),
      rrfK: z.number().int().min(1).max(10_000).default(60),
      /** How many hits each part contributes to the union before fusion. */
      depth: z.number().int().min(1).max(MAX_SEARCH_TOP_K).default(100),
      kPrime: z.number().int().min(1).max(MAX_K_PRIME).default(1000),
      nprobe: z.number().int().min(1).max(MAX_NPROBE).default(32).describe('as mode xtr: absent, 32, or WARP_DEFAULT_NPROBE with base xtr on a WARP search layout'),
      /** As mode xtr's tPrime (base xtr on a WARP search layout). */
      tPrime: z.number().int().min(1).max(MAX_T_PRIME).optional(),
      /**
       * As mode xtr's exact (base xtr on a WARP search layout): the token part's first `exact` hits
       * re-scored by exact MaxSim before the fusion. Absent: WARP_DEFAULT_EXACT.
       */
      exact: z.number().int().min(0).max(MAX_SEARCH_TOP_K).optional().describe("base xtr on a WARP search layout: the token part's first `exact` hits re-scored by exact MaxSim before the fusion; absent: WARP_DEFAULT_EXACT"),
      k1: z.number().min(0).max(10).default(0.9),
      b: z.number().min(0).max(1).default(0.4),
    })
    .strict(),
]);

/**
 * Hybrid's weight of BM25 when a request names none, per normalisation: for each, the weight whose
 * smaller gain over the better of the two parts on the development collections is largest
 * (Cranfield and Vaswani, `npm run eval -- fusion`, docs/benchmarks.md): minmax 0.7 (+0.0174 and
 * +0.0093 nDCG@10), zscore 0.3 (+0.0133, +0.0111), none 0.2 (+0.0165, +0.0104; raw scores depend on
 * the model, so this one carries least). The default normalisation stays minmax (a request that
 * names a lambda keeps its meaning); RRF lost to MaxSim on Vaswani (-0.0019).
 */
export const DEFAULT_HYBRID_LAMBDA: Readonly<Record<'none' | 'minmax' | 'zscore', number>> = { minmax: 0.7, zscore: 0.3, none: 0.2 };

/** The weight a linear hybrid fuses with: the request's, else the default of its normalisation (minmax when it names none). A collection's fitted weight is filled in before (resolveHybridMode). */
export function hybridLambda(mode: { lambda?: number; normalization?: 'none' | 'minmax' | 'zscore' }): number {
  return mode.lambda ?? DEFAULT_HYBRID_LAMBDA[mode.normalization ?? 'minmax'];
}
export type SearchMode = z.infer<typeof SearchModeSchema>;
export const SEARCH_MODES = ['xtr', 'bm25', 'dense', 'mebert', 'exhaustive', 'hybrid'] as const;

export const SearchRequestSchema = z
  .object({
    collection: resourceId('collection'),
    queries: z
      .array(z.object({ id: z.string().min(1).max(512), text: z.string().min(1, 'query text must not be empty').max(MAX_QUERY_CHARS) }).strict())
      .min(1)
      .max(MAX_SEARCH_QUERIES, `at most ${MAX_SEARCH_QUERIES} queries per search request (MAX_SEARCH_QUERIES)`),
    mode: z.preprocess((v) => (typeof v === 'string' ? { name: v } : v), SearchModeSchema).default({ name: 'xtr', kPrime: 1000, nprobe: 32 }),
    topK: z.number().int().positive().max(MAX_SEARCH_TOP_K, `topK is at most ${MAX_SEARCH_TOP_K} (MAX_SEARCH_TOP_K)`).default(10),
    /** Metadata filter (Qdrant-like must / should / must_not); validated by @lateral/search. */
    filter: z.unknown().optional(),
    /** Optional second stage: the top `depth` hits re-scored by any re-rank scorer. */
    rerank: z
      .object({
        scorer: z.preprocess((v) => (typeof v === 'string' ? { name: v } : v), ScorerSchema),
        depth: z.number().int().min(1).max(MAX_SEARCH_TOP_K).default(100),
      })
      .strict()
      .optional(),
    /** Per hit, which query token matched which document token, with the similarity (xtr, exhaustive). */
    explain: z.boolean().default(false),
    /** Fields read back from S3 onto every hit: `text`, `metadata`. */
    include: IncludeSchema.optional(),
    /** `parent`: passages of one document count once, with the best passage's score. */
    group: GroupSchema.optional(),
    /** Webhook: POSTed the job's summary when it completes or fails (signed; host must be in WEBHOOK_ALLOWED_HOSTS). */
    callback: CallbackUrlSchema.optional(),
  })
  .strict();
export type SearchRequest = z.infer<typeof SearchRequestSchema>;

export interface SearchHit extends HitDocumentFields {
  id: string;
  score: number;
  /** The mode (or `rerank:<scorer>`) that gave this score. */
  scoredBy: string;
  explain?: { queryToken: string; docToken: string; similarity: number; imputed: boolean }[];
}

/** Mode xtr on a collection with a WARP search layout: what the scan read. */
export interface WarpSearchStats {
  /** Lists probed per query token (the request's, clamped to the collection's centroids). */
  nprobe: number;
  /** Centroids of the collection's newest WARP centroid epoch (refitted as it grows: docs/scaling.md). */
  centroids: number;
  /** Centroid epochs the segments were at (1, except while a refit's rebuild catches up). */
  epochs: number;
  /** Segments scanned (their layout directories read). */
  segments: number;
  /** Bytes of those segments' search layout objects. */
  layoutBytes: number;
  /**
   * Per query: bytes of the probed lists scored, bytes of them fetched (ranged GETs or the disk
   * cache's copies; lists held in memory fetch nothing), ranged reads, distinct centroids probed.
   */
  queries: { queryId: string; bytesRead: number; bytesFetched: number; ranges: number; probed: number }[];
}

export interface SearchResult {
  searchId: string;
  collection: string;
  mode: SearchMode;
  generation: number;
  results: { queryId: string; hits: SearchHit[]; reason?: string }[];
  /** exactMs: WARP's exact final stage (mode xtr or hybrid's token part on a WARP layout, one process), every query's summed. */
  timings: { totalMs: number; encodeQueriesMs: number; searchMs: number; loadMs: number; exactMs?: number };
  /** What the search read, where a mode reports it. */
  stats?: { warp?: WarpSearchStats };
  /** Present (true) when segments of the generation could not be read: the hits come from the others. */
  degraded?: true;
  unavailableSegments?: UnavailableSegment[];
}
