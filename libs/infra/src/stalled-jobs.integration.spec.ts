import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { randomUUID } from 'node:crypto';
import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { inject } from 'vitest';
import { QueueName } from '@lateral/shared';
import { createLogger } from './logger';
import { BULLMQ_CONNECTION_OPTIONS, WorkerHost, type HandlerRegistry } from './queues';
import { settledJob } from './settled-job';

/**
 * Stalled jobs and shutdown (issue 12 item 3): a job held by a worker killed with SIGKILL is
 * resumed by another worker once its lock expires (JOB_LOCK_SECONDS + JOB_STALLED_CHECK_SECONDS,
 * not BullMQ's old 60 s lock) and completes once; a stall uses one of the job's attempts instead of
 * failing it on its second stall; a worker closed on SIGTERM hands a job it could not finish in
 * its grace period straight back to the queue.
 */
const ROOT = path.resolve(__dirname, '../../..');
const LOCK_MS = 3000;
const STALLED_MS = 1000;

describe('stalled jobs', () => {
  const redisUrl = inject('redisUrl');
  let prefix: string;
  let connection: Redis;
  let queue: Queue;
  const children: ChildProcess[] = [];
  const hosts: WorkerHost[] = [];

  beforeAll(() => {
    prefix = `stall${randomUUID().slice(0, 8)}`;
    connection = new Redis(redisUrl, { maxRetriesPerRequest: null });
    queue = new Queue(QueueName.rerank, { ...BULLMQ_CONNECTION_OPTIONS, connection, prefix });
  });
  // every test starts with no worker on the queue
  afterEach(async () => {
    for (const c of children.splice(0)) if (c.exitCode === null) c.kill('SIGKILL');
    for (const h of hosts.splice(0)) await h.close(100);
  });
  afterAll(async () => {
    await queue.close();
    connection.disconnect();
  });

  /** Starts a worker process and resolves once it announced a job: that is, mid-job. */
  function workerProcess(): Promise<{ child: ChildProcess; started: string }> {
    const child = spawn(process.execPath, ['--import', 'tsx', 'test/fixtures/stall-worker.ts'], {
      cwd: ROOT,
      env: { ...process.env, REDIS_URL: redisUrl, PREFIX: prefix, LOCK_MS: String(LOCK_MS), STALLED_MS: String(STALLED_MS), MAX_STALLED: '5' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    children.push(child);
    let err = '';
    child.stderr!.on('data', (d) => (err += d));
    return new Promise((resolve, reject) => {
      let out = '';
      child.stdout!.on('data', (d) => {
        out += d;
        const m = /started (\S+)/.exec(out);
        if (m) resolve({ child, started: m[0] });
      });
      child.on('exit', (code) => reject(new Error(`worker process exited (${code}) before starting a job: ${err.slice(-2000)}`)));
    });
  }

  function kill(child: ChildProcess): Promise<void> {
    return new Promise((resolve) => {
      child.once('exit', () => resolve());
      child.kill('SIGKILL');
    });
  }

  function inProcessHost(handler: HandlerRegistry[QueueName.rerank], graceMs?: number): WorkerHost {
    const host = new WorkerHost({ redisUrl, prefix, logger: createLogger('error', 'test'), concurrency: {}, lockDuration: LOCK_MS, stalledInterval: STALLED_MS, maxStalledCount: 5, graceMs });
    host.start([QueueName.rerank], { [QueueName.rerank]: handler });
    hosts.push(host);
    return host;
  }

  const settled = (id: string) => settledJob(queue, id);

  const payload = (id: string) => ({ tenantId: 't', rerankId: id, requestKey: `tenants/t/rerank/${id}/request.json` });
  const result = { resultKey: 'k', queries: 0, candidates: 0, missing: 0 };

  it('a job held by a worker killed with SIGKILL is resumed by another worker within the lock + check interval, and completes once', async () => {
    const id = `rr-${randomUUID()}`;
    await queue.add(QueueName.rerank, payload(id), { jobId: id, attempts: 5 });
    const { child } = await workerProcess();
    await kill(child);
    const killedAt = Date.now();
    let runs = 0;
    let resumedAt = 0;
    let stallsSeen = -1;
    inProcessHost(async (_p, job) => {
      runs++;
      resumedAt = Date.now();
      stallsSeen = job.stalledCounter;
      return result;
    });
    const job = await settled(id);
    const resumedAfterMs = resumedAt - killedAt;
    console.log(`stalled job resumed ${resumedAfterMs} ms after SIGKILL (lock ${LOCK_MS} ms, stalled check every ${STALLED_MS} ms)`);
    expect(await job.getState()).toBe('completed');
    expect(job.returnvalue).toEqual(result);
    expect(runs).toBe(1);
    expect(stallsSeen).toBe(1);
    // the lock's expiry plus one check interval, with room for a loaded machine: far below the 60 s lock it replaces
    expect(resumedAfterMs).toBeLessThan(LOCK_MS + STALLED_MS + 10_000);
  });

  it('each stall uses one of the job attempts: with attempts 2, a second stall fails it naming JOB_ATTEMPTS (never run a third time)', async () => {
    const id = `rr-${randomUUID()}`;
    await queue.add(QueueName.rerank, payload(id), { jobId: id, attempts: 2 });
    const first = await workerProcess();
    await kill(first.child);
    // the second process picks the stalled job up (one stall: 1 of 2 attempts used) and dies too
    const second = await workerProcess();
    expect(second.started).toBe(`started ${id}`);
    await kill(second.child);
    let runs = 0;
    inProcessHost(async () => {
      runs++;
      return result;
    });
    const job = await settled(id);
    expect(await job.getState()).toBe('failed');
    expect(job.failedReason).toMatch(/stalled 2 time\(s\).*2 attempts \(JOB_ATTEMPTS\) are used up/);
    expect(runs).toBe(0);
  });

  it('close() after its grace period hands a running job back to its queue at once: another worker runs it with no stall and no attempt used', async () => {
    const id = `rr-${randomUUID()}`;
    await queue.add(QueueName.rerank, payload(id), { jobId: id, attempts: 5 });
    let release!: () => void;
    let startedFirst!: () => void;
    const firstStarted = new Promise<void>((r) => (startedFirst = r));
    const first = inProcessHost(async () => {
      startedFirst();
      await new Promise<void>((r) => (release = r));
      return result;
    });
    await firstStarted;
    await first.close(300);
    let runs = 0;
    inProcessHost(async (_p, job) => {
      runs++;
      expect(job.stalledCounter).toBe(0);
      return result;
    });
    const job = await settled(id);
    release();
    expect(await job.getState()).toBe('completed');
    expect(runs).toBe(1);
    expect(job.stalledCounter).toBe(0);
    // one finished attempt (BullMQ counts the completion): the hand-back used none
    expect(job.attemptsMade).toBe(1);
    expect(job.failedReason).toBeFalsy();
  });
});
