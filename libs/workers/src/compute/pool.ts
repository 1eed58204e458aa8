/**
 * CPU work off the event loop (issue 31 item 3, issue 29 items 1 and 4): the one mechanism both
 * the scorer and the encoder use. A worker process's main thread keeps the BullMQ workers (job
 * pick-up, lock renewal, stalled-job checks, completion events), the heartbeat, the metrics
 * endpoint and, in the all-in-one process, the HTTP API; the processors (encode, compress, index,
 * commit, merge, search, re-rank, shard rounds, encode-texts, batch, train) run in COMPUTE_THREADS
 * persistent worker threads. Each thread builds the same handler registry (`pipelineHandlers`) over
 * its own connections and keeps its caches (segments, disk copies, candidate texts, ONNX sessions)
 * warm across jobs; jobs of one collection go to the same thread, so its segments are cached once.
 *
 * A job crosses as its parsed payload and a snapshot of the BullMQ job (./protocol.ts); the
 * processor's calls on the job (updateProgress, updateData, getChildrenValues,
 * moveToWaitingChildren, log) run on the real job in the main thread. Results come back by
 * structured clone; errors come back as their own class (PermanentJobError stays unrecoverable,
 * WaitingChildrenError still parks a flow parent). A thread that dies fails the jobs it was running
 * (an ordinary failure: BullMQ retries them with backoff) and is started again; a process that dies
 * loses its locks and its jobs are resumed elsewhere as before (stalled jobs).
 */
import path from 'node:path';
import type { Job } from 'bullmq';
import type { Config } from '@lateral/shared';
import { ThreadLink } from '@lateral/kernels';
import { addMetricsSource, jobLogFields, recordComputeJob, recordComputeRestart, type Logger } from '@lateral/infra';
import { JOB_METHODS, fromWire, toWire, type FromThread, type JobSnapshot, type ThreadInit, type ToThread } from './protocol';

/** The thread's entry (registers tsx, then runs ./thread-main.ts). */
export const COMPUTE_THREAD_ENTRY = path.join(__dirname, 'compute-thread.cjs');
/** A thread that exited is started again after this long, doubled for each exit in a row before it was ready (S3 or Redis not there yet), up to MAX_RESTART_DELAY_MS. */
const RESTART_DELAY_MS = 1000;
const MAX_RESTART_DELAY_MS = 30_000;
/** How long close() waits for a thread to close its connections before terminating it. */
const CLOSE_WAIT_MS = 5000;
/** How long a scrape waits for a thread's series. */
const METRICS_WAIT_MS = 2000;

/**
 * The configuration a thread runs with: with several threads each gets its share of the
 * process's cache budgets (SCORER_CACHE_BYTES, SCORER_DISK_CACHE_BYTES, TEXT_CACHE_MEMORY_MB)
 * and a disk cache folder of its own, so the process stays within what it was given.
 */
export function threadConfig(config: Config, index: number, threads: number): Config {
  if (threads <= 1) return config;
  const base = config.SCORER_DISK_CACHE_DIR ?? path.join(config.DATA_DIR, 'scorer-cache');
  return {
    ...config,
    SCORER_CACHE_BYTES: Math.max(1 << 20, Math.floor(config.SCORER_CACHE_BYTES / threads)),
    SCORER_DISK_CACHE_BYTES: Math.floor(config.SCORER_DISK_CACHE_BYTES / threads),
    SCORER_DISK_CACHE_DIR: path.join(base, `thread-${index}`),
    TEXT_CACHE_MEMORY_MB: Math.floor(config.TEXT_CACHE_MEMORY_MB / threads),
  };
}

class ComputeThread {
  private link!: ThreadLink<ToThread, FromThread>;
  ready!: Promise<void>;
  /** The jobs running in the thread by request id: their calls (updateProgress ...) run on them here. */
  readonly running = new Map<number, Job>();
  /** Jobs given to this thread and not settled (waiting for it to start included): what "least busy" counts. */
  load = 0;
  private alive = false;
  /** Ready and not exited since. */
  private started = false;
  /** Exits in a row before the thread was ready. */
  private failedStarts = 0;

  constructor(private readonly init: ThreadInit, private readonly entry: string, private readonly logger: Logger, private readonly isClosing: () => boolean) {
    this.spawn();
  }

  private spawn(): void {
    const where = `compute thread ${this.init.index}`;
    let started: () => void;
    let failed: (e: Error) => void;
    this.ready = new Promise<void>((resolve, reject) => {
      started = resolve;
      failed = reject;
    });
    this.ready.catch(() => undefined);
    let wasReady = false;
    this.ready.then(() => (wasReady = true), () => undefined);
    this.alive = true;
    this.link = new ThreadLink<ToThread, FromThread>(
      this.entry,
      { workerData: this.init },
      {
        // a job's result and a scrape's series answer their request; a thread's exit fails the jobs it was running
        replies: ['done', 'metrics'],
        exitError: (code) => new Error(`${where} exited (code ${code}) while running this job; the job is retried`),
        onError: (err) => this.logger.error(`${where} failed: ${err.stack ?? err.message}`),
        onMessage: (m) => {
          switch (m.t) {
            case 'ready':
              this.failedStarts = 0;
              this.started = true;
              started();
              break;
            case 'start-failed':
              failed(fromWire(m.error, where));
              break;
            case 'call':
              void this.call(m.id, m.run, m.method, m.args);
              break;
            case 'log':
              this.relay(m.line);
              break;
            default:
              break;
          }
        },
        onExit: (code) => {
          if (!wasReady) this.failedStarts++;
          this.alive = false;
          this.started = false;
          this.running.clear();
          failed(new Error(`${where} exited (code ${code}) before it was ready`));
          // Until it is started again, a job given to it fails at once (and is retried).
          this.ready = Promise.reject(new Error(`${where} exited (code ${code}) and is being started again; the job is retried`));
          this.ready.catch(() => undefined);
          if (this.isClosing()) return;
          recordComputeRestart();
          const delay = Math.min(MAX_RESTART_DELAY_MS, RESTART_DELAY_MS * 2 ** Math.max(0, this.failedStarts - 1));
          this.logger.warn(`${where} exited (code ${code}); starting it again in ${delay} ms`);
          setTimeout(() => {
            if (!this.isClosing()) this.spawn();
          }, delay).unref();
        },
      },
    );
  }

  /** A line the thread logged, written by this process's logger under `<component>:compute-<i>:…` with its fields. */
  private relay(line: string): void {
    let o: Record<string, unknown>;
    try {
      o = JSON.parse(line) as Record<string, unknown>;
    } catch {
      return;
    }
    const { level, component, msg, time: _t, pid: _p, ...fields } = o;
    const log = this.logger.child(typeof component === 'string' ? component : `compute-${this.init.index}`);
    const lv = level === 'debug' || level === 'info' || level === 'warn' || level === 'error' ? level : 'info';
    log[lv](String(msg ?? ''), fields);
  }

  /** A processor's call on its job, run on the real job here; the answer goes back to the thread. */
  private async call(id: number, run: number, method: string, args: unknown[]): Promise<void> {
    const link = this.link;
    try {
      const job = this.running.get(run);
      if (!job) throw new Error(`job call ${method} after its job ended`);
      if (!(JOB_METHODS as readonly string[]).includes(method)) throw new Error(`job method ${method} is not available in a compute thread`);
      const value = await (job as unknown as Record<string, (...a: unknown[]) => Promise<unknown>>)[method](...args);
      link.post({ t: 'reply', id, ok: true, value: value === undefined ? undefined : JSON.parse(JSON.stringify(value)) });
    } catch (err) {
      link.post({ t: 'reply', id, ok: false, error: toWire(err) });
    }
  }

  async run(kind: string, payload: unknown, job: Job, queueName: string): Promise<unknown> {
    this.load++;
    try {
      return await this.start(kind, payload, job, queueName);
    } finally {
      this.load--;
    }
  }

  private async start(kind: string, payload: unknown, job: Job, queueName: string): Promise<unknown> {
    await this.ready;
    if (!this.alive) throw new Error(`compute thread ${this.init.index} exited; the job is retried`);
    recordComputeJob(this.init.index, queueName);
    const snapshot: JobSnapshot = {
      id: job.id,
      name: job.name,
      data: job.data,
      opts: job.opts,
      attemptsMade: job.attemptsMade,
      stalledCounter: job.stalledCounter ?? 0,
      token: job.token,
      queueName,
      queueQualifiedName: job.queueQualifiedName,
      timestamp: job.timestamp,
      processedOn: job.processedOn,
      logFields: jobLogFields(queueName, job),
    };
    let runId = 0;
    try {
      const done = await this.link.request<Extract<FromThread, { t: 'done' }>>((id) => {
        runId = id;
        this.running.set(id, job);
        return { t: 'run', id, kind, payload, job: snapshot };
      });
      if (done.ok) return done.value;
      throw fromWire(done.error, `compute thread ${this.init.index}`);
    } finally {
      this.running.delete(runId);
    }
  }

  /** Its series, or none while it starts (a scrape or a heartbeat never waits for a thread to start). */
  async metrics(): Promise<unknown> {
    if (!this.started) return [];
    try {
      const m = await this.link.request<Extract<FromThread, { t: 'metrics' }>>((id) => ({ t: 'metrics', id }), { timeoutMs: METRICS_WAIT_MS, what: 'metrics' });
      return m.value;
    } catch {
      return []; // the thread exited or did not answer in time
    }
  }

  async close(): Promise<void> {
    await this.link.close({ t: 'close' }, CLOSE_WAIT_MS);
  }
}

/**
 * The configuration of a maintenance thread (./lanes.ts): merges and refits read and write S3
 * directly and use none of the scorer's caches, so it gets the smallest budgets (not a share of the
 * process's, which stay with the COMPUTE_THREADS pool) and a disk cache folder of its own.
 */
export function maintenanceThreadConfig(config: Config, lane: number): Config {
  const base = config.SCORER_DISK_CACHE_DIR ?? path.join(config.DATA_DIR, 'scorer-cache');
  return { ...config, SCORER_CACHE_BYTES: 1 << 20, SCORER_DISK_CACHE_BYTES: 0, SCORER_DISK_CACHE_DIR: path.join(base, `maintenance-${lane}`), TEXT_CACHE_MEMORY_MB: 0 };
}

export interface ComputePoolOptions {
  threads: number;
  config: Config;
  redisUrl: string;
  s3Endpoint: string | undefined;
  /** Lines the threads log go to it (its level decides which they send). */
  logger: Logger;
  /** The thread's entry (default compute-thread.cjs; the pool's own spec starts a small stand-in). */
  entry?: string;
  /** The nice value the threads lower themselves to once the default encoder is loaded (ThreadInit.nice); 0 or unset: none. */
  nice?: number;
  /** The nice value the threads lower themselves to as they start, before they load anything (ThreadInit.niceAtStart); 0 or unset: none. */
  niceAtStart?: number;
  /** The first thread's index (its log name and metrics label): maintenance threads come after the COMPUTE_THREADS pool's. Default 0. */
  firstIndex?: number;
  /** A thread's configuration from the process's (default threadConfig: the budgets split between the threads). */
  configFor?: (config: Config, index: number, threads: number) => Config;
}

/** COMPUTE_THREADS persistent threads running the processors (see the module comment). */
export class ComputePool {
  private readonly threads: ComputeThread[];
  private closing = false;
  private readonly dropMetrics: () => void;

  constructor(opts: ComputePoolOptions) {
    if (opts.threads < 1) throw new Error('a compute pool needs at least one thread');
    this.threads = Array.from(
      { length: opts.threads },
      (_, i) =>
        new ComputeThread(
          {
            config: (opts.configFor ?? threadConfig)(opts.config, i, opts.threads),
            redisUrl: opts.redisUrl,
            s3Endpoint: opts.s3Endpoint,
            index: (opts.firstIndex ?? 0) + i,
            logLevel: opts.logger.level ?? opts.config.LOG_LEVEL,
            nice: opts.nice ?? 0,
            niceAtStart: opts.niceAtStart ?? 0,
          },
          opts.entry ?? COMPUTE_THREAD_ENTRY,
          opts.logger,
          () => this.closing,
        ),
    );
    // Their series (inference, S3, caches, segment health) join the process's at each scrape.
    this.dropMetrics = addMetricsSource(async () => (await Promise.all(this.threads.map((t) => t.metrics()))) as never);
  }

  get size(): number {
    return this.threads.length;
  }

  /** Resolves once every thread has started (tests and start-up logs; run() waits for its own thread anyway). */
  async ready(): Promise<void> {
    await Promise.all(this.threads.map((t) => t.ready));
  }

  /**
   * Runs processor `kind` (a queue name, or `shard`) on `payload` in a thread: the one `affinity`
   * maps to when given (a collection's jobs stay where its caches are), else the least busy.
   */
  run(kind: string, payload: unknown, job: Job, queueName: string, affinity?: string): Promise<unknown> {
    return this.pick(affinity).run(kind, payload, job, queueName);
  }

  private pick(affinity: string | undefined): ComputeThread {
    if (this.threads.length === 1) return this.threads[0];
    if (affinity !== undefined) {
      let h = 0x811c9dc5;
      for (let i = 0; i < affinity.length; i++) h = Math.imul(h ^ affinity.charCodeAt(i), 0x01000193);
      return this.threads[(h >>> 0) % this.threads.length];
    }
    return this.threads.reduce((a, b) => (b.load < a.load ? b : a));
  }

  /** Closes every thread's connections (after the workers have finished or handed back their jobs). */
  async close(): Promise<void> {
    if (this.closing) return;
    this.closing = true;
    this.dropMetrics();
    await Promise.all(this.threads.map((t) => t.close()));
  }
}
