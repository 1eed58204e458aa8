import { Job, QueueEvents } from 'bullmq';
import { INLINE_JOB_BYTES, NotFoundError, QueueName } from '@lateral/shared';
import { parseWaitSeconds } from './json-body';
import { BULLMQ_CONNECTION_OPTIONS, createRedis, localCompletions, type Runtime } from '@lateral/infra';
import type { JobTiming, RequestTiming } from './server-timing';

export interface JobStatus<R, S> {
  id: string;
  status: 'queued' | 'running' | 'completed' | 'failed';
  progress: number;
  result?: R;
  error?: string;
  stats?: S;
}

/** `{ request }` for a job's data when the request's JSON is at most INLINE_JOB_BYTES (it then skips S3), else `{}`. */
export function inlineRequest<T>(req: T): { request?: T } {
  return Buffer.byteLength(JSON.stringify(req)) <= INLINE_JOB_BYTES ? { request: req } : {};
}

/**
 * The asynchronous request contract shared by re-rank and search: the request travels in the
 * job's data (small) or in S3, a job is queued, `wait` (seconds, <= RERANK_MAX_WAIT_SECONDS)
 * blocks until it finishes, and the result comes from the job's return value (small) or from S3
 * by the key the job returned. A waiting request learns of the completion from the queue's
 * completion event, which carries the return value: no polling and no state reads on that path.
 */
export class AsyncJobs<R, S> {
  private events: QueueEvents | null = null;

  constructor(
    private readonly rt: Runtime,
    private readonly queue: QueueName.rerank | QueueName.search,
    private readonly jobId: (tenant: string, id: string) => string,
    private readonly what: string,
    /** The job's return value -> result key and stats. */
    private readonly unpack: (returnvalue: unknown) => { resultKey: string; stats?: S },
  ) {}

  parseWait(raw: unknown): number {
    return parseWaitSeconds(raw, this.rt.config.RERANK_MAX_WAIT_SECONDS);
  }

  /**
   * After the job was queued (`job`, when the caller has it: no lookup): answers at once (202) or
   * waits up to `waitSeconds` (200 when finished).
   */
  async answer(tenant: string, id: string, waitSeconds: number, timing?: RequestTiming, job?: Job | null): Promise<{ status: number; body: JobStatus<R, S> }> {
    if (waitSeconds > 0) {
      const st = await this.status(tenant, id, waitSeconds, timing, job ?? undefined);
      return { status: st.status === 'completed' || st.status === 'failed' ? 200 : 202, body: st };
    }
    return { status: 202, body: { id, status: 'queued', progress: 0 } };
  }

  async status(tenant: string, id: string, waitSeconds = 0, timing?: RequestTiming, known?: Job): Promise<JobStatus<R, S>> {
    const q = this.rt.queues.get(this.queue);
    const job = known ?? (await Job.fromId(q, this.jobId(tenant, id)));
    if (!job) throw new NotFoundError(`${this.what} job '${id}' not found (results are kept 24 hours)`);
    if (waitSeconds > 0) {
      // The completion of a worker in this process, or else the queue's completion event (or at
      // once when already completed): both carry the return value.
      const local = localCompletions.wait(this.queue, job.id!);
      try {
        const done = await Promise.race([
          local.done.then((returnvalue) => ({ returnvalue })),
          job.waitUntilFinished(this.queueEvents(), waitSeconds * 1000).then(
            (returnvalue: unknown) => ({ returnvalue }),
            () => null, // timed out, or failed: the state read below tells which
          ),
        ]);
        if (done) return this.completed(id, done.returnvalue, timing);
      } finally {
        local.cancel();
      }
    }
    const state = await job.getState();
    const fresh = (await Job.fromId(q, job.id!)) ?? job;
    const progress = typeof fresh.progress === 'number' ? fresh.progress : 0;
    if (state === 'completed') return this.completed(id, fresh.returnvalue, timing);
    if (state === 'failed') return { id, status: 'failed', progress, error: fresh.failedReason };
    return { id, status: state === 'active' ? 'running' : 'queued', progress };
  }

  /** A completed job's answer: its result from the return value (small) or from S3. */
  private async completed(id: string, returnvalue: unknown, timing?: RequestTiming): Promise<JobStatus<R, S>> {
    const rv = returnvalue as { timing?: JobTiming; result?: R } | null;
    timing?.laps(rv?.timing);
    timing?.lap('handback');
    const { resultKey, stats } = this.unpack(returnvalue);
    const result = rv?.result !== undefined ? rv.result : await this.rt.store.getJson<R>(resultKey);
    timing?.lap('result');
    return { id, status: 'completed', progress: 100, result: result ?? undefined, ...(stats ? { stats } : {}) };
  }

  private queueEvents(): QueueEvents {
    if (!this.events) {
      this.events = new QueueEvents(this.queue, { ...BULLMQ_CONNECTION_OPTIONS, connection: createRedis(this.rt.services.redisUrl, 'worker', this.rt.logger), prefix: this.rt.config.REDIS_PREFIX });
      this.events.on('error', () => undefined);
    }
    return this.events;
  }

  async close(): Promise<void> {
    await this.events?.close();
  }
}
