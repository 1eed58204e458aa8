import os from 'node:os';
import path from 'node:path';
import { mkdtempSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startEmbeddedS3, type EmbeddedS3 } from '@lateral/infra';
import { startServer, type Server } from '../apps/all-in-one/src/server';
import { http, testConfig } from './helpers';

/** With the object store gone, requests get a quick 503 with Retry-After, never a 500 or a hang. */
describe('S3 unreachable', () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'lateral-s3-down-'));
  let s3: EmbeddedS3;
  let server: Server;

  beforeAll(async () => {
    s3 = await startEmbeddedS3({ dir, bucket: 'down', accessKeyId: 'S3RVER', secretAccessKey: 'S3RVER' });
    server = await startServer(testConfig({ S3_ENDPOINT: s3.endpoint, S3_BUCKET: 'down' }), { quiet: true, closeGraceMs: 5000 });
    expect((await http(server.url, 'POST', '/v1/collections', { id: 'c' })).status).toBe(201);
  });
  afterAll(async () => {
    await server?.stop();
  });

  it('answers 503 with Retry-After for reads, ingest and health', async () => {
    await s3.stop();
    const t0 = Date.now();
    for (const [method, url, body] of [
      ['GET', '/v1/collections/c', undefined],
      ['POST', '/v1/collections/c/documents', [{ id: 'a', text: 'boundary layer' }]],
      ['POST', '/v1/collections', { id: 'd' }],
    ] as const) {
      const res = await http(server.url, method, url, body);
      expect(res.status, `${method} ${url}: ${JSON.stringify(res.body)}`).toBe(503);
      expect(res.headers.get('retry-after')).toMatch(/^\d+$/);
      // which service, and what to do; not the bucket, a key or the endpoint
      expect(res.body.message).toMatch(/object store \(S3\) is unreachable.*S3_ENDPOINT/);
      expect(res.body.message).not.toMatch(/s3:\/\/|tenants\/|http:\/\/|ECONNREFUSED/);
    }
    const health = await http(server.url, 'GET', '/v1/health');
    expect(health.status).toBe(503);
    expect(health.body.s3.ok).toBe(false);
    expect(health.body.s3.error).toMatch(/object store \(S3\) is unreachable/);
    expect(JSON.stringify(health.body)).not.toMatch(/ECONNREFUSED|127\.0\.0\.1:\d+/);
    expect(Date.now() - t0).toBeLessThan(20_000);
  });
});
