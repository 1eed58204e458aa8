import { AsyncLocalStorage } from 'node:async_hooks';
import { Queue, QueueEvents, UnrecoverableError, WaitingChildrenError, Worker, type Job, type JobsOptions } from 'bullmq';
import { Redis, type RedisOptions } from 'ioredis';
import {
  ALL_QUEUES,
  InvalidPayloadError,
  PermanentJobError,
  QueueName,
  UnavailableError,
  parsePayload,
  jobName,
  type JobPayload,
  type JobPayloadInput,
  type JobResults,
} from '@lateral/shared';
import { currentLogContext, withLogContext, type LogFields, type Logger } from './logger';
import { recordJob, recordJobFailure } from './metrics';
import { localCompletions } from './local-completions';

/** The API's Redis timeouts (REDIS_COMMAND_TIMEOUT_MS, REDIS_CONNECT_TIMEOUT_MS); the defaults are the schema's. */
export interface RedisTimeouts {
  commandTimeoutMs: number;
  connectTimeoutMs: number;
}
const DEFAULT_REDIS_TIMEOUTS: RedisTimeouts = { commandTimeoutMs: 5000, connectTimeoutMs: 5000 };

/**
 * Producers (the API) fail fast when Redis is down so a request gets a 503 instead of hanging;
 * a command on a connected client that gets no answer within REDIS_COMMAND_TIMEOUT_MS fails too
 * (answered 503 `overloaded`, overload.ts). Workers wait and reconnect forever (BullMQ requires
 * maxRetriesPerRequest: null for them) and have no command timeout (their blocking reads wait).
 */
export function createRedis(url: string, role: 'producer' | 'worker', logger?: Logger, timeouts: Partial<RedisTimeouts> = {}): Redis {
  const t = { ...DEFAULT_REDIS_TIMEOUTS, ...timeouts };
  const common: RedisOptions = { connectionName: `lateral-${role}`, connectTimeout: t.connectTimeoutMs };
  const opts: RedisOptions =
    role === 'producer'
      ? { ...common, enableOfflineQueue: false, maxRetriesPerRequest: 1, commandTimeout: t.commandTimeoutMs, retryStrategy: (n) => Math.min(n * 200, 2000) }
      : { ...common, maxRetriesPerRequest: null, enableReadyCheck: false, retryStrategy: (n) => Math.min(n * 500, 5000) };
  const client = new Redis(url, opts);
  let lastLogged = 0;
  client.on('error', (err) => {
    if (Date.now() - lastLogged > 10_000) {
      lastLogged = Date.now();
      logger?.warn(`redis (${role}) error: ${err.message}`);
    }
  });
  return client;
}

/**
 * Options for every BullMQ Queue, Worker and QueueEvents. `skipVersionCheck`: BullMQ's connection
 * initialisation otherwise sends INFO and, when that fails after the connection has been closed
 * (a process stopped while Redis is slow to answer), re-emits the failure as an 'error' event on
 * an object whose listeners close() has already removed, which crashes the process. The embedded
 * and documented Redis (7.x) is above BullMQ's minimum (5.0), so the check buys nothing here.
 */
export const BULLMQ_CONNECTION_OPTIONS = { skipVersionCheck: true } as const;

export async function waitReady(client: Redis, timeoutMs = 10_000): Promise<void> {
  if (client.status === 'ready') return;
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new UnavailableError(`Redis not ready after ${timeoutMs} ms`)), timeoutMs);
    client.once('ready', () => {
      clearTimeout(timer);
      resolve();
    });
  });
}

/**
 * A backoff type for jobs whose failure may say when to try again (webhook deliveries: the
 * receiver's Retry-After on a 429 / 503, as WebhookRetryableError.retryAfterMs): that wait when
 * the error carries one, else exponential from the job's `backoff.delay`. Every worker registers
 * retryAfterBackoff as its custom strategy.
 */
export const RETRY_AFTER_BACKOFF = 'retry-after';

export function retryAfterBackoff(attemptsMade: number, _type?: string, err?: Error, job?: { opts: JobsOptions }): number {
  const asked = (err as { retryAfterMs?: unknown } | undefined)?.retryAfterMs;
  if (typeof asked === 'number' && Number.isFinite(asked) && asked >= 0) return asked;
  const backoff = job?.opts.backoff;
  const delay = typeof backoff === 'object' && backoff.delay !== undefined ? backoff.delay : 1000;
  return Math.round(2 ** Math.max(0, attemptsMade - 1) * delay);
}

export const DEFAULT_JOB_OPTIONS = (attempts: number): JobsOptions => ({
  attempts,
  backoff: { type: 'exponential', delay: 1000 },
  removeOnComplete: { age: 24 * 3600, count: 10_000 },
  removeOnFail: { age: 7 * 24 * 3600 },
});

/** One BullMQ queue per QueueName, sharing the producer connection. */
export class JobQueues {
  private readonly queues = new Map<QueueName, Queue>();
  /** Queues outside QueueName whose counts are reported too (the shard queues `shard-<i>`). */
  private readonly extra = new Map<string, Queue>();

  constructor(readonly connection: Redis, readonly prefix: string, private readonly attempts: number, extraNames: readonly string[] = []) {
    for (const name of ALL_QUEUES) {
      this.queues.set(name, new Queue(name, { ...BULLMQ_CONNECTION_OPTIONS, connection, prefix, defaultJobOptions: DEFAULT_JOB_OPTIONS(attempts) }));
    }
    for (const name of extraNames) this.extra.set(name, new Queue(name, { ...BULLMQ_CONNECTION_OPTIONS, connection, prefix }));
  }

  get(name: QueueName): Queue {
    const q = this.queues.get(name);
    if (!q) throw new Error(`no queue ${name}`);
    return q;
  }

  async add<Q extends QueueName>(name: Q, jobId: string, payload: JobPayloadInput<Q>, opts: JobsOptions = {}): Promise<Job> {
    const data = withRequestId(payload);
    parsePayload(name, data);
    return this.get(name).add(jobName(name, payload), data, { ...opts, jobId });
  }

  async addBulk<Q extends QueueName>(name: Q, jobs: { jobId: string; payload: JobPayloadInput<Q> }[]): Promise<Job[]> {
    const data = jobs.map((j) => withRequestId(j.payload));
    for (const d of data) parsePayload(name, d);
    return this.get(name).addBulk(jobs.map((j, i) => ({ name: jobName(name, j.payload), data: data[i], opts: { jobId: j.jobId } })));
  }

  async counts(): Promise<Record<string, Record<string, number>>> {
    const out: Record<string, Record<string, number>> = {};
    for (const [name, q] of [...this.queues, ...this.extra]) out[name] = await q.getJobCounts('waiting', 'active', 'completed', 'failed', 'delayed', 'prioritized');
    return out;
  }

  /** The producer connection's state as ioredis names it ('ready', 'connecting', 'reconnecting', 'end', ...): the health check and the load probe read it. */
  get connectionStatus(): string {
    return this.connection.status;
  }

  /** One round trip to Redis (the readiness check). */
  async ping(): Promise<void> {
    await this.connection.ping();
  }

  async close(): Promise<void> {
    await Promise.all([...this.queues.values(), ...this.extra.values()].map((q) => q.close()));
  }
}

/**
 * The request id of the enclosing log context (an API request, or the job that enqueues a follow-on
 * job) goes into the job's data beside the payload, so every job a request causes, directly or
 * through other jobs, logs it. The payload schemas do not declare it (parsing drops it, processors
 * never see it): WorkerHost reads it from the job's raw data, jobLogFields.
 */
export function withRequestId<T>(payload: T): T {
  const requestId = currentLogContext()?.requestId;
  if (typeof requestId !== 'string' || (payload as { requestId?: unknown }).requestId !== undefined) return payload;
  return { ...payload, requestId };
}

/** The fields on every log line a job writes: job id, queue, tenant, collection and the request id that caused it. */
export function jobLogFields(queue: string, job: Pick<Job, 'id' | 'data' | 'attemptsMade'>): LogFields {
  const d = (job.data ?? {}) as { tenantId?: unknown; collectionId?: unknown; requestId?: unknown };
  return {
    jobId: job.id,
    queue,
    ...(typeof d.tenantId === 'string' ? { tenant: d.tenantId } : {}),
    ...(typeof d.collectionId === 'string' ? { collection: d.collectionId } : {}),
    ...(typeof d.requestId === 'string' ? { requestId: d.requestId } : {}),
  };
}

const jobLoggers = new AsyncLocalStorage<Logger>();

/**
 * The logger of the job running here (WorkerHost's, for its queue; every line carries the job's
 * fields), or undefined outside a job: processors write their one summary line with it.
 */
export function jobLogger(): Logger | undefined {
  return jobLoggers.getStore();
}

/**
 * Runs `fn` as the job's code: every line logged inside it carries `fields` (jobLogFields) and
 * jobLogger() is `log`. WorkerHost runs each job in it; a compute thread runs the job's processor
 * in it again with the fields the main thread sent (libs/workers/src/compute).
 */
export function runInJobContext<T>(fields: LogFields, log: Logger, fn: () => Promise<T>): Promise<T> {
  return withLogContext(fields, () => jobLoggers.run(log, fn));
}

/** Defaults of JOB_LOCK_SECONDS and JOB_STALLED_CHECK_SECONDS (docs/deploy.md, "Stalled jobs"). */
export const DEFAULT_LOCK_MS = 30_000;
export const DEFAULT_STALLED_INTERVAL_MS = 10_000;

export type JobHandler<Q extends QueueName> = (payload: JobPayload<Q>, job: Job) => Promise<JobResults[Q]>;
export type HandlerRegistry = { [Q in QueueName]?: JobHandler<Q> };

/**
 * Runs BullMQ workers for the queues this process serves. Fails at start-up when a requested
 * queue has no handler. Payloads are parsed at the entry; bad payloads and permanent failures
 * become UnrecoverableError (no retry); everything else is retried with backoff.
 */
export class WorkerHost {
  private readonly workers: Worker[] = [];
  private readonly connections: Redis[] = [];
  /** Jobs being worked on in this process (handed back to their queue by a forced close). */
  private readonly active = new Map<string, { job: Job; abandon: (err: Error) => void }>();

  constructor(
    private readonly opts: {
      redisUrl: string;
      prefix: string;
      logger: Logger;
      concurrency: Partial<Record<QueueName, number>>;
      /** A job's lock (ms; JOB_LOCK_SECONDS), renewed every half of it; a killed worker's job is handed on once it expires. */
      lockDuration?: number;
      /** How often this process's workers look for stalled jobs (ms; JOB_STALLED_CHECK_SECONDS). */
      stalledInterval?: number;
      /** Stalls a job may have before BullMQ fails it (JOB_ATTEMPTS; each stall also uses one attempt, see tracked()). */
      maxStalledCount?: number;
      /** close()'s grace period (ms; SHUTDOWN_GRACE_SECONDS). */
      graceMs?: number;
      /** Called once when a job has failed for good (no retry left, or unrecoverable). */
      onFinalFailure?: (queue: QueueName, job: Job, err: Error) => Promise<void>;
    },
  ) {}

  /** The BullMQ workers start() created, one per queue served (heartbeats and metrics listen to their events). */
  get started(): readonly Worker[] {
    return this.workers;
  }

  start(queues: QueueName[], handlers: HandlerRegistry): void {
    const seen = new Set<QueueName>();
    for (const name of queues) {
      if (seen.has(name)) throw new Error(`queue ${name} listed twice in WORKER_QUEUES`);
      seen.add(name);
      if (!handlers[name]) throw new Error(`no handler registered for queue ${name} in this process`);
    }
    for (const name of queues) {
      this.spawn(name, (data) => parsePayload(name, data), this.tracked(name, handlers[name] as JobHandler<QueueName>), this.opts.concurrency[name] ?? 1, name);
    }
  }

  /**
   * Workers for queues outside QueueName (the shard queues `shard-<i>`, issue 10 item 4), with
   * the same logging, metrics, payload checks, stall budget and graceful close; no final-failure hook.
   */
  startExtra<P, R>(name: string, parse: (data: unknown) => P, handler: (payload: P, job: Job) => Promise<R>, concurrency: number): void {
    if (this.workers.some((w) => w.name === name)) throw new Error(`queue ${name} is already served by this process`);
    this.spawn(name, parse, this.tracked(name, handler as unknown as JobHandler<QueueName>) as unknown as (payload: P, job: Job) => Promise<R>, concurrency);
  }

  private spawn<P, R>(name: string, parse: (data: unknown) => P, handler: (payload: P, job: Job) => Promise<R>, concurrency: number, hooked?: QueueName): void {
    {
      const log = this.opts.logger.child(name);
      const connection = createRedis(this.opts.redisUrl, 'worker', log);
      this.connections.push(connection);
      const worker = new Worker(
        name,
        // Every line logged while the job runs (by any logger) carries jobLogFields; its duration is
        // recorded per outcome.
        (job: Job) =>
          runInJobContext(jobLogFields(name, job), log, async () => {
            const t0 = performance.now();
            let outcome: 'completed' | 'failed' = 'failed';
            let waiting = false;
            try {
              let payload;
              try {
                payload = parse(job.data);
              } catch (err) {
                throw new UnrecoverableError((err as Error).message);
              }
              try {
                const result = await handler(payload, job);
                outcome = 'completed';
                return result;
              } catch (err) {
                if (err instanceof PermanentJobError || err instanceof InvalidPayloadError) throw new UnrecoverableError(err.message);
                // A flow parent waiting for its children (sharded re-rank and search) has not failed.
                if (err instanceof WaitingChildrenError) waiting = true;
                throw err;
              }
            } finally {
              const seconds = (performance.now() - t0) / 1000;
              if (!waiting) recordJob(name, outcome, seconds);
              log.debug(`job ${waiting ? 'waiting for its children' : outcome} after ${Math.round(seconds * 1000)} ms`);
            }
          }),
        {
          ...BULLMQ_CONNECTION_OPTIONS,
          connection,
          prefix: this.opts.prefix,
          concurrency,
          lockDuration: this.opts.lockDuration ?? DEFAULT_LOCK_MS,
          stalledInterval: this.opts.stalledInterval ?? DEFAULT_STALLED_INTERVAL_MS,
          maxStalledCount: this.opts.maxStalledCount ?? 5,
          settings: { backoffStrategy: retryAfterBackoff },
        },
      );
      worker.on('error', (err) => log.warn(`worker error: ${err.message}`));
      worker.on('stalled', (jobId) => log.warn(`job ${jobId} stalled (its worker died or lost its lock): back in its queue`));
      // A request waiting in this process hears of the completion at once (local-completions.ts).
      worker.on('completed', (job, returnvalue) => {
        if (job.id) localCompletions.complete(name, job.id, returnvalue);
      });
      worker.on('failed', (job, err) => {
        const final = job && (err instanceof UnrecoverableError || err.name === 'UnrecoverableError' || job.attemptsMade >= (job.opts.attempts ?? 1));
        log.warn(`job ${job?.id} failed (attempt ${job?.attemptsMade}${final ? ', final' : ', will retry'}): ${err.message}`, job ? jobLogFields(name, job) : undefined);
        if (job) recordJobFailure(name, !!final);
        if (final && hooked && this.opts.onFinalFailure) this.opts.onFinalFailure(hooked, job, err).catch((e) => log.warn(`failure hook: ${(e as Error).message}`));
      });
      this.workers.push(worker);
    }
  }

  /**
   * The job budget shared by failures and stalls, and the record of what runs here: a job that has
   * stalled (its worker died, or lost its lock) `s` times and failed `f` times has used `s + f` of
   * its JOB_ATTEMPTS, so a flapping worker cannot run it forever, and one stall no longer fails it
   * for good (BullMQ's default maxStalledCount of 1 did, whatever JOB_ATTEMPTS said).
   */
  private tracked(name: string, handler: JobHandler<QueueName>): JobHandler<QueueName> {
    return async (payload, job) => {
      const attempts = job.opts.attempts ?? 1;
      const stalls = job.stalledCounter ?? 0;
      if (stalls > 0 && job.attemptsMade + stalls >= attempts) {
        throw new UnrecoverableError(
          `job stalled ${stalls} time(s) (its worker died or lost its lock) and failed ${job.attemptsMade} time(s): its ${attempts} attempts (JOB_ATTEMPTS) are used up`,
        );
      }
      const key = `${name}:${job.id}`;
      // A job handed back on shutdown settles its processor at once (its result would be refused
      // anyway: the lock is gone), so the worker can close before its connection does.
      let abandon!: (err: Error) => void;
      const abandoned = new Promise<never>((_, reject) => (abandon = reject));
      abandoned.catch(() => undefined);
      this.active.set(key, { job, abandon });
      try {
        return await Promise.race([handler(payload, job), abandoned]);
      } finally {
        this.active.delete(key);
      }
    };
  }

  private readonly closeHooks: (() => void)[] = [];
  private readonly closedHooks: (() => Promise<void>)[] = [];

  /** Runs `fn` at the end of close(), once no job runs here any more (the compute threads close then). */
  onClosed(fn: () => Promise<void>): void {
    this.closedHooks.push(fn);
  }

  /** Runs `stop` when the host closes (background loops started beside the workers: the reconciler). */
  onClose(stop: () => void): void {
    this.closeHooks.push(stop);
  }

  /**
   * Graceful close (SIGTERM): stop taking jobs and let active ones finish, up to `graceMs`
   * (SHUTDOWN_GRACE_SECONDS). Jobs still running then are handed back to their queue at once
   * (moved to wait with their lock released, no attempt used), so another worker resumes them
   * without waiting for the lock to expire; then the workers are closed by force.
   */
  async close(graceMs = this.opts.graceMs ?? 30_000): Promise<void> {
    for (const stop of this.closeHooks.splice(0)) stop();
    let timer: NodeJS.Timeout | undefined;
    const graceful = Promise.all(this.workers.map((w) => w.close())).then(() => true);
    const timedOut = new Promise<boolean>((resolve) => (timer = setTimeout(() => resolve(false), graceMs)));
    const ok = await Promise.race([graceful, timedOut]);
    clearTimeout(timer);
    if (!ok) {
      const running = [...this.active.values()].map((a) => a.job);
      this.opts.logger.warn(`workers did not finish within ${graceMs} ms (SHUTDOWN_GRACE_SECONDS); handing ${running.length} running job(s) back to their queues`);
      await Promise.race([
        Promise.all(running.map((job) => job.moveToWait(job.token).catch((err: Error) => this.opts.logger.warn(`could not hand job ${job.id} back (its lock will expire): ${err.message}`)))),
        new Promise((r) => setTimeout(r, 2000)),
      ]);
      for (const a of this.active.values()) a.abandon(new Error('handed back to its queue at shutdown (SHUTDOWN_GRACE_SECONDS)'));
      this.active.clear();
      await Promise.race([Promise.all(this.workers.map((w) => w.close(true))), new Promise((r) => setTimeout(r, 2000))]);
    }
    for (const c of this.connections) c.disconnect();
    for (const fn of this.closedHooks.splice(0)) await fn().catch((err: Error) => this.opts.logger.warn(`closing: ${err.message}`));
  }

  /** Jobs this process is working on now. */
  get running(): number {
    return this.active.size;
  }
}

export { QueueEvents };
