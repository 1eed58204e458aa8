import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger, startMetricsServer } from '@lateral/infra';
import { simdStatus } from '@lateral/simd';
import { startServer, type Server } from '../apps/all-in-one/src/server';
import { http, testConfig, until } from './helpers';

/** Parses Prometheus text: one entry per sample line, `name{labels}` -> value. */
function parseMetrics(text: string): Map<string, number> {
  const out = new Map<string, number>();
  for (const line of text.split('\n')) {
    if (!line || line.startsWith('#')) continue;
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})? (\S+)$/.exec(line);
    if (m) out.set(m[1] + (m[2] ?? ''), Number(m[3]));
  }
  return out;
}

/** The value of the one sample of `name` whose labels include all of `labels` (undefined when none). */
function sample(metrics: Map<string, number>, name: string, labels: Record<string, string> = {}): number | undefined {
  for (const [key, value] of metrics) {
    const brace = key.indexOf('{');
    const n = brace < 0 ? key : key.slice(0, brace);
    if (n !== name) continue;
    const ls = brace < 0 ? '' : key.slice(brace);
    if (Object.entries(labels).every(([k, v]) => ls.includes(`${k}="${v}"`))) return value;
  }
  return undefined;
}

const DOCS = Array.from({ length: 30 }, (_, i) => ({ id: `d${i}`, text: `document ${i} about supersonic flutter of a swept wing and boundary layer number ${i}` }));
const BATCH = 10;

describe('metrics and structured logs against a live API (real Redis, S3, ONNX)', () => {
  let server: Server;
  const lines: Record<string, unknown>[] = [];

  beforeAll(async () => {
    const logger = createLogger('debug', 'lateral', { json: true, destination: { write: (l: string) => lines.push(JSON.parse(l) as Record<string, unknown>) } });
    server = await startServer(testConfig({ ENCODE_BATCH_DOCUMENTS: String(BATCH) }), { logger, closeGraceMs: 5000 });
  });

  afterAll(async () => {
    await server?.stop();
  });

  it('an ingest with x-request-id: the id comes back, and every line its jobs write carries it with the job id, queue, tenant and collection', async () => {
    expect((await http(server.url, 'POST', '/v1/collections', { id: 'm' })).status).toBe(201);
    const res = await http(server.url, 'POST', '/v1/collections/m/documents', DOCS, { 'x-request-id': 'req-metrics-1' });
    expect(res.status).toBe(202);
    expect(res.headers.get('x-request-id')).toBe('req-metrics-1');
    const ingestionId = res.body.ingestionId as string;
    await until(async () => (await http(server.url, 'GET', `/v1/collections/m/ingestions/${ingestionId}`)).body.state === 'done', 60_000, 200);
    // The summary line is written by the commit that completed the ingestion, just before that job ends.
    const summary = await until(async () => lines.find((l) => l.event === 'ingestion.done' && l.ingestionId === ingestionId), 10_000, 50);
    expect(summary).toMatchObject({ requestId: 'req-metrics-1', queue: 'commit', tenant: 'default', collection: 'm', documents: DOCS.length, batches: DOCS.length / BATCH });
    expect(typeof summary.jobId).toBe('string');
    expect(summary.tokens as number).toBeGreaterThan(0);
    expect(summary.docsPerSecond).toBeCloseTo(DOCS.length / (summary.seconds as number), 0);

    // Every line a job of this collection wrote (the wrapper's debug lines included: at least one per job).
    const jobLines = lines.filter((l) => l.jobId !== undefined && l.collection === 'm');
    const queues = new Set(jobLines.map((l) => l.queue));
    expect([...queues].sort()).toEqual(['commit', 'compress', 'encode', 'index']);
    for (const l of jobLines) expect(l).toMatchObject({ requestId: 'req-metrics-1', tenant: 'default', collection: 'm' });
    // Each of the 3 batches went through every stage: 12 jobs, each with its own id.
    expect(new Set(jobLines.map((l) => l.jobId)).size).toBe(4 * (DOCS.length / BATCH));

    // One info line per HTTP request: method, route pattern, status, duration, request id.
    const requestLine = lines.find((l) => l.component === 'lateral:http' && l.route === '/v1/collections/:id/documents' && l.method === 'POST');
    expect(requestLine).toMatchObject({ level: 'info', status: 202, requestId: 'req-metrics-1' });
    expect(typeof requestLine!.ms).toBe('number');
  });

  it('GET /metrics after the ingest: queue depths, job durations, HTTP durations, S3 bytes, ONNX batches, per-collection figures', async () => {
    const batches = DOCS.length / BATCH;
    // The ingestion reads as done once its last commit is recorded in S3; BullMQ marks that commit
    // job completed just after its handler returns, so a busy machine may scrape in between: the
    // scrape is taken once every stage's job has been marked completed (or after 30 s, and fails below).
    const scrape = async () => {
      const res = await fetch(`${server.url}/metrics`);
      expect(res.status).toBe(200);
      expect(res.headers.get('content-type')).toMatch(/^text\/plain/);
      expect(res.headers.get('x-request-id')).toMatch(/^[0-9a-f-]{36}$/); // generated when the caller sends none
      return parseMetrics(await res.text());
    };
    const settled = (m: Map<string, number>) => ['encode', 'compress', 'index', 'commit'].every((queue) => sample(m, 'lateral_queue_jobs', { queue, state: 'completed' }) === batches && sample(m, 'lateral_job_duration_seconds_count', { queue, outcome: 'completed' }) === batches);
    let m = await scrape();
    for (const deadline = Date.now() + 30_000; !settled(m) && Date.now() < deadline; m = await scrape()) await new Promise((r) => setTimeout(r, 200));

    expect(sample(m, 'lateral_redis_up')).toBe(1);
    for (const queue of ['encode', 'compress', 'index', 'commit']) {
      // BullMQ keeps completed jobs: each stage completed one job per batch, and nothing is left waiting.
      expect(sample(m, 'lateral_queue_jobs', { queue, state: 'completed' })).toBe(batches);
      expect(sample(m, 'lateral_queue_jobs', { queue, state: 'waiting' })).toBe(0);
      expect(sample(m, 'lateral_queue_jobs', { queue, state: 'failed' })).toBe(0);
      expect(sample(m, 'lateral_job_duration_seconds_count', { queue, outcome: 'completed' })).toBe(batches);
      expect(sample(m, 'lateral_job_duration_seconds_sum', { queue, outcome: 'completed' })).toBeGreaterThan(0);
      expect(sample(m, 'lateral_job_duration_seconds_bucket', { queue, outcome: 'completed', le: '+Inf' })).toBe(batches);
    }
    expect(sample(m, 'lateral_job_failures_total', { queue: 'encode' }) ?? 0).toBe(0);

    expect(sample(m, 'lateral_http_request_duration_seconds_count', { method: 'POST', route: '/v1/collections/:id/documents', status: '202' })).toBe(1);
    expect(sample(m, 'lateral_http_request_duration_seconds_count', { method: 'POST', route: '/v1/collections', status: '201' })).toBe(1);

    // The encoder ran every document once, in batches of at most 10 sequences.
    const encoderBatches = sample(m, 'lateral_onnx_batch_size_count', { graph: 'glove-ctx-100d' })!;
    expect(sample(m, 'lateral_onnx_batch_size_sum', { graph: 'glove-ctx-100d' })).toBe(DOCS.length);
    expect(encoderBatches).toBeGreaterThanOrEqual(batches);
    expect(sample(m, 'lateral_onnx_inference_seconds_count', { graph: 'glove-ctx-100d' })).toBe(encoderBatches);
    expect(sample(m, 'lateral_onnx_tokens_total', { graph: 'glove-ctx-100d' })).toBeGreaterThan(0);

    // Per collection, as the API reports it; S3 saw at least the segments written and read back.
    const collection = (await http(server.url, 'GET', '/v1/collections/m')).body;
    const labels = { tenant: 'default', collection: 'm' };
    expect(sample(m, 'lateral_collection_documents', labels)).toBe(DOCS.length);
    const segmentBytes = sample(m, 'lateral_collection_bytes', labels)!;
    expect(segmentBytes).toBeGreaterThan(0);
    expect(sample(m, 'lateral_collection_tokens', labels)).toBe(collection.tokens);
    expect(sample(m, 'lateral_s3_bytes_total', { direction: 'written' })).toBeGreaterThan(segmentBytes);
    expect(sample(m, 'lateral_s3_bytes_total', { direction: 'read' })).toBeGreaterThan(segmentBytes); // the commit reads every segment back
    // Node's own process metrics come with it.
    expect(sample(m, 'process_cpu_user_seconds_total')).toBeGreaterThan(0);
    // The jobs ran in the compute thread (COMPUTE_THREADS=1), whose series above joined this registry's.
    expect(sample(m, 'lateral_compute_jobs_total', { thread: '0', queue: 'encode' })).toBe(DOCS.length / BATCH);
    expect(sample(m, 'lateral_compute_jobs_total', { thread: '0', queue: 'commit' })).toBeGreaterThan(0);
    // The scoring kernels this process runs: the gauge names the kind simdStatus() reports, and the
    // start-up log says it (a warning when it is the JavaScript fallback).
    const kind = simdStatus().kind;
    expect(sample(m, 'lateral_simd_kernels', { kind })).toBe(1);
    expect(sample(m, 'lateral_simd_kernels', { kind: kind === 'wasm' ? 'js' : 'wasm' })).toBeUndefined();
    expect(lines.some((l) => typeof l.msg === 'string' && l.msg.startsWith('scoring kernels: ') && l.level === (kind === 'wasm' ? 'info' : 'warn'))).toBe(true);
  });

  it('a re-rank and a search each write one summary line carrying their request id, collection and figures', async () => {
    const rr = await http(server.url, 'POST', '/v1/rerank?wait=30', { collection: 'm', topK: 3, queries: [{ id: 'q', text: 'supersonic flutter', candidates: ['d1', 'd2', 'nope'] }] }, { 'x-request-id': 'req-rerank-1' });
    expect(rr.status).toBe(200);
    expect(rr.headers.get('x-request-id')).toBe('req-rerank-1');
    const rerankLine = await until(async () => lines.find((l) => l.event === 'rerank.done' && l.requestId === 'req-rerank-1'), 10_000, 50);
    expect(rerankLine).toMatchObject({ queue: 'rerank', tenant: 'default', collection: 'm', queries: 1, candidates: 2, missing: 1, scorer: 'maxsim' });
    const sr = await http(server.url, 'POST', '/v1/search?wait=30', { collection: 'm', mode: 'bm25', topK: 2, queries: [{ id: 'q', text: 'boundary layer' }] }, { 'x-request-id': 'req-search-1' });
    expect(sr.status).toBe(200);
    const searchLine = await until(async () => lines.find((l) => l.event === 'search.done' && l.requestId === 'req-search-1'), 10_000, 50);
    expect(searchLine).toMatchObject({ queue: 'search', tenant: 'default', collection: 'm', queries: 1, hits: 2, mode: 'bm25' });
  });

  it('a malformed or over-long x-request-id answers 400 naming the header and the limit', async () => {
    for (const bad of ['x'.repeat(129), 'has space', 'semi;colon']) {
      const res = await http(server.url, 'GET', '/v1/collections', undefined, { 'x-request-id': bad });
      expect(res.status).toBe(400);
      expect(res.body.message).toContain('x-request-id');
      expect(res.body.message).toContain('128');
      expect(res.headers.get('x-request-id')).toMatch(/^[0-9a-f-]{36}$/);
    }
    const ok = await http(server.url, 'GET', '/v1/collections', undefined, { 'x-request-id': 'a'.repeat(128) });
    expect(ok.status).toBe(200);
  });
});

describe('a worker process metrics server', () => {
  it('serves the registry at /metrics and its liveness at /v1/health/live on its own port, and 404 elsewhere', async () => {
    const srv = await startMetricsServer(0, '127.0.0.1');
    try {
      const res = await fetch(`http://127.0.0.1:${srv.port}/metrics`);
      expect(res.status).toBe(200);
      const m = parseMetrics(await res.text());
      expect(sample(m, 'process_cpu_user_seconds_total')).toBeGreaterThan(0);
      expect(m.has('lateral_s3_bytes_total{direction="written"}')).toBe(true); // the same process-wide registry the API serves
      expect((await fetch(`http://127.0.0.1:${srv.port}/`)).status).toBe(404);
      // a worker's liveness (its Kubernetes liveness probe): the process answers, no dependency checked
      const live = await fetch(`http://127.0.0.1:${srv.port}/v1/health/live`);
      expect(live.status).toBe(200);
      expect(await live.json()).toMatchObject({ status: 'ok', uptimeSeconds: expect.any(Number), eventLoopLagMs: expect.any(Number) });
    } finally {
      await srv.close();
    }
  });
});
