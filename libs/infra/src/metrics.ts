import http from 'node:http';
import { AggregatorRegistry, Counter, Gauge, Histogram, Registry, collectDefaultMetrics, type MetricObjectWithValues, type MetricValue } from 'prom-client';
import { eventLoopMonitor } from './overload';

/**
 * Prometheus metrics (prom-client), one registry per process: the API serves it at `GET /metrics`
 * and every standalone worker process on its own port (`METRICS_PORT`); the all-in-one process has
 * one registry, so its API's `/metrics` shows its workers' series too.
 *
 * The code that measures calls the small `record*` functions below; the libraries that must not do
 * I/O (model, kernels) only take a callback, wired by the worker's composition root.
 */

const DURATION_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300];
const HTTP_BUCKETS = [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60];
const BATCH_BUCKETS = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024];

/** A cache's own figures, read at each scrape. Counts are totals since the cache was created. */
export interface CacheStats {
  bytes: number;
  entries?: number;
  hits: number;
  misses?: number;
  evictions: number;
}

type LabelOf<D> = D extends { labels: readonly (infer L)[] } ? Extract<L, string> : never;
type MetricOf<D> = D extends { kind: 'counter' } ? Counter<LabelOf<D>> : D extends { kind: 'gauge' } ? Gauge<LabelOf<D>> : Histogram<LabelOf<D>>;

interface MetricDefinition {
  kind: 'counter' | 'gauge' | 'histogram';
  name: string;
  help: string;
  labels?: readonly string[];
  buckets?: readonly number[];
}

/** Every series the code records into, as data: `LateralMetrics` builds one prom-client metric per entry. */
const SERIES = {
  jobDuration: { kind: 'histogram', name: 'lateral_job_duration_seconds', help: 'Time a worker spent on one job attempt, by queue and outcome (completed, failed).', labels: ['queue', 'outcome'], buckets: DURATION_BUCKETS },
  jobFailures: { kind: 'counter', name: 'lateral_job_failures_total', help: 'Jobs that failed for good (no attempt left, or a permanent error), by queue.', labels: ['queue'] },
  jobRetries: { kind: 'counter', name: 'lateral_job_retries_total', help: 'Job attempts that failed and will be retried with backoff, by queue.', labels: ['queue'] },
  httpDuration: { kind: 'histogram', name: 'lateral_http_request_duration_seconds', help: 'HTTP request durations by method, route pattern and status.', labels: ['method', 'route', 'status'], buckets: HTTP_BUCKETS },
  s3Bytes: { kind: 'counter', name: 'lateral_s3_bytes_total', help: 'Object bytes written to (direction="written") and read from (direction="read") S3.', labels: ['direction'] },
  s3Requests: { kind: 'counter', name: 'lateral_s3_requests_total', help: 'Object reads and writes sent to S3, by operation (get, put) and result (ok, error, missing).', labels: ['operation', 'result'] },
  unavailableDetected: {
    kind: 'counter',
    name: 'lateral_segment_unavailable_total',
    help: 'Segment or search-index objects found unreadable (checksum, decoding, missing from S3) by this scorer, by object (segment, index); counted once per detection.',
    labels: ['object'],
  },
  unavailableNow: {
    kind: 'gauge',
    name: 'lateral_segments_unavailable',
    help: 'Segment or search-index objects this scorer knows unreadable now (re-rank and search answer without them, degraded), by object.',
    labels: ['object'],
  },
  computeJobs: { kind: 'counter', name: 'lateral_compute_jobs_total', help: 'Jobs this process ran in a compute thread (COMPUTE_THREADS), by thread and queue.', labels: ['thread', 'queue'] },
  computeRestarts: { kind: 'counter', name: 'lateral_compute_thread_restarts_total', help: 'Compute threads that exited unexpectedly and were started again (their running jobs failed and are retried).' },
  inferenceSeconds: { kind: 'histogram', name: 'lateral_onnx_inference_seconds', help: 'ONNX Runtime session.run time, by graph (the encoder model, or a scoring kernel).', labels: ['graph'], buckets: DURATION_BUCKETS },
  inferenceBatch: { kind: 'histogram', name: 'lateral_onnx_batch_size', help: 'Sequences per encoder batch, by model.', labels: ['graph'], buckets: BATCH_BUCKETS },
  inferenceTokens: { kind: 'counter', name: 'lateral_onnx_tokens_total', help: 'Tokens (padded batch x sequence positions) run through the encoder, by model.', labels: ['graph'] },
  queueJobs: {
    kind: 'gauge',
    name: 'lateral_queue_jobs',
    help: 'Jobs per queue and state (waiting, active, completed, failed, delayed, prioritized), from BullMQ at scrape time (API).',
    labels: ['queue', 'state'],
  },
  redisUp: { kind: 'gauge', name: 'lateral_redis_up', help: '1 when Redis answered the last scrape, 0 when it did not (the queue series are then absent).' },
  collectionDocuments: { kind: 'gauge', name: 'lateral_collection_documents', help: 'Live documents in the current generation, by tenant and collection (API; refreshed at most every 30 s).', labels: ['tenant', 'collection'] },
  collectionTokens: { kind: 'gauge', name: 'lateral_collection_tokens', help: 'Stored tokens in the current generation, by tenant and collection.', labels: ['tenant', 'collection'] },
  collectionBytes: { kind: 'gauge', name: 'lateral_collection_bytes', help: 'Segment bytes in S3 of the current generation, by tenant and collection.', labels: ['tenant', 'collection'] },
  simdKernels: {
    kind: 'gauge',
    name: 'lateral_simd_kernels',
    help: 'The scoring kernels this worker process runs: 1 on kind="wasm" (the WebAssembly SIMD module) or kind="js" (the JavaScript fallback, about 2x slower: module not built or failing its self-check).',
    labels: ['kind'],
  },
} as const satisfies Record<string, MetricDefinition>;

/**
 * The cache series, read from each registered cache at scrape time (gauges: what it holds now;
 * counters: the monotonic totals the cache keeps itself, exposed with the cache's figure).
 */
const CACHE_SERIES: readonly { kind: 'counter' | 'gauge'; name: string; help: string; pick: (s: CacheStats) => number | undefined }[] = [
  { kind: 'gauge', name: 'lateral_cache_bytes', help: 'Bytes held by a cache (scorer segment caches), by cache.', pick: (s) => s.bytes },
  { kind: 'gauge', name: 'lateral_cache_entries', help: 'Entries held by a cache, by cache.', pick: (s) => s.entries },
  { kind: 'counter', name: 'lateral_cache_hits_total', help: 'Cache hits, by cache.', pick: (s) => s.hits },
  { kind: 'counter', name: 'lateral_cache_misses_total', help: 'Cache misses, by cache.', pick: (s) => s.misses },
  { kind: 'counter', name: 'lateral_cache_evictions_total', help: 'Entries evicted to stay within the budget, by cache.', pick: (s) => s.evictions },
];

/** The prom-client metric `d` describes, registered in `registry`. */
function metric<D extends MetricDefinition>(registry: Registry, d: D): MetricOf<D> {
  const common = { name: d.name, help: d.help, labelNames: [...(d.labels ?? [])], registers: [registry] };
  if (d.kind === 'counter') return new Counter(common) as MetricOf<D>;
  if (d.kind === 'gauge') return new Gauge(common) as MetricOf<D>;
  return new Histogram({ ...common, buckets: [...(d.buckets ?? DURATION_BUCKETS)] }) as MetricOf<D>;
}

export class LateralMetrics {
  readonly registry = new Registry();
  /** Off: every `record*` call returns at once (the ingest bench's "without" variant). */
  enabled = true;

  readonly jobDuration = metric(this.registry, SERIES.jobDuration);
  readonly jobFailures = metric(this.registry, SERIES.jobFailures);
  readonly jobRetries = metric(this.registry, SERIES.jobRetries);
  readonly httpDuration = metric(this.registry, SERIES.httpDuration);
  readonly s3Bytes = metric(this.registry, SERIES.s3Bytes);
  readonly s3Requests = metric(this.registry, SERIES.s3Requests);
  readonly unavailableDetected = metric(this.registry, SERIES.unavailableDetected);
  readonly unavailableNow = metric(this.registry, SERIES.unavailableNow);
  readonly computeJobs = metric(this.registry, SERIES.computeJobs);
  readonly computeRestarts = metric(this.registry, SERIES.computeRestarts);
  readonly inferenceSeconds = metric(this.registry, SERIES.inferenceSeconds);
  readonly inferenceBatch = metric(this.registry, SERIES.inferenceBatch);
  readonly inferenceTokens = metric(this.registry, SERIES.inferenceTokens);
  readonly queueJobs = metric(this.registry, SERIES.queueJobs);
  readonly redisUp = metric(this.registry, SERIES.redisUp);
  readonly collectionDocuments = metric(this.registry, SERIES.collectionDocuments);
  readonly collectionTokens = metric(this.registry, SERIES.collectionTokens);
  readonly collectionBytes = metric(this.registry, SERIES.collectionBytes);
  readonly simdKernels = metric(this.registry, SERIES.simdKernels);

  private readonly caches = new Map<string, () => CacheStats>();

  /** `defaults`: Node's process metrics (CPU, memory, event loop); off in compute threads, whose process is the main thread's. */
  constructor(defaults = true) {
    if (defaults) collectDefaultMetrics({ register: this.registry });
    const caches = this.caches;
    /** Each registered cache's figure `pick` (a cache whose stats throw, or lack the figure, is left out). */
    const figures = (pick: (s: CacheStats) => number | undefined): [string, number][] => {
      const out: [string, number][] = [];
      for (const [name, get] of caches) {
        let s: CacheStats;
        try {
          s = get();
        } catch {
          continue;
        }
        const v = pick(s);
        if (v !== undefined && Number.isFinite(v)) out.push([name, v]);
      }
      return out;
    };
    for (const { kind, name, help, pick } of CACHE_SERIES) {
      const common = { name, help, labelNames: ['cache'] as const, registers: [this.registry] };
      if (kind === 'gauge') {
        new Gauge({
          ...common,
          collect() {
            this.reset();
            for (const [cache, v] of figures(pick)) this.set({ cache }, v);
          },
        });
      } else {
        new Counter({
          ...common,
          collect() {
            this.reset();
            for (const [cache, v] of figures(pick)) this.inc({ cache }, v);
          },
        });
      }
    }
  }

  /** Reports a cache's figures at every scrape; returns the function that stops reporting it. */
  registerCache(name: string, getStats: () => CacheStats): () => void {
    this.caches.set(name, getStats);
    return () => {
      if (this.caches.get(name) === getStats) this.caches.delete(name);
    };
  }
}

let instance: LateralMetrics | undefined;

/** This process's metrics (created on first use). */
export function processMetrics(): LateralMetrics {
  return (instance ??= new LateralMetrics());
}

/**
 * In a compute thread (libs/workers/src/compute): its registry holds only the series its jobs
 * record (no process metrics: the main thread's registry has them once). Call before any record*.
 */
export function useThreadMetrics(): void {
  instance ??= new LateralMetrics(false);
}

type MetricsJson = MetricObjectWithValues<MetricValue<string>>[];
const metricsSources = new Set<() => Promise<MetricsJson[]>>();

/**
 * Series recorded elsewhere in this process (the compute threads' registries, read at each scrape):
 * the metrics endpoints and the heartbeat show them summed with this thread's (`metricsRegistry`).
 * Returns the function that removes the source.
 */
export function addMetricsSource(read: () => Promise<MetricsJson[]>): () => void {
  metricsSources.add(read);
  return () => metricsSources.delete(read);
}

/** This thread's registry as JSON (what a compute thread sends the main thread at a scrape). */
export async function metricsJson(): Promise<MetricsJson> {
  return (await processMetrics().registry.getMetricsAsJSON()) as MetricsJson;
}

/**
 * The process's metrics: this thread's registry, or, when compute threads record too, one
 * registry summing theirs with it (counters, histograms and gauges summed per label set).
 */
export async function metricsRegistry(): Promise<Registry> {
  const own = processMetrics().registry;
  if (metricsSources.size === 0) return own;
  const parts: MetricsJson[] = [(await own.getMetricsAsJSON()) as MetricsJson];
  for (const read of metricsSources) parts.push(...(await read()));
  return AggregatorRegistry.aggregate(parts as Parameters<typeof AggregatorRegistry.aggregate>[0]);
}

/** Turns recording on or off for the whole process (the ingest bench compares both). */
export function setMetricsEnabled(on: boolean): void {
  processMetrics().enabled = on;
}

export function recordJob(queue: string, outcome: 'completed' | 'failed', seconds: number): void {
  const m = processMetrics();
  if (m.enabled) m.jobDuration.observe({ queue, outcome }, seconds);
}

export function recordJobFailure(queue: string, final: boolean): void {
  const m = processMetrics();
  if (!m.enabled) return;
  if (final) m.jobFailures.inc({ queue });
  else m.jobRetries.inc({ queue });
}

export function recordComputeJob(thread: number, queue: string): void {
  const m = processMetrics();
  if (m.enabled) m.computeJobs.inc({ thread: String(thread), queue });
}

export function recordComputeRestart(): void {
  const m = processMetrics();
  if (m.enabled) m.computeRestarts.inc();
}

export function recordHttp(method: string, route: string, status: number, seconds: number): void {
  const m = processMetrics();
  if (m.enabled) m.httpDuration.observe({ method, route, status: String(status) }, seconds);
}

export function recordS3(operation: 'get' | 'put', result: 'ok' | 'error' | 'missing', bytes = 0): void {
  const m = processMetrics();
  if (!m.enabled) return;
  m.s3Requests.inc({ operation, result });
  if (bytes > 0) m.s3Bytes.inc({ direction: operation === 'get' ? 'read' : 'written' }, bytes);
}

/** A segment or index object turned unreadable (+1) or read again (-1) in this scorer. */
export function recordUnavailableSegment(object: 'segment' | 'index', change: 1 | -1): void {
  const m = processMetrics();
  if (!m.enabled) return;
  if (change > 0) m.unavailableDetected.inc({ object });
  m.unavailableNow.inc({ object }, change);
}

/** One ONNX Runtime run: `batch` sequences and `tokens` padded positions for the encoder; kernels give only the time. */
export interface InferenceEvent {
  graph: string;
  ms: number;
  batch?: number;
  tokens?: number;
}

/** Which scoring kernels this process runs (set once by a worker process at start). */
export function recordSimdKernels(kind: 'wasm' | 'js'): void {
  const m = processMetrics();
  m.simdKernels.reset();
  m.simdKernels.set({ kind }, 1);
}

export function recordInference(e: InferenceEvent): void {
  const m = processMetrics();
  if (!m.enabled) return;
  m.inferenceSeconds.observe({ graph: e.graph }, e.ms / 1000);
  if (e.batch !== undefined) m.inferenceBatch.observe({ graph: e.graph }, e.batch);
  if (e.tokens !== undefined) m.inferenceTokens.inc({ graph: e.graph }, e.tokens);
}

/**
 * Hook for caches (e.g. the scorer's segment cache): `getStats` is read at each scrape and exposed
 * as lateral_cache_bytes / _entries / _hits_total / _misses_total / _evictions_total{cache=name}.
 * Returns the function that unregisters it (call it when the cache is dropped).
 */
export function registerCacheMetrics(name: string, getStats: () => CacheStats): () => void {
  return processMetrics().registerCache(name, getStats);
}

/**
 * Sets the queue-depth gauges from `counts` (BullMQ getJobCounts per queue) and lateral_redis_up.
 * Never throws: when Redis does not answer within `timeoutMs`, redis_up is 0 and the queue series
 * are dropped, so a scrape still succeeds and says Redis is down.
 */
export async function sampleQueueDepths(counts: () => Promise<Record<string, Record<string, number>>>, timeoutMs = 2000): Promise<boolean> {
  const m = processMetrics();
  let timer: NodeJS.Timeout | undefined;
  try {
    const c = await Promise.race([
      counts(),
      new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error('Redis did not answer in time')), timeoutMs))),
    ]);
    m.queueJobs.reset();
    for (const [queue, states] of Object.entries(c)) for (const [state, n] of Object.entries(states)) m.queueJobs.set({ queue, state }, n);
    m.redisUp.set(1);
    return true;
  } catch {
    m.queueJobs.reset();
    m.redisUp.set(0);
    return false;
  } finally {
    clearTimeout(timer);
  }
}

/** The registry in Prometheus text format, with its content type. */
export async function renderMetrics(): Promise<{ contentType: string; body: string }> {
  const r = await metricsRegistry();
  return { contentType: r.contentType, body: await r.metrics() };
}

export interface MetricsServer {
  port: number;
  close(): Promise<void>;
}

/**
 * A worker process's own `/metrics` on `port` (0 picks a free one; the caller decides whether to
 * start it at all). Anything else answers 404.
 */
export async function startMetricsServer(port: number, host = '0.0.0.0'): Promise<MetricsServer> {
  const startedAt = Date.now();
  const server = http.createServer((req, res) => {
    const path = (req.url ?? '').split('?')[0];
    if (req.method === 'GET' && path === '/v1/health/live') {
      // liveness of a worker process (a Kubernetes liveness probe): it answers; no dependency checked
      const live = { status: 'ok', uptimeSeconds: Math.round((Date.now() - startedAt) / 1000), eventLoopLagMs: eventLoopMonitor().maxLagMs(10_000) };
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(live));
      return;
    }
    if (req.method !== 'GET' || path !== '/metrics') {
      res.writeHead(404, { 'content-type': 'text/plain' }).end('not found: this port serves GET /metrics and GET /v1/health/live\n');
      return;
    }
    renderMetrics().then(
      ({ contentType, body }) => res.writeHead(200, { 'content-type': contentType }).end(body),
      (err: unknown) => res.writeHead(500, { 'content-type': 'text/plain' }).end(`metrics failed: ${err instanceof Error ? err.message : String(err)}\n`),
    );
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => resolve());
  });
  const addr = server.address() as { port: number };
  return {
    port: addr.port,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
