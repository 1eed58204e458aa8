import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { HEARTBEAT_STALE_MS, HEARTBEAT_TTL_SECONDS, QueueName, heartbeatFields, heartbeatKeys, jobIds, s3Keys } from '@lateral/shared';
import { startServer, type Server } from '../apps/all-in-one/src/server';
import { http, testConfig, until } from './helpers';

const TOKEN = randomBytes(24).toString('base64url');
const AUTH = { authorization: `Bearer ${TOKEN}` };

/** GET /v1/admin/overview against real Redis, S3 and workers: what it reports equals what BullMQ and S3 hold. */
describe('operations overview', () => {
  const config = testConfig({ ADMIN_TOKEN: TOKEN, JOB_ATTEMPTS: '1' });
  let server: Server;
  const api = (method: string, url: string, body?: unknown) => http(server.url, method, url, body, AUTH);
  /** The overview is shared for up to 1 s: wait for one taken after now. */
  const overview = async () => {
    const t = Date.now();
    return until(async () => {
      const o = (await api('GET', '/v1/admin/overview')).body;
      return o.at > t ? o : null;
    }, 10_000, 200);
  };

  beforeAll(async () => {
    server = await startServer(config, { quiet: true });
    expect((await api('POST', '/v1/collections', { id: 'c' })).status).toBe(201);
  });
  afterAll(async () => {
    await server?.stop();
  });

  it('re-rank latency percentiles are those of the completed jobs', async () => {
    const ing = await api('POST', '/v1/collections/c/documents', [{ id: 'a', text: 'wing flutter' }, { id: 'b', text: 'boundary layer' }]);
    await until(async () => (await api('GET', ing.body.status)).body.state === 'done', 60_000, 200);
    for (let i = 0; i < 3; i++) {
      const r = await api('POST', '/v1/rerank?wait=30', { collection: 'c', queries: [{ id: 'q', text: 'wing', candidates: ['a', 'b'] }] });
      expect(r.body.status).toBe('completed');
    }
    const jobs = await server.runtime.queues.get(QueueName.rerank).getCompleted();
    const total = jobs.map((j) => j.finishedOn! - j.timestamp).sort((x, y) => x - y);
    const work = jobs.map((j) => j.finishedOn! - j.processedOn!).sort((x, y) => x - y);
    const o = await overview();
    // Three jobs: nearest rank p50 is the 2nd, p95 and p99 the 3rd.
    expect(o.latency.rerank['5m'].total).toEqual({ count: 3, p50: total[1], p95: total[2], p99: total[2] });
    expect(o.latency.rerank['60m'].processing).toEqual({ count: 3, p50: work[1], p95: work[2], p99: work[2] });
    expect(o.latency.search['5m'].total.count).toBe(0);
    const rerank = o.queues.find((q: { name: string }) => q.name === 'rerank');
    expect(rerank.completedPerMinute.reduce((s: number, x: number) => s + x, 0)).toBe(3);
    expect(rerank.counts.completed).toBe(3);
  }, 180_000);

  it("flags a worker whose heartbeat is late, forgets one whose heartbeat expired, and lists this process's workers", async () => {
    const redis = server.runtime.redis;
    const prefix = config.REDIS_PREFIX;
    const now = Date.now();
    const fake = (id: string, beatAt: number) =>
      heartbeatFields({ id, process: 'scorer-worker', host: 'elsewhere', pid: 1, queues: ['rerank'], concurrency: { rerank: 1 }, executionProvider: 'cuda', model: 'm', startedAt: beatAt - 1000, beatAt, completed: 0, failed: 0, active: 0, jobsPerSecond: 0, caches: {} });
    await redis.hset(heartbeatKeys.worker(prefix, 'late'), fake('late', now - HEARTBEAT_STALE_MS - 5_000));
    await redis.zadd(heartbeatKeys.index(prefix), now - HEARTBEAT_STALE_MS - 5_000, 'late');
    await redis.zadd(heartbeatKeys.index(prefix), now - HEARTBEAT_TTL_SECONDS * 1000 - 1_000, 'gone');
    const o = await overview();
    const byId = new Map(o.workers.map((w: { id: string }) => [w.id, w]));
    expect(byId.get('late')).toMatchObject({ stale: true, executionProvider: 'cuda', queues: ['rerank'] });
    expect(byId.has('gone')).toBe(false);
    expect(await redis.zscore(heartbeatKeys.index(prefix), 'gone')).toBeNull();
    const mine = o.workers.filter((w: { pid: number }) => w.pid === process.pid);
    expect(mine).toHaveLength(1);
    expect(mine[0].stale).toBe(false);
    expect(mine[0].queues).toEqual(server.workers.started.map((w) => w.name));
    // Its next beat (every 5 s) counts the 7 jobs of the first test: 4 of the ingestion, 3 re-ranks.
    const counted = await until(async () => {
      const w = (await overview()).workers.find((x: { pid: number }) => x.pid === process.pid);
      return w.completed >= 7 ? w : null;
    }, 15_000, 500);
    expect(counted.completed).toBe(7);
    expect(counted.jobsPerSecond).toBeGreaterThan(0);
    // The scorer's segment cache (registered for /metrics) is reported too: the re-ranks loaded the collection's segment.
    expect(counted.caches['scorer-segments'].bytes).toBeGreaterThan(0);
    expect(counted.caches['scorer-segments'].hitRatio).toBeGreaterThan(0);
  }, 180_000);

  // A process started for the search queue also serves the shard queues of SCORER_SHARDS (all by
  // default): its heartbeat lists search first, then shard-<i>, and nothing else.
  const servesOnlySearch = (queues: string[]) => queues[0] === 'search' && queues.slice(1).every((q) => /^shard-\d+$/.test(q));

  it("a second worker process appears with its own queues and disappears when it stops", async () => {
    const other = await startServer({ ...config, PORT: 0 }, { quiet: true, queues: [QueueName.search] });
    try {
      const o = await overview();
      expect(o.workers.some((w: { queues: string[] }) => servesOnlySearch(w.queues))).toBe(true);
    } finally {
      await other.stop();
    }
    const after = await overview();
    expect(after.workers.some((w: { queues: string[] }) => servesOnlySearch(w.queues))).toBe(false);
  }, 180_000);

  it('a failed ingestion batch is reported per stage and, retried after the cause is fixed, completes', async () => {
    const encode = server.runtime.queues.get(QueueName.encode);
    await encode.pause();
    const ing = await api('POST', '/v1/collections/c/documents', [{ id: 'x', text: 'shock wave' }, { id: 'y', text: 'heat transfer' }]);
    const batchId = `${ing.body.ingestionId}-00000`;
    const key = s3Keys.batchDocuments(config.DEFAULT_TENANT, 'c', batchId);
    const body = await server.runtime.store.get(key);
    await server.runtime.store.delete(key);
    await encode.resume();
    await until(async () => (await api('GET', ing.body.status)).body.state === 'failed', 30_000, 200);

    const o = await overview();
    const row = o.ingestions.find((i: { ingestionId: string }) => i.ingestionId === ing.body.ingestionId);
    expect(row.state).toBe('failed');
    expect(row.stages).toMatchObject({ accepted: 2, encoded: 0, committed: 0, failed: 2 });
    const jobId = jobIds.encode(config.DEFAULT_TENANT, 'c', batchId);
    const failed = o.failedJobs.find((j: { id: string }) => j.id === jobId);
    expect(failed).toMatchObject({ queue: 'encode', collection: 'c', attemptsMade: 1, attempts: 1 });
    expect(failed.failedReason).toMatch(/accepted documents are missing from S3/);
    expect(row.failures[0].error).toBe(failed.failedReason);

    // Unknown job -> 404; put the documents back, retry -> 202 (again: 409, it is no longer failed), and the ingestion completes.
    const unknown = await api('POST', `/v1/admin/jobs/rerank/${encodeURIComponent(jobIds.rerank(config.DEFAULT_TENANT, 'rr-none'))}/retry`);
    expect(unknown.status).toBe(404);
    await server.runtime.store.put(key, body!, 'application/x-ndjson');
    const retry = await api('POST', `/v1/admin/jobs/encode/${encodeURIComponent(jobId)}/retry`);
    expect(retry.status).toBe(202);
    expect(retry.body).toEqual({ queue: 'encode', jobId, state: 'waiting', previousAttempts: 1 });
    expect((await api('POST', `/v1/admin/jobs/encode/${encodeURIComponent(jobId)}/retry`)).status).toBe(409);
    const done = await until(async () => {
      const s = (await api('GET', ing.body.status)).body;
      return s.state === 'done' ? s : null;
    }, 60_000, 200);
    expect(done.stages).toMatchObject({ accepted: 2, indexed: 2, failed: 0 });
    const after = await overview();
    const finished = after.ingestions.find((i: { ingestionId: string }) => i.ingestionId === ing.body.ingestionId);
    expect(finished.state).toBe('done');
    expect(finished.stages).toEqual({ accepted: 2, encoded: 2, compressed: 2, indexed: 2, committed: 2, failed: 0 });
    expect(after.failedJobs.some((j: { id: string }) => j.id === jobId)).toBe(false);
    const c = after.collections.find((x: { id: string }) => x.id === 'c');
    const described = (await api('GET', '/v1/collections/c')).body;
    expect(c).toMatchObject({ documents: described.documents, tokens: described.tokens, generation: described.generation, segments: described.segments });
    expect(c.documents).toBe(4);
    const objects = await server.runtime.store.list(s3Keys.collectionPrefix(config.DEFAULT_TENANT, 'c'));
    expect(c.s3Bytes).toBeGreaterThan(0);
    expect(c.s3Bytes).toBeLessThanOrEqual(objects.reduce((s, x) => s + x.size, 0));
  }, 180_000);
});
