import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readlinkSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { loadCranfield } from '../scripts/lib/cranfield';
import { http, until } from './helpers';

/**
 * The all-in-one process as a user runs it, with its embedded redis-server and S3 server on a
 * DATA_DIR of its own: a signal runs the graceful path (prints what it stops, exits 0) and leaves
 * no redis-server behind, whether the signal goes to the tsx CLI, straight to the node process,
 * or to `npm start` (npm forwards it); and a restart on the same DATA_DIR finds the collection,
 * its ingestion done, a finished re-rank job (kept in Redis: the append-only file) and the jobs
 * that were still queued at the stop, which finish after the restart.
 */

const ROOT = path.resolve('.');
const TSX = path.join(ROOT, 'node_modules', '.bin', 'tsx');
const ENTRY = 'apps/all-in-one/src/main.ts';

interface Run {
  child: ChildProcess;
  output: () => string;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  url: string;
  redisPort: number;
  redisPid: number;
}

const started: ChildProcess[] = [];
const dirs: string[] = [];

function env(dataDir: string, extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  // SHUTDOWN_GRACE_SECONDS 10: jobs still running 10 s after the signal are handed back to their
  // queue (the default 30 s would spend this test's whole 30 s exit budget waiting on them).
  const e: NodeJS.ProcessEnv = { ...process.env, PORT: '0', DATA_DIR: dataDir, LOG_LEVEL: 'info', NODE_ENV: 'development', DEFAULT_MODEL: 'glove-ctx-100d', SHUTDOWN_GRACE_SECONDS: '10', ...extra };
  // The embedded services are what is under test.
  delete e.REDIS_URL;
  delete e.S3_ENDPOINT;
  return e;
}

async function start(cmd: string, args: string[], dataDir: string, extra: Record<string, string> = {}): Promise<Run> {
  const child = spawn(cmd, args, { cwd: ROOT, env: env(dataDir, extra), stdio: ['ignore', 'pipe', 'pipe'] });
  started.push(child);
  let out = '';
  child.stdout!.on('data', (b: Buffer) => (out += b.toString()));
  child.stderr!.on('data', (b: Buffer) => (out += b.toString()));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })));
  const url = await until(async () => {
    if (child.exitCode !== null) throw new Error(`exited ${child.exitCode} before serving:\n${out}`);
    return /lateral all-in-one: API (http:\/\/\S+)/.exec(out)?.[1];
  }, 90_000);
  const redisPort = Number(/started redis-server on redis:\/\/127\.0\.0\.1:(\d+)/.exec(out)?.[1]);
  const redisPid = Number(/started redis-server on \S+ \(pid (\d+)/.exec(out)?.[1]);
  expect(redisPort, out).toBeGreaterThan(0);
  expect(redisPid, out).toBeGreaterThan(0);
  return { child, output: () => out, exited, url, redisPort, redisPid };
}

/** Sends `signal`, expects exit code 0 within 30 s and the shutdown lines. */
async function stop(run: Run, signal: NodeJS.Signals) {
  const t0 = Date.now();
  run.child.kill(signal);
  const timeout = new Promise<never>((_, reject) => setTimeout(() => reject(new Error(`no exit 30 s after ${signal}:\n${run.output()}`)), 30_000));
  const { code, signal: killedBy } = await Promise.race([run.exited, timeout]);
  const out = run.output();
  expect({ code, killedBy }, out).toEqual({ code: 0, killedBy: null });
  expect(Date.now() - t0).toBeLessThan(30_000);
  for (const line of [
    `${signal} received: shutting down`,
    'stopping API http://',
    'stopping workers',
    'stopping Redis and S3 connections',
    'stopping in-process S3 server',
    `stopping embedded redis-server redis://127.0.0.1:${run.redisPort}`,
    'stopped in',
  ]) {
    expect(out, `missing "${line}"`).toContain(line);
  }
  return out;
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** redis-server processes (by `ps`) listening on `port` or working in `dir` (Linux /proc). */
function redisServersOf(port: number, dir: string): string[] {
  const ps = spawnSync('ps', ['-eo', 'pid=,args='], { encoding: 'utf8' });
  expect(ps.status, 'ps must run').toBe(0);
  const found = ps.stdout
    .split('\n')
    .filter((l) => /redis-server/.test(l) && !/lateral-redis/.test(l))
    .filter((l) => {
      if (l.includes(`:${port}`)) return true;
      const pid = Number(l.trim().split(/\s+/)[0]);
      try {
        return path.resolve(readlinkSync(`/proc/${pid}/cwd`)) === path.resolve(dir);
      } catch {
        return false;
      }
    });
  return found.map((l) => l.trim());
}

async function expectNoRedisLeft(run: Run, dataDir: string) {
  const redisDir = path.join(dataDir, 'redis');
  // The watchdog stops redis-server before the node process exits; allow it a moment regardless.
  await until(async () => !alive(run.redisPid), 5_000).catch(() => undefined);
  expect(alive(run.redisPid), `redis-server ${run.redisPid} is still running`).toBe(false);
  expect(redisServersOf(run.redisPort, redisDir)).toEqual([]);
  expect(existsSync(path.join(redisDir, 'redis-server.pid')), 'a clean Redis shutdown removes its pidfile').toBe(false);
}

function dataDir(): string {
  const d = mkdtempSync(path.join(os.tmpdir(), 'lateral-shutdown-'));
  dirs.push(d);
  return d;
}

afterAll(() => {
  for (const c of started) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

describe('shutdown of the all-in-one process (embedded Redis and S3)', () => {
  it('SIGINT to `tsx apps/all-in-one/src/main.ts`: prints what it stops, exits 0, no redis-server left', async () => {
    const dir = dataDir();
    const run = await start(TSX, [ENTRY], dir);
    expect((await http(run.url, 'GET', '/v1/health')).status).toBe(200);
    await stop(run, 'SIGINT');
    await expectNoRedisLeft(run, dir);
  }, 120_000);

  it('SIGINT straight to the node process (node --import tsx): the same', async () => {
    const dir = dataDir();
    const run = await start(process.execPath, ['--import', 'tsx', ENTRY], dir);
    await stop(run, 'SIGINT');
    await expectNoRedisLeft(run, dir);
  }, 120_000);

  it('SIGKILL to the node process: its redis-server goes too (the watchdog)', async () => {
    const dir = dataDir();
    const run = await start(process.execPath, ['--import', 'tsx', ENTRY], dir);
    run.child.kill('SIGKILL');
    await run.exited;
    await until(async () => !alive(run.redisPid), 10_000);
    expect(redisServersOf(run.redisPort, path.join(dir, 'redis'))).toEqual([]);
  }, 120_000);

  it('survives a restart through `npm start` + SIGTERM to npm: collection, ingestion, finished and queued jobs', async () => {
    const dir = dataDir();
    const cran = loadCranfield(path.resolve('data/cranfield'));
    const npmStart = () => start('npm', ['start', '--silent'], dir, { ENCODE_BATCH_DOCUMENTS: '20' });

    let run = await npmStart();
    const api = (method: string, url: string, body?: unknown) => http(run.url, method, url, body);
    expect((await api('POST', '/v1/collections', { id: 'kept' })).status).toBe(201);
    const docs = [
      { id: 'a', text: 'flutter of a swept wing at supersonic speed' },
      { id: 'b', text: 'heat transfer in the laminar boundary layer' },
      { id: 'c', text: 'shock wave boundary layer interaction' },
    ];
    const ing = await api('POST', '/v1/collections/kept/documents', docs);
    expect(ing.status).toBe(202);
    await until(async () => (await api('GET', ing.body.status)).body.state === 'done', 60_000);
    const rr = await api('POST', '/v1/rerank?wait=30', { collection: 'kept', queries: [{ id: 'q', text: 'supersonic flutter', candidates: ['a', 'b', 'c'] }] });
    expect(rr.body.status).toBe('completed');
    // Queued work at the stop: Cranfield's 1,400 documents in 70 encode jobs, stopped right after the 202.
    expect((await api('POST', '/v1/collections', { id: 'queued' })).status).toBe(201);
    const big = await api('POST', '/v1/collections/queued/documents', cran.docs.map((d) => ({ id: d.id, text: d.text || 'empty' })));
    expect(big.status).toBe(202);
    expect(big.body.batches).toBe(70);
    const before = await api('GET', big.body.status);
    expect(before.body.state, 'the ingestion must still be in progress at the stop').toBe('processing');
    await stop(run, 'SIGTERM');
    await expectNoRedisLeft(run, dir);
    expect(readdirSync(path.join(dir, 'redis', 'appendonlydir')).some((f) => f.endsWith('.aof'))).toBe(true);

    run = await npmStart();
    const list = await api('GET', '/v1/collections');
    const ids = (Array.isArray(list.body) ? list.body : list.body.collections).map((c: { id: string }) => c.id);
    expect(ids).toEqual(expect.arrayContaining(['kept', 'queued']));
    const st = await api('GET', ing.body.status);
    expect(st.body).toMatchObject({ state: 'done', stages: { indexed: 3, failed: 0 } });
    // The re-rank job's status lives in Redis only: it is there after the restart.
    const again = await api('GET', `/v1/rerank/${rr.body.id}`);
    expect(again.status).toBe(200);
    expect(again.body.status).toBe('completed');
    expect(again.body.result.results[0].hits.map((h: { id: string }) => h.id)).toEqual(rr.body.result.results[0].hits.map((h: { id: string }) => h.id));
    // The jobs still queued at the stop run after the restart.
    const done = await until(async () => {
      const s = await api('GET', big.body.status);
      if (s.body.state === 'failed') throw new Error(JSON.stringify(s.body));
      return s.body.state === 'done' ? s.body : null;
    }, 120_000);
    expect(done.stages).toMatchObject({ indexed: 1400, failed: 0 });
    const out = await stop(run, 'SIGTERM');
    await expectNoRedisLeft(run, dir);
    expect(out).toContain('started redis-server');
  }, 300_000);
});

// The test's own children never outlive it, even when an expectation above failed mid-way.
process.once('exit', () => {
  for (const c of started) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
});
