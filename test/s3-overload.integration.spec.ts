import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { startServer, type Server } from '../apps/all-in-one/src/server';
import { FaultProxy } from './faults/fault-proxy';
import { http, testConfig, until } from './helpers';

/**
 * "Unreachable means unreachable" for S3 (issue 31 item 4): the run's S3 server behind a TCP proxy.
 * Connections accepted but never answered (`stall`: a store that is there and too slow) are
 * overload: 503 `overloaded` + Retry-After 2, readiness 200 `overloaded`. Connections refused
 * (`refuse`) are down, as before: 503 "unreachable" + Retry-After 5, readiness 503.
 */
describe('S3 slow (connections stall) vs S3 down (connections refused)', () => {
  let proxy: FaultProxy;
  let server: Server;

  beforeAll(async () => {
    proxy = await FaultProxy.start(inject('s3Endpoint'));
    server = await startServer(testConfig({ S3_ENDPOINT: proxy.endpoint, S3_SOCKET_TIMEOUT_MS: '400', S3_CONNECT_TIMEOUT_MS: '1000', HEALTH_CHECK_TIMEOUT_MS: '800' }), { quiet: true, closeGraceMs: 5000 });
    expect((await http(server.url, 'POST', '/v1/collections', { id: 'c' })).status).toBe(201);
  });

  afterAll(async () => {
    await proxy?.set('pass');
    await server?.stop();
    await proxy?.stop();
  });

  it('stalled: 503 overloaded with Retry-After 2 and readiness overloaded; refused: 503 unreachable and readiness 503; passing again: 200', async () => {
    await proxy.set('stall');
    const t0 = Date.now();
    const read = await http(server.url, 'GET', '/v1/collections/c');
    expect(read.status, JSON.stringify(read.body)).toBe(503);
    expect(read.headers.get('retry-after')).toBe('2');
    expect(read.body.error).toBe('overloaded');
    expect(read.body.message).toMatch(/^the service is overloaded: the object store \(S3\) did not answer in time \(S3_SOCKET_TIMEOUT_MS\).*retry after 2 s\. This is load, not an outage/);
    expect(read.body.message).not.toMatch(/unreachable|s3:\/\/|tenants\/|http:\/\/|TimeoutError/);
    const ready = await http(server.url, 'GET', '/v1/health/ready');
    expect(ready.status).toBe(200);
    expect(ready.body.status).toBe('overloaded');
    expect(ready.body.s3).toMatchObject({ ok: false, overloaded: true });
    expect(ready.body.s3.error).toMatch(/^the service is overloaded: the object store \(S3\)/);
    expect(ready.body.redis.ok).toBe(true);
    expect((await http(server.url, 'GET', '/v1/health/live')).status).toBe(200);
    expect(Date.now() - t0).toBeLessThan(15_000);

    await proxy.set('refuse');
    const down = await http(server.url, 'GET', '/v1/collections/c');
    expect(down.status).toBe(503);
    expect(down.headers.get('retry-after')).toBe('5');
    expect(down.body.error).toBe('unavailable');
    expect(down.body.message).toMatch(/^the object store \(S3\) is unreachable or failing.*S3_ENDPOINT/);
    const notReady = await http(server.url, 'GET', '/v1/health/ready');
    expect([notReady.status, notReady.body.status, notReady.body.s3.ok, notReady.body.s3.overloaded]).toEqual([503, 'degraded', false, undefined]);

    await proxy.set('pass');
    await until(async () => (await http(server.url, 'GET', '/v1/health/ready')).body.status === 'ok', 15_000, 200);
    expect((await http(server.url, 'GET', '/v1/collections/c')).status).toBe(200);
  });
});
