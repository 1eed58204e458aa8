import { mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import { gzipSync } from 'node:zlib';
import path from 'node:path';
import { GetObjectCommand, ListObjectsV2Command, S3Client } from '@aws-sdk/client-s3';
import { ValidationError, mulberry32 } from '@lateral/shared';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openApiDocument } from '@lateral/http-api';
import { startApiOnly } from './api-only';
import { testConfig } from './helpers';

/**
 * Fuzz (issue 12 item 5): thousands of malformed, oversized, deeply nested, wrongly typed and
 * non-UTF-8 requests, with path traversal and control characters in ids, to every route the API
 * has: the routes are read from the running app's router and from the OpenAPI document, so
 * endpoints added later are fuzzed without touching this file. Nothing may answer 5xx (a 503 with
 * Retry-After from back-pressure or a saturated body reader would be allowed, and is counted), the
 * process must keep answering, its memory must stay bounded, and no answer may show a stack trace,
 * an absolute path, the bucket, a key or an endpoint.
 */

/** Deterministic pseudo-random numbers (mulberry32), so a failure can be replayed. */
const rng = mulberry32;

const FIELDS = ['id', 'text', 'metadata', 'documents', 'collection', 'queries', 'candidates', 'scorer', 'name', 'mode', 'topK', 'filter', 'must', 'should', 'key', 'match', 'range', 'codec', 'kind', 'bits', 'dims', 'model', 'maxDocTokens', 'wait', 'rerank', 'depth', 'explain', 'include', 'score', 'artifact', 'lambda', 'kPrime', 'nprobe', '__proto__', 'constructor', 'role', 'tenant', 'limit', 'cursor'];

function randomValue(r: () => number, depth = 0): unknown {
  const pick = r();
  if (depth > 6 || pick < 0.25) {
    const scalars: unknown[] = [null, true, false, 0, -1, 1e308, -0, 3.5, 2 ** 53 + 1, '', 'x', 'a'.repeat(1 + Math.floor(r() * 300)), '\u0000', '../../etc/passwd', '%00', '\ud800', 'π', 'maxsim', 'xtr', 'fp16', 'c'];
    return scalars[Math.floor(r() * scalars.length)];
  }
  if (pick < 0.55) return Array.from({ length: Math.floor(r() * 5) }, () => randomValue(r, depth + 1));
  const o: Record<string, unknown> = {};
  for (let i = Math.floor(r() * 5); i > 0; i--) o[FIELDS[Math.floor(r() * FIELDS.length)]] = randomValue(r, depth + 1);
  return o;
}

const BAD_IDS = [
  'x%2F..%2F..%2F..%2Fdefault%2Fcollections%2Fc',
  '..%2F..%2Fx',
  'a%00b',
  '%00',
  'a%0Ab',
  '%1B%5B31m',
  '%7F',
  'x'.repeat(10_000),
  '%E2%80%AE',
  '%F0%9F%92%A9',
  '%FF%FE',
  '%E0%A4%A',
  '%',
  'a%20b',
  '-leading-dash',
  'c',
  'rr-00000000-0000-0000-0000-000000000000',
  'ing-x',
];

const MALFORMED = [
  '',
  '{',
  '[',
  '{"id":',
  '{"id": "x",}',
  'null',
  'true',
  '0',
  '"string"',
  '[]',
  '{}',
  '{"__proto__": {"polluted": 1}}',
  '\u0000\u0001\u0002',
  '<?xml version="1.0"?><a/>',
  '--boundary\r\nContent-Disposition: form-data; name="a"\r\n\r\nb\r\n--boundary--',
  'id=x&text=y',
  '{"id":"x"}\n{"id":',
  '{"a":"\\ud800"}',
  '{"a":1e999}',
  '[' + '1,'.repeat(10_000) + '1]',
  '['.repeat(10_000) + ']'.repeat(10_000),
  '{"a":'.repeat(5_000) + '1' + '}'.repeat(5_000),
  '['.repeat(100_000),
];

interface Route {
  method: string;
  path: string;
}

/** Routes from the app's Express router and from the OpenAPI document, as `:param` templates. */
function routes(app: { getHttpAdapter(): { getInstance(): unknown } }): Route[] {
  const out = new Map<string, Route>();
  const add = (method: string, p: string) => out.set(`${method} ${p}`, { method: method.toUpperCase(), path: p });
  const express = app.getHttpAdapter().getInstance() as { router?: { stack: unknown[] }; _router?: { stack: unknown[] } };
  const stack = (express.router ?? express._router)?.stack ?? [];
  for (const layer of stack as { route?: { path: string; methods: Record<string, boolean> } }[]) {
    if (!layer.route || typeof layer.route.path !== 'string') continue;
    for (const [m, on] of Object.entries(layer.route.methods)) if (on && m !== '_all') add(m, layer.route.path);
  }
  for (const [p, ops] of Object.entries(openApiDocument('fuzz').paths as Record<string, Record<string, unknown>>)) {
    for (const m of Object.keys(ops)) if (['get', 'post', 'put', 'patch', 'delete'].includes(m)) add(m, p.replace(/\{(\w+)\}/g, ':$1'));
  }
  return [...out.values()].filter((r) => !r.path.startsWith('/docs'));
}

describe('fuzz: every route, hostile requests', () => {
  const config = testConfig({ MAX_REQUEST_BYTES: String(2 << 20), RERANK_MAX_WAIT_SECONDS: '1', MAX_JSON_DEPTH: '64' });
  let server: Awaited<ReturnType<typeof startApiOnly>>;
  const leaks: string[] = [];

  beforeAll(async () => {
    server = await startApiOnly(config);
    await fetch(`${server.url}/v1/collections`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"id":"c"}' });
    leaks.push(process.cwd(), path.resolve(config.MODELS_DIR), path.resolve(config.SCORERS_DIR), path.resolve(config.DATA_DIR), config.S3_BUCKET, config.S3_ENDPOINT!, config.REDIS_URL!, 'tenants/', 'node_modules');
  });
  afterAll(async () => {
    await server?.stop();
  });

  it('answers thousands of hostile requests to every route with no 5xx, no leak, bounded memory', async () => {
    const all = routes(server.app);
    // the routes of this issue and of the ones before it are all found
    for (const expected of ['POST /v1/collections', 'GET /v1/collections/:id', 'POST /v1/collections/:id/documents', 'GET /v1/collections/:id/ingestions/:ingestionId', 'POST /v1/rerank', 'GET /v1/rerank/:id', 'POST /v1/search', 'GET /v1/search/:id']) {
      expect(all.map((r) => `${r.method} ${r.path}`)).toContain(expected);
    }
    const r = rng(12);
    const requests: { method: string; url: string; body?: Buffer | string; headers: Record<string, string> }[] = [];
    const fill = (p: string, i: number) => p.replace(/:(\w+)/g, () => BAD_IDS[(i + Math.floor(r() * BAD_IDS.length)) % BAD_IDS.length]);
    for (const route of all) {
      const hasBody = route.method !== 'GET' && route.method !== 'DELETE';
      // every bad id in every path parameter
      BAD_IDS.forEach((_, i) => requests.push({ method: route.method, url: fill(route.path, i), headers: {} }));
      // hostile query strings
      for (const q of ['wait=0x10', 'wait=true', 'wait=-1', 'wait[]=1', 'wait=1e3', 'wait=%00', 'limit=-1', 'cursor=%FF', 'x='.padEnd(5000, 'y')]) {
        requests.push({ method: route.method, url: `${fill(route.path, 15)}?${q}`, headers: {}, ...(hasBody ? { body: '{}' } : {}) });
      }
      if (!hasBody) continue;
      const url = () => fill(route.path, 15 + Math.floor(r() * 3));
      for (const body of MALFORMED) requests.push({ method: route.method, url: url(), body, headers: { 'content-type': 'application/json' } });
      for (const body of MALFORMED.slice(0, 12)) requests.push({ method: route.method, url: url(), body, headers: { 'content-type': 'application/x-ndjson' } });
      for (let i = 0; i < 120; i++) requests.push({ method: route.method, url: url(), body: JSON.stringify(randomValue(r)), headers: { 'content-type': 'application/json' } });
      for (const type of ['text/plain', 'application/xml', 'multipart/form-data; boundary=b', 'application/x-www-form-urlencoded', 'application/json; charset=latin1', 'image/png', ';;;', 'application/json; charset=']) {
        requests.push({ method: route.method, url: url(), body: '{"id":"x"}', headers: { 'content-type': type } });
      }
      for (const enc of ['gzip', 'deflate', 'br', 'zstd', 'gzip, gzip', 'identity', '\u00ff']) {
        requests.push({ method: route.method, url: url(), body: 'garbage, not compressed', headers: { 'content-type': 'application/json', 'content-encoding': enc.replace(/[^\x20-\x7e]/g, '?') } });
      }
      requests.push({ method: route.method, url: url(), body: gzipSync(Buffer.alloc(8 << 20, 0x20)), headers: { 'content-type': 'application/json', 'content-encoding': 'gzip' } }); // a decompression bomb
      requests.push({ method: route.method, url: url(), body: gzipSync('{"a":'.repeat(1000)), headers: { 'content-type': 'application/json', 'content-encoding': 'gzip' } });
      // non-UTF-8 bytes, and bodies over MAX_REQUEST_BYTES
      requests.push({ method: route.method, url: url(), body: Buffer.from([0x7b, 0x22, 0xc3, 0x28, 0x22, 0x3a, 0xff, 0xfe, 0x7d]), headers: { 'content-type': 'application/json' } });
      requests.push({ method: route.method, url: url(), body: Buffer.from(Array.from({ length: 4096 }, () => Math.floor(r() * 256))), headers: { 'content-type': 'application/json' } });
      requests.push({ method: route.method, url: url(), body: '[' + '"x",'.repeat(700_000) + '"x"]', headers: { 'content-type': 'application/json' } });
      requests.push({ method: route.method, url: url(), body: 'x'.repeat(3 << 20), headers: { 'content-type': 'application/json' } });
    }
    expect(requests.length).toBeGreaterThan(2000);

    const rssStart = process.memoryUsage().rss;
    let rssPeak = rssStart;
    const sampler = setInterval(() => (rssPeak = Math.max(rssPeak, process.memoryUsage().rss)), 25);
    const byClass: Record<string, number> = {};
    const fivexx: string[] = [];
    const leaked: string[] = [];
    let next = 0;
    const worker = async () => {
      while (next < requests.length) {
        const req = requests[next++];
        const res = await fetch(server.url + req.url, { method: req.method, headers: req.headers, body: req.body });
        const text = await res.text();
        const cls = `${Math.floor(res.status / 100)}xx`;
        byClass[cls] = (byClass[cls] ?? 0) + 1;
        if (res.status >= 500 && !(res.status === 503 && res.headers.get('retry-after'))) fivexx.push(`${req.method} ${req.url.slice(0, 120)} -> ${res.status} ${text.slice(0, 300)}`);
        const leak = leaks.find((l) => l && text.includes(l)) ?? (/\n\s+at |\bat \S+ \(\//.test(text) ? 'stack trace' : undefined);
        if (leak) leaked.push(`${req.method} ${req.url.slice(0, 120)} -> ${res.status}: shows ${leak}: ${text.slice(0, 300)}`);
      }
    };
    await Promise.all(Array.from({ length: 8 }, worker));
    clearInterval(sampler);
    const rssEnd = process.memoryUsage().rss;
    console.log(
      `fuzz: ${requests.length} requests over ${all.length} routes: ${JSON.stringify(byClass)}; RSS ${Math.round(rssStart / 2 ** 20)} MB -> peak ${Math.round(rssPeak / 2 ** 20)} MB -> end ${Math.round(rssEnd / 2 ** 20)} MB`,
    );
    expect(fivexx).toEqual([]);
    expect(leaked).toEqual([]);
    // still up and answering
    const health = await fetch(`${server.url}/v1/health`);
    expect(health.status).toBeLessThan(500);
    expect((await fetch(`${server.url}/v1/collections`)).status).toBe(200);
    // bounded: at most BODY_PARSE_CONCURRENCY (2) large bodies of MAX_REQUEST_BYTES (2 MiB) are held at once
    expect(rssPeak - rssStart).toBeLessThan(512 * 2 ** 20);
  });
});

/**
 * Regression tests for the black-box probe of issue 27 (item 1): with AUTH=keys and two tenants, a
 * batch input can name only an upload of the caller's own; every other key, whether an object is
 * there or not, gets one and the same 400 (no existence or size oracle); a NUL is a 400, not a 503;
 * model ids refuse `.` and `..`; the object store refuses unsafe keys before a request leaves the
 * process, and the embedded S3 server refuses them from any other client.
 */
describe('fuzz: object keys cannot escape the caller (AUTH=keys, two tenants)', () => {
  const ADMIN = 'bootstrap-admin-credential-of-the-fuzz-0123456789';
  const config = testConfig({ AUTH: 'keys', ADMIN_API_KEY: ADMIN, RATE_LIMIT_PER_SECOND: '1000', RATE_LIMIT_BURST: '1000' });
  let server: Awaited<ReturnType<typeof startApiOnly>>;
  const call = async (key: string, method: string, url: string, body?: string | object, type = 'application/json') => {
    const res = await fetch(server.url + url, { method, headers: { authorization: `Bearer ${key}`, ...(body !== undefined ? { 'content-type': type } : {}) }, body: typeof body === 'object' ? JSON.stringify(body) : body });
    const text = await res.text();
    return { status: res.status, text, body: text ? JSON.parse(text) : null };
  };
  const rows = (tag: string) => [0, 1].map((i) => JSON.stringify({ custom_id: `${tag}-${i}`, query: 'wing flutter', candidates: [{ text: `${tag} row ${i}` }] })).join('\n') + '\n';
  let alpha: string;
  let beta: string;
  let betaKeyId: string;
  let betaBatch: string;
  const outside = mkdtempSync(path.join(os.tmpdir(), 'lateral-outside-'));

  beforeAll(async () => {
    server = await startApiOnly(config);
    const key = async (tenant: string) => {
      const r = await call(ADMIN, 'POST', '/v1/admin/keys', { tenant, role: 'write' });
      expect(r.status, r.text).toBe(201);
      return r.body as { id: string; key: string };
    };
    alpha = (await key('alpha')).key;
    const b = await key('beta');
    beta = b.key;
    betaKeyId = b.id;
    expect((await call(beta, 'PUT', '/v1/uploads/rows.jsonl', rows('beta'), 'application/jsonl')).status).toBe(201);
    const created = await call(beta, 'POST', `/v1/batches?model=${config.DEFAULT_MODEL}`, rows('beta'), 'application/jsonl');
    expect(created.status, created.text).toBe(202);
    betaBatch = created.body.id;
    writeFileSync(path.join(outside, 'x.jsonl'), rows('host'));
  });
  afterAll(async () => {
    await server?.stop();
  });

  it("every probe of another tenant's or the host's objects gets the same 400, present or absent", async () => {
    const up = path.relative(path.join(config.DATA_DIR, 's3', config.S3_BUCKET, 'tenants', 'alpha'), outside);
    const probes = [
      `tenants/alpha/../beta/batches/${betaBatch}/input.jsonl`,
      `./tenants/beta/batches/${betaBatch}/input.jsonl`,
      `tenants/beta/batches/${betaBatch}/input.jsonl`,
      'tenants/beta/uploads/rows.jsonl',
      'tenants/alpha/../beta/uploads/rows.jsonl',
      `auth/keys/${betaKeyId}.json`,
      `tenants/alpha/${up}/x.jsonl`,
      `tenants/alpha/../../../../../../../../..${outside}/x.jsonl`,
      'tenants/beta/batches/batch-none/input.jsonl',
      'tenants/alpha/../beta/uploads/absent.jsonl',
      'auth/keys/absent.json',
      'rows.jsonl\u0000',
      '\u0000',
      'uploads/rows.jsonl',
      '../rows.jsonl',
      '.',
      '..',
    ];
    const answers = new Map<string, string[]>();
    for (const input of probes) {
      const r = await call(alpha, 'POST', '/v1/batches', { input });
      expect(r.status, `${JSON.stringify(input)} -> ${r.text}`).toBe(400);
      expect(r.body.details?.[0]?.field).toBe('input');
      answers.set(r.text, [...(answers.get(r.text) ?? []), input]);
    }
    // one answer for all of them: nothing tells "exists" from "absent", or "yours" from "not yours"
    expect([...answers.keys()], JSON.stringify([...answers.values()])).toHaveLength(1);
    expect([...answers.keys()][0]).not.toContain('tenants/');

    // alpha's own name resolves under alpha's prefix only: absent (404) until alpha uploads it
    const none = await call(alpha, 'POST', '/v1/batches', { input: 'rows.jsonl', model: config.DEFAULT_MODEL });
    expect(none.status).toBe(404);
    expect(none.body.message).toContain("no upload 'rows.jsonl'");
    expect((await call(alpha, 'PUT', '/v1/uploads/rows.jsonl', rows('alpha'), 'application/jsonl')).status).toBe(201);
    const mine = await call(alpha, 'POST', '/v1/batches', { input: 'rows.jsonl', model: config.DEFAULT_MODEL });
    expect(mine.status, mine.text).toBe(202);
    expect(mine.body.input.bytes).toBe(Buffer.byteLength(rows('alpha')));
    expect(await server.rt.store.get('tenants/alpha/uploads/rows.jsonl')).not.toBeNull();
    // an upload name is a resource id: a traversal in the path is a 400 naming it ('..' and '%2E%2E' alone are resolved by the client before anything is sent)
    for (const bad of ['a%2F..%2F..%2Fb', '.hidden', 'x%00']) {
      const r = await call(alpha, 'PUT', `/v1/uploads/${bad}`, rows('alpha'), 'application/jsonl');
      expect([400, 404], `${bad} -> ${r.status} ${r.text}`).toContain(r.status);
    }
    expect((await call(alpha, 'PUT', '/v1/uploads/notjsonl.txt', 'hello\nworld\n', 'application/jsonl')).status).toBe(400);
    expect((await call(alpha, 'PUT', '/v1/uploads/x.jsonl', rows('alpha'), 'text/plain')).status).toBe(415);
  });

  it("model ids refuse '.' and '..' on every route that takes one", async () => {
    for (const model of ['..', '.', '../models', 'a/b']) {
      const results = [
        await call(alpha, 'POST', '/v1/collections', { id: 'm1', model }),
        await call(alpha, 'POST', '/v1/rerank', { model, queries: [{ id: 'q', text: 'wing', candidates: [{ text: 'a' }] }] }),
        await call(alpha, 'POST', '/v1/compat/cohere/rerank', { model, query: 'wing', documents: ['a'] }),
        await call(alpha, 'POST', '/v1/batches', { input: 'rows.jsonl', model }),
        await call(alpha, 'POST', `/v1/batches?model=${encodeURIComponent(model)}`, rows('alpha'), 'application/jsonl'),
      ];
      for (const r of results) {
        expect(r.status, `${model}: ${r.text}`).toBe(400);
        expect(JSON.stringify(r.body.details ?? [])).toContain('model');
      }
    }
  });

  it('the object store refuses unsafe keys before sending them; the embedded S3 server refuses them from any client', async () => {
    for (const key of ['tenants/alpha/../beta/uploads/rows.jsonl', './x', '/etc/passwd', 'a\u0000b']) {
      await expect(server.rt.store.get(key)).rejects.toBeInstanceOf(ValidationError);
      await expect(server.rt.store.put(key, 'x')).rejects.toBeInstanceOf(ValidationError);
    }
    await expect(server.rt.store.list('tenants/../')).rejects.toBeInstanceOf(ValidationError);
    // a raw S3 client, without the service's guard, straight at the embedded server
    const raw = new S3Client({ endpoint: config.S3_ENDPOINT, region: config.S3_REGION, forcePathStyle: true, credentials: { accessKeyId: config.S3_ACCESS_KEY_ID, secretAccessKey: config.S3_SECRET_ACCESS_KEY } });
    try {
      for (const Key of ['tenants/alpha/../beta/uploads/rows.jsonl', `tenants/alpha/../../../../../../../../..${outside}/x.jsonl`]) {
        const err = await raw.send(new GetObjectCommand({ Bucket: config.S3_BUCKET, Key })).then(
          () => null,
          (e: unknown) => e as { name?: string; $metadata?: { httpStatusCode?: number } },
        );
        expect(err, Key).not.toBeNull();
        expect(err?.$metadata?.httpStatusCode, `${Key}: ${err?.name}`).toBe(400);
      }
      const list = await raw.send(new ListObjectsV2Command({ Bucket: config.S3_BUCKET, Prefix: 'tenants/alpha/../beta/' })).then(
        () => 200,
        (e: { $metadata?: { httpStatusCode?: number } }) => e.$metadata?.httpStatusCode,
      );
      expect(list).toBe(400);
      // the guard does not get in the way of ordinary keys
      expect((await raw.send(new GetObjectCommand({ Bucket: config.S3_BUCKET, Key: 'tenants/alpha/uploads/rows.jsonl' }))).$metadata.httpStatusCode).toBe(200);
    } finally {
      raw.destroy();
    }
  });
});
