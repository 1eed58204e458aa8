import os from 'node:os';
import path from 'node:path';
import type { Job } from 'bullmq';
import { afterEach, describe, expect, it } from 'vitest';
import { QueueName, loadConfig } from '@lateral/shared';
import { createLogger } from '@lateral/infra';
import { ComputePool } from './pool';
import { MaintenanceLanes, laneOf } from './lanes';
import { ingestLanesAtStart } from '../start';

const STAND_IN = path.join(__dirname, 'testing', 'stand-in-thread.cjs');
const config = loadConfig({ DATA_DIR: '/tmp/lateral-lanes-spec' });
const logger = createLogger('error', 'spec');
const linux = process.platform === 'linux';

const job = { id: 'j', name: 'x', data: {}, opts: {}, attemptsMade: 0, token: 't', queueQualifiedName: 'bull:x', timestamp: 0 } as unknown as Job;

const closers: (() => Promise<void>)[] = [];
afterEach(async () => {
  await Promise.all(closers.splice(0).map((c) => c()));
});
function pool(threads: number): ComputePool {
  const p = new ComputePool({ threads, config, redisUrl: 'redis://unused', s3Endpoint: undefined, logger, entry: STAND_IN });
  closers.push(() => p.close());
  return p;
}
function lanes(threads: number, refitNice = 9): MaintenanceLanes {
  const l = new MaintenanceLanes({ threads, firstIndex: 1, refitNice, config, redisUrl: 'redis://unused', s3Endpoint: undefined, logger, entry: STAND_IN });
  closers.push(() => l.close());
  return l;
}

/** Which of two promises settles first. */
const first = (a: Promise<unknown>, b: Promise<unknown>) => Promise.race([a.then(() => 'a'), b.then(() => 'b')]);

describe('maintenance lanes', () => {
  it('merges and refits only; one lane each with 2 threads, one for both with 1', () => {
    expect(laneOf(QueueName.merge, 2)).toBe(0);
    expect(laneOf(QueueName.refit, 2)).toBe(1);
    expect(laneOf(QueueName.merge, 1)).toBe(0);
    expect(laneOf(QueueName.refit, 1)).toBe(0);
    for (const q of [QueueName.encode, QueueName.compress, QueueName.index, QueueName.commit, QueueName.search, QueueName.rerank]) expect(laneOf(q, 2)).toBeNull();
    expect(laneOf(QueueName.refit, 0)).toBeNull();
  });

  it('starts a lane on its first job, in a thread of its own after the pool', async () => {
    const l = lanes(2);
    expect(l.started()).toBe(0);
    const m = (await l.run(QueueName.merge, { op: 'nice' }, job)) as { thread: number; diskDir: string };
    expect(l.started()).toBe(1);
    const r = (await l.run(QueueName.refit, { op: 'nice' }, job)) as { thread: number; diskDir: string };
    expect(l.started()).toBe(2);
    expect([m.thread, r.thread]).toEqual([1, 2]);
    // disk cache folders of their own, not the pool's
    expect(m.diskDir).toMatch(/maintenance-0$/);
    expect(r.diskDir).toMatch(/maintenance-1$/);
    expect(() => l.pool(QueueName.encode)).toThrow(/does not run in a maintenance thread/);
  });

  it('startFor starts the lanes of the queues given now, and ready waits for them; a lane started on its first job is the same one', async () => {
    const l = lanes(2);
    await l.ready(); // nothing started: nothing to wait for
    l.startFor([QueueName.encode, QueueName.merge]);
    expect(l.started()).toBe(1);
    l.startFor([QueueName.merge, QueueName.refit]);
    expect(l.started()).toBe(2);
    await l.ready();
    const m = (await l.run(QueueName.merge, { op: 'nice' }, job)) as { thread: number };
    const r = (await l.run(QueueName.refit, { op: 'nice' }, job)) as { thread: number };
    expect([m.thread, r.thread]).toEqual([1, 2]);
    expect(l.started()).toBe(2);
    const one = lanes(1);
    one.startFor([QueueName.merge, QueueName.refit]);
    expect(one.started()).toBe(1);
  });

  it('an ingest process (encode and commit, merges after commits) starts its lanes with itself; others on their first job', () => {
    const all = [QueueName.encode, QueueName.compress, QueueName.index, QueueName.commit, QueueName.merge, QueueName.refit];
    expect(ingestLanesAtStart({ MERGE_AFTER_COMMIT: true }, all)).toBe(true);
    expect(ingestLanesAtStart({ MERGE_AFTER_COMMIT: false }, all)).toBe(false);
    // a scorer (merges and refits, no ingest), an encoder without maintenance queues
    expect(ingestLanesAtStart({ MERGE_AFTER_COMMIT: true }, [QueueName.search, QueueName.rerank, QueueName.merge, QueueName.refit])).toBe(false);
    expect(ingestLanesAtStart({ MERGE_AFTER_COMMIT: true }, [QueueName.encode, QueueName.compress, QueueName.index, QueueName.commit])).toBe(false);
    expect(ingestLanesAtStart({ MERGE_AFTER_COMMIT: true }, [QueueName.encode, QueueName.merge, QueueName.refit])).toBe(false);
  });

  it('an ingest job is not held by a refit busy in its own thread (it was, in a shared one)', async () => {
    const ingest = pool(1);
    const l = lanes(2);
    await ingest.ready();
    await l.run(QueueName.refit, { op: 'echo' }, job); // the lane's thread started
    const refit = l.run(QueueName.refit, { op: 'block', ms: 1500 }, job);
    const encode = ingest.run(QueueName.encode, { op: 'echo' }, job, QueueName.encode);
    expect(await first(encode, refit)).toBe('a');
    await refit;
    // The layout before: the refit in the pool's one thread holds the encode job until it ends.
    const shared = pool(1);
    await shared.ready();
    const refit2 = shared.run(QueueName.refit, { op: 'block', ms: 600 }, job, QueueName.refit);
    const encode2 = shared.run(QueueName.encode, { op: 'echo' }, job, QueueName.encode);
    expect(await first(encode2, refit2)).toBe('b');
    await encode2;
  });

  it('a merge is not held by a refit either (2 threads)', async () => {
    const l = lanes(2);
    await l.run(QueueName.refit, { op: 'echo' }, job);
    await l.run(QueueName.merge, { op: 'echo' }, job);
    const refit = l.run(QueueName.refit, { op: 'block', ms: 1500 }, job);
    const merge = l.run(QueueName.merge, { op: 'echo' }, job);
    expect(await first(merge, refit)).toBe('a');
    await refit;
  });

  it.runIf(linux)("the refit lane's thread runs at REFIT_NICE, the merge lane's at the process's priority", async () => {
    const own = os.getPriority(process.pid);
    const l = lanes(2, 9);
    const m = (await l.run(QueueName.merge, { op: 'nice' }, job)) as { nice: number };
    const r = (await l.run(QueueName.refit, { op: 'nice' }, job)) as { nice: number };
    expect(m.nice).toBe(own);
    expect(r.nice).toBe(Math.max(own, 9));
    // one thread for both: it runs refits, so it is lowered
    const one = lanes(1, 9);
    const both = (await one.run(QueueName.merge, { op: 'nice' }, job)) as { nice: number; thread: number };
    expect(both.nice).toBe(Math.max(own, 9));
    expect(((await one.run(QueueName.refit, { op: 'nice' }, job)) as { thread: number }).thread).toBe(both.thread);
  });

  it('REFIT_NICE 0 keeps the process priority', async () => {
    const l = lanes(2, 0);
    const r = (await l.run(QueueName.refit, { op: 'nice' }, job)) as { nice: number; niceAtStart: number };
    expect(r.niceAtStart).toBe(0);
    if (linux) expect(r.nice).toBe(os.getPriority(process.pid));
  });
});
