import { Job, QueueEvents, type Queue } from 'bullmq';
import type { Redis } from 'ioredis';
import { ALL_QUEUES, QueueName } from '@lateral/shared';
import type { Logger } from './logger';
import { BULLMQ_CONNECTION_OPTIONS, createRedis, type JobQueues } from './queues';
import { localCompletions } from './local-completions';

/** A job's state as BullMQ names it ('unknown': not found, or removed). */
export type JobState = 'completed' | 'failed' | 'active' | 'waiting' | 'delayed' | 'prioritized' | 'waiting-children' | 'unknown';

/** A job as the API shows it: a copy read from Redis, with the state it was in when read. */
export interface JobRecord {
  id: string;
  state: JobState;
  data: unknown;
  progress: unknown;
  returnvalue: unknown;
  failedReason: string | undefined;
  attemptsMade: number;
  attempts: number;
  timestamp: number;
  processedOn: number | null;
  finishedOn: number | null;
}

/** A job queued a moment ago (JobQueues.add's answer): its state can be read without looking it up. */
export type QueuedJob = Pick<Job, 'id' | 'getState'>;

const TERMINAL = new Set<JobState>(['completed', 'failed']);

function record(j: Job, state: JobState): JobRecord {
  return {
    id: j.id!,
    state,
    data: j.data,
    progress: j.progress,
    returnvalue: j.returnvalue,
    failedReason: j.failedReason,
    attemptsMade: j.attemptsMade,
    attempts: j.opts.attempts ?? 1,
    timestamp: j.timestamp,
    processedOn: j.processedOn ?? null,
    finishedOn: j.finishedOn ?? null,
  };
}

/** Reads a job and its state; a job that ended between the two reads is read again, so its return value or failedReason comes with the state. */
export async function readJob(queue: Queue, jobId: string, known?: Job): Promise<JobRecord | null> {
  const job = known ?? (await Job.fromId(queue, jobId));
  if (!job) return null;
  const state = (await job.getState()) as JobState;
  const fresh = TERMINAL.has(state) ? ((await Job.fromId(queue, jobId)) ?? job) : job;
  return record(fresh, state);
}

/**
 * The jobs of the queues as the API reads and acts on them (status, dashboards, retries,
 * cancels): named reads over BullMQ's jobs and its own sorted sets, so no caller outside this
 * library opens BullMQ's keys.
 */
export class JobRecordRepository {
  constructor(
    private readonly queues: JobQueues,
    private readonly redis: Redis = queues.connection,
  ) {}

  /** The job with its state (null: not found; finished jobs are kept as DEFAULT_JOB_OPTIONS says). */
  read(queue: QueueName, jobId: string): Promise<JobRecord | null> {
    return readJob(this.queues.get(queue), jobId);
  }

  /** The state of a job just queued (JobQueues.add's answer), without looking it up. */
  async stateOf(job: QueuedJob): Promise<JobState> {
    return (await job.getState()) as JobState;
  }

  /** A queued job that just finished (JobQueues.add's answer), read again for its return value or failedReason. */
  async reread(queue: QueueName, job: QueuedJob): Promise<JobRecord> {
    const r = await readJob(this.queues.get(queue), job.id!, job as Job);
    if (!r) throw new Error(`job ${job.id} of queue ${queue} vanished`);
    return r;
  }

  /** Removes a job not yet taken by a worker; false when that failed (a worker took it meanwhile). */
  async removeWaiting(queue: QueueName, jobId: string): Promise<boolean> {
    const job = await Job.fromId(this.queues.get(queue), jobId);
    if (!job) return false;
    try {
      await job.remove();
      return true;
    } catch {
      return false;
    }
  }

  /** Moves a failed job back to its queue, attempts counted from zero again. */
  async retryFailed(queue: QueueName, jobId: string): Promise<void> {
    const job = await Job.fromId(this.queues.get(queue), jobId);
    if (!job) throw new Error(`job ${jobId} of queue ${queue} vanished`);
    await job.retry('failed', { resetAttemptsMade: true, resetAttemptsStarted: true });
  }

  /** A flow parent's failure (failedReason, or null when it has not failed) and how many of its children are processed. */
  async flowProgress(queue: QueueName, jobId: string): Promise<{ failedReason: string | null; childrenProcessed: number } | null> {
    const job = await Job.fromId(this.queues.get(queue), jobId);
    if (!job) return null;
    if (await job.isFailed()) return { failedReason: job.failedReason ?? '', childrenProcessed: 0 };
    const deps = await job.getDependenciesCount({ processed: true });
    return { failedReason: null, childrenProcessed: deps.processed ?? 0 };
  }

  /** The first `n` active and waiting jobs, and the `finished` latest completed or failed ones. */
  async listed(queue: QueueName, n: number, finished: number): Promise<{ active: JobRecord[]; waiting: JobRecord[]; finished: JobRecord[] }> {
    const q = this.queues.get(queue);
    const [active, waiting, done] = await Promise.all([q.getActive(0, n - 1), q.getWaiting(0, n - 1), q.getJobs(['completed', 'failed'], 0, finished - 1, false)]);
    const ok = (js: Job[]) => js.filter((j): j is Job => !!j?.id);
    return {
      active: ok(active).map((j) => record(j, 'active')),
      waiting: ok(waiting).map((j) => record(j, 'waiting')),
      finished: ok(done).map((j) => record(j, j.failedReason ? 'failed' : 'completed')),
    };
  }

  /** The latest `n` failed jobs of a queue. */
  async failed(queue: QueueName, n: number): Promise<JobRecord[]> {
    const jobs = await this.queues.get(queue).getFailed(0, n - 1);
    return jobs.filter((j): j is Job => !!j?.id).map((j) => record(j, 'failed'));
  }

  /** Jobs completed and failed per minute over `minutes` minutes from `from` (ms), per queue of ALL_QUEUES: BullMQ's finished sets are scored by finish time. */
  async finishedPerMinute(from: number, minutes: number, minuteMs = 60_000): Promise<Map<QueueName, { completed: number[]; failed: number[] }>> {
    const pipe = this.redis.pipeline();
    for (const name of ALL_QUEUES) {
      const q = this.queues.get(name);
      for (const set of ['completed', 'failed']) {
        for (let i = 0; i < minutes; i++) pipe.zcount(q.toKey(set), from + i * minuteMs, `(${from + (i + 1) * minuteMs}`);
      }
    }
    const res = (await pipe.exec()) ?? [];
    const n = (k: number) => Number(res[k]?.[1] ?? 0);
    const out = new Map<QueueName, { completed: number[]; failed: number[] }>();
    ALL_QUEUES.forEach((name, qi) => {
      const base = qi * 2 * minutes;
      out.set(name, { completed: Array.from({ length: minutes }, (_, i) => n(base + i)), failed: Array.from({ length: minutes }, (_, i) => n(base + minutes + i)) });
    });
    return out;
  }

  /** The timestamps (queued, processed, finished; ms) of at most `limit` jobs of the queue completed since `since`, latest first. */
  async completedTimes(queue: QueueName, since: number, limit: number): Promise<{ queuedAt: number; processedAt: number; finishedAt: number }[]> {
    const q = this.queues.get(queue);
    const ids = await this.redis.zrevrangebyscore(q.toKey('completed'), '+inf', since, 'LIMIT', 0, limit);
    const pipe = this.redis.pipeline();
    for (const id of ids) pipe.hmget(q.toKey(id), 'timestamp', 'processedOn', 'finishedOn');
    const rows = ((await pipe.exec()) ?? []).map((r) => (r[1] as (string | null)[] | null) ?? []);
    return rows.map(([t, p, f]) => ({ queuedAt: Number(t), processedAt: Number(p), finishedAt: Number(f) }));
  }
}

/**
 * Waits for jobs of the re-rank and search queues to finish: the completion of a worker in this
 * process (local-completions.ts), or else the queue's completion event (one QueueEvents
 * connection per queue, opened on first use). Both carry the return value: no polling.
 */
export class JobCompletions {
  private readonly events = new Map<QueueName, QueueEvents>();

  constructor(
    private readonly queues: JobQueues,
    private readonly opts: { redisUrl: string; prefix: string; logger?: Logger },
  ) {}

  /** The job's return value once it completed within `ms`; null when it failed or is still running then. */
  async wait(queue: QueueName, jobId: string, ms: number, known?: QueuedJob): Promise<{ returnvalue: unknown } | null> {
    const job = (known as Job | undefined) ?? (await Job.fromId(this.queues.get(queue), jobId));
    if (!job) return null;
    const local = localCompletions.wait(queue, job.id!);
    try {
      return await Promise.race([
        local.done.then((returnvalue) => ({ returnvalue })),
        job.waitUntilFinished(this.queueEvents(queue), ms).then(
          (returnvalue: unknown) => ({ returnvalue }),
          () => null, // timed out, or failed: a read of its state tells which
        ),
      ]);
    } finally {
      local.cancel();
    }
  }

  private queueEvents(queue: QueueName): QueueEvents {
    let ev = this.events.get(queue);
    if (!ev) {
      ev = new QueueEvents(queue, { ...BULLMQ_CONNECTION_OPTIONS, connection: createRedis(this.opts.redisUrl, 'worker', this.opts.logger), prefix: this.opts.prefix });
      ev.on('error', () => undefined);
      this.events.set(queue, ev);
    }
    return ev;
  }

  async close(): Promise<void> {
    await Promise.all([...this.events.values()].map((e) => e.close()));
    this.events.clear();
  }
}
