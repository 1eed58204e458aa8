import os from 'node:os';
import path from 'node:path';
import { mkdtempSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startEmbeddedRedis, type EmbeddedRedis } from '@lateral/infra';
import { startServer, type Server } from '../apps/all-in-one/src/server';
import { http, testConfig } from './helpers';

/** A request that arrives while Redis is down gets a quick 503 with Retry-After, never a hang. */
describe('Redis unreachable', () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'lateral-redis-down-'));
  let redis: EmbeddedRedis;
  let server: Server;
  let port: number;

  beforeAll(async () => {
    redis = await startEmbeddedRedis({ dir });
    port = Number(new URL(redis.url).port);
    server = await startServer(testConfig({ REDIS_URL: redis.url }), { quiet: true, closeGraceMs: 5000 });
    expect((await http(server.url, 'POST', '/v1/collections', { id: 'c' })).status).toBe(201);
  });

  afterAll(async () => {
    // Bring Redis back on the same port so the workers can close cleanly.
    redis = await startEmbeddedRedis({ dir, port });
    await server?.stop();
    await redis.stop();
  });

  it('answers 503 with Retry-After for ingest, rerank and health', async () => {
    await redis.stop();
    const t0 = Date.now();
    const ingest = await http(server.url, 'POST', '/v1/collections/c/documents', [{ id: 'a', text: 'boundary layer' }]);
    expect(ingest.status).toBe(503);
    expect(ingest.headers.get('retry-after')).toMatch(/^\d+$/);
    expect(ingest.body.error).toBe('unavailable');
    // which service, and what to do; not ioredis's internals or the address
    expect(ingest.body.message).toMatch(/^Redis \(the job queues\) is unreachable.*retry after \d+ s.*REDIS_URL/);
    expect(ingest.body.message).not.toMatch(/enableOfflineQueue|Stream isn't writeable|ECONNREFUSED|127\.0\.0\.1|redis:\/\//);
    const rerank = await http(server.url, 'POST', '/v1/rerank', { collection: 'c', queries: [{ id: 'q', text: 'x', candidates: ['a'] }] });
    expect(rerank.status).toBe(503);
    const health = await http(server.url, 'GET', '/v1/health');
    expect(health.status).toBe(503);
    expect(health.body.redis.ok).toBe(false);
    expect(health.body.redis.error).toMatch(/^Redis \(the job queues\) is unreachable/);
    expect(Date.now() - t0).toBeLessThan(15_000);
  });
});
