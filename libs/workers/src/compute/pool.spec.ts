import path from 'node:path';
import type { Job } from 'bullmq';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { WaitingChildrenError } from 'bullmq';
import { PermanentJobError, UnavailableError, loadConfig } from '@lateral/shared';
import { createLogger } from '@lateral/infra';
import { ComputePool, threadConfig } from './pool';
import { fromWire, toWire } from './protocol';

const STAND_IN = path.join(__dirname, 'testing', 'stand-in-thread.cjs');
const config = loadConfig({ DATA_DIR: '/tmp/lateral-pool-spec' });

function fakeJob(data: unknown = { tenantId: 't', collectionId: 'c' }) {
  return {
    id: 'j1',
    name: 'search',
    data,
    opts: { attempts: 3 },
    attemptsMade: 0,
    token: 'tok-1',
    queueQualifiedName: 'bull:search',
    timestamp: Date.now(),
    updateProgress: vi.fn(async () => undefined),
    getChildrenValues: vi.fn(async () => ({ 'bull:shard-0:x': { round: 0 } })),
    remove: vi.fn(async () => undefined),
  };
}

let pool: ComputePool | undefined;
afterEach(async () => {
  await pool?.close();
  pool = undefined;
});

const start = (threads: number) =>
  (pool = new ComputePool({ threads, config, redisUrl: 'redis://unused', s3Endpoint: undefined, logger: createLogger('error', 'spec'), entry: STAND_IN }));

describe('ComputePool', () => {
  it('runs a job in a thread; the job methods it calls run on the real job here', async () => {
    const p = start(1);
    const job = fakeJob();
    const out = (await p.run('search', { op: 'job' }, job as unknown as Job, 'search')) as Record<string, unknown>;
    expect(job.updateProgress).toHaveBeenCalledWith(50);
    expect(job.getChildrenValues).toHaveBeenCalledTimes(1);
    expect(out).toMatchObject({ thread: 0, children: { 'bull:shard-0:x': { round: 0 } }, data: job.data, token: 'tok-1', fields: { jobId: 'j1', queue: 'search', tenant: 't', collection: 'c' } });
  });

  it('refuses job methods outside the list, by name', async () => {
    const p = start(1);
    const job = fakeJob();
    await expect(p.run('search', { op: 'forbidden' }, job as unknown as Job, 'search')).rejects.toThrow(/job method remove is not available/);
    expect(job.remove).not.toHaveBeenCalled();
  });

  it('errors come back as their own class with their fields', async () => {
    const p = start(1);
    const job = fakeJob() as unknown as Job;
    const permanent = await p.run('search', { op: 'fail', name: 'PermanentJobError', message: 'never' }, job, 'search').catch((e: unknown) => e);
    expect(permanent).toBeInstanceOf(PermanentJobError);
    expect((permanent as Error).message).toBe('never');
    const waiting = await p.run('search', { op: 'fail', name: 'WaitingChildrenError', message: '' }, job, 'search').catch((e: unknown) => e);
    expect(waiting).toBeInstanceOf(WaitingChildrenError);
    const unavailable = await p.run('search', { op: 'fail', name: 'UnavailableError', message: 'S3 down' }, job, 'search').catch((e: unknown) => e);
    expect(unavailable).toBeInstanceOf(UnavailableError);
    expect((unavailable as UnavailableError).retryAfterSeconds).toBe(7);
    const other = await p.run('search', { op: 'fail', name: 'TypeError', message: 'x is undefined' }, job, 'search').catch((e: unknown) => e);
    expect(other).toBeInstanceOf(Error);
    expect(other).not.toBeInstanceOf(PermanentJobError);
    expect((other as Error).name).toBe('TypeError');
  });

  it('a thread that dies fails its running job (to be retried) and is started again', async () => {
    const p = start(1);
    const job = fakeJob() as unknown as Job;
    await expect(p.run('search', { op: 'die' }, job, 'search')).rejects.toThrow(/compute thread 0 exited \(code 3\).*retried/);
    // the next job waits for the new thread
    const deadline = Date.now() + 30_000;
    let out: unknown;
    while (Date.now() < deadline) {
      out = await p.run('search', { op: 'echo' }, job, 'search').catch(() => null);
      if (out) break;
      await new Promise((r) => setTimeout(r, 200));
    }
    expect(out).toMatchObject({ thread: 0, echo: { op: 'echo' } });
  });

  it("keeps this thread's event loop free while a job keeps its thread busy", async () => {
    const p = start(1);
    await p.ready();
    let ticks = 0;
    const timer = setInterval(() => ticks++, 10);
    const out = await p.run('search', { op: 'block', ms: 600 }, fakeJob() as unknown as Job, 'search');
    clearInterval(timer);
    expect(out).toMatchObject({ blocked: 600 });
    // On this thread the same loop would let no timer fire for its 600 ms.
    expect(ticks).toBeGreaterThan(3);
  });

  it("sends one collection's jobs to one thread, and others to the least busy", async () => {
    const p = start(2);
    const job = fakeJob() as unknown as Job;
    const threads = new Set<number>();
    for (let i = 0; i < 6; i++) threads.add(((await p.run('search', { op: 'echo' }, job, 'search', 't/c')) as { thread: number }).thread);
    expect(threads.size).toBe(1);
    const busy = p.run('encode', { op: 'block', ms: 400 }, job, 'encode');
    const other = (await p.run('encode', { op: 'echo' }, job, 'encode')) as { thread: number };
    expect(other.thread).not.toBe(((await busy) as { thread: number }).thread);
  });
});

describe('threadConfig', () => {
  it('one thread keeps the budgets; several split them and get disk folders of their own', () => {
    expect(threadConfig(config, 0, 1)).toBe(config);
    const a = threadConfig(config, 0, 2);
    const b = threadConfig(config, 1, 2);
    expect(a.SCORER_CACHE_BYTES + b.SCORER_CACHE_BYTES).toBeLessThanOrEqual(config.SCORER_CACHE_BYTES);
    expect(a.SCORER_DISK_CACHE_BYTES + b.SCORER_DISK_CACHE_BYTES).toBeLessThanOrEqual(config.SCORER_DISK_CACHE_BYTES);
    expect(a.SCORER_DISK_CACHE_DIR).not.toBe(b.SCORER_DISK_CACHE_DIR);
  });
});

describe('wire errors', () => {
  it('keep class, message and fields through a round trip', () => {
    const e = fromWire(toWire(new UnavailableError('redis slow', 9)), 'here');
    expect(e).toBeInstanceOf(UnavailableError);
    expect(e.message).toBe('redis slow');
    expect((e as UnavailableError).retryAfterSeconds).toBe(9);
    expect(e.stack).toContain('(in here)');
  });
});
