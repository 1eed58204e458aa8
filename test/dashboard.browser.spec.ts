import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { chromium, type Browser, type Page } from 'playwright-core';
import { ALL_QUEUES, HEARTBEAT_STALE_MS, heartbeatFields, heartbeatKeys } from '@lateral/shared';
import { startServer, type Server } from '../apps/all-in-one/src/server';
import { http, testConfig, until } from './helpers';

const CHROMIUM = '/usr/bin/chromium';
/** Generous: the whole suite shares two cores with this test's server, workers and browser. */
const TEST_TIMEOUT_MS = 180_000;
export const SCREENSHOT = path.resolve('.cache/dashboard.png');

/**
 * Debian's chromium, driven by playwright-core (which downloads no browser). Installed here when
 * missing, as .ci/run installs redis-server; the test is skipped, saying why, only when that fails.
 */
function ensureChromium(): { ok: true } | { ok: false; reason: string } {
  if (existsSync(CHROMIUM)) return { ok: true };
  if (process.getuid?.() !== 0) return { ok: false, reason: `${CHROMIUM} is missing and this user is not root (install it with: apt-get install chromium)` };
  console.log(`dashboard browser test: ${CHROMIUM} is missing; installing Debian's chromium package (apt-get install chromium)`);
  const r = spawnSync('bash', ['-c', 'apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium'], { stdio: ['ignore', 'ignore', 'pipe'], timeout: 900_000 });
  if (existsSync(CHROMIUM)) return { ok: true };
  return { ok: false, reason: `apt-get install chromium failed (exit ${r.status}): ${String(r.stderr ?? '').slice(-400)}` };
}

const browserReady = ensureChromium();
if (!browserReady.ok) console.warn(`SKIPPED dashboard browser test: ${browserReady.reason}`);

const TOKEN = randomBytes(24).toString('base64url');
const LATE = 'gpu-node-1-late';
const AUTH = { authorization: `Bearer ${TOKEN}` };
const DOCS = Array.from({ length: 40 }, (_, i) => ({
  id: `d${i}`,
  text: ['supersonic wing flutter', 'laminar boundary layer heat transfer', 'shock wave interaction', 'turbulent skin friction'][i % 4] + ` report ${i}`,
}));
/** A lite-flat artifact that cannot be read (the re-rank fails in the worker), then a valid one. */
const BROKEN = '{"L1": 4, "L2": 4, oops';
const VALID = JSON.stringify({ L1: 4, L2: 4, hidden: 2, W: Array.from({ length: 32 }, (_, i) => ((i % 5) - 2) / 10), b: [0.1, -0.1], a: [1, 0.5] });

describe.skipIf(!browserReady.ok)('operations dashboard in headless Chromium', () => {
  const scorers = mkdtempSync(path.join(os.tmpdir(), 'lateral-scorers-'));
  const config = testConfig({ ADMIN_TOKEN: TOKEN, JOB_ATTEMPTS: '1', SCORERS_DIR: scorers });
  let server: Server;
  let browser: Browser;
  let page: Page;
  const pageErrors: string[] = [];
  const api = (method: string, url: string, body?: unknown) => http(server.url, method, url, body, AUTH);

  beforeAll(async () => {
    server = await startServer(config, { quiet: true });
    browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'] });
    page = await browser.newPage({ viewport: { width: 1440, height: 900 } });
    page.on('pageerror', (e) => pageErrors.push(e.message));
    page.on('console', (m) => {
      if (m.type() === 'error') pageErrors.push(m.text());
    });
  }, 180_000);
  afterAll(async () => {
    await browser?.close();
    await server?.stop();
  });

  /** The page's number in a cell ("1,234" -> 1234). */
  const cell = async (selector: string) => Number(((await page.locator(selector).textContent()) ?? '').replace(/,/g, ''));
  /** Waits until the page shows an overview taken after `t` (ms). */
  const pageAfter = (t: number) => until(async () => Number(await page.locator('#status').getAttribute('data-at')) > t, 20_000, 100);

  let rerankId = '';
  let failedReason = '';

  it('ingests documents and fails one re-rank on purpose', async () => {
    expect((await api('POST', '/v1/collections', { id: 'ops' })).status).toBe(201);
    const ing = await api('POST', '/v1/collections/ops/documents', DOCS);
    expect(ing.status).toBe(202);
    await until(async () => (await api('GET', ing.body.status)).body.state === 'done', 90_000, 200);
    const ok = await api('POST', '/v1/rerank?wait=30', { collection: 'ops', scorer: 'maxsim', queries: [{ id: 'q', text: 'wing flutter', candidates: ['d0', 'd1', 'd2'] }] });
    expect(ok.body.status).toBe('completed');
    writeFileSync(path.join(scorers, 'flat.json'), BROKEN);
    const bad = await api('POST', '/v1/rerank?wait=30', { collection: 'ops', scorer: { name: 'lite-flat', artifact: 'flat' }, queries: [{ id: 'q', text: 'wing', candidates: ['d0', 'd4'] }] });
    expect(bad.body.status).toBe('failed');
    rerankId = bad.body.id;
    failedReason = bad.body.error;
    expect(failedReason).toMatch(/JSON/);
  }, TEST_TIMEOUT_MS);

  it('signs in through the login form; the counts shown equal the API', async () => {
    await page.goto(`${server.url}/dashboard`);
    expect(await page.locator('input[name=token]').count()).toBe(1);
    expect(await page.locator('[data-testid=queues]').count()).toBe(0);
    await page.fill('input[name=token]', TOKEN);
    await Promise.all([page.waitForURL(`${server.url}/dashboard`), page.click('button[type=submit]')]);
    await page.locator('[data-testid=queues] tr[data-queue]').first().waitFor();
    // From here on, no request of the page may fail and no script may throw (the login page's own 401 is expected).
    pageErrors.length = 0;

    // A worker process on another host whose heartbeat stopped 20 s ago.
    const beatAt = Date.now() - HEARTBEAT_STALE_MS - 5_000;
    const fields = heartbeatFields({ id: LATE, process: 'encoder-worker', host: 'gpu-node-1', pid: 1, queues: ['encode'], concurrency: { encode: 4 }, executionProvider: 'cuda', model: 'minilm-l6-384', startedAt: beatAt - 60_000, beatAt, completed: 10, failed: 0, active: 1, jobsPerSecond: 0, caches: {} });
    await server.runtime.redis.hset(heartbeatKeys.worker(config.REDIS_PREFIX, LATE), fields);
    await server.runtime.redis.zadd(heartbeatKeys.index(config.REDIS_PREFIX), beatAt, LATE);

    // Nothing is running now: what the API says must be what the page shows after its next poll.
    const t = Date.now();
    const health = await api('GET', '/v1/health');
    const collection = await api('GET', '/v1/collections/ops');
    await pageAfter(t);
    for (const q of ALL_QUEUES) {
      const c = health.body.queues[q] as Record<string, number>;
      const row = `[data-testid=queues] tr[data-queue="${q}"]`;
      expect(await cell(`${row} [data-count=waiting]`), `${q} waiting`).toBe(c.waiting + (c.prioritized ?? 0));
      for (const s of ['active', 'completed', 'failed', 'delayed']) expect(await cell(`${row} [data-count=${s}]`), `${q} ${s}`).toBe(c[s]);
    }
    expect(health.body.queues.encode.completed).toBe(1);
    expect(health.body.queues.rerank.completed).toBe(1);
    expect(health.body.queues.rerank.failed).toBe(1);

    const col = '[data-testid=collections] tr[data-collection="ops"]';
    expect(await cell(`${col} [data-field=documents]`)).toBe(collection.body.documents);
    expect(collection.body.documents).toBe(DOCS.length);
    expect(await cell(`${col} [data-field=tokens]`)).toBe(collection.body.tokens);
    expect(await cell(`${col} [data-field=generation]`)).toBe(collection.body.generation);

    // The ingestion: done, every stage bar full.
    const ing = page.locator('#ingestions .ingestion').first();
    expect(await ing.getAttribute('data-state')).toBe('done');
    for (const s of ['accepted', 'encoded', 'compressed', 'indexed', 'committed']) {
      expect(await ing.locator(`[data-stage=${s}] [role=progressbar]`).getAttribute('aria-valuenow'), s).toBe(String(DOCS.length));
    }
    // This process's workers report their heartbeat, not stale; a worker whose beats stopped is flagged.
    const worker = page.locator(`[data-testid=workers] tr[data-worker]:not([data-worker="${LATE}"])`).first();
    expect(await worker.getAttribute('data-stale')).toBe('false');
    expect(await worker.textContent()).toContain('rerank');
    const late = page.locator(`[data-testid=workers] tr[data-worker="${LATE}"]`);
    expect(await late.getAttribute('data-stale')).toBe('true');
    expect(await late.locator('.stale').textContent()).toMatch(/^STALE \d+ s$/);
    // The throughput chart is drawn by Chart.js (served by the API, not a CDN).
    expect(await page.evaluate('typeof window.Chart')).toBe('function');
    expect(await page.locator('#throughput').evaluate((c) => (c as unknown as { width: number }).width)).toBeGreaterThan(100);
    // Latency of the completed re-rank, over 5 minutes.
    expect(await cell('[data-testid=latency] tr[data-queue=rerank][data-window="5m"] td:nth-child(3)')).toBe(1);

    // Every series of the throughput chart has its own colour (five shared one grey before).
    const colors = (await page.evaluate('window.Chart.getChart("throughput").data.datasets.map((d) => d.backgroundColor)')) as string[];
    expect(colors.length).toBe(ALL_QUEUES.length + 1);
    expect(new Set(colors).size).toBe(colors.length);
    // One clock: the header's time is 24-hour like the chart's axis (no AM / PM).
    expect(await page.locator('#status').textContent()).toMatch(/updated \d{2}:\d{2}:\d{2}$/);
    // The ingestion id is shown whole, not cut with an ellipsis.
    const ingId = (await ing.getAttribute('data-ingestion'))!;
    const small = ing.locator('.name small');
    expect(await small.textContent()).toContain(ingId);
    expect(await small.evaluate((e) => e.scrollWidth <= e.clientWidth + 1)).toBe(true);
    // A scorer's shard queues are one range, not eight names the queue table does not list.
    expect(await worker.textContent()).not.toMatch(/shard-\d/);
    // What "bytes in S3" counts beside "segment bytes" is said on the page.
    expect(await page.locator('[data-testid=bytes-note]').textContent()).toContain('bytes in S3: everything the collection keeps');
    if (process.env.DASHBOARD_SCREENSHOT) await page.screenshot({ path: process.env.DASHBOARD_SCREENSHOT, fullPage: true });
  }, TEST_TIMEOUT_MS);

  it('lists the failed job with its message, and retrying it from the page works', async () => {
    const jobId = `${config.DEFAULT_TENANT}~rerank~${rerankId}`;
    const row = page.locator(`[data-testid=failed-jobs] tr[data-job="${jobId}"]`);
    await row.waitFor();
    expect(await row.locator('[data-field=error]').textContent()).toBe(failedReason);
    expect(await row.getAttribute('data-queue')).toBe('rerank');

    mkdirSync(path.dirname(SCREENSHOT), { recursive: true });
    await page.screenshot({ path: SCREENSHOT, fullPage: true });
    console.log(`dashboard screenshot: ${SCREENSHOT}`);

    // Fix the artifact, then press Retry: the same job runs again and completes.
    writeFileSync(path.join(scorers, 'flat.json'), VALID);
    await row.locator('button[data-retry]').click();
    await until(async () => (await page.locator('#retry-result').getAttribute('data-status')) !== null, 10_000);
    expect(await page.locator('#retry-result').getAttribute('data-status')).toBe('202');
    const done = await until(async () => {
      const s = await api('GET', `/v1/rerank/${rerankId}`);
      return s.body.status === 'completed' || s.body.status === 'failed' ? s.body : null;
    }, 30_000);
    expect(done.status).toBe('completed');
    expect(done.result.results[0].hits.length).toBe(2);

    const t = Date.now();
    const health = await api('GET', '/v1/health');
    await pageAfter(t);
    expect(await row.count()).toBe(0);
    expect(await cell('[data-testid=queues] tr[data-queue=rerank] [data-count=completed]')).toBe(health.body.queues.rerank.completed);
    expect(health.body.queues.rerank.completed).toBe(2);
    expect(await cell('[data-testid=queues] tr[data-queue=rerank] [data-count=failed]')).toBe(0);
    await page.screenshot({ path: SCREENSHOT.replace(/\.png$/, '-after-retry.png'), fullPage: true });
    expect(pageErrors).toEqual([]);
  }, TEST_TIMEOUT_MS);

  it('the queue board at /admin/queues opens with the same session and lists every queue', async () => {
    await page.goto(`${server.url}/admin/queues`);
    for (const q of ALL_QUEUES) await page.getByText(q, { exact: true }).first().waitFor({ timeout: 20_000 });
    const anonymous = await browser.newPage();
    const res = await anonymous.goto(`${server.url}/admin/queues`);
    expect(res?.status()).toBe(401);
    await anonymous.close();
  }, TEST_TIMEOUT_MS);
});
