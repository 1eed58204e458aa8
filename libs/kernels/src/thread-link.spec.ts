import { describe, expect, it } from 'vitest';
import { ThreadLink, ThreadReplyTimeout } from './thread-link';

// A small thread: 'echo' answers with its value doubled, 'silent' never answers, 'note' sends an
// unsolicited message, 'die' exits with code 3, 'close' ends it unless it was told to ignore it.
const SOURCE = `
const { parentPort, workerData } = require('node:worker_threads');
parentPort.on('message', (m) => {
  if (m.t === 'echo') parentPort.postMessage({ t: 'done', id: m.id, value: m.value * 2, bytes: m.buf ? m.buf.byteLength : 0 });
  else if (m.t === 'note') parentPort.postMessage({ t: 'note', text: 'hello' });
  else if (m.t === 'die') process.exit(3);
  else if (m.t === 'close' && !workerData.ignoreClose) process.exit(0);
});
`;

type In = { t: 'echo'; id: number; value: number; buf?: ArrayBuffer } | { t: 'silent'; id: number } | { t: 'note' } | { t: 'die' } | { t: 'close' };
type Out = { t: 'done'; id: number; value: number; bytes: number } | { t: 'note'; text: string };

function link(opts: { ignoreClose?: boolean } = {}, notes: string[] = []) {
  return new ThreadLink<In, Out>(SOURCE, { eval: true, workerData: { ignoreClose: opts.ignoreClose ?? false } }, {
    replies: ['done'],
    unrefWhenIdle: true,
    onMessage: (m) => {
      if (m.t === 'note') notes.push(m.text);
    },
    exitError: (code) => new Error(`stand-in thread exited (code ${code})`),
  });
}

describe('ThreadLink', () => {
  it('answers requests by id (moving the buffers given), passes other messages on, and closes', async () => {
    const notes: string[] = [];
    const l = link({}, notes);
    const buf = new ArrayBuffer(64);
    const replies = await Promise.all([1, 2, 3].map((v) => l.request<Extract<Out, { t: 'done' }>>((id) => ({ t: 'echo', id, value: v, ...(v === 1 ? { buf } : {}) }), v === 1 ? { transfer: [buf] } : {})));
    expect(replies.map((r) => r.value)).toEqual([2, 4, 6]);
    expect(replies[0]!.bytes).toBe(64);
    expect(buf.byteLength).toBe(0); // moved, not copied
    l.post({ t: 'note' });
    await expect.poll(() => notes).toEqual(['hello']);
    expect(l.waitingCount).toBe(0);
    await l.close({ t: 'close' });
    expect(await l.exited).toBe(0);
  });

  it('fails waiting requests when the thread exits, and later ones at once; a deadline rejects a request left unanswered', async () => {
    const l = link();
    const silent = l.request((id) => ({ t: 'silent', id }), { timeoutMs: 50, what: 'silent request' });
    await expect(silent).rejects.toBeInstanceOf(ThreadReplyTimeout);
    await expect(l.request((id) => ({ t: 'silent', id }), { timeoutMs: 10, what: 'silent request' })).rejects.toThrow(/silent request: no reply from the thread within 10 ms/);
    const waiting = l.request((id) => ({ t: 'silent', id }));
    l.post({ t: 'die' });
    await expect(waiting).rejects.toThrow('stand-in thread exited (code 3)');
    await expect(l.request((id) => ({ t: 'echo', id, value: 1 }))).rejects.toThrow('stand-in thread exited (code 3)');
    expect(l.exitError?.message).toBe('stand-in thread exited (code 3)');
    await l.close({ t: 'close' }); // already ended: resolves
  });

  it('terminates a thread that does not end within the close deadline', async () => {
    const l = link({ ignoreClose: true });
    const t0 = performance.now();
    await l.close({ t: 'close' }, 100);
    expect(performance.now() - t0).toBeGreaterThanOrEqual(90);
    expect(typeof (await l.exited)).toBe('number'); // ended (terminated: it ignores 'close')
    await expect(l.request((id) => ({ t: 'echo', id, value: 1 }))).rejects.toThrow(/stand-in thread exited/);
  });
});
