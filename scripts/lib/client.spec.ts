import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { Readable } from 'node:stream';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { parseRetryAfter } from '@lateral/shared';
import { fetchRetrying, type RetryPolicy } from './client';

/**
 * fetchRetrying against a real local HTTP server: each test queues the answers the server gives,
 * in order, and reads back what the server received.
 */
describe('fetchRetrying', () => {
  type Answer = { status: number; headers?: Record<string, string>; body?: string };
  let server: http.Server;
  let base: string;
  let script: Answer[] = [];
  let received: { method: string; url: string; body: string }[] = [];

  beforeAll(async () => {
    server = http.createServer((req, res) => {
      let body = '';
      req.setEncoding('utf8');
      req.on('data', (c: string) => (body += c));
      req.on('end', () => {
        received.push({ method: req.method ?? '', url: req.url ?? '', body });
        const a = script.shift() ?? { status: 200, body: '{"ok":true}' };
        res.writeHead(a.status, { 'content-type': 'application/json', ...a.headers }).end(a.body ?? '');
      });
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(() => new Promise((r) => server.close(r)));
  beforeEach(() => {
    script = [];
    received = [];
  });

  /** A policy whose waits are recorded (and taken for real only when `real`), and whose lines are kept. */
  const recorder = (extra: RetryPolicy = {}, real = false) => {
    const lines: string[] = [];
    const waits: number[] = [];
    const policy: RetryPolicy = {
      log: (l) => lines.push(l),
      sleep: async (ms) => {
        waits.push(ms);
        if (real) await new Promise((r) => setTimeout(r, ms));
      },
      ...extra,
    };
    return { lines, waits, policy };
  };
  const overloaded = (retryAfter?: string): Answer => ({ status: 503, headers: retryAfter === undefined ? {} : { 'retry-after': retryAfter }, body: '{"error":"overloaded","message":"the service is overloaded"}' });

  it('retries 503 after its Retry-After in seconds, resending the body, and says so on each wait', async () => {
    script = [overloaded('1'), overloaded('1')];
    const { lines, waits, policy } = recorder({}, true);
    const t0 = Date.now();
    const res = await fetchRetrying(`${base}/v1/search?wait=5`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"q":1}' }, policy);
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ ok: true });
    expect(Date.now() - t0).toBeGreaterThanOrEqual(2000);
    expect(received.map((r) => [r.method, r.url, r.body])).toEqual(Array(3).fill(['POST', '/v1/search?wait=5', '{"q":1}']));
    expect(waits).toEqual([1000, 1000]);
    expect(lines).toEqual(['POST /v1/search: 503 overloaded, retrying in 1 s (attempt 2/8)', 'POST /v1/search: 503 overloaded, retrying in 1 s (attempt 3/8)']);
  });

  it('honours Retry-After as an HTTP date', async () => {
    script = [overloaded(new Date(Date.now() + 3000).toUTCString())];
    const { waits, lines, policy } = recorder();
    expect((await fetchRetrying(`${base}/v1/collections`, {}, policy)).status).toBe(200);
    expect(waits).toHaveLength(1);
    // the date has whole seconds: between 2 and 3 s from when it was read
    expect(waits[0]).toBeGreaterThan(1900);
    expect(waits[0]).toBeLessThanOrEqual(3000);
    expect(lines[0]).toMatch(/^GET \/v1\/collections: 503 overloaded, retrying in [23](\.\d)? s \(attempt 2\/8\)$/);
  });

  it('retries 429 without Retry-After on a doubling wait', async () => {
    script = [{ status: 429, body: '{"error":"rate_limited"}' }, { status: 429, body: '{"error":"rate_limited"}' }];
    const { waits, lines, policy } = recorder({ fallbackWaitMs: 250 });
    expect((await fetchRetrying(`${base}/v1/rerank`, { method: 'POST', body: '{}' }, policy)).status).toBe(200);
    expect(waits).toEqual([250, 500]);
    expect(lines[1]).toBe('POST /v1/rerank: 429 rate_limited, retrying in 0.5 s (attempt 3/8)');
  });

  it('gives up after `attempts` tries and returns the last refusal unread', async () => {
    script = [overloaded('1'), overloaded('1'), overloaded('1'), overloaded('1')];
    const { waits, lines, policy } = recorder({ attempts: 3 });
    const res = await fetchRetrying(`${base}/v1/health/ready`, {}, policy);
    expect(res.status).toBe(503);
    expect(res.headers.get('retry-after')).toBe('1');
    expect(((await res.json()) as { error: string }).error).toBe('overloaded');
    expect(received).toHaveLength(3);
    expect(waits).toEqual([1000, 1000]);
    expect(lines.at(-1)).toBe('GET /v1/health/ready: 503, giving up (after 3 attempts)');
  });

  it('does not start a wait that would end past totalMs, nor one longer than maxWaitMs', async () => {
    script = [overloaded('10')];
    const t = recorder({ totalMs: 5000 });
    expect((await fetchRetrying(`${base}/a`, {}, t.policy)).status).toBe(503);
    expect(t.waits).toEqual([]);
    expect(t.lines).toEqual(['GET /a: 503, giving up (5 s of retrying spent)']);

    script = [overloaded('60')];
    const m = recorder();
    expect((await fetchRetrying(`${base}/b`, {}, m.policy)).status).toBe(503);
    expect(m.lines).toEqual(['GET /b: 503, giving up (Retry-After 60 s is over 30 s)']);
    expect(received).toHaveLength(2);
  });

  it('returns other errors at once, and takes a fresh init per try for a streamed body', async () => {
    script = [{ status: 500, body: '{"error":"internal"}' }];
    const e = recorder();
    expect((await fetchRetrying(`${base}/c`, {}, e.policy)).status).toBe(500);
    expect(e.lines).toEqual([]);

    script = [overloaded('0')];
    const s = recorder();
    const stream = () => ({ method: 'POST', body: Readable.toWeb(Readable.from(['{"a":1}\n', '{"a":2}\n'])) as ReadableStream, duplex: 'half' }) as RequestInit;
    expect((await fetchRetrying(`${base}/v1/batches`, stream, s.policy)).status).toBe(200);
    expect(received.slice(1).map((r) => r.body)).toEqual(['{"a":1}\n{"a":2}\n', '{"a":1}\n{"a":2}\n']);
    expect(s.lines).toEqual(['POST /v1/batches: 503 overloaded, retrying in 0 s (attempt 2/8)']);
  });
});

describe('parseRetryAfter', () => {
  it('reads delay-seconds and HTTP dates, and nothing else', () => {
    const now = Date.parse('Wed, 21 Oct 2015 07:28:00 GMT');
    expect(parseRetryAfter('120', now)).toBe(120_000);
    expect(parseRetryAfter(' 0 ', now)).toBe(0);
    expect(parseRetryAfter('Wed, 21 Oct 2015 07:28:05 GMT', now)).toBe(5000);
    expect(parseRetryAfter('Wed, 21 Oct 2015 07:27:00 GMT', now)).toBe(0); // in the past: now
    for (const bad of [null, undefined, '', '-1', '1.5', 'soon']) expect(parseRetryAfter(bad, now), String(bad)).toBeUndefined();
  });
});
