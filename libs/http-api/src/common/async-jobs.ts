import { INLINE_JOB_BYTES, NotFoundError, QueueName } from '@lateral/shared';
import { parseWaitSeconds } from './json-body';
import type { ApiRepositories, JobRecord, QueuedJob } from '@lateral/infra';
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

/** The repositories the job reads and waits use (part of every asynchronous service's). */
export const ASYNC_JOBS_REPOSITORIES = ['jobs', 'completions', 'store'] as const satisfies readonly (keyof ApiRepositories)[];
/** What AsyncJobs uses: the job reads, the completion waits, S3 for large results, the wait limit. */
export type AsyncJobsDeps = Pick<ApiRepositories, (typeof ASYNC_JOBS_REPOSITORIES)[number]> & { config: Pick<ApiRepositories['config'], 'RERANK_MAX_WAIT_SECONDS'> };

/**
 * The asynchronous request contract shared by re-rank and search: the request travels in the
 * job's data (small) or in S3, a job is queued, `wait` (seconds, <= RERANK_MAX_WAIT_SECONDS)
 * blocks until it finishes, and the result comes from the job's return value (small) or from S3
 * by the key the job returned. A waiting request learns of the completion from the queue's
 * completion event, which carries the return value: no polling and no state reads on that path.
 */
export class AsyncJobs<R, S> {
  constructor(
    private readonly deps: AsyncJobsDeps,
    private readonly queue: QueueName.rerank | QueueName.search,
    private readonly jobId: (tenantId: string, id: string) => string,
    private readonly what: string,
    /** The job's return value -> result key and stats. */
    private readonly unpack: (returnvalue: unknown) => { resultKey: string; stats?: S },
  ) {}

  parseWait(raw: unknown): number {
    return parseWaitSeconds(raw, this.deps.config.RERANK_MAX_WAIT_SECONDS);
  }

  /**
   * After the job was queued (`job`, when the caller has it: no lookup): answers at once (202) or
   * waits up to `waitSeconds` (200 when finished).
   */
  async answer(tenantId: string, id: string, waitSeconds: number, timing?: RequestTiming, job?: QueuedJob | null): Promise<{ status: number; body: JobStatus<R, S> }> {
    if (waitSeconds > 0) {
      const st = await this.status(tenantId, id, waitSeconds, timing, job ?? undefined);
      return { status: st.status === 'completed' || st.status === 'failed' ? 200 : 202, body: st };
    }
    return { status: 202, body: { id, status: 'queued', progress: 0 } };
  }

  async status(tenantId: string, id: string, waitSeconds = 0, timing?: RequestTiming, known?: QueuedJob): Promise<JobStatus<R, S>> {
    const jobId = this.jobId(tenantId, id);
    const notFound = () => new NotFoundError(`${this.what} job '${id}' not found (results are kept 24 hours)`);
    let read: JobRecord | null = null;
    if (!known) {
      read = await this.deps.jobs.read(this.queue, jobId);
      if (!read) throw notFound();
    }
    if (waitSeconds > 0 && read?.state !== 'completed' && read?.state !== 'failed') {
      // The completion of a worker in this process, or else the queue's completion event (or at
      // once when already completed): both carry the return value.
      const done = await this.deps.completions.wait(this.queue, jobId, waitSeconds * 1000, known);
      if (done) return this.completed(id, done.returnvalue, timing);
      read = null;
    }
    const job = read ?? (await this.deps.jobs.read(this.queue, jobId));
    if (!job) throw notFound();
    const progress = typeof job.progress === 'number' ? job.progress : 0;
    if (job.state === 'completed') return this.completed(id, job.returnvalue, timing);
    if (job.state === 'failed') return { id, status: 'failed', progress, error: job.failedReason };
    return { id, status: job.state === 'active' ? 'running' : 'queued', progress };
  }

  /** A completed job's answer: its result from the return value (small) or from S3. */
  private async completed(id: string, returnvalue: unknown, timing?: RequestTiming): Promise<JobStatus<R, S>> {
    const rv = returnvalue as { timing?: JobTiming; result?: R } | null;
    timing?.laps(rv?.timing);
    timing?.lap('handback');
    const { resultKey, stats } = this.unpack(returnvalue);
    const result = rv?.result !== undefined ? rv.result : await this.deps.store.getJson<R>(resultKey);
    timing?.lap('result');
    return { id, status: 'completed', progress: 100, result: result ?? undefined, ...(stats ? { stats } : {}) };
  }
}
