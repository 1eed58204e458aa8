import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Redis } from 'ioredis';
import { mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ApiKeyRepository, ObjectStore, RateLimiter, startEmbeddedRedis, type EmbeddedRedis } from '@lateral/infra';
import { startServer, type Server } from '../apps/all-in-one/src/server';
import { runKeysCli } from '../scripts/lib/keys-cli';
import { QueueName, jobIds } from '@lateral/shared';
import { http, testConfig, until } from './helpers';

const ADMIN = 'bootstrap-admin-credential-of-the-test-0123456789';
const OPERATOR = 'operator-token-of-the-dashboard-0123';

/**
 * AUTH=keys through the real service (HTTP, queues, workers, Redis, S3): two tenants, each with
 * its own keys; a tenant's ids are invisible to the other (404 like an unknown id, at every
 * endpoint); roles; revocation, rotation; per-key rate limits. And AUTH=none, unchanged.
 */
describe('API keys and tenants (AUTH=keys)', () => {
  // Revocation by another process (the CLI) is seen within API_KEY_CACHE_SECONDS: 1 s here.
  const config = testConfig({ AUTH: 'keys', ADMIN_API_KEY: ADMIN, ADMIN_TOKEN: OPERATOR, API_KEY_CACHE_SECONDS: '1', RATE_LIMIT_PER_SECOND: '1000', RATE_LIMIT_BURST: '1000' });
  let server: Server;
  const call = (key: string | null, method: string, url: string, body?: unknown, headers: Record<string, string> = {}) =>
    http(server.url, method, url, body, key ? { authorization: `Bearer ${key}`, ...headers } : headers);
  const createKey = async (tenant: string, role: string, extra: Record<string, unknown> = {}) => {
    const r = await call(ADMIN, 'POST', '/v1/admin/keys', { tenant, role, ...extra });
    expect(r.status, JSON.stringify(r.body)).toBe(201);
    expect(r.body.key).toMatch(/^lat_[a-z0-9]{12}_[A-Za-z0-9_-]{43}$/);
    return r.body as { id: string; key: string; tenantId: string; role: string };
  };
  let aWrite: string;
  let aRead: string;
  let bWrite: string;
  const b: { ingestion?: string; rerank?: string; search?: string } = {};

  beforeAll(async () => {
    server = await startServer(config, { quiet: true });
    aWrite = (await createKey('tenant-a', 'write')).key;
    aRead = (await createKey('tenant-a', 'read')).key;
    bWrite = (await createKey('tenant-b', 'write')).key;
    for (const [key, id] of [
      [aWrite, 'a-docs'],
      [bWrite, 'b-docs'],
    ] as const) {
      expect((await call(key, 'POST', '/v1/collections', { id, codec: { kind: 'fp16' } })).status).toBe(201);
      const ing = await call(key, 'POST', `/v1/collections/${id}/documents`, [
        { id: 'd1', text: `${id} flutter of a swept wing at supersonic speed` },
        { id: 'd2', text: `${id} heat transfer in the laminar boundary layer` },
      ]);
      expect(ing.status, JSON.stringify(ing.body)).toBe(202);
      await until(async () => (await call(key, 'GET', ing.body.status)).body.state === 'done', 120_000);
      if (id === 'b-docs') b.ingestion = ing.body.ingestionId;
    }
    const rr = await call(bWrite, 'POST', '/v1/rerank?wait=30', { collection: 'b-docs', queries: [{ id: 'q', text: 'wing flutter', candidates: ['d1', 'd2'] }] });
    expect(rr.status, JSON.stringify(rr.body)).toBe(200);
    b.rerank = rr.body.id;
    const sr = await call(bWrite, 'POST', '/v1/search?wait=30', { collection: 'b-docs', mode: 'bm25', topK: 2, queries: [{ id: 'q', text: 'wing flutter' }] });
    expect(sr.status, JSON.stringify(sr.body)).toBe(200);
    b.search = sr.body.id;
  }, 180_000);
  afterAll(async () => {
    await server?.stop();
  });

  it('answers 401 without a key or with a malformed one, and serves health without one', async () => {
    const none = await call(null, 'GET', '/v1/collections');
    expect(none.status).toBe(401);
    expect(none.headers.get('www-authenticate')).toMatch(/^Bearer/);
    expect(none.body.message).toMatch(/Authorization: Bearer <key>/);
    expect((await call('lat_notakey', 'GET', '/v1/collections')).status).toBe(401);
    expect((await call(aWrite.slice(0, -1) + (aWrite.endsWith('A') ? 'B' : 'A'), 'GET', '/v1/collections')).status).toBe(401);
    expect((await call(null, 'GET', '/v1/health')).status).not.toBe(401);
    // before the body is read: a body the reader would refuse (415) gets the 401 first
    const early = await call(null, 'POST', '/v1/collections/a-docs/documents', 'not json', { 'content-type': 'text/plain' });
    expect(early.status).toBe(401);
    expect(early.body.error).toBe('unauthorized');
    expect((await call(aWrite, 'POST', '/v1/collections/a-docs/documents', 'not json', { 'content-type': 'text/plain' })).status).toBe(415);
    // x-api-key is the other accepted header
    expect((await call(null, 'GET', '/v1/collections', undefined, { 'x-api-key': aRead })).status).toBe(200);
  });

  it("keeps each tenant's data in its own S3 prefix, carried to the workers by the job payloads", async () => {
    const store = ObjectStore.fromConfig(config);
    try {
      expect(await store.exists('tenants/tenant-a/collections/a-docs/collection.json')).toBe(true);
      expect(await store.exists('tenants/tenant-b/collections/b-docs/collection.json')).toBe(true);
      // segments written by the encode/compress/index/commit jobs, under the payload's tenant
      expect((await store.list('tenants/tenant-b/collections/b-docs/segments/')).length).toBeGreaterThan(0);
      // a re-rank's job carries its tenant (a small request and result travel in the job, not in S3)
      const rerankJob = await server.runtime.queues.get(QueueName.rerank).getJob(jobIds.rerank('tenant-b', b.rerank!));
      expect(rerankJob?.data).toMatchObject({ tenantId: 'tenant-b', rerankId: b.rerank });
      expect(await store.list('tenants/tenant-a/rerank/')).toEqual([]);
      expect(await store.list('tenants/default/')).toEqual([]);
      expect(await store.list('tenants/tenant-a/collections/b-docs/')).toEqual([]);
    } finally {
      store.destroy();
    }
    const list = await call(aRead, 'GET', '/v1/collections');
    expect(JSON.stringify(list.body)).toContain('a-docs');
    expect(JSON.stringify(list.body)).not.toContain('b-docs');
  });

  it("answers 404 for every id of another tenant, exactly as for an id that does not exist", async () => {
    // Each request twice: with tenant B's id and with an unknown one; same status, same body but for the id.
    const pairs: [string, string, (id: string) => [string, unknown?]][] = [
      ['b-docs', 'zz-docs', (c) => [`/v1/collections/${c}`]],
      ['b-docs', 'zz-docs', (c) => [`/v1/collections/${c}/documents`, [{ id: 'x', text: 'wing' }]]],
      ['b-docs', 'zz-docs', (c) => [`/v1/collections/${c}/recompress`, { codec: { kind: 'int8' } }]],
      ['b-docs', 'zz-docs', (c) => [`/v1/rerank`, { collection: c, queries: [{ id: 'q', text: 'wing', candidates: ['d1'] }] }]],
      ['b-docs', 'zz-docs', (c) => [`/v1/search`, { collection: c, mode: 'bm25', queries: [{ id: 'q', text: 'wing' }] }]],
      [b.ingestion!, 'ing-00000000-0000-0000-0000-000000000000', (i) => [`/v1/collections/b-docs/ingestions/${i}`]],
      [b.rerank!, 'rr-00000000-0000-0000-0000-000000000000', (j) => [`/v1/rerank/${j}`]],
      [b.search!, 'sr-00000000-0000-0000-0000-000000000000', (j) => [`/v1/search/${j}`]],
      // documents read back, judgments and training (other issues' endpoints, same rule)
      ['b-docs', 'zz-docs', (c) => [`/v1/collections/${c}/documents/d1`]],
      ['b-docs', 'zz-docs', (c) => [`/v1/collections/${c}/documents`]],
      ['b-docs', 'zz-docs', (c) => [`/v1/collections/${c}/judgments`, [{ queryId: 'q', query: 'wing', docId: 'd1', relevance: 1 }]]],
      ['b-docs', 'zz-docs', (c) => [`/v1/collections/${c}/train`, { head: 'lite' }]],
    ];
    for (const [theirs, unknown, req] of pairs) {
      const [url, body] = req(theirs);
      const [url2, body2] = req(unknown);
      const method = body === undefined ? 'GET' : 'POST';
      const other = await call(aWrite, method, url, body);
      const missing = await call(aWrite, method, url2, body2);
      expect(other.status, `${method} ${url}: ${JSON.stringify(other.body)}`).toBe(404);
      expect(missing.status).toBe(404);
      expect(JSON.stringify(other.body).split(theirs).join('ID')).toBe(JSON.stringify(missing.body).split(unknown).join('ID'));
    }
    expect((await call(aWrite, 'DELETE', '/v1/collections/b-docs')).status).toBe(404);
    expect((await call(aWrite, 'DELETE', '/v1/collections/b-docs/documents/d1')).status).toBe(404);
    // ... and B still has everything
    expect((await call(bWrite, 'GET', '/v1/collections/b-docs')).body).toMatchObject({ id: 'b-docs', documents: 2 });
    const rr = await call(bWrite, 'GET', `/v1/rerank/${b.rerank}`);
    expect(rr.body.result.results[0].hits.map((h: { id: string }) => h.id).sort()).toEqual(['d1', 'd2']);
    expect((await call(bWrite, 'GET', `/v1/search/${b.search}`)).body.status).toBe('completed');
  });

  it('gives each tenant its own namespace: the same collection id in two tenants is two collections', async () => {
    expect((await call(aWrite, 'POST', '/v1/collections', { id: 'same' })).status).toBe(201);
    expect((await call(bWrite, 'POST', '/v1/collections', { id: 'same' })).status).toBe(201);
    expect((await call(aWrite, 'DELETE', '/v1/collections/same')).status).toBe(204);
    expect((await call(aWrite, 'GET', '/v1/collections/same')).status).toBe(404);
    expect((await call(bWrite, 'GET', '/v1/collections/same')).status).toBe(200);
  });

  it('lets a read key read, re-rank and search, and answers 403 naming the role to anything that writes', async () => {
    expect((await call(aRead, 'GET', '/v1/collections/a-docs')).status).toBe(200);
    const rr = await call(aRead, 'POST', '/v1/rerank?wait=30', { collection: 'a-docs', queries: [{ id: 'q', text: 'wing', candidates: ['d1', 'd2'] }] });
    expect(rr.status).toBe(200);
    const ingest = await call(aRead, 'POST', '/v1/collections/a-docs/documents', [{ id: 'd9', text: 'nozzle' }]);
    expect(ingest.status).toBe(403);
    expect(ingest.body.message).toMatch(/role 'write'.*this key's role is 'read'/);
    expect((await call(aRead, 'POST', '/v1/collections', { id: 'nope' })).status).toBe(403);
    expect((await call(aRead, 'DELETE', '/v1/collections/a-docs')).status).toBe(403);
    expect((await call(aRead, 'GET', '/v1/admin/keys')).status).toBe(403);
    expect((await call(aWrite, 'POST', '/v1/admin/keys', { tenant: 'tenant-a', role: 'admin' })).body.message).toMatch(/role 'admin'/);
    expect((await call(aRead, 'GET', '/v1/collections/a-docs')).body.documents).toBe(2);
  });

  it('accepts an admin API key as the operator credential of the operations endpoints (beside ADMIN_TOKEN), and no other key', async () => {
    const admin = await createKey('tenant-a', 'admin');
    const overview = await call(admin.key, 'GET', '/v1/admin/overview');
    expect(overview.status, JSON.stringify(overview.body)).toBe(200);
    expect((await call(null, 'GET', '/v1/admin/overview', undefined, { 'x-api-key': admin.key })).status).toBe(200);
    expect((await call(OPERATOR, 'GET', '/v1/admin/overview')).status).toBe(200);
    expect((await call(aWrite, 'GET', '/v1/admin/overview')).status).toBe(401);
    expect((await call(null, 'GET', '/v1/admin/overview')).status).toBe(401);
    // ... and an admin key manages keys; ADMIN_TOKEN is not an API key
    expect((await call(admin.key, 'GET', '/v1/admin/keys')).status).toBe(200);
    expect((await call(OPERATOR, 'GET', '/v1/admin/keys')).status).toBe(401);
  });

  it('lists keys without their secrets, and validates a key request naming the field', async () => {
    const list = await call(ADMIN, 'GET', '/v1/admin/keys?tenant=tenant-a');
    expect(list.status).toBe(200);
    expect(list.body.keys.length).toBeGreaterThanOrEqual(2);
    expect(list.body.keys.every((k: { tenantId: string }) => k.tenantId === 'tenant-a')).toBe(true);
    expect(JSON.stringify(list.body)).not.toMatch(/lat_|secret/i);
    const bad = await call(ADMIN, 'POST', '/v1/admin/keys', { tenant: 'a/../b', role: 'owner' });
    expect(bad.status).toBe(400);
    expect(bad.body.details.map((d: { field: string }) => d.field).sort()).toEqual(['role', 'tenant']);
    expect((await call(ADMIN, 'POST', '/v1/admin/keys/zzzzzzzzzzzz/rotate')).status).toBe(404);
  });

  it('revokes a key: 401 at once on this API process (admin endpoint)', async () => {
    const k = await createKey('tenant-a', 'read');
    expect((await call(k.key, 'GET', '/v1/collections')).status).toBe(200);
    const revoked = await call(ADMIN, 'DELETE', `/v1/admin/keys/${k.id}`);
    expect(revoked.status).toBe(200);
    expect(revoked.body.revokedAt).toBeTruthy();
    const after = await call(k.key, 'GET', '/v1/collections');
    expect(after.status).toBe(401);
    expect(after.body.message).toMatch(/revoked/);
  });

  it('revokes a key from the CLI (another process): 401 once API_KEY_CACHE_SECONDS has passed', async () => {
    const k = await createKey('tenant-a', 'read');
    expect((await call(k.key, 'GET', '/v1/collections')).status).toBe(200); // now in the API's cache
    const store = ObjectStore.fromConfig(config);
    const lines: string[] = [];
    try {
      await runKeysCli(['revoke', k.id], new ApiKeyRepository(store), (l) => lines.push(l));
    } finally {
      store.destroy();
    }
    expect(lines[0]).toMatch(new RegExp(`^revoked ${k.id} .*REVOKED`));
    await until(async () => (await call(k.key, 'GET', '/v1/collections')).status === 401, 15_000, 200);
  });

  it('rotates a key: the new secret works, the old one stops', async () => {
    const k = await createKey('tenant-a', 'write');
    const rotated = await call(ADMIN, 'POST', `/v1/admin/keys/${k.id}/rotate`);
    expect(rotated.status).toBe(200);
    expect(rotated.body).toMatchObject({ id: k.id, tenantId: 'tenant-a', role: 'write' });
    expect(rotated.body.key).not.toBe(k.key);
    expect((await call(k.key, 'GET', '/v1/collections')).status).toBe(401);
    const list = await call(rotated.body.key, 'GET', '/v1/collections');
    expect(list.status).toBe(200);
    expect(JSON.stringify(list.body)).toContain('a-docs');
  });

  it("answers 429 with Retry-After once a key's bucket is empty, and other keys are not affected", async () => {
    const k = await createKey('tenant-a', 'read', { rateLimit: { perSecond: 0.01, burst: 2 } });
    expect((await call(k.key, 'GET', '/v1/collections')).status).toBe(200);
    expect((await call(k.key, 'GET', '/v1/collections')).status).toBe(200);
    const limited = await call(k.key, 'GET', '/v1/collections');
    expect(limited.status).toBe(429);
    // one token per 100 s: the wait is a whole number of seconds in (0, 100]
    const retry = Number(limited.headers.get('retry-after'));
    expect(retry).toBeGreaterThan(0);
    expect(retry).toBeLessThanOrEqual(100);
    expect(limited.body.message).toMatch(/0\.01 requests per second, burst 2/);
    expect((await call(aRead, 'GET', '/v1/collections')).status).toBe(200);
  });

  it('runs the CLI commands against the same S3 records', async () => {
    const store = ObjectStore.fromConfig(config);
    const repo = new ApiKeyRepository(store);
    const out: string[] = [];
    try {
      await runKeysCli(['create', '--tenant', 'tenant-c', '--role', 'write', '--name', 'ci', '--json'], repo, (l) => out.push(l));
      const created = JSON.parse(out[0]!);
      expect(created).toMatchObject({ tenantId: 'tenant-c', role: 'write', name: 'ci' });
      expect((await call(created.key, 'POST', '/v1/collections', { id: 'c-docs' })).status).toBe(201);
      out.length = 0;
      await runKeysCli(['list', '--tenant', 'tenant-c', '--json'], repo, (l) => out.push(l));
      expect(JSON.parse(out[0]!).keys.map((k: { id: string }) => k.id)).toEqual([created.id]);
      out.length = 0;
      await runKeysCli(['rotate', created.id], repo, (l) => out.push(l));
      expect(out[1]).toMatch(new RegExp(`^lat_${created.id}_`));
      await until(async () => (await call(out[1]!, 'GET', '/v1/collections/c-docs')).status === 200, 15_000, 200);
      await until(async () => (await call(created.key, 'GET', '/v1/collections/c-docs')).status === 401, 15_000, 200);
      await expect(runKeysCli(['create', '--tenant', 'x', '--role', 'owner'], repo, () => undefined)).rejects.toThrow(/--role: role must be one of read, write, admin/);
    } finally {
      store.destroy();
    }
  });
});

describe('API key cache (repository, real S3)', () => {
  it('trusts a record for cacheTtlMs, then reads S3 again: a revocation elsewhere takes effect within the TTL', async () => {
    const config = testConfig();
    const store = ObjectStore.fromConfig(config);
    await store.ensureBucket();
    let now = 1_000_000;
    const api = new ApiKeyRepository(store, { cacheTtlMs: 5_000, now: () => now });
    const cli = new ApiKeyRepository(store);
    try {
      const { key, info } = await cli.create({ tenant: 't1', role: 'read' });
      expect(await api.verify(key)).toEqual({ keyId: info.id, tenantId: 't1', role: 'read' });
      await cli.revoke(info.id);
      now += 4_999;
      expect(await api.verify(key)).not.toBeNull(); // still cached: the documented delay
      now += 1;
      expect(await api.verify(key)).toBeNull();
      // the secret is stored only hashed
      const raw = JSON.stringify(await store.getJson(`auth/keys/${info.id}.json`));
      expect(raw).not.toContain(key.split('_').slice(2).join('_'));
      expect(raw).toMatch(/"secretSha256":"[0-9a-f]{64}"/);
    } finally {
      store.destroy();
    }
  });
});

describe('per-key rate limiter (Redis token bucket)', () => {
  it('allows the burst, then refuses with the wait until the next token; buckets are per key and shared across processes', async () => {
    const config = testConfig();
    const r1 = new Redis(config.REDIS_URL!);
    const r2 = new Redis(config.REDIS_URL!);
    try {
      // two API processes, one bucket per key id
      const p1 = new RateLimiter(r1, config.REDIS_PREFIX);
      const p2 = new RateLimiter(r2, config.REDIS_PREFIX);
      const limit = { perSecond: 0.001, burst: 3 }; // one token per 1,000 s
      const got = [await p1.take('k1', limit), await p2.take('k1', limit), await p1.take('k1', limit), await p2.take('k1', limit)];
      expect(got.map((d) => d.allowed)).toEqual([true, true, true, false]);
      expect(got.map((d) => d.remaining)).toEqual([2, 1, 0, 0]);
      expect(got[3]!.retryAfterSeconds).toBeGreaterThan(900);
      expect(got[3]!.retryAfterSeconds).toBeLessThanOrEqual(1000);
      expect((await p1.take('k2', limit)).allowed).toBe(true);
      // the bucket expires once it would be full again (no key left behind for ever)
      expect(await r1.pttl(`${config.REDIS_PREFIX}:ratelimit:k1`)).toBeGreaterThan(0);
    } finally {
      r1.disconnect();
      r2.disconnect();
    }
  });
});

describe('AUTH=keys with Redis down (the rate limits live there)', () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'lateral-keys-redis-down-'));
  let redis: EmbeddedRedis;
  let server: Server;
  let port: number;
  beforeAll(async () => {
    redis = await startEmbeddedRedis({ dir });
    port = Number(new URL(redis.url).port);
    server = await startServer(testConfig({ REDIS_URL: redis.url, AUTH: 'keys', ADMIN_API_KEY: ADMIN }), { quiet: true, closeGraceMs: 5000 });
  });
  afterAll(async () => {
    redis = await startEmbeddedRedis({ dir, port });
    await server?.stop();
    await redis.stop();
  });

  it('answers 503 with Retry-After, naming no internals, instead of letting the request through or failing with 500', async () => {
    expect((await http(server.url, 'GET', '/v1/collections', undefined, { authorization: `Bearer ${ADMIN}` })).status).toBe(200);
    await redis.stop();
    const res = await http(server.url, 'GET', '/v1/collections', undefined, { authorization: `Bearer ${ADMIN}` });
    expect(res.status).toBe(503);
    expect(res.headers.get('retry-after')).toMatch(/^\d+$/);
    expect(res.body.error).toBe('unavailable');
    expect(JSON.stringify(res.body)).not.toMatch(/127\.0\.0\.1|redis:\/\/|at .*\.ts/);
  });
});

describe('AUTH=none (the default): single tenant, as before', () => {
  let server: Server;
  beforeAll(async () => {
    server = await startServer(testConfig(), { quiet: true });
  });
  afterAll(async () => {
    await server?.stop();
  });

  it('needs no key, ignores one, keeps DEFAULT_TENANT, and refuses key management over HTTP', async () => {
    expect((await http(server.url, 'POST', '/v1/collections', { id: 'plain' })).status).toBe(201);
    expect((await http(server.url, 'GET', '/v1/collections/plain', undefined, { authorization: 'Bearer whatever' })).status).toBe(200);
    expect(await server.runtime.store.exists('tenants/default/collections/plain/collection.json')).toBe(true);
    const admin = await http(server.url, 'POST', '/v1/admin/keys', { tenant: 't', role: 'admin' });
    expect(admin.status).toBe(403);
    expect(admin.body.message).toMatch(/AUTH=keys/);
  });

  it('documents the key schemes, the key-management paths and the role of each operation in the OpenAPI document', async () => {
    const doc = (await http(server.url, 'GET', '/openapi.json')).body;
    expect(Object.keys(doc.components.securitySchemes)).toEqual(expect.arrayContaining(['bearerApiKey', 'headerApiKey']));
    expect(doc.security).toContainEqual({});
    expect(Object.keys(doc.paths)).toEqual(expect.arrayContaining(['/v1/admin/keys', '/v1/admin/keys/{id}', '/v1/admin/keys/{id}/rotate']));
    expect(doc.paths['/v1/health'].get.security).toEqual([]);
    expect(doc.paths['/v1/collections/{id}/documents'].post.description).toMatch(/role `write`/);
    expect(doc.paths['/v1/rerank'].post.description).toMatch(/role `read`/);
    expect(doc.paths['/v1/admin/keys'].post.responses['429'].headers['Retry-After']).toBeTruthy();
  });
});
