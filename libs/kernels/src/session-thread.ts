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
 * One thread per session, started with it and ended by `release()`, through the same mechanism as
 * the compute threads (./thread-link.ts: requests answered by id, one failure rule on exit): a
 * compute thread (libs/workers/src/compute) runs whole jobs with their own connections and caches,
 * and each encoder it loads owns one of these, holding nothing but the session, so that the job's
 * thread and the native run overlap. Runs are serialised in the thread (one session runs one batch
 * at a time; a batch posted meanwhile waits there, ready).
 *
 * The thread's code is plain JavaScript started with `eval` (it needs onnxruntime-node only, passed
 * as a resolved path), so it works the same under tsx, vitest and an esbuild bundle
 * (`scripts/bench/encoder-cuda.ts` carried to a GPU machine), with no file to find next to this one.
 */
import { baseSessionOptions, ort, type SessionOptions } from './session';
import { ThreadLink } from './thread-link';

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
  | { t: 'loaded'; provider: 'cpu' | 'cuda'; inputNames: string[]; outputNames: string[]; fallback?: string; tid: number | null }
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
// this thread's kernel id (Linux), so its starter can tell it apart (its OS priority: libs/workers/src/compute/thread-priority.ts)
const tid = (() => { try { const m = /\\/task\\/(\\d+)$/.exec(require('node:fs').readlinkSync('/proc/thread-self')); return m ? Number(m[1]) : null; } catch { return null; } })();
let session = null;
let queue = Promise.resolve();
async function load() {
  let fallback;
  let last;
  for (const a of workerData.attempts) {
    try {
      session = await ort.InferenceSession.create(workerData.model, a.options);
      parentPort.postMessage({ t: 'loaded', provider: a.provider, inputNames: session.inputNames, outputNames: session.outputNames, fallback, tid });
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

type ToThread = { t: 'run'; id: number; feeds: Record<string, ThreadTensor>; fetches: readonly string[] } | { t: 'release' };
type Done = Extract<FromThread, { t: 'done' }>;

export class SessionThread {
  private released: Promise<void> | null = null;

  private constructor(
    private readonly link: ThreadLink<ToThread, FromThread>,
    readonly provider: 'cpu' | 'cuda',
    readonly inputNames: readonly string[],
    readonly outputNames: readonly string[],
    /** The thread's kernel id (Linux; null elsewhere). ONNX Runtime's intra-op threads are started from it, with its priority. */
    readonly tid: number | null = null,
  ) {}

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
    let started: ((m: Extract<FromThread, { t: 'loaded' | 'load-failed' }>) => void) | undefined;
    let failed: ((e: Error) => void) | undefined;
    const first = new Promise<Extract<FromThread, { t: 'loaded' | 'load-failed' }>>((resolve, reject) => {
      started = resolve;
      failed = reject;
    });
    // An idle session thread never keeps the process alive; a run in flight does.
    const link = new ThreadLink<ToThread, FromThread>(
      THREAD_SOURCE,
      {
        eval: true,
        workerData: { ortPath: require.resolve('onnxruntime-node'), model: bytes, attempts },
        transferList: typeof bytes === 'string' || !(bytes.buffer instanceof ArrayBuffer) ? [] : [bytes.buffer],
      },
      {
        replies: ['done'],
        unrefWhenIdle: true,
        onMessage: (m) => {
          if (m.t === 'loaded' || m.t === 'load-failed') started?.(m);
        },
        // an error ends the thread: its exit fails what is pending (and a load still waited for)
        onError: (err) => failed?.(err),
        onExit: (code) => failed?.(new Error(`kernels: the ONNX Runtime session thread for ${what} exited (code ${code}) before it loaded`)),
        exitError: (code) => new Error(`the ONNX Runtime session thread exited (code ${code})`),
      },
    );
    link.worker.ref(); // until it has loaded
    let loaded: Extract<FromThread, { t: 'loaded' | 'load-failed' }>;
    try {
      loaded = await first;
    } finally {
      started = undefined;
      failed = undefined;
      link.worker.unref();
    }
    if (loaded.fallback !== undefined) opts.onFallback?.(loaded.fallback);
    if (loaded.t === 'load-failed') {
      void link.worker.terminate();
      throw new Error(`kernels: ONNX Runtime cannot load ${what}: ${loaded.message}`);
    }
    return new SessionThread(link, loaded.provider, loaded.inputNames, loaded.outputNames, loaded.tid);
  }

  /**
   * Runs the session on `feeds` in the thread. The feeds' buffers are transferred (detached here)
   * until the result gives them back in `feeds`; a failed run does not give them back.
   */
  async run(feeds: Record<string, ThreadTensor>, fetches: readonly string[]): Promise<ThreadRunResult> {
    if (this.released) throw new Error('the ONNX Runtime session thread has been released');
    const transfer = new Set<ArrayBuffer>();
    for (const f of Object.values(feeds)) if (f.data.buffer instanceof ArrayBuffer) transfer.add(f.data.buffer);
    const m = await this.link.request<Done>((id) => ({ t: 'run', id, feeds, fetches }), { transfer: [...transfer] });
    if (!m.ok) throw new Error(m.message);
    const offset = performance.timeOrigin;
    return { outputs: m.outputs, feeds: m.feeds, start: m.start - offset, end: m.end - offset };
  }

  /** Releases the session after the runs already posted, and ends the thread. */
  release(): Promise<void> {
    this.released ??= this.link.close({ t: 'release' });
    return this.released;
  }
}
