import { randomUUID } from 'node:crypto';
import { DeleteDocumentsSchema, NotFoundError, QueueName, ValidationError, deleteKeys, mergeJobId, type DeleteDocuments, type DeleteResult, type MergeOutcome } from '@lateral/shared';
import { compileFilter } from '@lateral/search';
import type { ApiRepositories, JobRecord, QueuedJob } from '@lateral/infra';
import { currentTenant } from '../common/request-context';
import { parseWaitSeconds } from '../common/json-body';
import { zodIssues } from '../common/zod-issues';

/** A delete still in the commit queue when the wait ran out (202); GET the status URL for its result. */
export interface DeletePending {
  deleteId: string;
  status: 'queued' | 'running';
  statusUrl: string;
}

/** A merge's answer: what it did (200), or that it is still queued or running (202; asked on `generation`). */
export type MergeAnswer =
  | ({ collection: string; generation: number; committed: boolean } & MergeOutcome)
  | { collection: string; generation: number; status: 'queued' | 'running' };

/** How long a delete waits for its commit by default (seconds; `wait` changes it, up to RERANK_MAX_WAIT_SECONDS). */
export const DEFAULT_DELETE_WAIT_SECONDS = 30;

/** The repositories this service is given (app.ts passes only these: pickRepositories). */
export const DELETES_REPOSITORIES = ['config', 'collections', 'generations', 'store', 'queues', 'jobs'] as const satisfies readonly (keyof ApiRepositories)[];
/** What deletes and merges use: the collection records and manifests, S3 (the request), the commit and merge queues and their jobs. */
export type DeletesDeps = Pick<ApiRepositories, (typeof DELETES_REPOSITORIES)[number]>;

/**
 * Deletes: the request (ids or a filter) is written to S3 and a delete job joins the commit queue,
 * where it is serialised with the segment commits of ingestions; the answer comes when the
 * generation holding its tombstones is committed (200, the acknowledgement), or 202 with a status
 * URL when that takes longer than `wait`.
 */
export class DeletesService {
  constructor(private readonly deps: DeletesDeps) {}

  private get tenantId(): string {
    return currentTenant(this.deps.config);
  }

  parseWait(raw: unknown): number {
    if (raw === undefined || raw === '') return Math.min(DEFAULT_DELETE_WAIT_SECONDS, this.deps.config.RERANK_MAX_WAIT_SECONDS);
    return parseWaitSeconds(raw, this.deps.config.RERANK_MAX_WAIT_SECONDS);
  }

  /** DELETE /v1/collections/{id}/documents/{docId}: 404 when the id is not a live document. */
  async deleteOne(collectionId: string, docId: string, waitSeconds: number): Promise<{ status: number; body: DeleteResult | DeletePending }> {
    const out = await this.submit(collectionId, { ids: [docId] }, waitSeconds);
    if (out.status === 200 && (out.body as DeleteResult).notFound.length > 0) {
      throw new NotFoundError(`document '${docId}' is not a live document of collection '${collectionId}'`);
    }
    return out;
  }

  /** POST /v1/collections/{id}/documents/delete with {ids} or {filter}. */
  async deleteMany(collectionId: string, body: unknown, waitSeconds: number): Promise<{ status: number; body: DeleteResult | DeletePending }> {
    const parsed = DeleteDocumentsSchema.safeParse(body);
    if (!parsed.success) throw new ValidationError('invalid delete request', zodIssues(parsed.error));
    return this.submit(collectionId, parsed.data, waitSeconds);
  }

  /** GET /v1/collections/{id}/deletes/{deleteId}. */
  async status(collectionId: string, deleteId: string): Promise<{ status: number; body: DeleteResult | DeletePending }> {
    const job = await this.deps.jobs.read(QueueName.commit, deleteKeys.job(this.tenantId, collectionId, deleteId));
    if (!job) throw new NotFoundError(`delete '${deleteId}' of collection '${collectionId}' not found (finished jobs are kept 24 hours)`);
    return this.answer(collectionId, deleteId, job, 0);
  }

  private async submit(collectionId: string, req: DeleteDocuments, waitSeconds: number): Promise<{ status: number; body: DeleteResult | DeletePending }> {
    const tenantId = this.tenantId;
    if (!(await this.deps.collections.get(tenantId, collectionId))) throw new NotFoundError(`collection '${collectionId}' not found`);
    if (req.filter !== undefined) compileFilter(req.filter, 'filter'); // a 400 naming the field, before anything is queued
    const deleteId = `del-${randomUUID()}`;
    const requestKey = deleteKeys.request(tenantId, collectionId, deleteId);
    await this.deps.store.putJson(requestKey, req);
    const job = await this.deps.queues.add(QueueName.commit, deleteKeys.job(tenantId, collectionId, deleteId), { op: 'delete', tenantId, collectionId, deleteId, requestKey });
    return this.answer(collectionId, deleteId, job, waitSeconds);
  }

  /**
   * POST /v1/collections/{id}/merge: a merge job on the merge queue (the tiered policy picks the
   * segments on the current generation); 200 with what it did once it finished, 202 while it runs
   * past `wait`. One job per generation asked on: asking again on the same generation answers the same job.
   */
  async merge(collectionId: string, waitSeconds: number): Promise<{ status: number; body: MergeAnswer }> {
    const tenantId = this.tenantId;
    if (!(await this.deps.collections.get(tenantId, collectionId))) throw new NotFoundError(`collection '${collectionId}' not found`);
    const generation = (await this.deps.generations.manifest(tenantId, collectionId))?.generation ?? 0;
    const jobId = mergeJobId(tenantId, collectionId, 'api', generation);
    const job = await this.deps.queues.add(QueueName.merge, jobId, { op: 'merge', tenantId, collectionId, trigger: 'api' });
    const until = Date.now() + waitSeconds * 1000;
    let pause = 20;
    for (;;) {
      const state = await this.deps.jobs.stateOf(job);
      if (state === 'completed' || state === 'failed') {
        const fresh = await this.deps.jobs.reread(QueueName.merge, job);
        if (state === 'failed') throw new Error(`merge of ${collectionId} failed: ${fresh.failedReason}`);
        const r = fresh.returnvalue as { generation: number; committed: boolean; documents?: number; merged: MergeOutcome; refit?: string; reindex?: Record<string, unknown> };
        return { status: 200, body: { collection: collectionId, generation: r.generation, committed: r.committed, ...r.merged, ...(r.refit ? { refit: r.refit } : {}), ...(r.reindex ? { reindex: r.reindex } : {}) } };
      }
      if (Date.now() >= until) return { status: 202, body: { collection: collectionId, generation, status: state === 'active' ? 'running' : 'queued' } };
      await new Promise((r) => setTimeout(r, Math.min(pause, Math.max(1, until - Date.now()))));
      pause = Math.min(200, pause * 2);
    }
  }

  /** Polls the job until it finishes or `waitSeconds` pass (deletes are rare: no QueueEvents connection kept). */
  private async answer(collectionId: string, deleteId: string, job: QueuedJob | JobRecord, waitSeconds: number): Promise<{ status: number; body: DeleteResult | DeletePending }> {
    const until = Date.now() + waitSeconds * 1000;
    let pause = 20;
    for (;;) {
      const state = 'state' in job ? job.state : await this.deps.jobs.stateOf(job);
      if (state === 'completed') {
        const fresh = 'state' in job ? job : await this.deps.jobs.reread(QueueName.commit, job);
        return { status: 200, body: { deleteId, ...(fresh.returnvalue as Omit<DeleteResult, 'deleteId'>) } };
      }
      if (state === 'failed') {
        const fresh = 'state' in job ? job : await this.deps.jobs.reread(QueueName.commit, job);
        throw new Error(`delete ${deleteId} failed: ${fresh.failedReason}`);
      }
      if (Date.now() >= until) return { status: 202, body: { deleteId, status: state === 'active' ? 'running' : 'queued', statusUrl: `/v1/collections/${collectionId}/deletes/${deleteId}` } };
      await new Promise((r) => setTimeout(r, Math.min(pause, Math.max(1, until - Date.now()))));
      pause = Math.min(200, pause * 2);
    }
  }
}
