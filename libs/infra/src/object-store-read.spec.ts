import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { ObjectStore, READ_BODY_RETRIES, transientBodyError } from './object-store';

/**
 * ObjectStore's reads against a stand-in S3 server whose answers begin and then stop mid-body:
 * the inactivity timeout (S3_SOCKET_TIMEOUT_MS) or a cut connection during the body is read again
 * inside the client, bounded and said on the logger, so one slow answer under a busy CPU does not
 * fail the job (issue 31); an answer that stops every time still fails the read.
 */
const BODY = Buffer.from(Array.from({ length: 64 * 1024 }, (_, i) => i % 251));
type Behaviour = 'whole' | 'stall' | 'cut';

let server: http.Server;
let endpoint: string;
/** What each GET of a key gets, in order (the last one repeats). */
let plan: Behaviour[] = [];
let gets = 0;

beforeAll(async () => {
  server = http.createServer((req, res) => {
    req.resume();
    const behaviour = plan[Math.min(gets, plan.length - 1)];
    gets++;
    res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': String(BODY.length) });
    if (behaviour === 'whole') return void res.end(BODY);
    // The head and half of the body, then silence (held until the client gives up) or a cut connection.
    res.write(BODY.subarray(0, BODY.length / 2), () => {
      if (behaviour === 'cut') res.socket?.destroy();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  endpoint = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterAll(async () => {
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
});

beforeEach(() => {
  gets = 0;
  plan = [];
});

function storeWithLog(): { store: ObjectStore; warnings: string[] } {
  const warnings: string[] = [];
  const store = new ObjectStore('bucket', {
    endpoint,
    region: 'us-east-1',
    forcePathStyle: true,
    accessKeyId: 'k',
    secretAccessKey: 's',
    socketTimeoutMs: 300,
    logger: { warn: (m: string) => warnings.push(m) },
  });
  return { store, warnings };
}

describe('ObjectStore: a read whose body stops is read again inside the client', () => {
  it('an answer that goes quiet mid-body for S3_SOCKET_TIMEOUT_MS: read again, the whole object returned, one warning naming the key', async () => {
    plan = ['stall', 'whole'];
    const { store, warnings } = storeWithLog();
    try {
      const bytes = await store.get('raw/seg-1.bin');
      expect(Buffer.from(bytes!).equals(BODY)).toBe(true);
      expect(gets).toBe(2);
      expect(warnings).toHaveLength(1);
      expect(warnings[0]).toMatch(/reading s3:\/\/bucket\/raw\/seg-1\.bin: the answer stopped while its body streamed \(TimeoutError: .*inactivity.*\); reading it again in 250 ms \(try 2 of 3\)/);
    } finally {
      store.destroy();
    }
  });

  it('a connection cut mid-body (ranged read): read again and the asked bytes returned', async () => {
    plan = ['cut', 'whole'];
    const { store, warnings } = storeWithLog();
    try {
      // The stand-in answers the whole object to any range: ask for all of it.
      const bytes = await store.getRange('layouts/warp-0.bin', 0, BODY.length);
      expect(Buffer.from(bytes!).equals(BODY)).toBe(true);
      expect(gets).toBe(2);
      expect(warnings).toHaveLength(1);
      expect(warnings[0]).toContain('reading s3://bucket/layouts/warp-0.bin bytes 0..65536: the answer stopped while its body streamed');
    } finally {
      store.destroy();
    }
  });

  it('an answer that stops every time still fails the read, after 1 + READ_BODY_RETRIES tries (an outage is not hidden)', async () => {
    plan = ['stall'];
    const { store, warnings } = storeWithLog();
    try {
      const err = (await store.get('raw/seg-2.bin').catch((e: unknown) => e)) as Error;
      expect(err).toBeInstanceOf(Error);
      expect(err.message).toMatch(/reading s3:\/\/bucket\/raw\/seg-2\.bin/);
      expect(err.message).toMatch(/inactivity/);
      expect(gets).toBe(1 + READ_BODY_RETRIES);
      expect(warnings).toHaveLength(READ_BODY_RETRIES);
    } finally {
      store.destroy();
    }
  });

  it('which body errors are transient', () => {
    expect(transientBodyError(Object.assign(new Error('socket timed out'), { name: 'TimeoutError' }))).toBe(true);
    expect(transientBodyError(Object.assign(new Error('read ECONNRESET'), { code: 'ECONNRESET' }))).toBe(true);
    expect(transientBodyError(new Error('aborted'))).toBe(true);
    expect(transientBodyError(new RangeError('out of memory'))).toBe(false);
    expect(transientBodyError(null)).toBe(false);
  });
});
