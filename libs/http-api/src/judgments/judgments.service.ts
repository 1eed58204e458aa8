import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import {
  assertModelId,
  MIN_TRAIN_QUERIES,
  ModelManifestSchema,
  ConflictError,
  NotFoundError,
  QueueName,
  TrainRequestSchema,
  ValidationError,
  s3Keys,
  trainingKeys,
  type JudgmentSet,
  type AesiTrainReport,
  type StoredTrainRequest,
  type TrainReport,
  type TrainRequest,
} from '@lateral/shared';
import type { ApiRepositories, JobRecord } from '@lateral/infra';
import { currentTenant } from '../common/request-context';
import { parseJudgments } from './judgments.parse';
import { zodIssues } from '../common/zod-issues';
import type { TenantQuotas } from '../auth/quotas';

export interface JudgmentsSummary {
  judgmentsId: string;
  collection: string;
  queries: number;
  judgments: number;
  positives: number;
  /** judged queries with a positive judgment of a known document and a non-positive candidate: what training can use */
  trainableQueries: number;
  /** judged document ids the collection has not accepted (listed, not fatal; at most 1,000 listed) */
  unknownDocuments: string[];
  unknownDocumentsTotal: number;
}

export interface TrainStatus {
  trainId: string;
  collection: string;
  status: 'queued' | 'running' | 'completed' | 'failed' | 'cancelled';
  progress: unknown;
  result?: TrainReport | AesiTrainReport;
  error?: string;
}

/** POST /v1/collections/{id}/train: judgmentsId is null for head 'aesi' (no judgments). */
export interface TrainAccepted {
  trainId: string;
  collection: string;
  judgmentsId: string | null;
  status: 'queued';
  trainableQueries: number;
}

/** The repositories this service is given (app.ts passes only these: pickRepositories). */
export const JUDGMENTS_REPOSITORIES = ['config', 'collections', 'store', 'queues', 'jobs', 'trainingCancels'] as const satisfies readonly (keyof ApiRepositories)[];
/** What judgments and training use: collection records, S3 (judgments, requests, reports), the train queue and its jobs, the cancel flags, the quotas. */
export type JudgmentsDeps = Pick<ApiRepositories, (typeof JUDGMENTS_REPOSITORIES)[number]> & { quotas: TenantQuotas };

/** Judgments (S3) and training runs (the train queue) of a collection. */
export class JudgmentsService {
  constructor(private readonly deps: JudgmentsDeps) {}

  /** The caller's tenant (request-context.ts): DEFAULT_TENANT with AUTH=none, the API key's with AUTH=keys. */
  private get tenantId(): string {
    return currentTenant(this.deps.config);
  }

  private async collection(id: string) {
    const c = await this.deps.collections.get(this.tenantId, id);
    if (!c) throw new NotFoundError(`collection '${id}' not found`);
    return c;
  }

  /** Ids of every document the collection has accepted (the stored ingest batches). */
  private async acceptedIds(collection: string): Promise<Set<string>> {
    const ids = new Set<string>();
    const prefix = `${s3Keys.collectionPrefix(this.tenantId, collection)}batches/`;
    for (const o of await this.deps.store.list(prefix)) {
      if (!o.key.endsWith('/documents.ndjson')) continue;
      const bytes = await this.deps.store.get(o.key);
      if (!bytes) continue;
      for (const line of Buffer.from(bytes).toString('utf8').split('\n')) {
        if (!line) continue;
        try {
          const id = (JSON.parse(line) as { id?: unknown }).id;
          if (typeof id === 'string') ids.add(id);
        } catch {
          // a stored batch is written by the API itself; an unreadable line names no document
        }
      }
    }
    return ids;
  }

  async store(collection: string, body: string, contentType: string | undefined): Promise<JudgmentsSummary> {
    await this.collection(collection);
    const queries = parseJudgments(body, contentType);
    const known = await this.acceptedIds(collection);
    const unknown = new Set<string>();
    let judgments = 0;
    let positives = 0;
    let trainable = 0;
    for (const q of queries) {
      let pos = false;
      let nonPos = false;
      for (const j of q.judgments) {
        judgments++;
        if (j.grade > 0) positives++;
        if (!known.has(j.doc)) unknown.add(j.doc);
        else if (j.grade > 0) pos = true;
        else nonPos = true;
      }
      // Unjudged documents of the collection serve as negatives too, when it has more than the judged ones.
      if (pos && (nonPos || known.size > q.judgments.length)) trainable++;
    }
    // Ids sort by creation time (to the millisecond): the newest set is the default of a train request.
    const judgmentsId = `js-${new Date().toISOString().replace(/[-:.TZ]/g, '').slice(0, 17)}-${randomUUID().slice(0, 8)}`;
    const set: JudgmentSet = { judgmentsId, collection, createdAt: new Date().toISOString(), queries, unknownDocuments: [...unknown] };
    await this.deps.store.putJson(trainingKeys.judgments(this.tenantId, collection, judgmentsId), set);
    return {
      judgmentsId,
      collection,
      queries: queries.length,
      judgments,
      positives,
      trainableQueries: trainable,
      unknownDocuments: [...unknown].slice(0, 1000),
      unknownDocumentsTotal: unknown.size,
    };
  }

  async get(collection: string, judgmentsId: string): Promise<JudgmentSet> {
    await this.collection(collection);
    const set = await this.deps.store.getJson<JudgmentSet>(trainingKeys.judgments(this.tenantId, collection, judgmentsId));
    if (!set) throw new NotFoundError(`judgment set '${judgmentsId}' of collection '${collection}' not found`);
    return set;
  }

  /** The newest judgment set of a collection (ids sort by creation time). */
  private async latest(collection: string): Promise<string | null> {
    const keys = (await this.deps.store.list(trainingKeys.judgmentsPrefix(this.tenantId, collection))).map((o) => o.key).filter((k) => k.endsWith('.json')).sort();
    const last = keys.at(-1);
    return last ? last.slice(last.lastIndexOf('/') + 1, -'.json'.length) : null;
  }

  async train(collection: string, body: unknown): Promise<TrainAccepted> {
    const parsed = TrainRequestSchema.safeParse(body ?? {});
    if (!parsed.success) throw new ValidationError('invalid train request', zodIssues(parsed.error));
    const req = parsed.data;
    const c = await this.collection(collection);
    // AESI fits a codec on the collection's own token vectors: no judgments, but the model's static
    // embedding table (the side information), checked here rather than failing the job.
    if (req.head === 'aesi') {
      this.checkStaticTable(c.model);
      return this.enqueue(collection, req, null, 0);
    }
    const judgmentsId = req.judgments ?? (await this.latest(collection));
    if (!judgmentsId) {
      throw new ConflictError(`collection '${collection}' has no judgments: POST /v1/collections/${collection}/judgments first`);
    }
    const set = await this.deps.store.getJson<JudgmentSet>(trainingKeys.judgments(this.tenantId, collection, judgmentsId));
    // 409 naming `judgments`: the collection in the URL exists (a 404 would say it does not); it has no such set.
    if (!set) throw new ConflictError(`judgments: collection '${collection}' has no judgment set '${judgmentsId}' (POST /v1/collections/${collection}/judgments answers with the id of the set it stores)`);
    const unknown = new Set(set.unknownDocuments);
    const trainable = set.queries.filter((q) => q.judgments.some((j) => j.grade > 0 && !unknown.has(j.doc))).length;
    if (trainable < MIN_TRAIN_QUERIES) {
      // The request is well formed; the stored judgments are not enough yet: a conflict with the collection's state.
      throw new ConflictError(
        `training needs at least ${MIN_TRAIN_QUERIES} judged queries with a positive judgment of a document in the collection (some to train, 2 held out); judgment set '${judgmentsId}' has ${trainable}`,
      );
    }
    return this.enqueue(collection, req, judgmentsId, trainable);
  }

  /** head 'aesi' needs side information: a model whose manifest declares its static input embedding table. */
  private checkStaticTable(model: string): void {
    assertModelId(model);
    let declared = false;
    try {
      const m = ModelManifestSchema.safeParse(JSON.parse(readFileSync(path.resolve(this.deps.config.MODELS_DIR, model, 'manifest.json'), 'utf8')));
      declared = m.success && !!m.data.staticEmbeddings;
    } catch {
      declared = false;
    }
    if (!declared) {
      throw new ValidationError(`head 'aesi' needs a model with static input embeddings (the side information); model '${model}' declares no staticEmbeddings in its manifest.json`, [
        { field: 'head', message: `'aesi' needs a static embedding table; model '${model}' has none (manifest staticEmbeddings)` },
      ]);
    }
  }

  private async enqueue(collection: string, req: TrainRequest, judgmentsId: string | null, trainable: number): Promise<TrainAccepted> {
    const trainId = `tr-${randomUUID()}`;
    const stored: StoredTrainRequest = { ...req, trainId, collection, judgmentsId: judgmentsId ?? '', createdAt: new Date().toISOString() };
    const requestKey = trainingKeys.trainRequest(this.tenantId, trainId);
    const release = await this.deps.quotas.admit(this.tenantId, { kind: 'train', id: trainId });
    try {
      await this.deps.store.putJson(requestKey, stored);
      // One attempt: a diverged or cancelled run fails for good; a crashed worker's job is given back by BullMQ (stalled).
      await this.deps.queues.add(QueueName.train, trainingKeys.trainJob(this.tenantId, trainId), { tenantId: this.tenantId, collectionId: collection, trainId, requestKey }, { attempts: 1 });
    } catch (err) {
      await release();
      throw err;
    }
    return { trainId, collection, judgmentsId, status: 'queued', trainableQueries: trainable };
  }

  private async job(trainId: string): Promise<JobRecord> {
    const job = await this.deps.jobs.read(QueueName.train, trainingKeys.trainJob(this.tenantId, trainId));
    if (!job) throw new NotFoundError(`training '${trainId}' not found (finished runs are kept 24 hours; their artifacts and reports stay in S3)`);
    return job;
  }

  async status(trainId: string): Promise<TrainStatus> {
    // A run that ended between reading the job and its state is read again (JobRecordRepository.read),
    // so its failedReason (a cancel) or its return value comes with the state, not the stale active copy's.
    const found = await this.deps.jobs.read(QueueName.train, trainingKeys.trainJob(this.tenantId, trainId));
    if (!found && (await this.deps.trainingCancels.isCancelled(this.tenantId, trainId))) {
      return { trainId, collection: '', status: 'cancelled', progress: null };
    }
    const job = found ?? (await this.job(trainId));
    const state = job.state;
    const data = job.data as { collectionId: string };
    const base = { trainId, collection: data.collectionId, progress: job.progress };
    if (state === 'completed') {
      const rv = job.returnvalue as { reportKey: string };
      const result = (await this.deps.store.getJson<TrainReport | AesiTrainReport>(rv.reportKey)) ?? undefined;
      return { ...base, status: 'completed', ...(result ? { result } : {}) };
    }
    if (state === 'failed') {
      const cancelled = /was cancelled/.test(job.failedReason ?? '');
      return { ...base, status: cancelled ? 'cancelled' : 'failed', error: job.failedReason };
    }
    return { ...base, status: state === 'active' ? 'running' : 'queued' };
  }

  /** A queued run is removed; a running one stops at its next step (a flag the job reads), failing as cancelled. */
  async cancel(trainId: string): Promise<{ trainId: string; status: 'cancelled' | 'cancelling' | 'completed' | 'failed' }> {
    const job = await this.job(trainId);
    const state = job.state;
    if (state === 'completed' || state === 'failed') return { trainId, status: state };
    await this.deps.trainingCancels.cancel(this.tenantId, trainId);
    // Not taken by a worker yet: removed; taken meanwhile (the removal fails): the flag stops it.
    if ((state === 'waiting' || state === 'delayed' || state === 'prioritized' || state === 'waiting-children') && (await this.deps.jobs.removeWaiting(QueueName.train, job.id))) {
      return { trainId, status: 'cancelled' };
    }
    return { trainId, status: 'cancelling' };
  }
}
