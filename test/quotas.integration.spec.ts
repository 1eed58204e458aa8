import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Job } from 'bullmq';
import { QueueName, s3Keys, type JobPayload } from '@lateral/shared';
import { ApiKeyRepository, TenantQuotaRepository, type JobHandler } from '@lateral/infra';
import { pipelineHandlers } from '@lateral/workers';
import { startServer, type Server } from '../apps/all-in-one/src/server';
import { runKeysCli } from '../scripts/lib/keys-cli';
import { http, testConfig, until } from './helpers';

const ADMIN = 'bootstrap-admin-credential-of-the-quota-test-0123456789';
const OPERATOR = 'operator-token-of-the-quota-test-0123';

const docs = (prefix: string, n: number) => Array.from({ length: n }, (_, i) => ({ id: `${prefix}${i}`, text: `${prefix} supersonic flutter of a swept wing, case ${i}` }));

/**
 * Per-tenant quotas through the real service (HTTP, queues, workers, Redis, S3), AUTH=keys with
 * two tenants: documents (TENANT_MAX_DOCUMENTS 10, ingestions in progress counted), bytes (a
 * tenant override set by the admin endpoint), jobs in flight (TENANT_MAX_CONCURRENT_JOBS 2, held
 * by an API without workers). Refusals are 403 / 429 naming the quota, its value and the usage,
 * and accept nothing; usage is read from S3 state, so replayed jobs do not count twice.
 */
describe('tenant quotas (AUTH=keys)', () => {
  const config = testConfig({
    AUTH: 'keys',
    ADMIN_API_KEY: ADMIN,
    ADMIN_TOKEN: OPERATOR,
    API_KEY_CACHE_SECONDS: '1',
    RATE_LIMIT_PER_SECOND: '1000',
    RATE_LIMIT_BURST: '1000',
    TENANT_MAX_DOCUMENTS: '10',
    TENANT_MAX_CONCURRENT_JOBS: '2',
    ENCODE_BATCH_DOCUMENTS: '4',
  });
  let server: Server;
  const call = (key: string | null, method: string, url: string, body?: unknown) => http(server.url, method, url, body, key ? { authorization: `Bearer ${key}` } : {});
  const keys: Record<string, string> = {};
  const waitDone = async (key: string, status: string) =>
    until(async () => {
      const s = await call(key, 'GET', status);
      if (s.body.state === 'failed') throw new Error(JSON.stringify(s.body));
      return s.body.state === 'done' ? s.body : null;
    }, 120_000);
  const quota = async (tenant: string) => (await call(ADMIN, 'GET', `/v1/admin/quotas/${tenant}`)).body;

  beforeAll(async () => {
    server = await startServer(config, { quiet: true });
    for (const [tenant, role] of [
      ['qa', 'write'],
      ['qb', 'write'],
      ['qa', 'read'],
    ] as const) {
      const r = await call(ADMIN, 'POST', '/v1/admin/keys', { tenant, role });
      expect(r.status).toBe(201);
      keys[`${tenant}-${role}`] = r.body.key;
    }
  });
  afterAll(async () => {
    await server?.stop();
  });

  it('documents: live plus in-progress documents per tenant; 403 naming maxDocuments, its value and the usage; nothing accepted', async () => {
    const a = keys['qa-write']!;
    for (const id of ['c1', 'c2']) expect((await call(a, 'POST', '/v1/collections', { id })).status).toBe(201);
    const first = await call(a, 'POST', '/v1/collections/c1/documents', docs('a', 6));
    expect(first.status).toBe(202);
    await waitDone(a, first.body.status);
    // 6 held + 5 asked > 10, across collections
    const over = await call(a, 'POST', '/v1/collections/c2/documents', docs('b', 5));
    expect(over.status).toBe(403);
    expect(over.body.error).toBe('quota_exceeded');
    expect(over.body.message).toMatch(/maxDocuments \(TENANT_MAX_DOCUMENTS or the tenant's quota\) is 10; it holds 6 .* this request adds 5/);
    expect(over.body.details).toEqual([{ field: 'quota.maxDocuments', message: 'limit 10, used 6, requested 5' }]);
    expect((await call(a, 'GET', '/v1/collections/c2')).body.documents).toBe(0);
    // exactly up to the quota; while it is in progress its documents count (pending), so one more is refused at once
    const fill = await call(a, 'POST', '/v1/collections/c2/documents', docs('b', 4));
    expect(fill.status).toBe(202);
    const oneMore = await call(a, 'POST', '/v1/collections/c1/documents', docs('z', 1));
    expect(oneMore.status).toBe(403);
    expect(oneMore.body.details[0].message).toBe('limit 10, used 10, requested 1');
    await waitDone(a, fill.body.status);
    const q = await quota('qa');
    expect(q.usage).toMatchObject({ documents: 10, committedDocuments: 10, pendingDocuments: 0, concurrentJobs: 0 });
    expect(q.limits).toEqual({ maxDocuments: 10, maxBytes: 0, maxConcurrentJobs: 2 });
    expect(q.usage.bytes).toBeGreaterThan(0);
    // an id ingested again replaces itself: still 10 live documents, but the request's documents count until committed
    expect((await call(a, 'POST', '/v1/collections/c1/documents', docs('a', 1))).status).toBe(403);
    // the other tenant has its own count
    const b = keys['qb-write']!;
    expect((await call(b, 'POST', '/v1/collections', { id: 'c1' })).status).toBe(201);
    const bIng = await call(b, 'POST', '/v1/collections/c1/documents', docs('a', 10));
    expect(bIng.status).toBe(202);
    await waitDone(b, bIng.body.status);
    // deleting documents frees the quota
    const del = await call(a, 'POST', '/v1/collections/c1/documents/delete?wait=30', { ids: ['a0', 'a1'] });
    expect(del.status, JSON.stringify(del.body)).toBe(200);
    expect((await quota('qa')).usage.committedDocuments).toBe(8);
    const after = await call(a, 'POST', '/v1/collections/c1/documents', docs('y', 2));
    expect(after.status).toBe(202);
    await waitDone(a, after.body.status);
    // the caller sees its own tenant's usage
    const own = await call(keys['qa-read']!, 'GET', '/v1/quota');
    expect(own.status).toBe(200);
    expect(own.body).toMatchObject({ tenant: 'qa', usage: { documents: 10, committedDocuments: 10 } });
  });

  it('usage comes from S3 state: replayed encode, compress and commit jobs of a finished batch count nothing twice', async () => {
    const b = keys['qb-write']!;
    const before = await quota('qb');
    expect(before.usage.committedDocuments).toBe(10);
    const coll = await call(b, 'GET', '/v1/collections/c1');
    const manifest = await server.runtime.generations.manifest('qb', 'c1');
    const seg = manifest!.segments[0]!;
    const ingestionId = seg.batchId.replace(/-\d{5}$/, '');
    const handlers = pipelineHandlers(server.runtime);
    const fakeJob = { updateProgress: async () => undefined } as unknown as Job;
    const run = <Q extends QueueName>(q: Q, p: JobPayload<Q>) => (handlers[q] as JobHandler<Q>)(p, fakeJob);
    const common = { tenantId: 'qb', collectionId: 'c1', ingestionId, batchId: seg.batchId, documents: seg.documents };
    await run(QueueName.encode, { ...common, documentsKey: s3Keys.batchDocuments('qb', 'c1', seg.batchId) });
    await run(QueueName.compress, { ...common, rawKey: s3Keys.rawVectors('qb', 'c1', seg.batchId), codecVersion: 1 });
    await Promise.all([run(QueueName.commit, { ...common, segmentKey: seg.key, codecVersion: 1 }), run(QueueName.commit, { ...common, segmentKey: seg.key, codecVersion: 1 })]);
    await until(async () => {
      const counts = await server.runtime.queues.counts();
      return Object.values(counts).every((c) => (c.waiting ?? 0) + (c.active ?? 0) + (c.delayed ?? 0) === 0);
    }, 60_000);
    const after = await quota('qb');
    expect(after.usage).toEqual(before.usage);
    expect((await call(b, 'GET', '/v1/collections/c1')).body.generation).toBe(coll.body.generation);
    // still full: one more document is refused
    expect((await call(b, 'POST', '/v1/collections/c1/documents', docs('n', 1))).status).toBe(403);
  });

  it('bytes: a tenant override set by the admin endpoint; 403 naming maxBytes once the committed segments reach it; null restores the default', async () => {
    const b = keys['qb-write']!;
    // raise documents for qb, and cap its bytes below what it holds
    const set = await call(ADMIN, 'PUT', '/v1/admin/quotas/qb', { maxDocuments: 1000, maxBytes: 1000 });
    expect(set.status, JSON.stringify(set.body)).toBe(200);
    expect(set.body.overrides).toMatchObject({ maxDocuments: 1000, maxBytes: 1000 });
    expect(set.body.limits).toEqual({ maxDocuments: 1000, maxBytes: 1000, maxConcurrentJobs: 2 });
    expect(set.body.defaults).toEqual({ maxDocuments: 10, maxBytes: 0, maxConcurrentJobs: 2 });
    const held = set.body.usage.bytes as number;
    expect(held).toBeGreaterThan(1000);
    const over = await call(b, 'POST', '/v1/collections/c1/documents', docs('m', 1));
    expect(over.status).toBe(403);
    expect(over.body.details).toEqual([{ field: 'quota.maxBytes', message: `limit 1000, used ${held}, requested 0` }]);
    expect(over.body.message).toMatch(/maxBytes .* is 1000; its collections' committed segments hold \d+ bytes/);
    // above what it holds: accepted
    expect((await call(ADMIN, 'PUT', '/v1/admin/quotas/qb', { maxDocuments: 1000, maxBytes: held + 1 })).status).toBe(200);
    const ok = await call(b, 'POST', '/v1/collections/c1/documents', docs('m', 3));
    expect(ok.status).toBe(202);
    await waitDone(b, ok.body.status);
    // the last accepted ingestion may carry the tenant over (bytes are known once compressed); the next is refused
    expect((await quota('qb')).usage.bytes).toBeGreaterThan(held + 1);
    expect((await call(b, 'POST', '/v1/collections/c1/documents', docs('m', 1))).status).toBe(403);
    // null: back to the default (documents 10: qb holds 13 now)
    const cleared = await call(ADMIN, 'PUT', '/v1/admin/quotas/qb', { maxBytes: null });
    expect(cleared.body.overrides.maxBytes).toBeUndefined();
    expect(cleared.body.limits).toEqual({ maxDocuments: 10, maxBytes: 0, maxConcurrentJobs: 2 });
    expect((await call(b, 'POST', '/v1/collections/c1/documents', docs('m', 1))).body.details[0].field).toBe('quota.maxDocuments');
  });

  it("`npm run keys -- quota` sets and shows a tenant's overrides in S3; the API applies them within API_KEY_CACHE_SECONDS", async () => {
    const lines: string[] = [];
    const print = (l: string) => lines.push(l);
    const repo = new ApiKeyRepository(server.runtime.store);
    const quotas = new TenantQuotaRepository(server.runtime.store);
    await runKeysCli(['quota', 'qc'], repo, print, quotas);
    expect(lines.at(-1)).toBe('tenant qc  maxDocuments default  maxBytes default  maxConcurrentJobs default');
    await runKeysCli(['quota', 'qc', '--documents', '2'], repo, print, quotas);
    expect(lines.at(-1)).toMatch(/^tenant qc  maxDocuments 2  maxBytes default  maxConcurrentJobs default  updated \d{4}-/);
    await expect(runKeysCli(['quota', 'qc', '--documents', '-3'], repo, print, quotas)).rejects.toThrow(/maxDocuments: at least 0/);
    await expect(runKeysCli(['quota', 'qc', '--jobs', 'many'], repo, print, quotas)).rejects.toThrow(/--jobs/);
    const r = await call(ADMIN, 'POST', '/v1/admin/keys', { tenant: 'qc', role: 'write' });
    const c = r.body.key as string;
    expect((await call(c, 'POST', '/v1/collections', { id: 'c' })).status).toBe(201);
    const refused = await call(c, 'POST', '/v1/collections/c/documents', docs('c', 3));
    expect(refused.status).toBe(403);
    expect(refused.body.details[0].message).toBe('limit 2, used 0, requested 3');
    await runKeysCli(['quota', 'qc', '--documents', '3', '--jobs', '0'], repo, print, quotas);
    const accepted = await until(async () => {
      const a = await call(c, 'POST', '/v1/collections/c/documents', docs('c', 3));
      return a.status === 202 ? a : null;
    }, 10_000, 200);
    await waitDone(c, accepted.body.status);
    expect((await quota('qc')).limits).toEqual({ maxDocuments: 3, maxBytes: 0, maxConcurrentJobs: 0 });
  });

  it('the quota endpoints: operator credential only, 400 naming a bad value or tenant', async () => {
    expect((await call(keys['qa-write']!, 'GET', '/v1/admin/quotas/qa')).status).toBe(401);
    expect((await call(null, 'PUT', '/v1/admin/quotas/qa', { maxDocuments: 1 })).status).toBe(401);
    const op = await http(server.url, 'GET', '/v1/admin/quotas/qa', undefined, { authorization: `Bearer ${OPERATOR}` });
    expect(op.status).toBe(200);
    const neg = await call(ADMIN, 'PUT', '/v1/admin/quotas/qa', { maxDocuments: -1 });
    expect(neg.status).toBe(400);
    expect(neg.body.details[0].field).toBe('maxDocuments');
    const unknown = await call(ADMIN, 'PUT', '/v1/admin/quotas/qa', { maxDocs: 5 });
    expect(unknown.status).toBe(400);
    const badTenant = await call(ADMIN, 'GET', '/v1/admin/quotas/a%2F..%2Fb');
    expect(badTenant.status).toBe(400);
    expect(badTenant.body.details[0].field).toBe('path.tenant');
  });
});

describe('tenant quotas: jobs in flight (TENANT_MAX_CONCURRENT_JOBS)', () => {
  const config = testConfig({ TENANT_MAX_CONCURRENT_JOBS: '2', ADMIN_TOKEN: OPERATOR });
  let api: Server;
  let workers: Server | undefined;
  const call = (method: string, url: string, body?: unknown) => http(api.url, method, url, body);
  const rerank = { collection: 'j', queries: [{ id: 'q', text: 'supersonic flutter', candidates: ['j0', 'j1'] }] };

  beforeAll(async () => {
    // The API takes no jobs itself (queues: none), so what it accepts stays in flight until a worker runs.
    const ingestOnly = await startServer(config, { quiet: true, queues: [QueueName.encode, QueueName.compress, QueueName.index, QueueName.commit] });
    expect((await http(ingestOnly.url, 'POST', '/v1/collections', { id: 'j' })).status).toBe(201);
    const ing = await http(ingestOnly.url, 'POST', '/v1/collections/j/documents?wait=60', docs('j', 2));
    expect(ing.status).toBe(200);
    await ingestOnly.stop();
    api = await startServer(config, { quiet: true, queues: [] });
  });
  afterAll(async () => {
    await workers?.stop();
    await api?.stop();
  });

  it('429 with Retry-After naming maxConcurrentJobs while two jobs are in flight; accepted again once they finished', async () => {
    expect((await call('POST', '/v1/rerank', rerank)).status).toBe(202);
    expect((await call('POST', '/v1/search', { collection: 'j', queries: [{ id: 'q', text: 'flutter' }], mode: 'bm25' })).status).toBe(202);
    for (const [url, body] of [
      ['/v1/rerank', rerank],
      ['/v1/search', { collection: 'j', queries: [{ id: 'q', text: 'flutter' }], mode: 'bm25' }],
      ['/v1/collections/j/documents', docs('k', 1)],
    ] as const) {
      const r = await call('POST', url, body);
      expect(r.status, url).toBe(429);
      expect(r.headers.get('retry-after')).toBe('5');
      expect(r.body.details).toEqual([{ field: 'quota.maxConcurrentJobs', message: 'limit 2, used 2, requested 1' }]);
      expect(r.body.message).toMatch(/has 2 jobs in flight .* maxConcurrentJobs quota \(TENANT_MAX_CONCURRENT_JOBS or the tenant's quota\) of 2/);
    }
    const q = await http(api.url, 'GET', '/v1/admin/quotas/default', undefined, { authorization: `Bearer ${OPERATOR}` });
    expect(q.body.usage.concurrentJobs).toBe(2);
    // a worker process takes the two jobs; once they finished, the tenant may submit again
    workers = await startServer(config, { quiet: true, queues: [QueueName.rerank, QueueName.search] });
    const again = await until(async () => {
      const r = await call('POST', '/v1/rerank?wait=30', rerank);
      return r.status === 429 ? null : r;
    }, 60_000, 250);
    expect(again.status).toBe(200);
    expect(again.body.status).toBe('completed');
  });
});
