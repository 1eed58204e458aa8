import { randomUUID } from 'node:crypto';
import path from 'node:path';
import { QueueName, RerankRequestSchema, ValidationError, checkScorerArtifact, jobIds, type Config, type RerankResult } from '@lateral/shared';
import { checkScorerArtifactExists, type ApiRepositories, type QueuedJob } from '@lateral/infra';
import { currentTenant } from '../common/request-context';
import { ASYNC_JOBS_REPOSITORIES, AsyncJobs, type AsyncJobsDeps, type JobStatus } from '../common/async-jobs';
import { zodIssues } from '../common/zod-issues';
import { checkCallback } from '../common/callback';
import { TextRerankSubmitter } from './text-candidates';
import type { TenantQuotas } from '../auth/quotas';
import type { RequestTiming } from '../common/server-timing';

export type RerankStatus = JobStatus<RerankResult, { queries: number; candidates: number; missing: number }>;

/** The repositories this service is given (app.ts passes only these: pickRepositories). */
export const RERANK_REPOSITORIES = ['config', ...ASYNC_JOBS_REPOSITORIES] as const satisfies readonly (keyof ApiRepositories)[];
/** What a re-rank request uses: the text submitter (S3, the queues, the flows), the quotas, and the job reads and waits. */
export type RerankDeps = AsyncJobsDeps & { config: Config; texts: TextRerankSubmitter; quotas: TenantQuotas };

/** Asynchronous re-ranking: the request goes to S3, a job to the rerank queue, the result back to S3. */
export class RerankService {
  private readonly jobs: AsyncJobs<RerankResult, { queries: number; candidates: number; missing: number }>;

  readonly texts: TextRerankSubmitter;

  constructor(private readonly deps: RerankDeps) {
    this.texts = deps.texts;
    this.jobs = new AsyncJobs(deps, QueueName.rerank, jobIds.rerank, 're-rank', (rv) => {
      const r = rv as { resultKey: string; queries: number; candidates: number; missing: number };
      return { resultKey: r.resultKey, stats: { queries: r.queries, candidates: r.candidates, missing: r.missing } };
    });
  }

  /** The caller's tenant (request-context.ts): DEFAULT_TENANT with AUTH=none, the API key's with AUTH=keys. */
  private get tenantId(): string {
    return currentTenant(this.deps.config);
  }

  parseWait(raw: unknown): number {
    return this.jobs.parseWait(raw);
  }

  async submit(body: unknown, waitSeconds: number, timing?: RequestTiming): Promise<{ status: number; body: RerankStatus }> {
    const parsed = RerankRequestSchema.safeParse(body);
    if (!parsed.success) throw new ValidationError('invalid re-rank request', zodIssues(parsed.error));
    const req = parsed.data;
    checkCallback(this.deps.config, req.callback);
    checkScorerArtifact(path.resolve(this.deps.config.SCORERS_DIR), req.scorer);
    await checkScorerArtifactExists(this.deps, this.tenantId, req.scorer);
    // Collection and/or model; text candidates go to the encoder pool first (text-candidates.ts).
    const collection = await this.texts.target(this.tenantId, req);
    const id = `rr-${randomUUID()}`;
    timing?.lap('validate');
    const release = await this.deps.quotas.admit(this.tenantId, { kind: 'rerank', id });
    timing?.lap('quota');
    let job: QueuedJob | null;
    try {
      job = await this.texts.enqueue(this.tenantId, id, req, collection, timing);
    } catch (err) {
      await release();
      throw err;
    }
    timing?.lap('enqueue');
    return this.jobs.answer(this.tenantId, id, waitSeconds, timing, job);
  }

  status(id: string, waitSeconds = 0): Promise<RerankStatus> {
    return this.jobs.status(this.tenantId, id, waitSeconds);
  }

}
