import { z } from 'zod';
import { ALL_QUEUES, QueueName } from './queues';

const bool = z
  .union([z.boolean(), z.enum(['true', 'false', '1', '0', 'yes', 'no'])])
  .transform((v) => v === true || v === 'true' || v === '1' || v === 'yes');
const int = (def: number, min: number, max: number) => z.coerce.number().int().min(min).max(max).default(def);

/** SCORER_WARP_WHOLE_BYTES when unset (64 MiB), also the serving library's default where no configuration is given (WARP_WHOLE_READ_BYTES). */
export const DEFAULT_WARP_WHOLE_BYTES = 64 * 2 ** 20;

/**
 * SCORER_WARP_RANGE_GAP_BYTES when unset (32 KiB), also the serving library's default
 * (WARP_RANGE_GAP_BYTES): two probed lists at most this far apart are read in one ranged GET.
 * A GET's first byte (~10 ms) costs what ~1 MB does at 100 MB/s, so 32 KiB read and dropped costs
 * ~3% of the GET it saves; the bound is the bytes a cold query fetches (the 5% target of issue
 * 32): at 1,000,000 documents (synthetic, uniform centroid ids) 32 KiB saves ~8% of the first
 * query's ranged GETs for +0.35 points of the layout bytes (3.24% to 3.6%), where 64 KiB saves
 * ~16% for +1.4 points (4.6%, near the target before real lists' skew) (docs/segment-format.md,
 * "Reading a layout by ranges").
 */
export const DEFAULT_WARP_RANGE_GAP_BYTES = 32 * 2 ** 10;

/**
 * Every environment variable lateral reads, validated once at start-up.
 * The configuration table (docs/configuration.md) is this object, one row per key.
 */
export const ConfigSchema = z.object({
  NODE_ENV: z.enum(['development', 'production', 'test']).default('development'),
  LOG_LEVEL: z.enum(['debug', 'info', 'warn', 'error']).default('info'),
  /** Port of a standalone worker process's own GET /metrics (Prometheus text), bound on HOST; 0 = none. The API serves /metrics on PORT. */
  METRICS_PORT: int(9464, 0, 65535),
  /** HTTP port of the API. */
  PORT: int(8080, 0, 65535),
  HOST: z.string().default('127.0.0.1'),
  /** Operator credential for /dashboard, /admin/queues and /v1/admin/* (at least 16 characters); unset: those answer 403 (disabled). */
  ADMIN_TOKEN: z.string().min(16, 'ADMIN_TOKEN must be at least 16 characters').optional(),
  /** Redis URL; when unset (or unreachable, for the demo) an embedded redis-server is started. */
  REDIS_URL: z.string().url().optional(),
  /** Prefix of every BullMQ and lateral key in Redis. */
  REDIS_PREFIX: z.string().regex(/^[A-Za-z0-9_-]+$/).default('lateral'),
  /** S3 endpoint; when unset an in-process S3-compatible server is started on DATA_DIR. */
  S3_ENDPOINT: z.string().url().optional(),
  S3_REGION: z.string().default('us-east-1'),
  S3_BUCKET: z.string().min(3).default('lateral'),
  S3_ACCESS_KEY_ID: z.string().default('S3RVER'),
  S3_SECRET_ACCESS_KEY: z.string().default('S3RVER'),
  S3_FORCE_PATH_STYLE: bool.default(true),
  /**
   * The API's Redis commands (enqueue, job reads, counts, rate limits) fail after this long without
   * an answer; on a connected client that is answered 503 `overloaded`, not Redis down.
   */
  REDIS_COMMAND_TIMEOUT_MS: int(5000, 100, 600_000),
  /** Connecting to Redis gives up after this long (then retried; a request meanwhile gets 503 Redis unreachable). */
  REDIS_CONNECT_TIMEOUT_MS: int(5000, 100, 600_000),
  /** An S3 request that cannot open its connection within this long fails (retried by the SDK, 3 attempts). */
  S3_CONNECT_TIMEOUT_MS: int(5000, 100, 600_000),
  /** An S3 request whose connection carries no byte for this long fails as overload (retried by the SDK, 3 attempts). */
  S3_SOCKET_TIMEOUT_MS: int(30_000, 100, 3_600_000),
  /** Each readiness check (Redis PING, S3 HeadBucket, queue counts) is given this long; GET /v1/health/ready answers within about this. */
  HEALTH_CHECK_TIMEOUT_MS: int(2000, 100, 60_000),
  /** An event loop held up this long (or fully busy) while a Redis or S3 call timed out makes the timeout overload, not the dependency down. */
  EVENT_LOOP_OVERLOAD_MS: int(500, 10, 60_000),
  /** Folder for the embedded S3 server and Redis data. */
  DATA_DIR: z.string().default('.data'),
  /** Folder holding model directories (each with model.onnx, tokenizer.json, manifest.json). */
  MODELS_DIR: z.string().default('.cache/models'),
  /** Folder of scorer artifacts (LITE / KNRM `.onnx`, lite-flat `.json`) named by re-rank requests. */
  SCORERS_DIR: z.string().default('.cache/scorers'),
  /**
   * How a scorer holds EDEN token-layout generations (bits <= 6, no side information):
   * `int8-image` keeps the codes as their int8 rotated image and runs MaxSim as integer GEMMs
   * (faster, 1 B per dim in RAM, adds the grid and query roundings); `decode` decodes them to fp32.
   */
  COMPRESSED_SCORING: z.enum(['int8-image', 'decode']).default('int8-image'),
  /**
   * Bytes a scorer keeps in memory of segments, their search indexes, id tables and the vectors
   * made from them (decoded fp32 or the int8 rotated image), evicted least recently used.
   */
  SCORER_CACHE_BYTES: int(2 * 2 ** 30, 1 << 20, 2 ** 46),
  /** Bytes of S3 objects (segments, indexes) a scorer keeps on local disk under SCORER_DISK_CACHE_DIR (0 = no disk cache). */
  SCORER_DISK_CACHE_BYTES: int(10 * 2 ** 30, 0, 2 ** 50),
  /** Folder of the scorer's local disk cache of S3 objects (may be shared by the processes of one machine); unset: DATA_DIR/scorer-cache. */
  SCORER_DISK_CACHE_DIR: z.string().min(1).optional(),
  /** Segment and index objects a scorer reads and parses at once. */
  SCORER_LOAD_CONCURRENCY: int(4, 1, 256),
  /**
   * WARP search layouts up to this many bytes are read whole (one GET) and kept whole in memory;
   * larger ones are read by their probed lists' byte ranges (ranged GETs). 0 = always by ranges.
   * 64 MiB: full Vaswani's merged layouts (20-29 MB) searched by ranges took a 172 ms search job
   * (114 ranged reads a query), read whole 25 ms (docs/benchmarks.md, "WARP").
   */
  SCORER_WARP_WHOLE_BYTES: int(DEFAULT_WARP_WHOLE_BYTES, 0, 2 ** 40),
  /**
   * WARP layouts read by ranges: two probed lists of a segment are read in one ranged GET when at
   * most this many bytes of other lists lie between them (read and dropped). Fewer GETs for more
   * bytes; 0 = exactly the probed lists' bytes (adjacent lists still one GET).
   */
  SCORER_WARP_RANGE_GAP_BYTES: int(DEFAULT_WARP_RANGE_GAP_BYTES, 0, 2 ** 30),
  /**
   * How a re-rank reads its candidates' codes: `ranges` = positioned reads of the segments' copies
   * in the disk cache, the memory cache keeping only each segment's head (ids, token offsets, code
   * starts), for EDEN token-layout segments scored from the int8 image (others, and a scorer
   * without a disk cache, load whole segments); `segments` = whole segments in the memory cache.
   */
  SCORER_RERANK_READS: z.enum(['ranges', 'segments']).default('ranges'),
  /**
   * The order a search walks a generation's segments in: `alternate` = each walk goes the other
   * way from the one before, so a walk starts with the segments the last one left in the memory
   * cache (a collection larger than SCORER_CACHE_BYTES then keeps about the bound's share of
   * its segments between searches, where walking one way evicts each before it is read again);
   * `manifest` = always in manifest order. Results do not depend on it.
   */
  SCORER_SCAN_ORDER: z.enum(['alternate', 'manifest']).default('alternate'),
  /**
   * Shards a collection may be created with at most (`shards` on POST /v1/collections), and the
   * shard queues (`shard-0` .. `shard-<n-1>`) a scorer holding `all` serves.
   */
  COLLECTION_MAX_SHARDS: int(8, 1, 64),
  /**
   * Shards whose queues this process serves when it works on the rerank or search queue: `all`
   * (0 .. COLLECTION_MAX_SHARDS - 1), `none`, or a list such as `0,1` or `0-3`.
   */
  SCORER_SHARDS: z.string().default('all'),
  /** true: the shard comes from the host name's trailing ordinal (a StatefulSet pod `...-2` holds shard 2), overriding SCORER_SHARDS. */
  SCORER_SHARD_FROM_HOSTNAME: bool.default(false),
  /** Shard child jobs (a sharded re-rank's or search's part for one shard) worked on at once per shard queue. */
  SCORER_SHARD_CONCURRENCY: int(2, 1, 64),
  /** Model directory name used when a collection names none. */
  DEFAULT_MODEL: z.string().default('minilm-l6-384'),
  /** The local model the Cohere-compatible route uses for Cohere's model names (`rerank-english-v3.0`, `rerank-v3.5`, ...); unset = DEFAULT_MODEL. */
  COHERE_MODEL: z.string().regex(/^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$/, 'COHERE_MODEL must be a model directory name under MODELS_DIR').optional(),
  /** ONNX Runtime execution provider; cuda falls back to cpu with a logged warning. */
  ORT_EXECUTION_PROVIDER: z.enum(['cpu', 'cuda']).default('cpu'),
  ORT_CUDA_DEVICE_ID: int(0, 0, 64),
  /**
   * The encoder graph a model is run with: `fp16` / `int8` load the model's `<model>-fp16` /
   * `<model>-int8` directory (same weights, built by build-model for minilm-l6-384) when it exists,
   * else the model itself; `fp32` always the model itself; `auto`: int8 on the CPU provider (its
   * nDCG@10 cost is within 0.002 on Cranfield and TREC DL 2019), fp32 on CUDA (docs/models.md).
   */
  ENCODER_PRECISION: z.enum(['auto', 'fp32', 'fp16', 'int8']).default('auto'),
  /**
   * Sessions of each encoder model, each in a thread of its own, that its batches are spread over;
   * 0 = auto: 2 on CUDA (two batches side by side: 1.5-1.6x one session on an H200,
   * docs/models.md "Encoder processes per GPU"), 1 on the CPU provider (one session's intra-op
   * threads already use every core).
   */
  ENCODER_SESSIONS: int(0, 0, 16),
  /** Threads per ONNX session (0 = ONNX Runtime's default). */
  ORT_INTRA_OP_THREADS: int(0, 0, 256),
  /** Token budget of one encoder batch (sum of padded lengths). */
  ENCODE_TOKEN_BUDGET: int(16384, 256, 1 << 22),
  /** Queues this process works on (comma-separated); the API process works none by default. */
  WORKER_QUEUES: z
    .string()
    .default('')
    .transform((s, ctx) => {
      const names = s.split(',').map((x) => x.trim()).filter(Boolean);
      for (const n of names) {
        if (!ALL_QUEUES.includes(n as QueueName)) {
          ctx.addIssue({ code: 'custom', message: `unknown queue '${n}' (known: ${ALL_QUEUES.join(', ')})` });
        }
      }
      return names as QueueName[];
    }),
  /**
   * Worker threads that run a worker process's jobs (encode, compress, index, commit, merge,
   * search, re-rank, batch, train ...) off its event loop, which keeps BullMQ's lock renewal, the
   * heartbeat, /metrics and (all-in-one) the HTTP API on time; each keeps its caches across jobs.
   * 0 = run them on the event loop, as before. Several split the cache budgets between them.
   */
  COMPUTE_THREADS: int(1, 0, 64),
  /**
   * In a process that serves the encode queue, its compute threads lower their own OS priority to
   * this nice value (Linux) once the default model's encoder is loaded: the encoder's session
   * thread and ONNX Runtime's threads keep the process's priority, and the compute threads'
   * compress, index, commit and merge work takes the cores they leave (docs/models.md). 0 = off
   * (the default: at the load it was measured under, 20-40 on 2 cores, it changed nothing measurable,
   * and it would slow an all-in-one's searches beside other processes' busy cores).
   */
  COMPUTE_NICE: int(0, 0, 19),
  /**
   * Encode jobs a process runs at once. 2: the second job's batches wait in line behind the first
   * one's in the encoder's session thread (oldest job first, libs/model/src/batch-slots.ts), so the
   * session never idles while a job tokenizes, writes its segment or is handed over (docs/models.md).
   */
  ENCODE_CONCURRENCY: int(2, 1, 64),
  COMPRESS_CONCURRENCY: int(2, 1, 64),
  INDEX_CONCURRENCY: int(2, 1, 64),
  /** Token IVF centroids per collection and codec version; 0 = PLAID's rule on the first indexed segment's tokens. */
  IVF_CENTROIDS: int(0, 0, 65536),
  COMMIT_CONCURRENCY: int(4, 1, 64),
  /** Merges (issue 10): a tier of the tiered policy merges once it holds this many segments. */
  MERGE_FACTOR: int(10, 2, 1000),
  /** A segment whose deleted (tombstoned) fraction of documents reaches this is rewritten. */
  MERGE_DELETED_FRACTION: z.coerce.number().gt(0).max(1).default(0.3),
  /** Segments under this many live documents share the lowest tier. */
  MERGE_FLOOR_DOCUMENTS: int(256, 1, 10_000_000),
  /** Segments with this many live documents or more are not merged with others (only rewritten for deletes). */
  MERGE_MAX_DOCUMENTS: int(1_000_000, 1, 2 ** 32 - 1),
  /** Cap on a merge's output in coded segment bytes (Lucene's max merged segment size); below the 4 GiB segment format limit. */
  MERGE_MAX_BYTES: int(256 * 2 ** 20, 1 << 20, 2 ** 32 - 1),
  /**
   * Collections with a WARP search layout: segments per shard past which the lowest tier holding two
   * or more merges before it is full (a WARP query costs about one ranged read per probed list per
   * segment); 0 = no bound (the tiered policy alone).
   */
  MERGE_WARP_MAX_SEGMENTS: int(12, 0, 100_000),
  /**
   * Ingest back-pressure of collections with a WARP search layout: while a shard of the current
   * generation holds more than this many times MERGE_WARP_MAX_SEGMENTS segments, POST
   * .../documents answers 503 (Retry-After) instead of letting merges fall further behind; applied
   * only with MERGE_AFTER_COMMIT (merges in the background) and MERGE_WARP_MAX_SEGMENTS > 0. 0 = off.
   */
  INGEST_WARP_SEGMENTS_FACTOR: int(2, 0, 1000),
  /** Cap on the output of a merge made for MERGE_WARP_MAX_SEGMENTS, in coded segment bytes (over MERGE_MAX_BYTES: segments grow instead of their count). */
  MERGE_WARP_MAX_BYTES: int(512 * 2 ** 20, 1 << 20, 2 ** 32 - 1),
  /** Concurrent merge jobs per process (the merge queue; one merge per collection at a time whatever this is). */
  MERGE_CONCURRENCY: int(1, 1, 16),
  /** Concurrent WARP refit jobs per process (the refit queue; one refit per collection at a time whatever this is). */
  REFIT_CONCURRENCY: int(1, 1, 16),
  /** Enqueue a merge job after each committed generation (false: only POST /v1/collections/{id}/merge). */
  MERGE_AFTER_COMMIT: bool.default(true),
  /** Newest generations whose segments are kept; objects a merge replaced are removed once older ones only list them (and GC_GRACE_SECONDS passed). */
  KEEP_GENERATIONS: int(10, 1, 100_000),
  /** Seconds a merged-away segment (and its index, raw vectors, documents) stays after the merge committed. */
  GC_GRACE_SECONDS: int(3600, 0, 30 * 24 * 3600),
  RERANK_CONCURRENCY: int(1, 1, 64),
  SEARCH_CONCURRENCY: int(2, 1, 64),
  /** Concurrent encode-texts jobs (candidate texts -> the text cache) per process. */
  ENCODE_TEXTS_CONCURRENCY: int(1, 1, 64),
  /** Concurrent batch jobs (plan, chunk, finalize) per process. */
  BATCH_CONCURRENCY: int(1, 1, 64),
  /**
   * Hosts a request's `callback` URL may name (comma-separated `host`, `host:port`, `*.domain`, `*`);
   * empty = webhooks disabled. Loopback, link-local and metadata addresses only when named exactly (docs/webhooks.md).
   */
  WEBHOOK_ALLOWED_HOSTS: z.string().default(''),
  /** HMAC-SHA256 key of the `x-lateral-signature` header of webhook deliveries; required for callbacks to be accepted. */
  WEBHOOK_SECRET: z.string().default(''),
  /** One webhook delivery's time limit (connect to answer), ms; a timeout is retried. */
  WEBHOOK_TIMEOUT_MS: int(5000, 100, 120_000),
  /** Attempts per webhook delivery (timeouts, connection errors and 5xx are retried) before it is marked failed. */
  WEBHOOK_ATTEMPTS: int(5, 1, 50),
  /** First retry delay of a webhook delivery (ms), doubled on each attempt. */
  WEBHOOK_BACKOFF_MS: int(1000, 1, 3_600_000),
  /** Concurrent webhook deliveries per process serving the `webhook` queue. */
  WEBHOOK_CONCURRENCY: int(8, 1, 256),
  /** Days an encoded candidate text stays reusable in the text cache (checked on read; expired entries are deleted by the cleanup). */
  TEXT_CACHE_TTL_DAYS: int(30, 1, 3650),
  /** Seconds between reconciler passes (re-enqueue work whose jobs Redis lost, from S3); 0 = off. */
  RECONCILE_INTERVAL_SECONDS: int(120, 0, 86_400),
  /** Decoded cached texts a scorer process keeps in memory (MiB). */
  TEXT_CACHE_MEMORY_MB: int(256, 0, 65536),
  /** Largest batch input file (bytes). */
  BATCH_MAX_BYTES: int(1 << 30, 1024, 2 ** 40),
  /** Rows (input lines) per batch chunk job. */
  BATCH_CHUNK_ROWS: int(250, 1, 10_000),
  /** Attempts per job before it is marked failed (transient errors only). */
  JOB_ATTEMPTS: int(5, 1, 100),
  /**
   * A job's lock in Redis, renewed by its worker every half of it: a worker killed mid-job leaves a
   * lock that expires within this time, and the job is then handed to another worker (docs/deploy.md).
   */
  JOB_LOCK_SECONDS: int(30, 2, 600),
  /** How often every worker looks for jobs whose lock expired (stalled) and puts them back in their queue. */
  JOB_STALLED_CHECK_SECONDS: int(10, 1, 600),
  /** On SIGTERM / SIGINT, how long workers may finish their active jobs; then the jobs still running go back to their queue. */
  SHUTDOWN_GRACE_SECONDS: int(30, 0, 3600),
  /** Jobs waiting in one queue above which new requests that feed it answer 503 + Retry-After (0 = no limit). */
  MAX_QUEUE_BACKLOG: int(10_000, 0, 100_000_000),
  /** Largest single document text, in bytes (UTF-8). */
  MAX_DOCUMENT_BYTES: int(100_000, 1, 16 << 20),
  /** Most documents in one ingest request. */
  MAX_BATCH_DOCUMENTS: int(5_000, 1, 1_000_000),
  /** Largest request body, in bytes. */
  MAX_REQUEST_BYTES: int(64 << 20, 1024, 1 << 30),
  /** Deepest nesting of arrays / objects in a JSON or NDJSON body. */
  MAX_JSON_DEPTH: int(64, 2, 10_000),
  /** Request bodies over 1 MiB (or compressed, or of unknown length) read and handled at once per API process; the others wait. */
  BODY_PARSE_CONCURRENCY: int(2, 1, 256),
  /** Documents per encode job (an ingest request is split into batches of this size). */
  ENCODE_BATCH_DOCUMENTS: int(256, 1, 100_000),
  /** Longest `wait` a caller may ask for on rerank, in seconds. */
  RERANK_MAX_WAIT_SECONDS: int(60, 0, 3600),
  /** Tenant of every request when AUTH=none, and of the bootstrap admin key (ADMIN_API_KEY). */
  DEFAULT_TENANT: z.string().regex(/^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$/).default('default'),
  /** `none`: single tenant, no credentials (as before API keys); `keys`: every /v1 request but health needs an API key. */
  AUTH: z.enum(['none', 'keys']).default('none'),
  /** With AUTH=keys: a bootstrap admin credential of DEFAULT_TENANT (at least 32 characters), to create the first keys. */
  ADMIN_API_KEY: z.string().min(32, 'ADMIN_API_KEY must be at least 32 characters').optional(),
  /** How long an API process trusts a key it has read from S3: a revoked or rotated key stops working within this delay. */
  API_KEY_CACHE_SECONDS: z.coerce.number().min(0).max(3600).default(5),
  /** Per-key rate limit (token bucket in Redis): requests per second; 0 = no limit. */
  RATE_LIMIT_PER_SECOND: z.coerce.number().min(0).max(1_000_000).default(50),
  /** Per-key burst: the bucket's size. */
  RATE_LIMIT_BURST: int(100, 1, 1_000_000),
  /** Per-tenant quota: live documents over all of a tenant's collections, plus those of its ingestions in progress; 0 = unlimited. */
  TENANT_MAX_DOCUMENTS: int(0, 0, Number.MAX_SAFE_INTEGER),
  /** Per-tenant quota: bytes of the compressed segments its collections' current generations hold (as committed); 0 = unlimited. */
  TENANT_MAX_BYTES: int(0, 0, Number.MAX_SAFE_INTEGER),
  /** Per-tenant quota: ingestions, re-rank and search jobs, batches and training runs accepted and not finished; 0 = unlimited. */
  TENANT_MAX_CONCURRENT_JOBS: int(0, 0, 1_000_000),
});

export type Config = z.infer<typeof ConfigSchema>;

export class ConfigError extends Error {}

/** Parse once at start-up; fails fast naming every bad variable. */
export function loadConfig(env: Record<string, string | undefined> = process.env): Config {
  const known = Object.fromEntries(Object.keys(ConfigSchema.shape).map((k) => [k, env[k] === '' ? undefined : env[k]]));
  const parsed = ConfigSchema.safeParse(known);
  if (!parsed.success) {
    const lines = parsed.error.issues.map((i) => `  ${i.path.join('.')}: ${i.message}`);
    throw new ConfigError(`invalid configuration:\n${lines.join('\n')}`);
  }
  return parsed.data;
}

export const CONFIG_KEYS = Object.keys(ConfigSchema.shape) as (keyof Config)[];
