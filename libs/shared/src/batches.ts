import { z } from 'zod';
import { modelId, resourceId } from './ids';
import { CandidateSchema, MAX_CANDIDATES_PER_QUERY, MAX_QUERY_CHARS, ScorerSchema, type ScorerSpec } from './rerank';

/** Settings of a whole batch (query string of an upload, or the JSON body naming an S3 key). */
export const BatchOptionsSchema = z
  .object({
    /** Collection of id candidates; optional when rows give candidates as texts (then `model` is required). */
    collection: resourceId('collection').optional(),
    model: modelId().optional(),
    scorer: z.preprocess((v) => (typeof v === 'string' ? { name: v } : v), ScorerSchema).default({ name: 'maxsim', normalize: false }),
    /** Hits per row (a row's `topK` overrides it). */
    topK: z.coerce.number().int().positive().max(MAX_CANDIDATES_PER_QUERY).default(10),
  })
  .strict()
  .superRefine((o, ctx) => {
    if (!o.collection && !o.model) ctx.addIssue({ code: 'custom', path: ['model'], message: 'model is required when the batch names no collection' });
  });
export type BatchOptions = z.infer<typeof BatchOptionsSchema>;

/** One line of a batch file: a re-rank row. */
export const BatchRowSchema = z
  .object({
    custom_id: z.string().min(1, 'custom_id must not be empty').max(512, 'custom_id is over 512 characters'),
    query: z.string().trim().min(1, 'query must not be empty').max(MAX_QUERY_CHARS, `query is over ${MAX_QUERY_CHARS} characters`),
    candidates: z
      .array(CandidateSchema)
      .min(1, 'candidates must not be empty')
      .max(MAX_CANDIDATES_PER_QUERY, `too many candidates: at most ${MAX_CANDIDATES_PER_QUERY} per row`),
    /** Hits of this row (else the batch's `topK`): the same name as on every other route. */
    topK: z.number().int().positive().max(MAX_CANDIDATES_PER_QUERY).optional(),
    /** Deprecated spelling of `topK` (rows of files written for earlier versions); accepted, same meaning. */
    top_k: z.number().int().positive().max(MAX_CANDIDATES_PER_QUERY).optional(),
  })
  .strict()
  .superRefine((r, ctx) => {
    if (r.topK !== undefined && r.top_k !== undefined && r.topK !== r.top_k) {
      ctx.addIssue({ code: 'custom', path: ['top_k'], message: 'give topK only: top_k is its deprecated spelling, and the two differ' });
    }
  })
  .transform(({ top_k, ...r }) => {
    const topK = r.topK ?? top_k;
    return topK === undefined ? r : { ...r, topK };
  });
export type BatchRow = z.output<typeof BatchRowSchema>;

/** One line of a chunk file as the plan step wrote it: a valid row, or that row's error. */
export type BatchChunkEntry =
  | { line: number; custom_id: string; row: BatchRow }
  | { line: number; custom_id: string | null; error: BatchRowError };

export interface BatchRowError {
  message: string;
  issues?: { field: string; message: string }[];
}

/** One line of a batch's result file, in the input's order. */
export type BatchResultLine =
  | { custom_id: string; line: number; hits: { id: string; score: number | null }[]; missing?: string[] }
  | { custom_id: string | null; line: number; error: BatchRowError };

export type BatchState = 'validating' | 'running' | 'completed' | 'failed' | 'cancelled';

/** A batch's record in S3 (batchKeys.record). */
export interface BatchRecord {
  id: string;
  tenantId: string;
  state: BatchState;
  createdAt: string;
  startedAt?: string;
  completedAt?: string;
  cancelledAt?: string;
  options: BatchOptions & { scorer: ScorerSpec };
  /** The input file: an upload the batch names (read by the plan job); absent for a body POSTed as JSONL, which is cut into chunks as it streams in. */
  input: { key?: string; bytes: number };
  /** Filled by the plan step (or by the API, for a JSONL body). */
  chunks?: number;
  /** The chunk files are written: a plan again (after Redis lost the flow) only adds the flow. */
  planned?: boolean;
  chunkRows?: number;
  counts?: { rows: number; invalid: number; completed?: number; failed?: number };
  texts?: { encoded: number; reused: number; tokens: number };
  timings?: Record<string, number>;
  resultKey?: string;
  error?: string;
}
