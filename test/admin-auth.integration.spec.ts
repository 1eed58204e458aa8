import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ALL_QUEUES, ConfigError, loadConfig } from '@lateral/shared';
import { startServer, type Server } from '../apps/all-in-one/src/server';
import { http, testConfig } from './helpers';

const TOKEN = randomBytes(24).toString('base64url');
/** Strings only the dashboard page, its script or the queue board contain (never the login form). */
const PAGE_MARKERS = ['data-testid="queues"', 'dashboard.js', 'renderQueues', 'bull-board'];
const OPERATOR_GETS = ['/dashboard', '/dashboard/assets/dashboard.js', '/dashboard/assets/chart.umd.min.js', '/admin/queues', '/admin/queues/api/queues', '/v1/admin/overview'];

async function raw(base: string, method: string, url: string, headers: Record<string, string> = {}, body?: string) {
  const res = await fetch(base + url, { method, headers, body, redirect: 'manual' });
  return { status: res.status, headers: res.headers, text: await res.text() };
}

describe('operator auth (ADMIN_TOKEN set)', () => {
  let server: Server;
  beforeAll(async () => {
    server = await startServer(testConfig({ ADMIN_TOKEN: TOKEN }), { quiet: true, queues: [] });
  });
  afterAll(async () => {
    await server?.stop();
  });

  it('401 on every operator path without the credential, or with a wrong one, and nothing of the pages leaks', async () => {
    for (const url of [...OPERATOR_GETS, '/admin/queues/']) {
      const attempts: Record<string, string>[] = [{}, { authorization: `Bearer ${TOKEN}x` }, { authorization: 'Basic abc' }, { cookie: 'lateral_admin=forged' }, { accept: 'text/html' }];
      for (const headers of attempts) {
        const res = await raw(server.url, 'GET', url, headers);
        expect(res.status, `${url} ${JSON.stringify(headers)}`).toBe(401);
        for (const m of PAGE_MARKERS) expect(res.text, `${url} leaks ${m}`).not.toContain(m);
      }
    }
    const retry = await raw(server.url, 'POST', '/v1/admin/jobs/encode/some-job/retry');
    expect(retry.status).toBe(401);
    expect(JSON.parse(retry.text)).toMatchObject({ error: 'unauthorized' });
    expect(retry.headers.get('www-authenticate')).toMatch(/^Bearer/);
  });

  it('a browser without a session gets the login form (401), not the dashboard', async () => {
    const res = await raw(server.url, 'GET', '/dashboard', { accept: 'text/html' });
    expect(res.status).toBe(401);
    expect(res.text).toContain('name="token"');
    expect(res.text).toContain('action="/dashboard/login"');
  });

  it('the bearer token opens every operator path', async () => {
    const auth = { authorization: `Bearer ${TOKEN}` };
    for (const url of OPERATOR_GETS) expect((await raw(server.url, 'GET', url, auth)).status, url).toBe(200);
    const page = await raw(server.url, 'GET', '/dashboard', auth);
    expect(page.text).toContain('data-testid="queues"');
    expect(page.headers.get('content-security-policy')).toContain("default-src 'self'");
    // the queue board's page asks nothing off the machine (bull-board links a web font stylesheet; removed)
    const boardPage = await raw(server.url, 'GET', '/admin/queues', auth);
    expect(boardPage.text).toContain('<html');
    expect(boardPage.text).not.toMatch(/(href|src)="https?:\/\//);
    const board = await raw(server.url, 'GET', '/admin/queues/api/queues', auth);
    const names = (JSON.parse(board.text) as { queues: { name: string }[] }).queues.map((q) => q.name).sort();
    expect(names).toEqual([...ALL_QUEUES].sort());
    const overview = await http(server.url, 'GET', '/v1/admin/overview', undefined, auth);
    expect(overview.body.queues.map((q: { name: string }) => q.name).sort()).toEqual(names);
  });

  it('login sets an HttpOnly SameSite=Strict session cookie that is not the token; logout clears it', async () => {
    const wrong = await raw(server.url, 'POST', '/dashboard/login', { 'content-type': 'application/x-www-form-urlencoded' }, `token=${TOKEN}x`);
    expect(wrong.status).toBe(401);
    expect(wrong.headers.get('set-cookie')).toBeNull();
    expect(wrong.text).toContain('wrong token');
    const ok = await raw(server.url, 'POST', '/dashboard/login', { 'content-type': 'application/x-www-form-urlencoded' }, `token=${encodeURIComponent(TOKEN)}`);
    expect(ok.status).toBe(303);
    expect(ok.headers.get('location')).toBe('/dashboard');
    const setCookie = ok.headers.get('set-cookie')!;
    expect(setCookie).toMatch(/HttpOnly/);
    expect(setCookie).toMatch(/SameSite=Strict/);
    expect(setCookie).not.toContain(TOKEN);
    const cookie = setCookie.split(';')[0];
    expect((await raw(server.url, 'GET', '/dashboard', { cookie })).status).toBe(200);
    expect((await raw(server.url, 'GET', '/v1/admin/overview', { cookie })).status).toBe(200);
    const out = await raw(server.url, 'POST', '/dashboard/logout', { cookie });
    expect(out.status).toBe(303);
    expect(out.headers.get('set-cookie')).toMatch(/Max-Age=0/);
  });

  it('retry: 400 naming the queue, 404 for an unknown job', async () => {
    const auth = { authorization: `Bearer ${TOKEN}` };
    const bad = await http(server.url, 'POST', '/v1/admin/jobs/nope/j1/retry', undefined, auth);
    expect(bad.status).toBe(400);
    expect(bad.body.details[0].field).toBe('path.queue');
    const missing = await http(server.url, 'POST', '/v1/admin/jobs/rerank/default~rerank~rr-none/retry', undefined, auth);
    expect(missing.status).toBe(404);
    expect(missing.body.message).toMatch(/not found in queue rerank/);
  });

  it('the OpenAPI document describes the operations endpoints and their credential', async () => {
    const doc = (await http(server.url, 'GET', '/openapi.json')).body;
    const overview = doc.paths['/v1/admin/overview'].get;
    const retry = doc.paths['/v1/admin/jobs/{queue}/{jobId}/retry'].post;
    expect(overview.security).toEqual(expect.arrayContaining([{ adminToken: [] }, { adminSession: [] }]));
    expect(Object.keys(overview.responses)).toEqual(expect.arrayContaining(['200', '401', '403']));
    expect(Object.keys(retry.responses)).toEqual(expect.arrayContaining(['202', '400', '404', '409', '401']));
    expect(doc.components.securitySchemes.adminToken).toMatchObject({ type: 'http', scheme: 'bearer' });
  });

  it('the other endpoints need no operator credential', async () => {
    expect((await http(server.url, 'GET', '/v1/health')).status).toBeLessThan(600);
    expect((await http(server.url, 'GET', '/v1/collections')).status).toBe(200);
  });
});

describe('operator endpoints without ADMIN_TOKEN', () => {
  let server: Server;
  beforeAll(async () => {
    server = await startServer(testConfig(), { quiet: true, queues: [] });
  });
  afterAll(async () => {
    await server?.stop();
  });

  it('are disabled (403 saying how to enable them), whatever is presented', async () => {
    for (const url of OPERATOR_GETS) {
      const res = await raw(server.url, 'GET', url, { authorization: 'Bearer anything-at-all-here' });
      expect(res.status, url).toBe(403);
      expect(res.text).toContain('ADMIN_TOKEN');
      for (const m of PAGE_MARKERS) expect(res.text).not.toContain(m);
    }
    const json = await http(server.url, 'GET', '/v1/admin/overview');
    expect(json.body.error).toBe('admin_disabled');
  });

  it('a short ADMIN_TOKEN stops the process at start-up, naming the variable', () => {
    expect(() => loadConfig({ ADMIN_TOKEN: 'short' })).toThrow(ConfigError);
    expect(() => loadConfig({ ADMIN_TOKEN: 'short' })).toThrow(/ADMIN_TOKEN/);
  });
});

describe('operator auth beside API keys (AUTH=keys)', () => {
  let server: Server;
  beforeAll(async () => {
    server = await startServer(testConfig({ ADMIN_TOKEN: TOKEN, AUTH: 'keys' }), { quiet: true, queues: [] });
  });
  afterAll(async () => {
    await server?.stop();
  });

  it('ADMIN_TOKEN opens the operator paths, which need no API key; it is not an API key elsewhere', async () => {
    const auth = { authorization: `Bearer ${TOKEN}` };
    for (const url of OPERATOR_GETS) expect((await raw(server.url, 'GET', url, auth)).status, url).toBe(200);
    for (const url of OPERATOR_GETS) expect((await raw(server.url, 'GET', url)).status, url).toBe(401);
    expect((await http(server.url, 'GET', '/v1/collections', undefined, auth)).status).toBe(401);
  });
});
