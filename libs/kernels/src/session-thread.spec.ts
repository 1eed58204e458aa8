import { Worker } from 'node:worker_threads';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { GraphBuilder, encodeModel, floatTensor, makeModel, makeValueInfo } from './onnx-graph';
import { SessionThread } from './session-thread';

/** y = x * 2 + 1 over float32 [n], and the input cast to int64 as a second output. */
function graph(): Uint8Array {
  const g = new GraphBuilder();
  const y = g.op('Add', [g.op('Mul', ['x', g.constant(floatTensor('two', [], [2]))]), g.constant(floatTensor('one', [], [1]))], {}, 'y');
  g.op('Cast', ['x'], { to: 7 }, 'ix');
  return encodeModel(makeModel(g.build('affine', [makeValueInfo('x', 'FLOAT', ['n'])], [makeValueInfo(y, 'FLOAT', ['n']), makeValueInfo('ix', 'INT64', ['n'])])));
}

describe('SessionThread', () => {
  it('runs the session in its thread: outputs come back, and the inputs buffers with them', async () => {
    const t = await SessionThread.start(graph(), { intraOpThreads: 1 });
    try {
      expect(t.provider).toBe('cpu');
      expect([...t.inputNames]).toEqual(['x']);
      expect([...t.outputNames].sort()).toEqual(['ix', 'y']);
      const x = new Float32Array([1, 2, 3, 4]);
      const sent = x.subarray(0, 3);
      const pending = t.run({ x: { type: 'float32', data: sent, dims: [3] } }, ['y', 'ix']);
      expect(x.length).toBe(0); // moved to the thread, not copied
      const r = await pending;
      expect(Array.from(r.outputs.y!.data as Float32Array)).toEqual([3, 5, 7]);
      expect(r.outputs.y!.dims).toEqual([3]);
      expect(r.outputs.y!.type).toBe('float32');
      expect(Array.from(r.outputs.ix!.data as BigInt64Array)).toEqual([1n, 2n, 3n]);
      // the whole input buffer is back, the fourth value included
      const back = r.feeds.x!.data as Float32Array;
      expect(back.length).toBe(3);
      expect(Array.from(new Float32Array(back.buffer))).toEqual([1, 2, 3, 4]);
      expect(r.end).toBeGreaterThanOrEqual(r.start);
      expect(Math.abs(r.start - performance.now())).toBeLessThan(60_000); // on this thread's clock
      // several at once: each gets its own answer, in order of posting
      const many = await Promise.all([1, 2, 3].map((v) => t.run({ x: { type: 'float32', data: new Float32Array([v]), dims: [1] } }, ['y'])));
      expect(many.map((m) => (m.outputs.y!.data as Float32Array)[0])).toEqual([3, 5, 7]);
    } finally {
      await t.release();
    }
    await expect(t.run({ x: { type: 'float32', data: new Float32Array(1), dims: [1] } }, ['y'])).rejects.toThrow(/released|exited/);
  });

  it("a run ONNX Runtime refuses rejects with its message; the thread goes on", async () => {
    const t = await SessionThread.start(graph());
    try {
      await expect(t.run({ x: { type: 'int32', data: new Int32Array([1]), dims: [1] } }, ['y'])).rejects.toThrow(/type|expected/i);
      const r = await t.run({ x: { type: 'float32', data: new Float32Array([0]), dims: [1] } }, ['y']);
      expect(Array.from(r.outputs.y!.data as Float32Array)).toEqual([1]);
    } finally {
      await t.release();
    }
  });

  it('a graph ONNX Runtime cannot load fails the start, naming it; CUDA unavailable falls back to the CPU and says why', async () => {
    await expect(SessionThread.start(new Uint8Array([1, 2, 3, 4]))).rejects.toThrow(/cannot load in-memory model \(4 bytes\)/);
    const reasons: string[] = [];
    const t = await SessionThread.start(graph(), { executionProvider: 'cuda', onFallback: (why) => reasons.push(why) });
    try {
      // On a machine with CUDA's libraries the session is a CUDA one and nothing falls back.
      if (t.provider === 'cpu') expect(reasons.length).toBe(1);
      else expect(reasons).toEqual([]);
    } finally {
      await t.release();
    }
  });

  it.runIf(process.platform === 'linux')('keeps the priority it started with when the thread that started it lowers its own afterwards (an encoder process\'s compute thread)', async () => {
    const before = os.getPriority(process.pid);
    const r = await new Promise<{ own: number; session: number; sessionTid: number | null; ownTid: number; y: number }>((resolve, reject) => {
      const w = new Worker(
        `
        require('tsx/cjs');
        const { parentPort, workerData } = require('node:worker_threads');
        const os = require('node:os');
        const fs = require('node:fs');
        const { SessionThread } = require(workerData.dir + '/session-thread.ts');
        (async () => {
          const t = await SessionThread.start(workerData.model, { intraOpThreads: 2 });
          const ownTid = Number(/\\/task\\/(\\d+)$/.exec(fs.readlinkSync('/proc/thread-self'))[1]);
          os.setPriority(ownTid, Math.max(os.getPriority(ownTid), 9));
          const out = await t.run({ x: { type: 'float32', data: new Float32Array([2]), dims: [1] } }, ['y']);
          parentPort.postMessage({ own: os.getPriority(ownTid), session: os.getPriority(t.tid), sessionTid: t.tid, ownTid, y: out.outputs.y.data[0] });
          await t.release();
        })().catch((e) => { throw e; });
        `,
        { eval: true, workerData: { dir: path.resolve(__dirname), model: graph() } },
      );
      w.once('message', resolve);
      w.once('error', reject);
    });
    expect(r.y).toBe(5);
    expect(r.sessionTid).toBeGreaterThan(0);
    expect(r.sessionTid).not.toBe(r.ownTid);
    expect(r.own).toBe(Math.max(before, 9));
    expect(r.session).toBe(before);
  });
});
