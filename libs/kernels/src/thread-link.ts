/**
 * The one mechanism by which the service runs work in worker threads and talks to them (issue 29
 * and issue 31's design note: one thread mechanism, not two). Used by the compute threads
 * (libs/workers/src/compute/pool.ts: whole jobs off the event loop) and by the encoder's session
 * thread (./session-thread.ts: one ONNX session's runs off the compute thread); see
 * docs/architecture.md, "CPU work off the event loop".
 *
 * A link owns one `Worker` and gives it:
 * - requests answered by id: `request(build)` posts the message `build(id)` (buffers in `transfer`
 *   are moved, not copied) and resolves with the thread's message of a `replies` type that carries
 *   that id; an optional deadline rejects it with a ThreadReplyTimeout (a late answer is dropped);
 * - one failure rule: when the thread exits, every request still waiting fails with
 *   `exitError(code)`, and a request made afterwards fails at once with the same error;
 * - every other message (start handshakes, logs, calls from the thread) to `onMessage`;
 * - `unrefWhenIdle`: the thread keeps the process alive only while a request waits for it;
 * - `close(message, waitMs)`: asks the thread to end with `message`, waits for it to exit, and
 *   terminates it after `waitMs` when given.
 */
import { Worker, type Transferable, type WorkerOptions } from 'node:worker_threads';

/** A message from the thread that answers a request: its type is one of the link's `replies`, and it carries the request's id. */
export interface ThreadReply {
  t: string;
  id: number;
}

export interface ThreadLinkOptions<Out extends { t: string }> {
  /** Message types that answer a request (each carries the request's `id`). */
  replies: readonly string[];
  /** Every other message from the thread (and replies nobody waits for any more are dropped). */
  onMessage?: (m: Out) => void;
  /** An 'error' event of the worker (an uncaught exception in the thread; its 'exit' follows). */
  onError?: (err: Error) => void;
  /** Called once when the thread has exited, after the waiting requests have been failed. */
  onExit?: (code: number) => void;
  /** The error waiting (and later) requests fail with once the thread has exited. */
  exitError: (code: number) => Error;
  /** unref the worker while no request waits: an idle thread never keeps the process alive. */
  unrefWhenIdle?: boolean;
}

/** A request's deadline passed before its reply came. */
export class ThreadReplyTimeout extends Error {
  constructor(what: string, ms: number) {
    super(`${what}: no reply from the thread within ${ms} ms`);
    this.name = 'ThreadReplyTimeout';
  }
}

interface Waiting {
  resolve: (m: ThreadReply) => void;
  reject: (e: Error) => void;
  timer?: NodeJS.Timeout;
}

export class ThreadLink<In extends { t: string }, Out extends { t: string }> {
  readonly worker: Worker;
  /** Resolves with the exit code once the thread has exited. */
  readonly exited: Promise<number>;
  private readonly waiting = new Map<number, Waiting>();
  private seq = 0;
  private failure: Error | null = null;

  constructor(entry: string | URL, workerOptions: WorkerOptions, private readonly opts: ThreadLinkOptions<Out>) {
    const worker = new Worker(entry, workerOptions);
    this.worker = worker;
    this.exited = new Promise((resolve) => worker.once('exit', resolve));
    worker.on('message', (m: Out) => {
      if (opts.replies.includes(m.t) && typeof (m as unknown as ThreadReply).id === 'number') {
        const id = (m as unknown as ThreadReply).id;
        const w = this.waiting.get(id);
        if (!w) return;
        this.settle(id, w);
        w.resolve(m as unknown as ThreadReply);
        return;
      }
      opts.onMessage?.(m);
    });
    worker.on('error', (err) => opts.onError?.(err));
    worker.once('exit', (code) => {
      this.failure = opts.exitError(code);
      for (const [id, w] of [...this.waiting]) {
        this.settle(id, w);
        w.reject(this.failure);
      }
      opts.onExit?.(code);
    });
    if (opts.unrefWhenIdle) worker.unref();
  }

  /** The error requests fail with: set once the thread has exited, else null. */
  get exitError(): Error | null {
    return this.failure;
  }

  /** Requests waiting for their reply. */
  get waitingCount(): number {
    return this.waiting.size;
  }

  /**
   * Posts `build(id)` and resolves with the reply carrying `id` (the caller reads its fields:
   * success or an error it describes). Rejects when the thread exits first, or after `timeoutMs`.
   */
  request<R extends ThreadReply>(build: (id: number) => In, opts: { transfer?: readonly Transferable[]; timeoutMs?: number; what?: string } = {}): Promise<R> {
    if (this.failure) return Promise.reject(this.failure);
    const id = ++this.seq;
    return new Promise<R>((resolve, reject) => {
      const w: Waiting = { resolve: resolve as (m: ThreadReply) => void, reject };
      if (opts.timeoutMs !== undefined) {
        w.timer = setTimeout(() => {
          this.settle(id, w);
          reject(new ThreadReplyTimeout(opts.what ?? 'request', opts.timeoutMs!));
        }, opts.timeoutMs);
      }
      this.waiting.set(id, w);
      if (this.opts.unrefWhenIdle) this.worker.ref();
      this.worker.postMessage(build(id), opts.transfer ? [...opts.transfer] : undefined);
    });
  }

  /** A message that expects no reply (an answer to the thread's own call, a notice). */
  post(m: In, transfer?: readonly Transferable[]): void {
    this.worker.postMessage(m, transfer ? [...transfer] : undefined);
  }

  /**
   * Asks the thread to end (`message`, unless it has exited already) and waits until it has; with
   * `waitMs`, terminates it when it has not ended by then. Resolves once it has exited.
   */
  async close(message: In, waitMs?: number): Promise<void> {
    if (!this.failure) {
      this.worker.ref(); // the close is awaited: the thread may finish what it was asked to first
      this.worker.postMessage(message);
    }
    if (waitMs === undefined) {
      await this.exited;
      return;
    }
    let timer: NodeJS.Timeout | undefined;
    const ended = await Promise.race([this.exited.then(() => true), new Promise<boolean>((r) => (timer = setTimeout(() => r(false), waitMs)))]);
    clearTimeout(timer);
    if (!ended) {
      await this.worker.terminate();
      await this.exited;
    }
  }

  private settle(id: number, w: Waiting): void {
    this.waiting.delete(id);
    if (w.timer) clearTimeout(w.timer);
    if (this.opts.unrefWhenIdle && this.waiting.size === 0) this.worker.unref();
  }
}
