import { randomUUID } from 'node:crypto';
import path from 'node:path';
import { NotFoundError, QueueName, collectionShards, SearchRequestSchema, ValidationError, checkScorerArtifact, jobIds, s3Keys, warpLayoutOf, withWarpDefaults, type SearchResult } from '@lateral/shared';
import { checkScorerArtifactExists, type ApiRepositories, type QueuedJob } from '@lateral/infra';
import { currentTenant } from '../common/request-context';
import { compileFilter } from '@lateral/search';
import { ASYNC_JOBS_REPOSITORIES, AsyncJobs, inlineRequest, type AsyncJobsDeps, type JobStatus } from '../common/async-jobs';
import { zodIssues } from '../common/zod-issues';
import { checkCallback } from '../common/callback';
import type { TenantQuotas } from '../auth/quotas';
import type { RequestTiming } from '../common/server-timing';

export type SearchStatus = JobStatus<SearchResult, { queries: number; hits: number }>;

/** The repositories this service is given (app.ts passes only these: pickRepositories). */
export const SEARCH_REPOSITORIES = ['config', 'store', 'queues', 'serving', ...ASYNC_JOBS_REPOSITORIES] as const satisfies readonly (keyof ApiRepositories)[];
/** What a search request uses: S3 (the request), the search queue, the serving cache's collection records, the quotas, and the job reads and waits. */
export type SearchDeps = Pick<ApiRepositories, (typeof SEARCH_REPOSITORIES)[number]> & AsyncJobsDeps & { quotas: TenantQuotas };

/** Asynchronous search over a whole collection: request to S3, a job on the search queue, the result back from S3. */
export class SearchService {
  private readonly jobs: AsyncJobs<SearchResult, { queries: number; hits: number }>;

  constructor(private readonly deps: SearchDeps) {
    this.jobs = new AsyncJobs(deps, QueueName.search, jobIds.search, 'search', (rv) => {
      const r = rv as { resultKey: string; queries?: number; hits?: number };
      return { resultKey: r.resultKey, stats: { queries: r.queries ?? 0, hits: r.hits ?? 0 } };
    });
  }

  /** The caller's tenant (request-context.ts): DEFAULT_TENANT with AUTH=none, the API key's with AUTH=keys. */
  private get tenantId(): string {
    return currentTenant(this.deps.config);
  }

  parseWait(raw: unknown): number {
    return this.jobs.parseWait(raw);
  }

  async submit(body: unknown, waitSeconds: number, timing?: RequestTiming): Promise<{ status: number; body: SearchStatus }> {
    const parsed = SearchRequestSchema.safeParse(body);
    if (!parsed.success) throw new ValidationError('invalid search request', zodIssues(parsed.error));
    let req = parsed.data;
    // 400 naming the path of a bad filter condition, before anything is queued.
    if (req.filter !== undefined) compileFilter(req.filter);
    checkCallback(this.deps.config, req.callback);
    if (req.rerank) checkScorerArtifact(path.resolve(this.deps.config.SCORERS_DIR), req.rerank.scorer);
    if (req.rerank) await checkScorerArtifactExists(this.deps, this.tenantId, req.rerank.scorer);
    const collection = await this.deps.serving.collection(this.tenantId, req.collection); // cached, fresh (serving-cache.ts)
    if (!collection) throw new NotFoundError(`collection '${req.collection}' not found`);
    // A WARP search layout has its own nprobe default (WARP_DEFAULT_NPROBE) where the request names none.
    if (warpLayoutOf(collection)) req = { ...req, mode: withWarpDefaults(req.mode, (body as { mode?: unknown } | null)?.mode) };
    const id = `sr-${randomUUID()}`;
    timing?.lap('validate');
    const release = await this.deps.quotas.admit(this.tenantId, { kind: 'search', id });
    timing?.lap('quota');
    let job: QueuedJob;
    try {
      const requestKey = s3Keys.searchRequest(this.tenantId, id);
      // A small request travels in the job's data, a large one in S3 (INLINE_JOB_BYTES); so does
      // every request on a collection with several shards (each shard's job reads it by its key).
      const inline = collectionShards(collection) > 1 ? {} : inlineRequest(req);
      if (inline.request === undefined) await this.deps.store.putJson(requestKey, req);
      timing?.lap('request');
      job = await this.deps.queues.add(QueueName.search, jobIds.search(this.tenantId, id), { tenantId: this.tenantId, collectionId: req.collection, searchId: id, requestKey, ...inline, ...(req.callback ? { callback: req.callback } : {}) });
    } catch (err) {
      await release();
      throw err;
    }
    timing?.lap('enqueue');
    return this.jobs.answer(this.tenantId, id, waitSeconds, timing, job);
  }

  status(id: string, waitSeconds = 0): Promise<SearchStatus> {
    return this.jobs.status(this.tenantId, id, waitSeconds);
  }

}
