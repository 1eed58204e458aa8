import { Worker } from 'node:worker_threads';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { currentThreadId, lowerThreadPriority } from './thread-priority';

const linux = process.platform === 'linux';

/** Runs `source` (CommonJS, with `require` of this folder's compiled-by-tsx module) in a new thread and returns what it posts. */
function inThread<T>(source: string): Promise<T> {
  return new Promise((resolve, reject) => {
    const w = new Worker(source, { eval: true, workerData: { dir: path.resolve(__dirname) } });
    w.once('message', (v: T) => {
      resolve(v);
      void w.terminate();
    });
    w.once('error', reject);
  });
}

describe('thread priority', () => {
  it.runIf(linux)('names the calling thread: the main thread is the process', () => {
    expect(currentThreadId()).toBe(process.pid);
  });

  it('refuses a nice value outside 1-19 without touching anything', () => {
    expect(lowerThreadPriority(0)).toEqual({ applied: false, reason: expect.stringContaining('1 to 19') });
    expect(lowerThreadPriority(20)).toMatchObject({ applied: false });
    expect(lowerThreadPriority(2.5)).toMatchObject({ applied: false });
  });

  it.runIf(linux)('lowers only the calling thread, and a thread it starts afterwards inherits it', async () => {
    const before = os.getPriority(process.pid);
    const r = await inThread<{ outcome: { applied: boolean; tid: number; nice: number }; again: { applied: boolean; nice: number }; own: number; child: number }>(`
      require('tsx/cjs');
      const { parentPort, Worker, workerData } = require('node:worker_threads');
      const os = require('node:os');
      const { lowerThreadPriority, currentThreadId } = require(workerData.dir + '/thread-priority.ts');
      const outcome = lowerThreadPriority(7);
      const again = lowerThreadPriority(3); // already lower: left as it is
      const child = new Worker("const { parentPort } = require('node:worker_threads'); const fs = require('node:fs'); const os = require('node:os'); parentPort.postMessage(os.getPriority(Number(/\\\\/task\\\\/(\\\\d+)$/.exec(fs.readlinkSync('/proc/thread-self'))[1])));", { eval: true });
      child.once('message', (n) => { parentPort.postMessage({ outcome, again, own: os.getPriority(currentThreadId()), child: n }); child.terminate(); });
    `);
    const want = Math.max(before, 7);
    expect(r.outcome).toMatchObject({ applied: true, nice: want });
    expect(r.outcome.tid).not.toBe(process.pid);
    expect(r.again).toMatchObject({ applied: true, nice: want });
    expect(r.own).toBe(want);
    expect(r.child).toBe(want);
    // the process's main thread keeps its priority
    expect(os.getPriority(process.pid)).toBe(before);
  });
});
