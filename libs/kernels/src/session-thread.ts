/**
 * An ONNX Runtime session in a worker thread of its own (issue 29 items 1 and 4).
 *
 * onnxruntime-node 1.30's `session.run` is a synchronous native call made from the caller's event
 * loop (its promise only defers the call with setImmediate), so while a batch runs, the thread that
 * asked for it can do nothing else: not tokenize or pack the next batch, not copy out the previous
 * one, not run the other jobs of its compute thread (compress, index, commit). Here the session
 * lives in a small thread that only runs it: the caller posts a batch's input tensors (their
 * buffers are moved, not copied), goes on with its own JavaScript, and gets the outputs back (also
 * moved) together with its input buffers, to be reused for a later batch.
 *
 * One thread per session, started with it and ended by `release()`. This is not a second pool
 * beside the compute threads (libs/workers/src/compute): those run whole jobs with their own
 * connections and caches, and a job's encoder lives in one of them; this thread holds nothing but
 * the session, so that the job's thread and the native run overlap. Runs are serialised in the
 * thread (one session runs one batch at a time; a batch posted meanwhile waits there, ready).
 *
 * The thread's code is plain JavaScript started with `eval` (it needs onnxruntime-node only, passed
 * as a resolved path), so it works the same under tsx, vitest and an esbuild bundle
 * (`scripts/bench/encoder-cuda.ts` carried to a GPU machine), with no file to find next to this one.
 */
import { Worker } from 'node:worker_threads';
import { baseSessionOptions, ort, type SessionOptions } from './session';

/** A tensor as it crosses to and from the thread: its element type, dims and data (a typed array whose buffer is transferred). */
export interface ThreadTensor {
  type: ort.Tensor.Type;
  dims: readonly number[];
  data: Float32Array | Int32Array | BigInt64Array | Uint8Array | Int8Array | Float64Array | Uint16Array | Int16Array;
}

export interface ThreadRunResult {
  outputs: Record<string, ThreadTensor>;
  /** The feeds as they were posted, their buffers back in this thread (reuse them). */
  feeds: Record<string, ThreadTensor>;
  /** When the run started and ended in the thread, on this thread's performance.now() clock. */
  start: number;
  end: number;
}

type FromThread =
  | { t: 'loaded'; provider: 'cpu' | 'cuda'; inputNames: string[]; outputNames: string[]; fallback?: string }
  | { t: 'load-failed'; message: string; fallback?: string }
  | { t: 'done'; id: number; ok: true; outputs: Record<string, ThreadTensor>; feeds: Record<string, ThreadTensor>; start: number; end: number }
  | { t: 'done'; id: number; ok: false; message: string; feeds: Record<string, ThreadTensor> };

/** The thread: loads the session with the first attempt that works, then runs what it is sent, one batch at a time. */
const THREAD_SOURCE = `
'use strict';
const { parentPort, workerData } = require('node:worker_threads');
const ort = require(workerData.ortPath);
const now = () => performance.timeOrigin + performance.now();
const buffersOf = (tensors) => {
  const out = new Set();
  for (const t of Object.values(tensors)) if (t && t.data && t.data.buffer instanceof ArrayBuffer) out.add(t.data.buffer);
  return [...out];
};
const why = (err) => (err instanceof Error ? err.message : String(err));
let session = null;
let queue = Promise.resolve();
async function load() {
  let fallback;
  let last;
  for (const a of workerData.attempts) {
    try {
      session = await ort.InferenceSession.create(workerData.model, a.options);
      parentPort.postMessage({ t: 'loaded', provider: a.provider, inputNames: session.inputNames, outputNames: session.outputNames, fallback });
      return;
    } catch (err) {
      last = err;
      if (a.provider === 'cuda') fallback = why(err);
    }
  }
  parentPort.postMessage({ t: 'load-failed', message: why(last), fallback });
}
async function run(m) {
  const feeds = {};
  for (const [name, f] of Object.entries(m.feeds)) feeds[name] = new ort.Tensor(f.type, f.data, f.dims);
  const start = now();
  let out;
  try {
    out = await session.run(feeds, m.fetches);
  } catch (err) {
    parentPort.postMessage({ t: 'done', id: m.id, ok: false, message: why(err), feeds: m.feeds }, buffersOf(m.feeds));
    return;
  }
  const end = now();
  const outputs = {};
  for (const name of m.fetches) {
    const t = out[name];
    outputs[name] = { type: t.type, dims: t.dims, data: t.data };
  }
  const transfer = new Set([...buffersOf(outputs), ...buffersOf(m.feeds)]);
  parentPort.postMessage({ t: 'done', id: m.id, ok: true, outputs, feeds: m.feeds, start, end }, [...transfer]);
}
parentPort.on('message', (m) => {
  if (m.t === 'run') queue = queue.then(() => run(m));
  else if (m.t === 'release') {
    queue = queue.then(async () => {
      try { await session?.release(); } catch {}
      process.exit(0);
    });
  }
});
void load();
`;

interface Pending {
  resolve: (r: ThreadRunResult) => void;
  reject: (e: Error) => void;
}

export class SessionThread {
  private readonly pending = new Map<number, Pending>();
  private seq = 0;
  private exitError: Error | null = null;
  private released: Promise<void> | null = null;
  private readonly exited: Promise<void>;

  private constructor(
    private readonly worker: Worker,
    readonly provider: 'cpu' | 'cuda',
    readonly inputNames: readonly string[],
    readonly outputNames: readonly string[],
  ) {
    this.exited = new Promise((resolve) => worker.once('exit', () => resolve()));
    worker.on('message', (m: FromThread) => {
      if (m.t !== 'done') return;
      const p = this.pending.get(m.id);
      if (!p) return;
      this.pending.delete(m.id);
      if (this.pending.size === 0) worker.unref();
      if (m.ok) {
        const offset = performance.timeOrigin;
        p.resolve({ outputs: m.outputs, feeds: m.feeds, start: m.start - offset, end: m.end - offset });
      } else p.reject(new Error(m.message));
    });
    worker.once('exit', (code) => {
      this.exitError = new Error(`the ONNX Runtime session thread exited (code ${code})`);
      for (const p of this.pending.values()) p.reject(this.exitError);
      this.pending.clear();
    });
    // An idle session thread never keeps the process alive; a run in flight does.
    worker.unref();
  }

  /**
   * Loads `model` (a path or the graph's bytes, which are moved to the thread: do not use them
   * afterwards) in a new thread with createSession's options: CUDA first when asked, then the CPU
   * provider (`onFallback` is told why CUDA was not used). Throws an Error naming the model when
   * ONNX Runtime cannot load it.
   */
  static async start(model: Uint8Array | string, opts: Omit<SessionOptions, 'observe'> = {}): Promise<SessionThread> {
    const base = baseSessionOptions(opts);
    const attempts = [
      ...(opts.executionProvider === 'cuda' ? [{ provider: 'cuda' as const, options: { ...base, executionProviders: [{ name: 'cuda', deviceId: opts.deviceId ?? 0 }, 'cpu'] } }] : []),
      { provider: 'cpu' as const, options: { ...base, executionProviders: ['cpu'] } },
    ];
    // A Uint8Array over part of a larger buffer is copied first, so only its own bytes move.
    const bytes = typeof model === 'string' ? model : model.byteOffset === 0 && model.byteLength === model.buffer.byteLength ? model : model.slice();
    const what = typeof model === 'string' ? model : `in-memory model (${model.byteLength} bytes)`; // before the bytes move
    const worker = new Worker(THREAD_SOURCE, {
      eval: true,
      workerData: { ortPath: require.resolve('onnxruntime-node'), model: bytes, attempts },
      transferList: typeof bytes === 'string' || !(bytes.buffer instanceof ArrayBuffer) ? [] : [bytes.buffer],
    });
    const loaded = await new Promise<Extract<FromThread, { t: 'loaded' }>>((resolve, reject) => {
      const onExit = (code: number) => reject(new Error(`kernels: the ONNX Runtime session thread for ${what} exited (code ${code}) before it loaded`));
      worker.once('exit', onExit);
      worker.once('error', reject);
      worker.once('message', (m: FromThread) => {
        worker.off('exit', onExit);
        worker.off('error', reject);
        if (m.t === 'loaded' || m.t === 'load-failed') {
          if (m.fallback !== undefined) opts.onFallback?.(m.fallback);
          if (m.t === 'loaded') resolve(m);
          else {
            void worker.terminate();
            reject(new Error(`kernels: ONNX Runtime cannot load ${what}: ${m.message}`));
          }
        }
      });
    });
    worker.on('error', () => undefined); // an error ends the thread: 'exit' fails what is pending
    return new SessionThread(worker, loaded.provider, loaded.inputNames, loaded.outputNames);
  }

  /**
   * Runs the session on `feeds` in the thread. The feeds' buffers are transferred (detached here)
   * until the result gives them back in `feeds`; a failed run does not give them back.
   */
  run(feeds: Record<string, ThreadTensor>, fetches: readonly string[]): Promise<ThreadRunResult> {
    if (this.exitError) return Promise.reject(this.exitError);
    if (this.released) return Promise.reject(new Error('the ONNX Runtime session thread has been released'));
    const id = ++this.seq;
    const transfer = new Set<ArrayBuffer>();
    for (const f of Object.values(feeds)) if (f.data.buffer instanceof ArrayBuffer) transfer.add(f.data.buffer);
    return new Promise<ThreadRunResult>((resolve, reject) => {
      this.pending.set(id, { resolve, reject });
      this.worker.ref();
      this.worker.postMessage({ t: 'run', id, feeds, fetches }, [...transfer]);
    });
  }

  /** Releases the session after the runs already posted, and ends the thread. */
  release(): Promise<void> {
    this.released ??= (async () => {
      if (!this.exitError) {
        this.worker.ref();
        this.worker.postMessage({ t: 'release' });
      }
      await this.exited;
    })();
    return this.released;
  }
}
