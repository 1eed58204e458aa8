import { z } from 'zod';
import { CodecSettingsSchema } from './codec-settings';
import { BM25_ANALYZERS, IvfLayoutSettingsSchema, PassageSettingsSchema, STAGES, WarpLayoutSettingsSchema, type Collection } from './collection';
import { HitDocumentFieldsSchema, TRUNCATED_IDS_SHOWN } from './documents';
import { ScorerSchema, type RerankResult } from './rerank';
import { SearchModeSchema, type SearchResult } from './search';
import { FittedFusionSchema } from './fusion-record';
import { DegradedSegmentSchema, UnavailableSegmentSchema } from './degraded';
import { BatchOptionsSchema } from './batches';
import { ApiKeyRecordSchema, type ApiKeyInfo } from './api-keys';
import { JudgedQuerySchema, type JudgmentSet } from './training';
import type { MergeOutcome } from './queues';

/**
 * Response bodies of the HTTP API as zod schemas: the OpenAPI document is generated from them
 * (libs/http-api/src/openapi/, `io: 'output'`) and test/openapi-live.integration.spec.ts checks
 * the live answers against it. Where the producing code has its own type, `Produces<Schema, T>`
 * below makes the compiler check that the type fits the schema; the others document the shape the
 * services build (their fields are named in each description).
 */

/** Compile-time check: `T` (what the code produces) fits `S` (what the document promises). */
export type Produces<S extends z.ZodType, T extends z.output<S>> = T;

const int = z.number().int();
const count = int.min(0);

/** Every error answer: a code, a message, and for bad input the fields at fault. */
export const ErrorBodySchema = z.object({
  error: z.string().describe('a short code: bad_request, not_found, conflict, unavailable (a dependency down), overloaded (a dependency or this process too slow under load), unauthorized, forbidden, payload_too_large, unsupported_media_type, ...'),
  message: z.string().describe('what went wrong, naming the field and the limit'),
  details: z.array(z.object({ field: z.string(), message: z.string() })).optional().describe('bad input: one entry per field at fault'),
});

export const StageCountsSchema = z
  .object(Object.fromEntries(STAGES.map((s) => [s, count])) as Record<(typeof STAGES)[number], typeof count>)
  .describe('documents per stage: accepted (in the ingestion record), encoded (raw vectors written), compressed (segment written), indexed (in the current generation), failed (batch failed for good)');

const codec = CodecSettingsSchema;

/** POST /v1/collections (201): the stored collection. */
export const CollectionSchema = z.object({
  tenantId: z.string(),
  id: z.string(),
  model: z.string(),
  dims: int,
  maxDocTokens: int,
  codec,
  passages: PassageSettingsSchema.optional().describe('documents over maxDocTokens are split into passages (absent: truncated)'),
  shards: int.min(2).optional().describe('shards the segments are split into, each served through its own queue (absent: 1)'),
  search: z
    .union([WarpLayoutSettingsSchema, IvfLayoutSettingsSchema])
    .optional()
    .describe("how mode xtr reads the collection: `{ layout: 'warp', bits }` (WARP's engine over a centroid-major layout per segment; the default of new collections) or `{ layout: 'ivf' }` (the segment index's IVF); absent: a collection created before WARP became the default, searched through the IVF"),
  bm25: z
    .object({ analyzer: z.enum(BM25_ANALYZERS) })
    .optional()
    .describe("BM25's analyser: 'english' (words, stop words, Porter stems) or 'pieces' (the encoder's sub-word tokens); absent: a collection created before analysers existed, BM25 over pieces"),
  reindex: z
    .object({ search: WarpLayoutSettingsSchema, codecVersion: int, epoch: int.optional().describe('the centroid epoch of the new layouts, once the job fitted it'), startedAt: z.string() })
    .optional()
    .describe('a re-index to WARP search layouts in flight (POST /v1/collections/{id}/reindex): searches read the IVF until every live segment has its layout, then `search` is set and this field goes'),
  fusion: FittedFusionSchema.optional().describe("hybrid's fusion fitted on the collection's judgments (POST /v1/collections/{id}/fusion/fit): a linear hybrid search naming no lambda uses it; absent: the service's defaults"),
  codecVersion: int.describe('codec artifact version (bumped by re-compression)'),
  createdAt: z.string(),
  pending: z
    .object({ codecVersion: int, codec, batches: z.array(z.string()), startedAt: z.string() })
    .optional()
    .describe('a re-compression in flight: segments at this codecVersion are being written'),
});
export type CollectionBody = Produces<typeof CollectionSchema, Collection>;

/** GET /v1/collections/{id}: the collection plus what S3 holds of it. */
export const CollectionDescriptionSchema = CollectionSchema.extend({
  generation: count.describe('current generation: the highest manifest in S3 (0: nothing committed yet)'),
  segments: count,
  documents: count.describe('distinct live document ids (an id ingested again counts once)'),
  tokens: count,
  segmentBytes: count,
  bytesPerToken: z.number().nullable().describe('null while nothing is committed'),
  codecVersions: z.array(int).describe('codec versions of the live segments'),
  stages: StageCountsSchema.describe('summed over every ingestion of the collection'),
  degraded: z
    .object({ generation: count, segments: z.array(DegradedSegmentSchema) })
    .optional()
    .describe("present when scorers found segments of the current generation unreadable (checksum, decoding, missing object): re-rank and search answer without them until they are rewritten (merge, re-compression) or read again"),
});

/** GET /v1/collections. */
export const CollectionListSchema = z.object({
  collections: z.array(
    z.union([
      CollectionDescriptionSchema,
      z.object({ id: z.string(), missing: z.literal(true) }).describe('a collection whose record is listed but could not be described (deleted meanwhile, or its record unreadable)'),
    ]),
  ),
});

/** POST /v1/collections/{id}/documents (202): the accepted ingestion. */
export const IngestionAcceptedSchema = z.object({
  ingestionId: z.string(),
  collection: z.string(),
  documents: count.describe('documents accepted'),
  batches: count.describe('encode jobs (ENCODE_BATCH_DOCUMENTS documents each)'),
  status: z.string().describe('URL of the ingestion status (also the Location header)'),
});

/** GET /v1/collections/{id}/ingestions/{ingestionId}. */
export const IngestionStatusSchema = z.object({
  ingestionId: z.string(),
  collection: z.string(),
  state: z.enum(['processing', 'done', 'failed']).describe('done: every document is in the current generation'),
  stages: StageCountsSchema,
  batches: count,
  createdAt: z.string(),
  encodedBatches: count.describe('batches whose encode job has written its document info (the long-document counts below are over these)'),
  truncated: z.object({ documents: count, ids: z.array(z.string()) }).describe(`documents cut to the collection's maxDocTokens: how many, and the first ${TRUNCATED_IDS_SHOWN} ids`),
  split: z.object({ documents: count, passages: count }).optional().describe('collections with passages: documents split into passages, and how many passages'),
  failures: z
    .array(z.object({ batchId: z.string().describe('the ingest batch, `{ingestionId}-00000` and on'), stage: z.string(), documents: count, error: z.string() }))
    .optional()
    .describe('present when a batch failed for good'),
});

/** POST /v1/collections/{id}/documents with `wait`, finished in time (200). */
export const IngestionFinishedSchema = IngestionAcceptedSchema.extend(IngestionStatusSchema.shape);

/** POST /v1/collections/{id}/reindex (202). */
export const ReindexAcceptedSchema = z.object({
  collection: z.string(),
  search: WarpLayoutSettingsSchema.describe('the WARP search layout being built'),
  startedAt: z.string().describe('when the re-index was asked for (asking again with the same settings keeps it)'),
  status: z.string().describe('URL to poll: the collection (`reindex` while it runs; `search` set to the layout, `reindex` gone, when searches read the new layouts)'),
});

/** POST /v1/collections/{id}/recompress (202). */
export const RecompressAcceptedSchema = z.object({
  collection: z.string(),
  codecVersion: int.describe('the codec version being written; the collection moves to it when every segment is'),
  batches: count.describe('segments to re-write'),
  status: z.string().describe('URL to poll: the collection (its codecVersion and codec change when the new generation is committed)'),
});

export const DeleteResultSchema = z.object({
  deleteId: z.string(),
  generation: count.describe('the generation holding the tombstones (the current one when nothing was deleted)'),
  committed: z.boolean().describe('false: nothing live matched, no generation written'),
  deleted: count,
  notFound: z.array(z.string()).describe('requested ids that are not live documents'),
  documents: count.describe('live documents after the delete'),
});
export const DeletePendingSchema = z.object({ deleteId: z.string(), status: z.enum(['queued', 'running']), statusUrl: z.string() });

// ---- asynchronous jobs (re-rank, search) -------------------------------------------------------

const NULL_SCORE =
  'null: the candidate could not be scored (a document with no token vectors, e.g. only punctuation or words on the skiplist, gives MaxSim no term: its score is NaN, which JSON writes as null); such hits are listed last';

/** Re-rank and search results computed without segments that could not be read. */
const DEGRADED_FIELDS = {
  degraded: z.literal(true).optional().describe('present when segments of the generation could not be read (checksum, decoding, missing object): the result comes from the other segments'),
  unavailableSegments: z.array(UnavailableSegmentSchema).optional().describe('degraded: the segments left out, each naming the object that failed and why'),
};

export const RerankHitSchema = HitDocumentFieldsSchema.extend({
  id: z.string().describe('the candidate id (`#<position>` for a text candidate given without one)'),
  score: z.number().nullable().describe(NULL_SCORE),
});

export const RerankResultSchema = z.object({
  rerankId: z.string(),
  collection: z.string().optional().describe('absent when the request named none (text candidates only)'),
  model: z.string().optional().describe('the model that encoded the queries and text candidates'),
  texts: z
    .object({ candidates: count, encoded: count, reused: count })
    .optional()
    .describe('requests with text candidates: candidates given as text, and distinct texts the encoder pool encoded for this job or found already encoded'),
  scorer: ScorerSchema.describe('the scorer with its defaults filled in'),
  generation: count.describe('collection generation the candidates were scored in'),
  vectors: z
    .enum(['rotated-int8', 'fp32'])
    .optional()
    .describe('how the generation was held: EDEN token-layout codes as their int8 rotated image (MaxSim by integer GEMMs), or decoded fp32 vectors; absent when nothing was loaded'),
  results: z.array(
    z.object({
      queryId: z.string(),
      hits: z.array(RerankHitSchema),
      missing: z.array(z.string()).describe('candidate ids that are not live documents of the generation'),
      pending: z.array(z.string()).optional().describe('the missing ids that an ingestion still in progress accepted (not live yet, rather than unknown)'),
      unavailable: z
        .array(z.string())
        .optional()
        .describe('degraded: candidate ids live in the generation but held by a segment that could not be read (see unavailableSegments); not scored, not in missing'),
    }),
  ),
  timings: z.object({ totalMs: z.number(), encodeQueriesMs: z.number(), scoreMs: z.number(), loadMs: z.number() }),
  ...DEGRADED_FIELDS,
});
export type RerankResultBody = Produces<typeof RerankResultSchema, RerankResult>;

export const SearchHitSchema = HitDocumentFieldsSchema.extend({
  id: z.string(),
  score: z.number().nullable().describe(NULL_SCORE),
  scoredBy: z.string().describe('the mode, or rerank:<scorer> for a second stage'),
  explain: z
    .array(z.object({ queryToken: z.string(), docToken: z.string(), similarity: z.number(), imputed: z.boolean() }))
    .optional()
    .describe('explain: per query token, the matched document token and its similarity (xtr, exhaustive)'),
});

export const SearchResultSchema = z.object({
  searchId: z.string(),
  collection: z.string(),
  mode: SearchModeSchema.describe('the mode with its defaults filled in'),
  generation: count.describe('collection generation searched (0: nothing committed yet)'),
  results: z.array(
    z.object({
      queryId: z.string(),
      hits: z.array(SearchHitSchema),
      reason: z.string().optional().describe('why there are no hits (e.g. only stop words), when that is known'),
    }),
  ),
  timings: z
    .object({ totalMs: z.number(), encodeQueriesMs: z.number(), searchMs: z.number(), loadMs: z.number(), exactMs: z.number().optional() })
    .describe("milliseconds: searchMs covers the pass over the segments (each read as the search reaches it) and the second stage; loadMs is the part of it spent waiting for segments to be read (with shards: the slowest shard); exactMs (WARP with an exact final stage, one process) the part spent in that stage, every query's summed"),
  stats: z
    .object({
      warp: z
        .object({
          nprobe: count.describe("lists probed per query token (the request's, clamped to the collection's centroids)"),
          centroids: count.describe("centroids of the collection's newest WARP centroid epoch"),
          epochs: count.describe("centroid epochs the segments were at (1, except while a refit's rebuild catches up)"),
          segments: count.describe('segments scanned (their layout directories read)'),
          layoutBytes: count.describe("bytes of those segments' search layout objects"),
          queries: z.array(z.object({ queryId: z.string(), bytesRead: count, bytesFetched: count, ranges: count, probed: count })).describe('per query: bytes of the probed lists scored, bytes of them fetched (ranged GETs or disk-cache copies), ranged reads, distinct centroids probed'),
        })
        .optional(),
    })
    .optional()
    .describe("what the search read: WARP collections' per-query reads (mode xtr on a WARP layout)"),
  ...DEGRADED_FIELDS,
});
export type SearchResultBody = Produces<typeof SearchResultSchema, SearchResult>;

/** The status of a re-rank or search job (libs/http-api/src/common/async-jobs.ts JobStatus). */
function jobStatus<R extends z.ZodType, S extends z.ZodType>(result: R, stats: S) {
  return z.object({
    id: z.string(),
    status: z.enum(['queued', 'running', 'completed', 'failed']),
    progress: z.number().describe('percent'),
    result: result.optional().describe('completed: the result'),
    error: z.string().optional().describe('failed: why'),
    stats: stats.optional().describe('completed: counts reported by the job'),
  });
}
export const RerankStatusSchema = jobStatus(RerankResultSchema, z.object({ queries: count, candidates: count, missing: count }));
export const SearchStatusSchema = jobStatus(SearchResultSchema, z.object({ queries: count, hits: count }));

// ---- batches, the Cohere-compatible endpoint, API keys, judgments and training ----------------

/** GET /v1/batches/{id} (libs/http-api/src/batches/batches.service.ts BatchStatus, checked in libs/http-api/src/openapi/batches.ts). */
export const BatchStatusSchema = z.object({
  id: z.string(),
  state: z.enum(['validating', 'running', 'completed', 'failed', 'cancelled']),
  createdAt: z.string(),
  startedAt: z.string().optional(),
  completedAt: z.string().optional(),
  cancelledAt: z.string().optional(),
  options: BatchOptionsSchema.describe('the batch options with their defaults filled in'),
  input: z.object({ bytes: count }),
  counts: z
    .object({ rows: count, invalid: count.describe('rows that failed validation'), completed: count.optional(), failed: count.optional() })
    .optional()
    .describe('after validation'),
  progress: z.object({ chunks: count.nullable().describe('null until validated'), chunksDone: count, fraction: z.number(), etaSeconds: z.number().nullable() }),
  texts: z.object({ encoded: count, reused: count, tokens: count }).optional().describe('distinct texts per chunk encoded by the encoder pool / found in the text cache'),
  timings: z.record(z.string(), z.number()).optional().describe('milliseconds summed over chunks: encodeTextsMs, encodeQueriesMs, scoreMs, loadMs, chunkMs'),
  result: z.object({ key: z.string(), url: z.string() }).optional().describe('completed: the result file (S3 key, and its URL here)'),
  error: z.string().optional(),
});

/** POST /v1/compat/cohere/rerank (200), Cohere's shape. */
export const CohereRerankResponseSchema = z.object({
  id: z.string().describe('the re-rank job id (GET /v1/rerank/{id})'),
  results: z.array(
    z.object({
      index: count.describe('position of the document in the request'),
      relevance_score: z.number().nullable().describe(`the scorer's raw score (MaxSim), not a probability; ${NULL_SCORE}`),
      document: z.object({ text: z.string() }).optional().describe('with return_documents: true'),
    }),
  ),
  meta: z.object({
    api_version: z.object({ version: z.string() }),
    billed_units: z.object({ search_units: count }),
    model: z.string().optional().describe("the local model that scored the documents (a Cohere model name such as 'rerank-english-v3.0' maps to COHERE_MODEL)"),
  }),
});

/** An API key as listed (never its secret or hash). */
export const ApiKeyInfoSchema = ApiKeyRecordSchema.omit({ secretSha256: true });
export type ApiKeyInfoBody = Produces<typeof ApiKeyInfoSchema, ApiKeyInfo>;
export const ApiKeyWithSecretSchema = ApiKeyInfoSchema.extend({ key: z.string().describe('lat_<id>_<secret>: shown this once, stored only as its SHA-256') });
export const ApiKeyListSchema = z.object({ keys: z.array(ApiKeyInfoSchema).describe('oldest first (revoked ones too, with revokedAt)') });

/** POST /v1/collections/{id}/judgments (201) (judgments.service.ts JudgmentsSummary, checked in libs/http-api/src/openapi/training.ts). */
export const JudgmentsSummarySchema = z.object({
  judgmentsId: z.string(),
  collection: z.string(),
  queries: count,
  judgments: count,
  positives: count,
  trainableQueries: count.describe('queries with a positive judgment of a document the collection has'),
  unknownDocuments: z.array(z.string()).describe('judged ids the collection has not accepted (first 1,000); not an error'),
  unknownDocumentsTotal: count,
});

/** GET /v1/collections/{id}/judgments/{judgmentsId}: the stored set. */
export const JudgmentSetSchema = z.object({
  judgmentsId: z.string(),
  collection: z.string(),
  createdAt: z.string(),
  queries: z.array(JudgedQuerySchema),
  unknownDocuments: z.array(z.string()).describe('judged document ids that the collection had not accepted when the set was stored'),
});
export type JudgmentSetBody = Produces<typeof JudgmentSetSchema, JudgmentSet>;

/** POST /v1/collections/{id}/train (202). */
export const TrainAcceptedSchema = z.object({
  trainId: z.string(),
  collection: z.string(),
  judgmentsId: z.string().nullable().describe("the judgment set trained on; null for head 'aesi' (fitted on the collection's token vectors)"),
  status: z.literal('queued'),
  trainableQueries: count.describe("judged queries usable for training (0 for head 'aesi')"),
});

const TrainReportSchema = z
  .object({
    trainId: z.string(),
    artifact: z.string(),
    head: z.enum(['lite', 'knrm']),
    size: z.enum(['default', 'small']).optional(),
    version: int,
    collection: z.string(),
    generation: int,
    model: z.string(),
    judgmentsId: z.string(),
    bestEpoch: int,
    curve: z.array(z.object({ epoch: int, trainLoss: z.number(), valNdcg10: z.number(), seconds: z.number() })),
    heldOut: z.object({ queries: count, ndcg10: z.number(), maxsimNdcg10: z.number() }),
    data: z.record(z.string(), z.unknown()),
    options: z.record(z.string(), z.unknown()),
    seconds: z.number(),
    createdAt: z.string(),
  })
  .describe('the training report (also `{artifact}.training.json` beside the artifact)');

const AesiTrainReportSchema = z
  .object({
    trainId: z.string(),
    trainedCodec: z.string().describe("the trained codec's name: POST /v1/collections/{id}/recompress with codec.trained = this"),
    head: z.literal('aesi'),
    version: int,
    collection: z.string(),
    generation: int,
    model: z.string(),
    codec: z.record(z.string(), z.unknown()).describe('the codec settings the trained codec is stored with'),
    bestEpoch: int,
    curve: z.array(z.object({ epoch: int, trainMse: z.number(), valMse: z.number(), valRelError: z.number(), seconds: z.number() })),
    heldOut: z.object({ tokens: count, mse: z.number(), relError: z.number().describe("sum ||v - v'||^2 / sum ||v||^2 over the held-out tokens") }),
    data: z.record(z.string(), z.unknown()),
    options: z.record(z.string(), z.unknown()),
    seconds: z.number(),
    createdAt: z.string(),
  })
  .describe("an AESI run's report (also `codecs/trained/{name}.training.json` beside the trained codec)");

/** GET /v1/train/{trainId} (judgments.service.ts TrainStatus, checked in libs/http-api/src/openapi/training.ts). */
export const TrainStatusSchema = z.object({
  trainId: z.string(),
  collection: z.string(),
  status: z.enum(['queued', 'running', 'completed', 'failed', 'cancelled']),
  progress: z.unknown().describe('stage (loading, first-stage, training, writing), percent, epoch, maxEpochs, step, stepsPerEpoch, loss (mean of the epoch so far), etaSeconds, curve'),
  result: z.union([TrainReportSchema, AesiTrainReportSchema]).optional(),
  error: z.string().optional().describe('why it failed: a diverged run names the epoch and the last finite loss'),
});

/** DELETE /v1/train/{trainId} (202). */
export const TrainCancelSchema = z.object({ trainId: z.string(), status: z.enum(['cancelled', 'cancelling', 'completed', 'failed']).describe('cancelled: it was queued; cancelling: it stops at its next step; completed / failed: it had finished, nothing to cancel') });

// ---- the service: health, models; merges and uploads ------------------------------------------

/** One dependency's check in a readiness answer (libs/http-api/src/admin/health.controller.ts ServiceCheck). */
export const ServiceCheckSchema = z.object({
  ok: z.boolean().describe('answered within HEALTH_CHECK_TIMEOUT_MS'),
  ms: z.number(),
  overloaded: z
    .boolean()
    .optional()
    .describe('true when it did not answer in time because of load (a connected Redis or an S3 endpoint accepting connections that was slow, or this process busy): not an outage'),
  error: z.string().optional().describe('which service, whether it is down or overloaded, and what to do'),
});

/** GET /v1/health and /v1/health/ready, 200 and 503 alike. */
export const ReadinessSchema = z.object({
  status: z
    .enum(['ok', 'overloaded', 'degraded'])
    .describe('ok: ready; overloaded: ready but a check did not answer in time because of load (200); degraded: Redis or S3 down, or the default model missing (503)'),
  eventLoopLagMs: z.number().describe("the largest delay of this process's event loop over the last 10 s"),
  redis: ServiceCheckSchema,
  s3: ServiceCheckSchema,
  models: z.object({
    ok: z.boolean(),
    default: z.string().describe('DEFAULT_MODEL'),
    missing: z.array(z.string()).describe('models whose manifest.json is not under MODELS_DIR'),
    hint: z.string().optional().describe('what to do, when something is missing'),
  }),
  queues: z.record(z.string(), z.record(z.string(), z.number())).nullable().describe('job counts per queue and state; null when Redis is down'),
});

/** GET /v1/health/live. */
export const LivenessSchema = z.object({
  status: z.literal('ok'),
  uptimeSeconds: z.number(),
  eventLoopLagMs: z.number().describe("the largest delay of this process's event loop over the last 10 s (for information: liveness does not fail on it)"),
});

/** GET /v1/models (libs/http-api/src/collections/models.controller.ts ModelInfo). */
export const ModelListSchema = z.object({
  default: z.string(),
  cohere: z.string(),
  models: z.array(
    z.object({
      id: z.string(),
      dims: int,
      maxQueryTokens: int,
      maxDocTokens: int,
      pooling: z.enum(['mean', 'cls']),
      default: z.boolean(),
      cohere: z.boolean(),
      description: z.string(),
    }),
  ),
});

/** POST /v1/collections/{id}/merge (200): what the merge did (MergeOutcome in queues.ts). */
export const MergeResultSchema = z.object({
  collection: z.string(),
  generation: int.describe('the current generation after the merge'),
  committed: z.boolean().describe('a generation was written'),
  status: z
    .enum(['merged', 'nothing-to-merge', 'inputs-gone', 'recompressing', 'busy'])
    .describe("busy: another merge of this collection held its lease for the whole wait (twice JOB_LOCK_SECONDS); nothing was done, and a merge job is queued again to run after a job lock's time"),
  inputs: z.array(z.string()).describe('S3 keys of the segments merged'),
  output: z.string().nullable().describe('S3 key of the merged segment (null: none written or committed)'),
  dropped: int.describe('deleted and superseded documents left out'),
  reason: z.enum(['tier', 'deletes']).optional(),
  index: z.enum(['copied', 'rebuilt']).optional().describe("the merged segment's search index: copied from the inputs' indexes, or rebuilt (an input had none usable)"),
  recoded: int.optional().describe('inputs coded again from their raw fp16 batch because their segment was missing or corrupt in S3 (absent: none)'),
  refit: z
    .string()
    .optional()
    .describe("WARP collections: the id of the refit job queued after this merge (the refit queue: the centroids refitted when the collection's tokens call for more, segments' search layouts moved to the newest centroid epoch; docs/scaling.md, \"WARP centroids\"). Refits run beside merges, never inside them; absent: none due"),
  reindex: z
    .object({
      status: z.enum(['done', 'incomplete']).describe("done: `search` is now the WARP layout; incomplete: segments could not be read (`unreadable`), searches stay on the IVF and the next merge job resumes"),
      bits: z.union([z.literal(2), z.literal(4)]),
      epoch: int.describe('the centroid epoch of the layouts'),
      centroids: int,
      built: int.describe('layouts this job built'),
      segments: int.describe('segments moved to the epoch'),
      unreadable: z.array(z.string()).describe('segment keys that could not be read'),
      generation: int.describe('the last generation the re-index committed (0: none)'),
    })
    .optional()
    .describe('a re-index to WARP search layouts the job ran before merging (POST /v1/collections/{id}/reindex)'),
});
export type MergeOutcomeBody = Produces<typeof MergeResultSchema.shape.status, MergeOutcome['status']>;

/** POST /v1/collections/{id}/merge (202): still in the merge queue. */
export const MergePendingSchema = z.object({ collection: z.string(), generation: int, status: z.enum(['queued', 'running']) });

/** PUT /v1/uploads/{name} (201). */
export const UploadStoredSchema = z.object({ name: z.string(), bytes: count });
