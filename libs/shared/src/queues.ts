import { z } from 'zod';
import { assertResourceId, modelId, resourceId } from './ids';
import { DeletePayloadSchema } from './deletes';
import { CallbackUrlSchema, WebhookEventSchema } from './webhooks';

export enum QueueName {
  encode = 'encode',
  compress = 'compress',
  /** Builds a written segment's search index (IVF and BM25 postings) before it is committed. */
  index = 'index',
  /** Makes a written segment part of the collection's next generation (was `index` before 0.2). */
  commit = 'commit',
  /** Merges of a collection's segments (the tiered policy); only the reference swap goes through the generation commit. */
  merge = 'merge',
  /**
   * WARP centroid refits (libs/pipeline/src/maintenance/refit.processor.ts): the next epoch's
   * centroids fitted when the tokens call for more, every segment's layout moved to the newest
   * epoch; one per collection at a time (its own lease), beside merges, which go on at the current epoch.
   */
  refit = 'refit',
  rerank = 'rerank',
  search = 'search',
  /** Fits a learned head (LITE, K-NRM) on a collection's judgments; scorer workers, concurrency 1. */
  train = 'train',
  /** Encodes candidate texts of re-rank requests and batches into the text cache (encoder pool). */
  encodeTexts = 'encode-texts',
  /** Batch files: plan (validate rows, cut chunks), chunk (re-rank a chunk's rows), finalize (the result file). */
  batch = 'batch',
  /** Webhook deliveries: a finished re-rank or search POSTed to its request's `callback` URL (signed, retried). */
  webhook = 'webhook',
}

const tenantId = resourceId('tenantId');
const collectionId = resourceId('collectionId');
const s3Key = z.string().min(1).max(1024);
const rerankBatchId = resourceId('rerankBatchId');
/** The batch queue's field as jobs queued before `rerankBatchId` carry it. */
const legacyRerankBatchId = resourceId('batchId');

/** A written segment on its way to the current generation: the index job's payload, passed on unchanged to its commit. */
const writtenSegment = z.object({
  tenantId,
  collectionId,
  ingestionId: resourceId('ingestionId').nullable(),
  /** The ingest batch (`ingestBatchId` in code); queued jobs carry it under this name. */
  batchId: resourceId('batchId'),
  segmentKey: s3Key,
  codecVersion: z.number().int().positive(),
  documents: z.number().int().nonnegative(),
});

/**
 * A written segment to commit: what its index job was given, and (`verified`) the whole object's
 * CRC-32C and size as the index job read it, every section's checksum verified (and its head stored
 * from that read): the commit then reads the small head instead of the whole segment. A job queued
 * without it (an older version, a spec) reads and verifies the segment itself.
 */
const committedSegment = writtenSegment.extend({
  verified: z.object({ checksum: z.string().regex(/^[0-9a-f]{8}$/), bytes: z.number().int().positive() }).optional(),
});

/**
 * A merge (op 'merge') on the merge queue: the tiered policy chooses the segments on the current
 * generation (libs/pipeline/src/maintenance/merge-policy.ts); one merge per collection at a time, beside
 * commits and deletes (only its reference swap is a generation commit). Merge jobs queued on the
 * commit queue by an earlier version are still run there.
 */
export const MergePayloadSchema = z.object({
  op: z.literal('merge'),
  tenantId,
  collectionId,
  /** Who asked: 'commit' (after a committed generation), 'api' (POST /v1/collections/{id}/merge) or 'reindex' (POST /v1/collections/{id}/reindex: the job builds the WARP layouts first). */
  trigger: z.enum(['commit', 'api', 'reindex']),
});
export type MergePayload = z.infer<typeof MergePayloadSchema>;
/** A merge's job id: one per collection and generation it was asked on (BullMQ forbids ':'; '~' never appears in resource ids). */
export const mergeJobId = (tenantId: string, collectionId: string, trigger: MergePayload['trigger'], generation: number) =>
  `${assertResourceId('tenant id', tenantId)}~${assertResourceId('collection id', collectionId)}~merge~${trigger}-g${generation}`;
/**
 * The BullMQ deduplication id of a collection's background merges (after commits, deletes and
 * merges): one per collection, so a waiting merge absorbs every later request and a request made
 * while one runs becomes one merge after it (libs/pipeline/src/maintenance/merge-schedule.ts).
 */
export const mergeDedupId = (tenantId: string, collectionId: string) => `${assertResourceId('tenant id', tenantId)}~${assertResourceId('collection id', collectionId)}~merge`;

/**
 * A WARP refit (the refit queue): `epoch` is the centroid epoch it was queued for (the generation's
 * newest + 1 when the tokens called for more centroids, the newest when segments of an older epoch
 * were left to move). The job does what is due when it runs, whatever `epoch` says.
 */
export const RefitPayloadSchema = z.object({ tenantId, collectionId, epoch: z.number().int().nonnegative() });
export type RefitPayload = z.infer<typeof RefitPayloadSchema>;
/** A refit's job id: one per collection and target epoch (removed when completed, so it dedupes only while queued or running). */
export const refitJobId = (tenantId: string, collectionId: string, epoch: number) =>
  `${assertResourceId('tenant id', tenantId)}~${assertResourceId('collection id', collectionId)}~refit~e${epoch}`;

/** Payloads carry references only (ids and S3 keys), never vectors. */
/**
 * A re-rank or search request whose JSON is at most this many bytes travels in its job's data
 * (`request`) instead of S3, and a result at most this size comes back in the job's return value
 * (`result`) instead of S3 (issue 31 item 2): a small request that waits costs no S3 round trip.
 * Larger ones keep the S3 objects under `requestKey` / `resultKey`.
 */
export const INLINE_JOB_BYTES = 32 * 1024;

export const JobPayloadSchemas = {
  [QueueName.encode]: z.object({
    tenantId,
    collectionId,
    ingestionId: resourceId('ingestionId'),
    batchId: resourceId('batchId'),
    documentsKey: s3Key,
    documents: z.number().int().nonnegative(),
  }),
  [QueueName.compress]: z.object({
    tenantId,
    collectionId,
    ingestionId: resourceId('ingestionId').nullable(),
    batchId: resourceId('batchId'),
    rawKey: s3Key,
    codecVersion: z.number().int().positive(),
    documents: z.number().int().nonnegative(),
  }),
  [QueueName.index]: writtenSegment,
  /** A written segment to commit or a delete (tombstones): both change the generation, so they share one queue (and merges queued here before the merge queue). */
  [QueueName.commit]: z.union([committedSegment, DeletePayloadSchema, MergePayloadSchema]),
  [QueueName.merge]: MergePayloadSchema,
  [QueueName.refit]: RefitPayloadSchema,
  [QueueName.rerank]: z.object({
    tenantId,
    rerankId: resourceId('rerankId'),
    requestKey: s3Key,
    /** The request itself when it is small (INLINE_JOB_BYTES); then nothing is written under requestKey. */
    request: z.unknown().optional(),
    /** The request's callback URL (also in the request in S3): a webhook job is queued when this job completes or fails for good. */
    callback: CallbackUrlSchema.optional(),
  }),
  [QueueName.search]: z.object({
    tenantId,
    collectionId,
    searchId: resourceId('searchId'),
    requestKey: s3Key,
    /** The request itself when it is small (INLINE_JOB_BYTES); then nothing is written under requestKey. */
    request: z.unknown().optional(),
    callback: CallbackUrlSchema.optional(),
  }),
  [QueueName.train]: z.object({
    tenantId,
    collectionId,
    trainId: resourceId('trainId'),
    requestKey: s3Key,
  }),
  [QueueName.encodeTexts]: z.object({
    tenantId,
    model: modelId(),
    /** Token cap of the encoded texts (the collection's maxDocTokens, or the model's). */
    maxTokens: z.number().int().positive(),
    /** Codec of the cached vectors: a collection's current codec version, or null for the default (fp16). */
    codec: z.object({ collectionId, codecVersion: z.number().int().positive() }).nullable(),
    /** JSON array of the distinct texts to have encoded (a batch chunk's: ChunkTexts, the texts with their hashes). */
    textsKey: s3Key,
    texts: z.number().int().nonnegative(),
    /**
     * A batch chunk's file, which names the chunk's texts by hash (its hashes section, or a JSONL
     * file's header line: ChunkHeader, in the texts file's order): read first, and the texts file only when some text is not cached (a
     * chunk whose texts are all cached reads its hashes, not its texts; a text an earlier chunk's
     * texts file holds, per the file's textsIn, is read from there). Absent: the texts file.
     */
    chunkKey: s3Key.optional(),
  }),
  /**
   * A batch re-rank file's step. `rerankBatchId` names the file (POST /v1/batches), not an ingest
   * batch (the ingest queues' `batchId`); jobs queued before the rename carry it as `batchId`, which
   * is read as `rerankBatchId` (Redis keeps such jobs across an upgrade).
   */
  [QueueName.batch]: z
    .union([
      z.discriminatedUnion('step', [
        z.object({ step: z.literal('plan'), tenantId, rerankBatchId }),
        z.object({ step: z.literal('chunk'), tenantId, rerankBatchId, chunk: z.number().int().nonnegative() }),
        z.object({ step: z.literal('finalize'), tenantId, rerankBatchId, chunks: z.number().int().nonnegative() }),
      ]),
      z.discriminatedUnion('step', [
        z.object({ step: z.literal('plan'), tenantId, batchId: legacyRerankBatchId }),
        z.object({ step: z.literal('chunk'), tenantId, batchId: legacyRerankBatchId, chunk: z.number().int().nonnegative() }),
        z.object({ step: z.literal('finalize'), tenantId, batchId: legacyRerankBatchId, chunks: z.number().int().nonnegative() }),
      ]),
    ])
    .transform((p) => {
      if (!('batchId' in p)) return p;
      const { batchId, ...rest } = p;
      return { ...rest, rerankBatchId: batchId };
    }),
  /** One delivery: the URL (checked again, with its resolved address, at delivery) and the event to POST. */
  [QueueName.webhook]: z.object({ tenantId, url: CallbackUrlSchema, body: WebhookEventSchema }),
} as const;

export type JobPayload<Q extends QueueName> = z.infer<(typeof JobPayloadSchemas)[Q]>;
/** What a producer may queue: the payload before parsing (the batch queue still takes the earlier `batchId`). */
export type JobPayloadInput<Q extends QueueName> = z.input<(typeof JobPayloadSchemas)[Q]>;

/**
 * The BullMQ job name of a payload (what Bull Board and job listings show): the queue's name, but
 * a delete on the commit queue is named 'delete' (and a merge queued there by an earlier version
 * 'merge'): the queue is shared because both write the next generation, not because a delete is a
 * commit. Workers choose the handler by the payload, so jobs named 'commit' by an earlier version
 * run as before.
 */
export function jobName<Q extends QueueName>(queue: Q, payload: JobPayloadInput<Q>): string {
  if (queue === QueueName.commit && typeof payload === 'object' && payload !== null && 'op' in payload) return payload.op;
  return queue;
}
/** A commit job that commits a written segment (not a delete). */
export type SegmentCommitPayload = z.infer<typeof committedSegment>;

/** What a merge did: the segments it replaced (keys) and the one it wrote (null: nothing was live), or why it did nothing. */
export interface MergeOutcome {
  /** busy: another merge of the collection held its lease past the wait (MERGE_LEASE_WAIT): the job did nothing and a merge job is queued again. */
  status: 'merged' | 'nothing-to-merge' | 'inputs-gone' | 'recompressing' | 'busy';
  inputs: string[];
  output: string | null;
  /** Documents dropped (tombstoned or superseded in the inputs). */
  dropped: number;
  /** Why: a size tier was full, deletes reached their fraction, or the shard held more segments than its bound (MERGE_WARP_MAX_SEGMENTS). */
  reason?: 'tier' | 'deletes' | 'segments';
  /** How the merged segment's search index was made: copied from the inputs' indexes, or rebuilt (an input had none usable). */
  index?: 'copied' | 'rebuilt';
  /** Inputs coded again from their raw batch because their segment was missing or corrupt in S3 (absent: none). */
  recoded?: number;
}

/**
 * What a re-rank or search job adds to its return value: the result itself when it is small
 * (INLINE_JOB_BYTES; nothing is written under resultKey then), and when its handler started and
 * ended (epoch ms, for the API's Server-Timing).
 */
export interface InlineJobResult {
  result?: unknown;
  timing?: { startedAt: number; doneAt: number };
}

/** What a finished job returns (stored by BullMQ; small). */
export interface JobResults {
  [QueueName.encode]: { rawKey: string; documents: number; tokens: number; codecVersion: number };
  [QueueName.compress]: { segmentKey: string; bytes: number };
  [QueueName.index]: { indexKey: string; bytes: number; /** the segment as the index job verified it (its whole-object CRC-32C, 8 hex digits, and size) */ segment?: { checksum: string; bytes: number } };
  /** A delete also returns what it deleted (DeleteResult). */
  [QueueName.commit]: { generation: number; committed: boolean; deleted?: number; notFound?: string[]; documents?: number; merged?: MergeOutcome };
  /** The generation the merge committed (or found), and what it did. */
  [QueueName.merge]: {
    generation: number;
    committed: boolean;
    documents?: number;
    merged: MergeOutcome;
    /**
     * The policy still asks a merge on the newest generation the job saw (after its own commit):
     * a background merge queues the next one (merge-schedule.ts). Absent on jobs of earlier versions.
     */
    again?: boolean;
    /** WARP collections: the refit job queued after this merge (refit queue), when one was due. */
    refit?: string;
    /** A re-index to WARP layouts the job ran first (libs/pipeline/src/maintenance/warp-reindex.ts). */
    reindex?: { status: 'done' | 'incomplete'; bits: 2 | 4; epoch: number; centroids: number; built: number; segments: number; unreadable: string[]; generation: number };
  };
  /**
   * A refit: 'done' (`rounds` passes made; `stale`: segments still at an older epoch), 'nothing-to-do'
   * (not a WARP collection, nothing indexed, nothing due), 'busy' (another refit of the collection
   * held its lease), 'recompressing' or 'reindexing' (left to those jobs).
   */
  [QueueName.refit]: { status: 'done' | 'nothing-to-do' | 'busy' | 'recompressing' | 'reindexing'; epoch: number; centroids: number; refitted: boolean; rebuilt: number; rounds: number; generation: number; stale: number };
  /** `texts`: requests with text candidates (how many texts were encoded for this job, how many reused). */
  [QueueName.rerank]: { resultKey: string; queries: number; candidates: number; missing: number; texts?: { candidates: number; encoded: number; reused: number } } & InlineJobResult;
  [QueueName.search]: { resultKey: string; queries: number; hits: number } & InlineJobResult;
  [QueueName.train]:
    | { artifact: string; version: number; artifactKey: string; reportKey: string; bestEpoch: number; heldOutNdcg10: number; maxsimNdcg10: number }
    | { trainedCodec: string; version: number; artifactKey: string; reportKey: string; bestEpoch: number; heldOutMse: number; heldOutRelError: number };
  [QueueName.encodeTexts]: { texts: number; encoded: number; reused: number; tokens: number; ms: number };
  /** plan: rows read and rows that failed validation; chunk: rows re-ranked and failed, texts encoded / reused, time per part (ms). */
  [QueueName.batch]: { step: 'plan' | 'chunk' | 'finalize'; rows: number; failed: number; encoded?: number; reused?: number; tokens?: number; timings?: Record<string, number> };
  /** The receiver's HTTP status, the address called and the time taken. */
  [QueueName.webhook]: { status: number; host: string; address: string; ms: number };
}

export const ALL_QUEUES: QueueName[] = Object.values(QueueName);

/** Parse a payload at a worker's entry; it crossed a JSON boundary. */
export function parsePayload<Q extends QueueName>(queue: Q, data: unknown): JobPayload<Q> {
  const parsed = JobPayloadSchemas[queue].safeParse(data);
  if (!parsed.success) {
    const issues = parsed.error.issues.map((i) => `${i.path.join('.') || '(root)'}: ${i.message}`).join('; ');
    throw new InvalidPayloadError(`invalid ${queue} job payload: ${issues}`);
  }
  return parsed.data as JobPayload<Q>;
}

export class InvalidPayloadError extends Error {}
