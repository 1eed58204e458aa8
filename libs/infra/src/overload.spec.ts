import http from 'node:http';
import net from 'node:net';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ObjectStore } from './object-store';
import { EventLoopMonitor, classifyDependencyError, type LoadContext } from './overload';

const idle: LoadContext = { lagMs: 0, utilization: 0.1, overloadLagMs: 500 };
const busy: LoadContext = { lagMs: 1200, utilization: 0.4, overloadLagMs: 500 };
const saturated: LoadContext = { lagMs: 60, utilization: 0.99, overloadLagMs: 500 };

/** A store on a local endpoint with short timeouts and the SDK's own retries (3 attempts). */
const storeAt = (endpoint: string) =>
  new ObjectStore('b', { endpoint, region: 'us-east-1', accessKeyId: 'k', secretAccessKey: 's', forcePathStyle: true, connectTimeoutMs: 300, socketTimeoutMs: 200 });
const failure = async (p: Promise<unknown>): Promise<Error> => {
  try {
    await p;
  } catch (err) {
    return err as Error;
  }
  throw new Error('expected a failure');
};

describe('classifyDependencyError: Redis', () => {
  const timedOut = new Error('Command timed out');

  it('a command timeout on a connected client is overload, busy or not', () => {
    expect(classifyDependencyError(timedOut, { ...idle, redisStatus: 'ready' })).toEqual({ service: 'Redis', kind: 'overloaded', reason: 'command timeout on a connected client', busy: false });
    expect(classifyDependencyError(timedOut, { ...busy, redisStatus: 'ready' })).toMatchObject({ service: 'Redis', kind: 'overloaded', busy: true });
  });

  it('a command timeout on a connection that is not ready is overload only while the event loop was busy', () => {
    expect(classifyDependencyError(timedOut, { ...idle, redisStatus: 'reconnecting' })).toMatchObject({ service: 'Redis', kind: 'down', busy: false });
    expect(classifyDependencyError(timedOut, { ...busy, redisStatus: 'reconnecting' })).toMatchObject({ service: 'Redis', kind: 'overloaded', busy: true });
    expect(classifyDependencyError(timedOut, { ...saturated, redisStatus: 'reconnecting' })).toMatchObject({ service: 'Redis', kind: 'overloaded', busy: true });
  });

  it('not connected is down whatever the load', () => {
    for (const m of ["Stream isn't writeable and enableOfflineQueue options is false", 'Connection is closed.', 'connect ECONNREFUSED 127.0.0.1:6399', 'Redis not ready after 10000 ms']) {
      expect(classifyDependencyError(new Error(m), { ...busy, redisStatus: 'ready' }), m).toMatchObject({ service: 'Redis', kind: 'down' });
    }
    const maxRetries = Object.assign(new Error('Reached the max retries per request limit (which is 1).'), { name: 'MaxRetriesPerRequestError' });
    expect(classifyDependencyError(maxRetries, busy)).toMatchObject({ service: 'Redis', kind: 'down' });
  });

  it('BUSY (a script running) is overload; errors that are not Redis or S3 are neither', () => {
    expect(classifyDependencyError(new Error('BUSY Redis is busy running a script.'), idle)).toMatchObject({ service: 'Redis', kind: 'overloaded' });
    expect(classifyDependencyError(new Error('collection c not found'), busy)).toBeNull();
    expect(classifyDependencyError('Command timed out', busy)).toBeNull();
  });
});

describe('classifyDependencyError: S3, from the SDK against real local sockets', () => {
  let silent: net.Server; // accepts, never answers
  let slowDown: http.Server; // answers S3's SlowDown (503)
  let refused: string; // a port nothing listens on
  const open: net.Socket[] = [];

  beforeAll(async () => {
    silent = net.createServer((s) => open.push(s));
    slowDown = http.createServer((req, res) => {
      req.resume();
      res.writeHead(503, { 'content-type': 'application/xml' }).end('<?xml version="1.0" encoding="UTF-8"?><Error><Code>SlowDown</Code><Message>Please reduce your request rate.</Message></Error>');
    });
    const free = net.createServer();
    await Promise.all([silent, slowDown, free].map((s) => new Promise<void>((r) => s.listen(0, '127.0.0.1', r))));
    refused = `http://127.0.0.1:${(free.address() as AddressInfo).port}`;
    await new Promise((r) => free.close(r));
  });
  afterAll(async () => {
    for (const s of open) s.destroy();
    await Promise.all([silent, slowDown].map((s) => new Promise((r) => s.close(r))));
  });

  it('connection refused is down, even while busy', async () => {
    const err = await failure(storeAt(refused).get('k'));
    expect(classifyDependencyError(err, busy)).toMatchObject({ service: 'S3', kind: 'down', reason: 'no server answers at S3_ENDPOINT' });
  });

  it('a connected socket that stays quiet past S3_SOCKET_TIMEOUT_MS is overload, busy or not', async () => {
    const err = await failure(storeAt(`http://127.0.0.1:${(silent.address() as AddressInfo).port}`).get('k'));
    expect(classifyDependencyError(err, idle)).toMatchObject({ service: 'S3', kind: 'overloaded', busy: false });
    // health's check sees the same cause through ping's UnavailableError
    const ping = await failure(storeAt(`http://127.0.0.1:${(silent.address() as AddressInfo).port}`).ping());
    expect(classifyDependencyError((ping as Error & { cause?: unknown }).cause, idle)).toMatchObject({ service: 'S3', kind: 'overloaded' });
  });

  it("S3's SlowDown (503) is overload", async () => {
    const err = await failure(storeAt(`http://127.0.0.1:${(slowDown.address() as AddressInfo).port}`).put('k', 'v'));
    expect(classifyDependencyError(err, idle)).toMatchObject({ service: 'S3', kind: 'overloaded', reason: 'the store answered SlowDown' });
  });

  it('a reset or a connect timeout is overload while the event loop was busy, down otherwise', () => {
    const reset = Object.assign(new Error('reading s3://b/k: socket hang up'), { cause: Object.assign(new Error('socket hang up'), { code: 'ECONNRESET', $metadata: {} }) });
    expect(classifyDependencyError(reset, idle)).toMatchObject({ service: 'S3', kind: 'down' });
    expect(classifyDependencyError(reset, busy)).toMatchObject({ service: 'S3', kind: 'overloaded', busy: true });
    const connect = Object.assign(new Error('reading s3://b/k: the request socket did not establish a connection with the server within the configured timeout of 5000 ms.'), {
      cause: Object.assign(new Error('@smithy/node-http-handler - the request socket did not establish a connection with the server within the configured timeout of 5000 ms.'), { name: 'TimeoutError', $metadata: {} }),
    });
    expect(classifyDependencyError(connect, idle)).toMatchObject({ service: 'S3', kind: 'down' });
    expect(classifyDependencyError(connect, saturated)).toMatchObject({ service: 'S3', kind: 'overloaded' });
  });

  it('credentials or bucket refused is down whatever the load', () => {
    const denied = Object.assign(new Error('reading s3://b/k: Access Denied'), { cause: Object.assign(new Error('Access Denied'), { name: 'AccessDenied', $metadata: { httpStatusCode: 403 } }) });
    expect(classifyDependencyError(denied, busy)).toMatchObject({ service: 'S3', kind: 'down' });
  });
});

describe('EventLoopMonitor', () => {
  it('sees a loop held up, while it is held and after, and its utilization', async () => {
    const monitor = new EventLoopMonitor(20);
    try {
      await new Promise((r) => setTimeout(r, 100));
      expect(monitor.maxLagMs(1000)).toBeLessThan(200);
      const t0 = Date.now();
      while (Date.now() - t0 < 400); // hold the loop
      // still inside the same task: the tick that is due is late
      expect(monitor.pendingLagMs()).toBeGreaterThanOrEqual(350);
      expect(monitor.maxLagMs(1000)).toBeGreaterThanOrEqual(350);
      await new Promise((r) => setTimeout(r, 60));
      expect(monitor.maxLagMs(1000)).toBeGreaterThanOrEqual(350);
      expect(monitor.utilization(1000)).toBeGreaterThan(0.5);
    } finally {
      monitor.stop();
    }
  });
});
