import { randomUUID } from 'node:crypto';
import { Job, QueueEvents } from 'bullmq';
import {
  NotFoundError,
  QueueName,
  RerankRequestSchema,
  ValidationError,
  jobIds,
  s3Keys,
  type RerankResult,
} from '@lateral/shared';
import { createRedis } from '@lateral/infra';
import type { Runtime } from '@lateral/infra';
import { checkScorerArtifact } from '@lateral/shared';
import path from 'node:path';
import { zodIssues } from './zod-issues';

export interface RerankStatus {
  id: string;
  status: 'queued' | 'running' | 'completed' | 'failed';
  progress: number;
  result?: RerankResult;
  error?: string;
  stats?: { queries: number; candidates: number; missing: number };
}

/** Asynchronous re-ranking: the request goes to S3, a job to the rerank queue, the result back to S3. */
export class RerankService {
  private events: QueueEvents | null = null;

  constructor(private readonly rt: Runtime) {}

  private get tenant(): string {
    return this.rt.config.DEFAULT_TENANT;
  }

  parseWait(raw: unknown): number {
    if (raw === undefined || raw === '') return 0;
    const n = Number(raw);
    const max = this.rt.config.RERANK_MAX_WAIT_SECONDS;
    if (!Number.isFinite(n) || n < 0 || n > max) {
      throw new ValidationError(`wait must be a number of seconds between 0 and ${max} (RERANK_MAX_WAIT_SECONDS)`, [{ field: 'wait', message: `0..${max}` }]);
    }
    return n;
  }

  async submit(body: unknown, waitSeconds: number): Promise<{ status: number; body: RerankStatus }> {
    const parsed = RerankRequestSchema.safeParse(body);
    if (!parsed.success) throw new ValidationError('invalid re-rank request', zodIssues(parsed.error));
    const req = parsed.data;
    checkScorerArtifact(path.resolve(this.rt.config.SCORERS_DIR), req.scorer);
    const collection = await this.rt.collections.get(this.tenant, req.collection);
    if (!collection) throw new NotFoundError(`collection '${req.collection}' not found`);
    const id = `rr-${randomUUID()}`;
    const requestKey = s3Keys.rerankRequest(this.tenant, id);
    await this.rt.store.putJson(requestKey, req);
    await this.rt.queues.add(QueueName.rerank, jobIds.rerank(this.tenant, id), { tenantId: this.tenant, rerankId: id, requestKey });
    if (waitSeconds > 0) {
      const st = await this.status(id, waitSeconds);
      return { status: st.status === 'completed' || st.status === 'failed' ? 200 : 202, body: st };
    }
    return { status: 202, body: { id, status: 'queued', progress: 0 } };
  }

  async status(id: string, waitSeconds = 0): Promise<RerankStatus> {
    const job = await Job.fromId(this.rt.queues.get(QueueName.rerank), jobIds.rerank(this.tenant, id));
    if (!job) throw new NotFoundError(`re-rank job '${id}' not found (results are kept 24 hours)`);
    if (waitSeconds > 0 && !(await job.isCompleted()) && !(await job.isFailed())) {
      try {
        await job.waitUntilFinished(this.queueEvents(), waitSeconds * 1000);
      } catch {
        // Timed out, or failed: the state read below tells which.
      }
    }
    const state = await job.getState();
    const fresh = (await Job.fromId(this.rt.queues.get(QueueName.rerank), job.id!)) ?? job;
    const progress = typeof fresh.progress === 'number' ? fresh.progress : 0;
    if (state === 'completed') {
      const rv = fresh.returnvalue as { resultKey: string; queries: number; candidates: number; missing: number };
      const result = await this.rt.store.getJson<RerankResult>(rv.resultKey);
      return { id, status: 'completed', progress: 100, result: result ?? undefined, stats: { queries: rv.queries, candidates: rv.candidates, missing: rv.missing } };
    }
    if (state === 'failed') return { id, status: 'failed', progress, error: fresh.failedReason };
    return { id, status: state === 'active' ? 'running' : 'queued', progress };
  }

  private queueEvents(): QueueEvents {
    if (!this.events) {
      this.events = new QueueEvents(QueueName.rerank, { connection: createRedis(this.rt.services.redisUrl, 'worker', this.rt.logger), prefix: this.rt.config.REDIS_PREFIX });
      this.events.on('error', () => undefined);
    }
    return this.events;
  }

  async close(): Promise<void> {
    await this.events?.close();
  }
}
