import os from 'node:os';
import path from 'node:path';
import { mkdtempSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startEmbeddedRedis, type EmbeddedRedis } from '@lateral/infra';
import { startServer, type Server } from '../apps/all-in-one/src/server';
import { http, testConfig, until } from './helpers';

/**
 * "Unreachable means unreachable" (issue 31 item 4): a Redis that is there but does not answer in
 * time (its process paused with SIGSTOP: the connection stays up, nothing comes back) is overload,
 * answered 503 `overloaded` + Retry-After naming overload, not "Redis is unreachable"; readiness
 * says `overloaded` (200, not taken out of service), liveness answers 200 throughout. Resumed,
 * everything answers again without a restart.
 */
describe('Redis slow (paused), not down', () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'lateral-redis-slow-'));
  let redis: EmbeddedRedis;
  let server: Server;
  let paused = false;
  const pause = (on: boolean) => {
    process.kill(redis.pid!, on ? 'SIGSTOP' : 'SIGCONT');
    paused = on;
  };

  beforeAll(async () => {
    redis = await startEmbeddedRedis({ dir });
    server = await startServer(testConfig({ REDIS_URL: redis.url, REDIS_COMMAND_TIMEOUT_MS: '600', HEALTH_CHECK_TIMEOUT_MS: '800' }), { quiet: true, closeGraceMs: 5000 });
    expect((await http(server.url, 'POST', '/v1/collections', { id: 'c' })).status).toBe(201);
  });

  afterAll(async () => {
    if (paused) pause(false);
    await server?.stop();
    await redis?.stop();
  });

  it('answers 503 overloaded with Retry-After while Redis is paused, ready says overloaded, live says ok', async () => {
    pause(true);
    try {
      const t0 = Date.now();
      const ingest = await http(server.url, 'POST', '/v1/collections/c/documents', [{ id: 'a', text: 'boundary layer' }]);
      expect(ingest.status, JSON.stringify(ingest.body)).toBe(503);
      expect(ingest.headers.get('retry-after')).toBe('2');
      expect(ingest.body.error).toBe('overloaded');
      expect(ingest.body.message).toMatch(/^the service is overloaded: Redis \(the job queues\) did not answer in time \(REDIS_COMMAND_TIMEOUT_MS\).*retry after 2 s\. This is load, not an outage/);
      expect(ingest.body.message).not.toMatch(/unreachable|Command timed out|127\.0\.0\.1|redis:\/\//);
      // refused by back-pressure (the encode backlog could not be read): nothing accepted
      expect(ingest.body.message).toContain("when the encode queue's backlog was read, so nothing was accepted");
      // a route that is not back-pressured meets the timeout in its own Redis read: the error filter says the same
      const read = await http(server.url, 'GET', '/v1/rerank/rr-nope');
      expect(read.status, JSON.stringify(read.body)).toBe(503);
      expect(read.headers.get('retry-after')).toBe('2');
      expect(read.body.error).toBe('overloaded');
      expect(read.body.message).toMatch(/^the service is overloaded: Redis \(the job queues\) did not answer in time \(REDIS_COMMAND_TIMEOUT_MS\), although it is connected, so this request may not have been carried out; retry after 2 s\. This is load, not an outage/);

      const ready = await http(server.url, 'GET', '/v1/health/ready');
      expect(ready.status).toBe(200);
      expect(ready.body.status).toBe('overloaded');
      expect(ready.headers.get('retry-after')).toBe('2');
      expect(ready.body.redis).toMatchObject({ ok: false, overloaded: true });
      expect(ready.body.redis.error).toMatch(/^the service is overloaded: Redis/);
      expect(ready.body.s3.ok).toBe(true);
      expect(ready.body.queues).toBeNull();
      // /v1/health is the readiness answer
      const health = await http(server.url, 'GET', '/v1/health');
      expect([health.status, health.body.status]).toEqual([200, 'overloaded']);

      const live = await http(server.url, 'GET', '/v1/health/live');
      expect(live.status).toBe(200);
      expect(live.body.status).toBe('ok');
      expect(Date.now() - t0).toBeLessThan(10_000);
    } finally {
      pause(false);
    }
    // resumed: ready again, and the same ingest is accepted
    await until(async () => (await http(server.url, 'GET', '/v1/health/ready')).body.status === 'ok', 15_000, 200);
    const again = await http(server.url, 'POST', '/v1/collections/c/documents', [{ id: 'a', text: 'boundary layer' }]);
    expect(again.status, JSON.stringify(again.body)).toBe(202);
  });
});
