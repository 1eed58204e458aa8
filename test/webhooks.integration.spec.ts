import { createServer, type IncomingHttpHeaders, type Server as HttpServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { lookup as dnsLookup } from 'node:dns/promises';
import { hostname } from 'node:os';
import Ajv from 'ajv';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PermanentJobError, QueueName, WebhookEventSchema, jobIds, specialAddress, verifyWebhookSignature, type WebhookEvent } from '@lateral/shared';
import { WebhookRetryableError, deliverWebhook, settledJob, webhookEventFor } from '@lateral/infra';
import { startServer, type Server } from '../apps/all-in-one/src/server';
import { http, testConfig, until } from './helpers';

/**
 * Webhooks (docs/webhooks.md) through HTTP, queues, S3 and the workers: a search or re-rank with
 * a `callback` gets one signed POST when it finishes, a failed one a POST with its error, a
 * receiver answering 5xx is retried with backoff, and URLs outside WEBHOOK_ALLOWED_HOSTS (or
 * special addresses a wildcard would match) are refused. The receiver is a local HTTP server on
 * 127.0.0.1, which the allow-list names explicitly (loopback is otherwise refused).
 */
describe('webhooks (real Redis, real S3 server, local receiver)', () => {
  const SECRET = 'test-webhook-secret-0123456789';
  const ADMIN = 'admin-token-for-the-webhooks-test';
  // Requests to /slow are held open (a receiver that never answers) and answered when the suite ends.
  const held: import('node:http').ServerResponse[] = [];
  let server: Server;
  let receiver: HttpServer;
  let base = '';
  type Received = { path: string; headers: IncomingHttpHeaders; body: string; answered: number; at: number };
  const received: Received[] = [];
  const flakyAnswers = [500, 500, 200];
  // Every job gets one attempt (the failed search fails at once); webhook deliveries get three, 50 ms apart and doubling.
  const config = testConfig({
    JOB_ATTEMPTS: '1',
    WEBHOOK_ALLOWED_HOSTS: '127.0.0.1',
    WEBHOOK_SECRET: SECRET,
    WEBHOOK_ATTEMPTS: '3',
    WEBHOOK_BACKOFF_MS: '50',
    WEBHOOK_TIMEOUT_MS: '2000',
    ADMIN_TOKEN: ADMIN,
  });
  const docs = Array.from({ length: 12 }, (_, i) => ({ id: `d${i}`, text: `document ${i} about ${i % 2 ? 'aircraft wings and lift' : 'heat transfer in fluids'} number ${i}` }));

  beforeAll(async () => {
    receiver = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        const path = req.url ?? '';
        let answered = 200;
        if (path === '/flaky') answered = flakyAnswers[received.filter((r) => r.path === '/flaky').length] ?? 200;
        if (path === '/down') answered = 500;
        // busy once (503 + Retry-After: 3), then fine; /busy-long asks for two hours
        const busy = (path === '/busy' && received.every((r) => r.path !== '/busy')) || path === '/busy-long';
        if (busy) {
          answered = 503;
          res.setHeader('Retry-After', path === '/busy' ? '3' : '7200');
        }
        if (path === '/slow') {
          received.push({ path, headers: req.headers, body: Buffer.concat(chunks).toString('utf8'), answered: 0, at: Date.now() });
          held.push(res);
          return;
        }
        received.push({ path, headers: req.headers, body: Buffer.concat(chunks).toString('utf8'), answered, at: Date.now() });
        res.statusCode = answered;
        res.end('ok');
      });
    });
    await new Promise<void>((r) => receiver.listen(0, '127.0.0.1', r));
    base = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}`;
    server = await startServer(config, { quiet: true });
    await api('POST', '/v1/collections', { id: 'hooks' });
    const ing = await api('POST', '/v1/collections/hooks/documents', docs);
    await until(async () => (await api('GET', ing.body.status)).body.state === 'done', 120_000);
  }, 180_000);
  afterAll(async () => {
    for (const res of held) res.end();
    await server?.stop();
    await new Promise((r) => receiver?.close(r));
  });
  const api = (method: string, url: string, body?: unknown) => http(server.url, method, url, body);
  const at = (path: string) => received.filter((r) => r.path === path);
  const verified = (r: Received): WebhookEvent => {
    expect(r.headers['content-type']).toBe('application/json');
    const sig = String(r.headers['x-lateral-signature']);
    expect(sig).toMatch(/^t=\d+,v1=[0-9a-f]{64}$/);
    expect(verifyWebhookSignature(SECRET, r.body, sig)).toBe(true);
    // A different secret, or a changed body, does not verify.
    expect(verifyWebhookSignature('another-secret', r.body, sig)).toBe(false);
    expect(verifyWebhookSignature(SECRET, `${r.body} `, sig)).toBe(false);
    return WebhookEventSchema.parse(JSON.parse(r.body));
  };

  it('a completed search delivers one signed POST with its counts and location', async () => {
    const r = await api('POST', '/v1/search?wait=60', { collection: 'hooks', queries: [{ id: 'q1', text: 'aircraft lift' }, { id: 'q2', text: 'heat' }], topK: 3, callback: `${base}/search` });
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    expect(r.body.status).toBe('completed');
    const id = r.body.id as string;
    await until(async () => at('/search').length >= 1, 30_000);
    const event = verified(at('/search')[0]!);
    const hits = (r.body.result.results as { hits: unknown[] }[]).reduce((s, q) => s + q.hits.length, 0);
    expect(event).toMatchObject({ event: 'search.completed', id, kind: 'search', status: 'completed', collection: 'hooks', location: `/v1/search/${id}`, error: null, counts: { queries: 2, hits } });
    expect(event.counts).toEqual(r.body.stats);
    const loc = await api('GET', event.location);
    expect(loc.status).toBe(200);
    expect(loc.body.status).toBe('completed');
    // One delivery: the webhook job completed on its first attempt.
    const job = await server.runtime.queues.get(QueueName.webhook).getJob(`${config.DEFAULT_TENANT}~search~${id}~completed`);
    expect(job?.attemptsMade).toBe(1);
    expect(await job?.getState()).toBe('completed');
    expect(at('/search')).toHaveLength(1);
  });

  it('the OpenAPI document declares `callback` on both requests, the WebhookEvent component (the delivered body matches it) and the signature', async () => {
    const doc = (await api('GET', '/openapi.json')).body;
    // A body whose rules span fields is stated as alternatives (anyOf of closed objects): each one takes `callback`.
    for (const p of ['/v1/search', '/v1/rerank']) {
      const schema = doc.paths[p].post.requestBody.content['application/json'].schema;
      for (const form of schema.anyOf ?? [schema]) expect(form.properties.callback.description).toContain('WEBHOOK_ALLOWED_HOSTS');
    }
    expect(doc.webhooks.jobFinished.post.requestBody.content['application/json'].schema).toEqual({ $ref: '#/components/schemas/WebhookEvent' });
    expect(doc.components.schemas.WebhookEvent.description).toContain('HMAC-SHA256');
    const ajv = new Ajv({ allErrors: true, unknownFormats: 'ignore', schemaId: 'auto' });
    const validate = ajv.compile({ allOf: [{ $ref: '#/components/schemas/WebhookEvent' }], components: doc.components });
    expect(received.length).toBeGreaterThan(0);
    for (const r of received) expect(validate(JSON.parse(r.body)), ajv.errorsText(validate.errors)).toBe(true);
    expect(validate({ ...JSON.parse(received[0]!.body), status: 'maybe' })).toBe(false);
  });

  it('a completed re-rank delivers one signed POST with its counts and location', async () => {
    const r = await api('POST', '/v1/rerank?wait=60', { collection: 'hooks', queries: [{ id: 'q', text: 'heat transfer', candidates: ['d0', 'd1', 'd2', 'nope'] }], callback: `${base}/rerank` });
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    expect(r.body.status).toBe('completed');
    const id = r.body.id as string;
    await until(async () => at('/rerank').length >= 1, 30_000);
    const event = verified(at('/rerank')[0]!);
    expect(event).toMatchObject({ event: 'rerank.completed', id, kind: 'rerank', status: 'completed', location: `/v1/rerank/${id}`, error: null });
    // The counts are the job's own, as GET /v1/rerank/{id} reports them (one of the four ids is not in the collection).
    expect(event.counts).toEqual(r.body.stats);
    expect(event.counts).toMatchObject({ queries: 1, missing: 1 });
    expect((await api('GET', event.location)).body.status).toBe('completed');
    expect(at('/rerank')).toHaveLength(1);
  });

  it('a re-rank of text candidates (a flow: encode-texts, then the re-rank) delivers its callback too', async () => {
    const r = await api('POST', '/v1/rerank?wait=60', { model: config.DEFAULT_MODEL, queries: [{ id: 'q', text: 'heat transfer', candidates: [{ text: 'heat moves through fluids' }, { text: 'wings make lift' }] }], callback: `${base}/texts` });
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    expect(r.body.status).toBe('completed');
    await until(async () => at('/texts').length >= 1, 30_000);
    const event = verified(at('/texts')[0]!);
    expect(event).toMatchObject({ event: 'rerank.completed', id: r.body.id, collection: null, location: `/v1/rerank/${r.body.id}`, error: null });
    expect(event.counts).toEqual(r.body.stats);
  });

  it('a failed search delivers status failed with its error', async () => {
    // Made to fail on purpose: a search job whose request is not in S3 (PermanentJobError, no retry).
    const id = 'sr-webhook-fails';
    const requestKey = `tenants/${config.DEFAULT_TENANT}/search/${id}/request.json`;
    await server.runtime.queues.add(QueueName.search, jobIds.search(config.DEFAULT_TENANT, id), { tenantId: config.DEFAULT_TENANT, collectionId: 'hooks', searchId: id, requestKey, callback: `${base}/failed` });
    await until(async () => at('/failed').length >= 1, 30_000);
    const event = verified(at('/failed')[0]!);
    expect(event).toMatchObject({ event: 'search.failed', id, kind: 'search', status: 'failed', collection: 'hooks', location: `/v1/search/${id}`, counts: {} });
    expect(event.error).toContain(`search request missing from S3: ${requestKey}`);
  });

  it('a receiver answering 500 twice then 200 gets three attempts, each signed, then the delivery completes', async () => {
    const r = await api('POST', '/v1/search?wait=60', { collection: 'hooks', queries: [{ id: 'q', text: 'fluids' }], callback: `${base}/flaky` });
    expect(r.body.status).toBe('completed');
    const job = await settledJob(server.runtime.queues.get(QueueName.webhook), `${config.DEFAULT_TENANT}~search~${r.body.id}~completed`, 30_000);
    expect(await job.getState()).toBe('completed');
    expect(at('/flaky').map((x) => x.answered)).toEqual([500, 500, 200]);
    expect(job.attemptsMade).toBe(3);
    expect(job.returnvalue).toMatchObject({ status: 200, host: new URL(base).host, address: '127.0.0.1' });
    const bodies = at('/flaky').map((x) => verified(x));
    expect(new Set(bodies.map((b) => JSON.stringify(b))).size).toBe(1);
  });

  it('a receiver answering 503 with Retry-After: 3 is tried again after those 3 s, not after WEBHOOK_BACKOFF_MS; one asking for hours is not retried', async () => {
    const r = await api('POST', '/v1/search?wait=60', { collection: 'hooks', queries: [{ id: 'q', text: 'lift' }], callback: `${base}/busy` });
    expect(r.body.status).toBe('completed');
    const job = await settledJob(server.runtime.queues.get(QueueName.webhook), `${config.DEFAULT_TENANT}~search~${r.body.id}~completed`, 30_000);
    expect(await job.getState()).toBe('completed');
    const tries = at('/busy');
    expect(tries.map((x) => x.answered)).toEqual([503, 200]);
    expect(job.attemptsMade).toBe(2);
    // WEBHOOK_BACKOFF_MS is 50 here (a retry after a 500 comes about 1 s later, BullMQ's delayed-job
    // promotion included): this one waited for the receiver's 3 s
    expect(tries[1]!.at - tries[0]!.at).toBeGreaterThanOrEqual(2950);

    const event = webhookEventFor('rerank', { tenantId: 't', rerankId: 'rr-busy' }, { counts: { queries: 1, candidates: 1, missing: 0 } });
    const settings = { WEBHOOK_ALLOWED_HOSTS: '127.0.0.1', WEBHOOK_SECRET: SECRET, WEBHOOK_TIMEOUT_MS: 1000, WEBHOOK_ATTEMPTS: 3, WEBHOOK_BACKOFF_MS: 50 };
    const err = await deliverWebhook(settings, { tenantId: 't', url: `${base}/busy-long`, body: event }).then(() => null, (e: Error) => e);
    expect(err).toBeInstanceOf(PermanentJobError);
    expect(err!.message).toBe(`webhook to ${new URL(base).host} answered HTTP 503 with Retry-After 7200 s, over the 3600 s a delivery waits: not retried`);
  });

  it('a receiver that keeps answering 500 is tried WEBHOOK_ATTEMPTS times, then the job fails naming the host and status', async () => {
    const r = await api('POST', '/v1/search?wait=60', { collection: 'hooks', queries: [{ id: 'q', text: 'wings' }], callback: `${base}/down` });
    expect(r.body.status).toBe('completed');
    const job = await settledJob(server.runtime.queues.get(QueueName.webhook), `${config.DEFAULT_TENANT}~search~${r.body.id}~completed`, 30_000);
    expect(await job.getState()).toBe('failed');
    expect(at('/down')).toHaveLength(3);
    expect(job.failedReason).toBe(`webhook to ${new URL(base).host} answered HTTP 500`);
    // The search itself stays completed: the slow or failing receiver never touched it.
    expect((await api('GET', `/v1/search/${r.body.id}`)).body.status).toBe('completed');
    // The failed delivery is on the dashboard's failed-job list (GET /v1/admin/overview), with its message.
    const overview = await http(server.url, 'GET', '/v1/admin/overview', undefined, { authorization: `Bearer ${ADMIN}` });
    expect(overview.status).toBe(200);
    const listed = (overview.body.failedJobs as { queue: string; id: string; failedReason: string }[]).find((f) => f.id === job.id);
    expect(listed).toMatchObject({ queue: 'webhook', failedReason: `webhook to ${new URL(base).host} answered HTTP 500` });
  });

  it('a receiver that does not answer within WEBHOOK_TIMEOUT_MS: a retryable failure naming the host and the setting', async () => {
    const event = webhookEventFor('rerank', { tenantId: 't', rerankId: 'rr-slow' }, { counts: { queries: 1, candidates: 1, missing: 0 } });
    const settings = { WEBHOOK_ALLOWED_HOSTS: '127.0.0.1', WEBHOOK_SECRET: SECRET, WEBHOOK_TIMEOUT_MS: 300, WEBHOOK_ATTEMPTS: 1, WEBHOOK_BACKOFF_MS: 1 };
    const err = await deliverWebhook(settings, { tenantId: 't', url: `${base}/slow`, body: event }).then(() => null, (e: Error) => e);
    expect(err).toBeInstanceOf(WebhookRetryableError);
    expect(err!.message).toBe(`webhook to ${new URL(base).host}: no answer within 300 ms (WEBHOOK_TIMEOUT_MS)`);
    expect(at('/slow')).toHaveLength(1);
  });

  it('a callback outside WEBHOOK_ALLOWED_HOSTS -> 400 naming callback (search and re-rank), nothing queued', async () => {
    for (const callback of ['https://example.com/hook', 'http://localhost:9/hook', 'http://169.254.169.254/latest/meta-data', 'http://[fe80::1]/hook', 'ftp://127.0.0.1/x', 'not a url']) {
      const s = await api('POST', '/v1/search', { collection: 'hooks', queries: [{ id: 'q', text: 'x' }], callback });
      expect(s.status, `${callback}: ${JSON.stringify(s.body)}`).toBe(400);
      expect(JSON.stringify(s.body)).toContain('callback');
      const rr = await api('POST', '/v1/rerank', { collection: 'hooks', queries: [{ id: 'q', text: 'x', candidates: ['d0'] }], callback });
      expect(rr.status, `${callback}: ${JSON.stringify(rr.body)}`).toBe(400);
      expect(JSON.stringify(rr.body)).toContain('callback');
    }
    const s = await api('POST', '/v1/search', { collection: 'hooks', queries: [{ id: 'q', text: 'x' }], callback: 'https://example.com/hook' });
    expect(JSON.stringify(s.body)).toContain('WEBHOOK_ALLOWED_HOSTS');
  });

  it('an allowed name that resolves to a loopback address at delivery is refused (DNS rebinding, internal names)', async (ctx) => {
    // This machine's host name: an ordinary name, listed explicitly; where /etc/hosts maps it to loopback it must be refused.
    const name = hostname().toLowerCase();
    const addrs = await dnsLookup(name, { all: true }).catch(() => []);
    if (specialAddress(name) || !addrs.some((a) => specialAddress(a.address) === 'loopback')) {
      console.log(`skipped: host name ${name} does not resolve to a loopback address here (${addrs.map((a) => a.address).join(', ') || 'unresolved'})`);
      ctx.skip();
    }
    const event = webhookEventFor('search', { tenantId: 't', searchId: 'sr-rebind' }, { counts: {} });
    const settings = { WEBHOOK_ALLOWED_HOSTS: name, WEBHOOK_SECRET: SECRET, WEBHOOK_TIMEOUT_MS: 1000, WEBHOOK_ATTEMPTS: 1, WEBHOOK_BACKOFF_MS: 1 };
    await expect(deliverWebhook(settings, { tenantId: 't', url: `http://${name}:${new URL(base).port}/rebind`, body: event })).rejects.toThrow(`refused: ${name} resolves to`);
    expect(at('/rebind')).toHaveLength(0);
  });

  it('the worker re-checks at delivery: a wildcard never reaches loopback, link-local or metadata addresses', async () => {
    const event = webhookEventFor('search', { tenantId: 't', collectionId: 'c', searchId: 'sr-x' }, { counts: { queries: 1, hits: 1 } });
    const settings = { WEBHOOK_ALLOWED_HOSTS: '*', WEBHOOK_SECRET: SECRET, WEBHOOK_TIMEOUT_MS: 1000, WEBHOOK_ATTEMPTS: 1, WEBHOOK_BACKOFF_MS: 1 };
    const before = received.length;
    for (const url of [`${base}/wild`, `http://localhost:${new URL(base).port}/wild`, 'http://169.254.169.254/latest', 'http://[::ffff:169.254.169.254]/x', 'http://metadata.google.internal/x', 'http://[fe80::1]/x']) {
      await expect(deliverWebhook(settings, { tenantId: 't', url, body: event }), url).rejects.toThrow(/refused: .*(loopback|link-local|metadata)/);
    }
    expect(received.length).toBe(before);
    // Named explicitly, `localhost` is resolved at delivery (the connection's own lookup) and called.
    const ok = await deliverWebhook({ ...settings, WEBHOOK_ALLOWED_HOSTS: 'localhost' }, { tenantId: 't', url: `http://localhost:${new URL(base).port}/named`, body: event });
    expect(ok).toMatchObject({ status: 200, host: `localhost:${new URL(base).port}` });
    expect(specialAddress(ok.address)).toBe('loopback');
    expect(at('/named')).toHaveLength(1);
    // Webhooks disabled: an empty allow-list refuses everything, even an explicitly allowed receiver's address.
    await expect(deliverWebhook({ ...settings, WEBHOOK_ALLOWED_HOSTS: '' }, { tenantId: 't', url: `${base}/wild`, body: event })).rejects.toThrow(/WEBHOOK_ALLOWED_HOSTS is empty/);
  });
});
