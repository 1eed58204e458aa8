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

export class LateralMetrics {
  readonly registry = new Registry();
  /** Off: every `record*` call returns at once (the ingest bench's "without" variant). */
  enabled = true;

  readonly jobDuration = new Histogram({
    name: 'lateral_job_duration_seconds',
    help: 'Time a worker spent on one job attempt, by queue and outcome (completed, failed).',
    labelNames: ['queue', 'outcome'] as const,
    buckets: DURATION_BUCKETS,
    registers: [this.registry],
  });
  readonly jobFailures = new Counter({
    name: 'lateral_job_failures_total',
    help: 'Jobs that failed for good (no attempt left, or a permanent error), by queue.',
    labelNames: ['queue'] as const,
    registers: [this.registry],
  });
  readonly jobRetries = new Counter({
    name: 'lateral_job_retries_total',
    help: 'Job attempts that failed and will be retried with backoff, by queue.',
    labelNames: ['queue'] as const,
    registers: [this.registry],
  });
  readonly httpDuration = new Histogram({
    name: 'lateral_http_request_duration_seconds',
    help: 'HTTP request durations by method, route pattern and status.',
    labelNames: ['method', 'route', 'status'] as const,
    buckets: HTTP_BUCKETS,
    registers: [this.registry],
  });
  readonly s3Bytes = new Counter({
    name: 'lateral_s3_bytes_total',
    help: 'Object bytes written to (direction="written") and read from (direction="read") S3.',
    labelNames: ['direction'] as const,
    registers: [this.registry],
  });
  readonly s3Requests = new Counter({
    name: 'lateral_s3_requests_total',
    help: 'Object reads and writes sent to S3, by operation (get, put) and result (ok, error, missing).',
    labelNames: ['operation', 'result'] as const,
    registers: [this.registry],
  });
  readonly unavailableDetected = new Counter({
    name: 'lateral_segment_unavailable_total',
    help: 'Segment or search-index objects found unreadable (checksum, decoding, missing from S3) by this scorer, by object (segment, index); counted once per detection.',
    labelNames: ['object'] as const,
    registers: [this.registry],
  });
  readonly unavailableNow = new Gauge({
    name: 'lateral_segments_unavailable',
    help: 'Segment or search-index objects this scorer knows unreadable now (re-rank and search answer without them, degraded), by object.',
    labelNames: ['object'] as const,
    registers: [this.registry],
  });
  readonly computeJobs = new Counter({
    name: 'lateral_compute_jobs_total',
    help: 'Jobs this process ran in a compute thread (COMPUTE_THREADS), by thread and queue.',
    labelNames: ['thread', 'queue'] as const,
    registers: [this.registry],
  });
  readonly computeRestarts = new Counter({
    name: 'lateral_compute_thread_restarts_total',
    help: 'Compute threads that exited unexpectedly and were started again (their running jobs failed and are retried).',
    registers: [this.registry],
  });
  readonly inferenceSeconds = new Histogram({
    name: 'lateral_onnx_inference_seconds',
    help: 'ONNX Runtime session.run time, by graph (the encoder model, or a scoring kernel).',
    labelNames: ['graph'] as const,
    buckets: DURATION_BUCKETS,
    registers: [this.registry],
  });
  readonly inferenceBatch = new Histogram({
    name: 'lateral_onnx_batch_size',
    help: 'Sequences per encoder batch, by model.',
    labelNames: ['graph'] as const,
    buckets: BATCH_BUCKETS,
    registers: [this.registry],
  });
  readonly inferenceTokens = new Counter({
    name: 'lateral_onnx_tokens_total',
    help: 'Tokens (padded batch x sequence positions) run through the encoder, by model.',
    labelNames: ['graph'] as const,
    registers: [this.registry],
  });
  readonly queueJobs = new Gauge({
    name: 'lateral_queue_jobs',
    help: 'Jobs per queue and state (waiting, active, completed, failed, delayed, prioritized), from BullMQ at scrape time (API).',
    labelNames: ['queue', 'state'] as const,
    registers: [this.registry],
  });
  readonly redisUp = new Gauge({
    name: 'lateral_redis_up',
    help: '1 when Redis answered the last scrape, 0 when it did not (the queue series are then absent).',
    registers: [this.registry],
  });
  readonly collectionDocuments = new Gauge({
    name: 'lateral_collection_documents',
    help: 'Live documents in the current generation, by tenant and collection (API; refreshed at most every 30 s).',
    labelNames: ['tenant', 'collection'] as const,
    registers: [this.registry],
  });
  readonly collectionTokens = new Gauge({
    name: 'lateral_collection_tokens',
    help: 'Stored tokens in the current generation, by tenant and collection.',
    labelNames: ['tenant', 'collection'] as const,
    registers: [this.registry],
  });
  readonly collectionBytes = new Gauge({
    name: 'lateral_collection_bytes',
    help: 'Segment bytes in S3 of the current generation, by tenant and collection.',
    labelNames: ['tenant', 'collection'] as const,
    registers: [this.registry],
  });

  private readonly caches = new Map<string, () => CacheStats>();

  /** `defaults`: Node's process metrics (CPU, memory, event loop); off in compute threads, whose process is the main thread's. */
  constructor(defaults = true) {
    if (defaults) collectDefaultMetrics({ register: this.registry });
    const caches = this.caches;
    const each = (pick: (s: CacheStats) => number | undefined, set: (name: string, v: number) => void) => {
      for (const [name, get] of caches) {
        let s: CacheStats;
        try {
          s = get();
        } catch {
          continue;
        }
        const v = pick(s);
        if (v !== undefined && Number.isFinite(v)) set(name, v);
      }
    };
    new Gauge({
      name: 'lateral_cache_bytes',
      help: 'Bytes held by a cache (scorer segment caches), by cache.',
      labelNames: ['cache'] as const,
      registers: [this.registry],
      collect() {
        this.reset();
        each((s) => s.bytes, (cache, v) => this.set({ cache }, v));
      },
    });
    new Gauge({
      name: 'lateral_cache_entries',
      help: 'Entries held by a cache, by cache.',
      labelNames: ['cache'] as const,
      registers: [this.registry],
      collect() {
        this.reset();
        each((s) => s.entries, (cache, v) => this.set({ cache }, v));
      },
    });
    // Monotonic totals kept by the cache itself: exposed as counters with the cache's figure.
    for (const [suffix, help, pick] of [
      ['hits', 'Cache hits, by cache.', (s: CacheStats) => s.hits],
      ['misses', 'Cache misses, by cache.', (s: CacheStats) => s.misses],
      ['evictions', 'Entries evicted to stay within the budget, by cache.', (s: CacheStats) => s.evictions],
    ] as const) {
      new Counter({
        name: `lateral_cache_${suffix}_total`,
        help,
        labelNames: ['cache'] as const,
        registers: [this.registry],
        collect() {
          this.reset();
          each(pick, (cache, v) => this.inc({ cache }, v));
        },
      });
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
