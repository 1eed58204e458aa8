import { gzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startApiOnly } from './api-only';
import { QueueName } from '@lateral/shared';
import { http, testConfig, until } from './helpers';

/** Hostile input (issue 12 item 5): each answer a 4xx naming what was wrong, never a 500. */
describe('hostile input', () => {
  const config = testConfig({ MAX_JSON_DEPTH: '32', RERANK_MAX_WAIT_SECONDS: '5' });
  let server: Awaited<ReturnType<typeof startApiOnly>>;
  const api = (method: string, url: string, body?: unknown, headers: Record<string, string> = {}) => http(server.url, method, url, body, headers);

  beforeAll(async () => {
    server = await startApiOnly(config);
    expect((await api('POST', '/v1/collections', { id: 'c' })).status).toBe(201);
  });
  afterAll(async () => {
    await server?.stop();
  });

  it('path ids go through the body schema: traversal, NUL and 10 kB ids are 400s naming the parameter', async () => {
    for (const bad of ['x%2F..%2F..%2F..%2Fdefault%2Fcollections%2Fc', 'a%00b', 'x'.repeat(10_000), 'a%0D%0Ab', '%E2%80%AE']) {
      const got = await api('GET', `/v1/collections/${bad}`);
      expect(got.status, bad.slice(0, 40)).toBe(400);
      expect(got.body.details[0].field).toBe('path.id');
      const ingest = await api('POST', `/v1/collections/${bad}/documents`, [{ id: 'a', text: 'wing' }]);
      expect(ingest.status).toBe(400);
    }
    expect((await api('GET', '/v1/collections/c/ingestions/ing%2F..%2Fx')).body.details[0].field).toBe('path.ingestionId');
    // document ids: the same rule in a path and in a body (no control characters, at most 512 bytes)
    expect((await api('GET', '/v1/collections/c/documents/a%00b')).body.details[0].field).toBe('path.docId');
    expect((await api('GET', `/v1/collections/c/documents/${'x'.repeat(513)}`)).status).toBe(400);
    const ctl = await api('POST', '/v1/collections/c/documents', [{ id: 'a\u0000b', text: 'wing' }]);
    expect(ctl.status).toBe(400);
    expect(ctl.body.message).toMatch(/control characters/);
    expect((await api('GET', '/v1/rerank/rr-%00')).status).toBe(400);
    expect((await api('GET', '/v1/search/..%2F..')).status).toBe(400);
    // a path that does not percent-decode
    expect((await api('GET', '/v1/collections/%E0%A4%A')).status).toBe(400);
  });

  it('bodies nested deeper than MAX_JSON_DEPTH are a 400 naming the limit (no stack overflow)', async () => {
    const deep = '['.repeat(10_000) + ']'.repeat(10_000);
    for (const url of ['/v1/collections', '/v1/rerank', '/v1/search', '/v1/collections/c/documents']) {
      const res = await api('POST', url, deep);
      expect(res.status, url).toBe(400);
      expect(res.body.message).toMatch(/MAX_JSON_DEPTH \(32\)/);
    }
    const meta = JSON.stringify([{ id: 'a', text: 'wing', metadata: JSON.parse('{"a":'.repeat(40) + '1' + '}'.repeat(40)) }]);
    expect((await api('POST', '/v1/collections/c/documents', meta)).body.message).toMatch(/MAX_JSON_DEPTH/);
    // 30 levels is fine
    const ok = await api('POST', '/v1/collections/c/documents', [{ id: 'a', text: 'wing', metadata: JSON.parse('{"a":'.repeat(28) + '1' + '}'.repeat(28)) }]);
    expect(ok.status).toBe(202);
  });

  it('415 naming the accepted types for text/plain, XML, multipart and forms; NDJSON only where documents are ingested', async () => {
    for (const type of ['text/plain', 'application/xml', 'text/xml', 'multipart/form-data; boundary=x', 'application/x-www-form-urlencoded']) {
      const res = await api('POST', '/v1/rerank', '{"collection":"c"}', { 'content-type': type });
      expect(res.status, type).toBe(415);
      expect(res.body.message).toMatch(/application\/json/);
    }
    const nd = await api('POST', '/v1/rerank', '{"collection":"c"}', { 'content-type': 'application/x-ndjson' });
    expect(nd.status).toBe(415);
    const ingest = await api('POST', '/v1/collections/c/documents', '{"id":"n1","text":"wing"}\n', { 'content-type': 'application/x-ndjson' });
    expect(ingest.status).toBe(202);
    const latin1 = await api('POST', '/v1/collections', '{"id":"x"}', { 'content-type': 'application/json; charset=iso-8859-1' });
    expect(latin1.status).toBe(415);
  });

  it('Content-Encoding: gzip is read; garbage or an unknown coding is a 400 naming the header', async () => {
    const gz = await fetch(`${server.url}/v1/collections`, { method: 'POST', headers: { 'content-type': 'application/json', 'content-encoding': 'gzip' }, body: gzipSync('{"id":"gz"}') });
    expect(gz.status).toBe(201);
    for (const enc of ['gzip', 'deflate', 'br', 'zstd', 'compress']) {
      const res = await api('POST', '/v1/collections', 'not compressed at all', { 'content-type': 'application/json', 'content-encoding': enc });
      expect(res.status, enc).toBe(400);
      expect(res.body.details[0].field).toBe('content-encoding');
    }
    // A decompression bomb: small on the wire, over MAX_REQUEST_BYTES once inflated: 413, the connection closed.
    const bomb = gzipSync(Buffer.alloc(config.MAX_REQUEST_BYTES + 1, 0x20));
    expect(bomb.length).toBeLessThan(config.MAX_REQUEST_BYTES);
    const big = await fetch(`${server.url}/v1/collections`, { method: 'POST', headers: { 'content-type': 'application/json', 'content-encoding': 'gzip' }, body: bomb });
    expect(big.status).toBe(413);
    expect(((await big.json()) as { message: string }).message).toBe(`request body is over MAX_REQUEST_BYTES (${config.MAX_REQUEST_BYTES} bytes) once decompressed`);
    expect(big.headers.get('connection')).toBe('close');
  });

  it('bodies that are not UTF-8 are a 400', async () => {
    const res = await fetch(`${server.url}/v1/collections`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: Buffer.from([0x7b, 0x22, 0x69, 0x64, 0x22, 0x3a, 0x22, 0xff, 0xfe, 0x22, 0x7d]) });
    expect(res.status).toBe(400);
    expect(((await res.json()) as { message: string }).message).toMatch(/UTF-8/);
  });

  it('wait is parsed strictly: 0x10, 1e1, true and arrays are 400s naming the field', async () => {
    const body = { collection: 'c', queries: [{ id: 'q', text: 'wing', candidates: ['a'] }] };
    for (const q of ['0x10', '1e1', '-1', 'true', ' 5', 'Infinity']) {
      const res = await api('POST', `/v1/rerank?wait=${encodeURIComponent(q)}`, body);
      expect(res.status, q).toBe(400);
      expect(res.body.details[0].field).toBe('wait');
    }
    expect((await api('POST', '/v1/rerank?wait=1&wait=2', body)).status).toBe(400);
    for (const w of [true, '0x10', [1], null]) {
      const res = await api('POST', '/v1/rerank', { ...body, wait: w });
      expect(res.status, JSON.stringify(w)).toBe(400);
      expect(res.body.details[0].field).toBe('wait');
    }
    expect((await api('GET', '/v1/rerank/rr-x?wait=0x10')).status).toBe(400);
  });

  it('re-rank and search limits are 400s naming the limit: queries, candidates per query and per request, top-k', async () => {
    const q = (i: number, n: number) => ({ id: `q${i}`, text: 'wing', candidates: Array.from({ length: n }, (_, j) => `d${j}`) });
    const cases: [string, unknown, RegExp][] = [
      ['/v1/rerank', { collection: 'c', queries: [q(0, 10_001)] }, /MAX_CANDIDATES_PER_QUERY/],
      ['/v1/rerank', { collection: 'c', queries: Array.from({ length: 10_001 }, (_, i) => ({ id: `q${i}`, text: 'w', candidates: ['a'] })) }, /MAX_RERANK_QUERIES/],
      ['/v1/rerank', { collection: 'c', queries: Array.from({ length: 101 }, (_, i) => q(i, 10_000)) }, /over MAX_RERANK_CANDIDATES \(1000000\)/],
      ['/v1/rerank', { collection: 'c', topK: 10_001, queries: [q(0, 1)] }, /topK is at most 10000/],
      ['/v1/search', { collection: 'c', topK: 1001, queries: [{ id: 'q', text: 'w' }] }, /MAX_SEARCH_TOP_K/],
      ['/v1/search', { collection: 'c', queries: Array.from({ length: 1001 }, (_, i) => ({ id: `q${i}`, text: 'w' })) }, /MAX_SEARCH_QUERIES/],
    ];
    for (const [url, body, limit] of cases) {
      const res = await api('POST', url, body);
      expect(res.status, String(limit)).toBe(400);
      expect(JSON.stringify(res.body.details), String(limit)).toMatch(limit);
    }
  });

  it('error messages name settings, not absolute paths, buckets or endpoints', async () => {
    const model = await api('POST', '/v1/collections', { id: 'm', model: 'no-such-model' });
    expect(model.status).toBe(400);
    const artifact = await api('POST', '/v1/rerank', { collection: 'c', scorer: { name: 'lite', artifact: 'nope' }, queries: [{ id: 'q', text: 'w', candidates: ['a'] }] });
    expect(artifact.status).toBe(400);
    for (const res of [model, artifact]) {
      const text = JSON.stringify(res.body);
      expect(text).not.toContain(process.cwd());
      expect(text).not.toContain(config.MODELS_DIR);
      expect(text).not.toContain(config.S3_BUCKET);
      expect(text).not.toMatch(/\n\s+at /);
    }
    expect(model.body.message).toMatch(/MODELS_DIR/);
    expect(artifact.body.message).toMatch(/SCORERS_DIR/);
  });
});

/** Queue back-pressure (issue 12 item 2): over MAX_QUEUE_BACKLOG waiting jobs, requests feeding that queue get 503 + Retry-After. */
describe('queue back-pressure', () => {
  const config = testConfig({ MAX_QUEUE_BACKLOG: '2' });
  let server: Awaited<ReturnType<typeof startApiOnly>>;
  const api = (method: string, url: string, body?: unknown) => http(server.url, method, url, body);

  beforeAll(async () => {
    server = await startApiOnly(config); // no workers: queued jobs stay waiting
    expect((await api('POST', '/v1/collections', { id: 'c' })).status).toBe(201);
  });
  afterAll(async () => {
    await server?.stop();
  });

  it('accepts up to the backlog, then refuses re-ranks naming MAX_QUEUE_BACKLOG, while other queues still accept', async () => {
    const body = { collection: 'c', queries: [{ id: 'q', text: 'wing', candidates: ['a'] }] };
    for (let i = 0; i < 3; i++) expect((await api('POST', '/v1/rerank', body)).status).toBe(202);
    // the counts are cached for a second: the refusal comes once they are read again
    const refused = await until(async () => {
      const res = await api('POST', '/v1/rerank', body);
      return res.status === 503 ? res : undefined;
    }, 10_000);
    expect(refused.headers.get('retry-after')).toMatch(/^\d+$/);
    // (requests that came while the cached count was below the limit were still accepted)
    const m = /rerank queue has (\d+) jobs waiting, over MAX_QUEUE_BACKLOG \(2\)/.exec(refused.body.message);
    expect(m).not.toBeNull();
    expect(Number(m![1])).toBeGreaterThanOrEqual(3);
    // the refused request added nothing
    expect(await server.rt.queues.get(QueueName.rerank).getJobCounts('wait')).toEqual({ wait: Number(m![1]) });
    // a different queue (encode) is not refused
    expect((await api('POST', '/v1/collections/c/documents', [{ id: 'd', text: 'wing' }])).status).toBe(202);
  });
});
