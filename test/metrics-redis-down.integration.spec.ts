import os from 'node:os';
import path from 'node:path';
import { mkdtempSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger, startEmbeddedRedis, type EmbeddedRedis } from '@lateral/infra';
import { startServer, type Server } from '../apps/all-in-one/src/server';
import { http, testConfig } from './helpers';

const redisUp = (text: string) => Number(/^lateral_redis_up (\S+)$/m.exec(text)?.[1]);

/** A scrape never fails because Redis is down: it answers 200 and says so (lateral_redis_up 0). */
describe('GET /metrics while Redis is unreachable', () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'lateral-metrics-redis-down-'));
  const lines: Record<string, unknown>[] = [];
  let redis: EmbeddedRedis;
  let server: Server;
  let port: number;

  beforeAll(async () => {
    const logger = createLogger('info', 'lateral', { json: true, destination: { write: (l: string) => lines.push(JSON.parse(l) as Record<string, unknown>) } });
    redis = await startEmbeddedRedis({ dir, logger });
    port = Number(new URL(redis.url).port);
    server = await startServer(testConfig({ REDIS_URL: redis.url }), { logger, closeGraceMs: 5000 });
    expect((await http(server.url, 'POST', '/v1/collections', { id: 'c' })).status).toBe(201);
  });

  afterAll(async () => {
    // Bring Redis back on the same port so the workers can close cleanly.
    redis = await startEmbeddedRedis({ dir, port });
    await server?.stop();
    await redis.stop();
  });

  it('reports lateral_redis_up 1 with queue depths, then 0 without them once Redis is gone, still answering 200', async () => {
    const before = await fetch(`${server.url}/metrics`);
    expect(before.status).toBe(200);
    const up = await before.text();
    expect(redisUp(up)).toBe(1);
    expect(up).toMatch(/^lateral_queue_jobs\{queue="encode",state="waiting"\} 0$/m);

    await redis.stop();
    const res = await fetch(`${server.url}/metrics`);
    expect(res.status).toBe(200);
    const down = await res.text();
    expect(redisUp(down)).toBe(0);
    expect(down).not.toMatch(/^lateral_queue_jobs\{/m); // no stale depths
    // The rest of the registry is still there.
    expect(down).toMatch(/^lateral_http_request_duration_seconds_count\{method="POST",route="\/v1\/collections",status="201"\} 1$/m);
  });

  it('the embedded redis-server stopping by our own stop() is not reported as an unexpected exit', () => {
    expect(lines.some((l) => String(l.msg).includes('redis-server') && l.level === 'error')).toBe(false);
  });
});

describe('an embedded redis-server that dies', () => {
  it('is logged as an error that says what happened and what to do', async () => {
    const lines: Record<string, unknown>[] = [];
    const logger = createLogger('info', 'lateral', { json: true, destination: { write: (l: string) => lines.push(JSON.parse(l) as Record<string, unknown>) } });
    const redis = await startEmbeddedRedis({ dir: mkdtempSync(path.join(os.tmpdir(), 'lateral-redis-dies-')), logger });
    try {
      process.kill(redis.pid!, 'SIGKILL');
      const deadline = Date.now() + 10_000;
      while (!lines.some((l) => l.level === 'error') && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
      const line = lines.find((l) => l.level === 'error');
      expect(line).toMatchObject({ service: 'redis-server', pid: redis.pid, signal: null });
      expect(String(line!.msg)).toMatch(/redis-server \(pid \d+, redis:\/\/127\.0\.0\.1:\d+\) exited with code \d+/);
      expect(String(line!.msg)).toContain('Restart lateral');
      expect(String(line!.msg)).toContain('REDIS_URL');
    } finally {
      await redis.stop();
    }
  });
});
