import {
  QUOTA_CONFIG,
  QUOTA_NAMES,
  QueueName,
  QuotaExceededError,
  batchKeys,
  jobIds,
  trainingKeys,
  type TenantLimits,
  type TenantQuotaStatus,
  type TenantQuotaUpdate,
  type TenantUsage,
} from '@lateral/shared';
import type { ApiRepositories, TenantQuotaRepository } from '@lateral/infra';
import { codecVersions } from '../common/codec-versions';

/** A job counted against maxConcurrentJobs (and, for an ingestion, its documents against maxDocuments until committed). */
export type InFlightJob =
  | { kind: 'ingest'; collection: string; id: string; documents: number }
  | { kind: 'rerank' | 'search' | 'train' | 'batch'; id: string };

/** A reserved job whose target is not found yet (written after the reservation) counts for this long. */
const RESERVE_GRACE_MS = 60_000;
/** A member older than this is dropped whatever its state (results and finished jobs are kept 24 h). */
const MAX_AGE_MS = 24 * 3600 * 1000;
/** Seconds a caller refused for jobs in flight is asked to wait. */
export const QUOTA_RETRY_AFTER_SECONDS = 5;
const TERMINAL_BATCH = new Set(['completed', 'failed', 'cancelled']);

/**
 * Per-tenant quotas (docs/auth.md, "Quotas"), checked when a request is accepted, never later:
 * - maxDocuments: live documents of the current generations of every collection of the tenant
 *   (from S3: each manifest's count, so a batch delivered twice counts once) plus the documents of
 *   its ingestions still in progress (accepted minus indexed, from each ingestion's S3-derived
 *   state), plus the request's. Over it: 403.
 * - maxBytes: bytes of the compressed segments its current generations name (committed state in S3).
 *   An ingest is refused (403) once the tenant holds at least that many; what it would add is not
 *   known before it is encoded and compressed, so the last accepted ingestion may carry a tenant
 *   over by its own size.
 * - maxConcurrentJobs: ingestions, re-rank and search jobs, batches and training runs accepted and
 *   not finished. A Redis sorted set per tenant holds them (idempotent members, not counters); each
 *   check first drops the members whose job has finished (read from BullMQ or S3), then adds the
 *   new one atomically unless the set is full: 429 with Retry-After.
 * Checks of one tenant are serialised within an API process; several API processes can overshoot
 * maxDocuments by the requests they accept at the same instant (maxConcurrentJobs is atomic in Redis).
 */
/** The repositories this service is given (app.ts passes only these: pickRepositories). */
export const QUOTAS_REPOSITORIES = ['config', 'quotaOverrides', 'collections', 'generations', 'ingestions', 'store', 'jobs', 'inFlight'] as const satisfies readonly (keyof ApiRepositories)[];
/** What the quota checks read: the overrides, the tenant's collections, generations, ingestions and batches, its jobs and in-flight set. */
export type TenantQuotasDeps = Pick<ApiRepositories, (typeof QUOTAS_REPOSITORIES)[number]>;

export class TenantQuotas {
  private readonly locks = new Map<string, Promise<unknown>>();
  private readonly repository: TenantQuotaRepository;

  constructor(private readonly deps: TenantQuotasDeps) {
    this.repository = deps.quotaOverrides;
  }

  defaults(): TenantLimits {
    const c = this.deps.config;
    return { maxDocuments: c.TENANT_MAX_DOCUMENTS, maxBytes: c.TENANT_MAX_BYTES, maxConcurrentJobs: c.TENANT_MAX_CONCURRENT_JOBS };
  }

  async limits(tenant: string): Promise<TenantLimits> {
    const d = this.defaults();
    const o = await this.repository.get(tenant);
    return { maxDocuments: o?.maxDocuments ?? d.maxDocuments, maxBytes: o?.maxBytes ?? d.maxBytes, maxConcurrentJobs: o?.maxConcurrentJobs ?? d.maxConcurrentJobs };
  }

  /**
   * Admits a job for the tenant or throws QuotaExceededError naming the quota, its value, the
   * usage and what the request asked for. Returns a release function for a request that fails
   * after admission (the job was never queued); a finished job is released by the next check.
   */
  async admit(tenant: string, job: InFlightJob): Promise<() => Promise<void>> {
    const limits = await this.limits(tenant);
    const tracked = limits.maxConcurrentJobs > 0 || (job.kind === 'ingest' && limits.maxDocuments > 0);
    const storage = job.kind === 'ingest' && (limits.maxDocuments > 0 || limits.maxBytes > 0);
    if (!tracked && !storage) return async () => undefined;
    return this.serialised(tenant, async () => {
      if (storage) {
        const usage = await this.usage(tenant);
        const requested = (job as { documents: number }).documents;
        if (limits.maxDocuments > 0 && usage.documents + requested > limits.maxDocuments) {
          throw new QuotaExceededError(
            `tenant '${tenant}' document quota exceeded: maxDocuments (${QUOTA_CONFIG.maxDocuments} or the tenant's quota) is ${limits.maxDocuments}; ` +
              `it holds ${usage.documents} (${usage.committedDocuments} committed, ${usage.pendingDocuments} in ingestions in progress) and this request adds ${requested}. ` +
              'Nothing was accepted: delete documents or collections, or ask the operator for a larger quota',
            'maxDocuments',
            limits.maxDocuments,
            usage.documents,
            requested,
            403,
          );
        }
        if (limits.maxBytes > 0 && usage.bytes >= limits.maxBytes) {
          throw new QuotaExceededError(
            `tenant '${tenant}' storage quota exceeded: maxBytes (${QUOTA_CONFIG.maxBytes} or the tenant's quota) is ${limits.maxBytes}; ` +
              `its collections' committed segments hold ${usage.bytes} bytes. Nothing was accepted: delete documents or collections, or ask the operator for a larger quota`,
            'maxBytes',
            limits.maxBytes,
            usage.bytes,
            0,
            403,
          );
        }
      } else if (limits.maxConcurrentJobs > 0) {
        await this.inFlight(tenant);
      }
      if (!tracked) return async () => undefined;
      const member = JSON.stringify(job);
      const n = await this.deps.inFlight.reserve(tenant, member, limits.maxConcurrentJobs);
      if (n >= 0) {
        throw new QuotaExceededError(
          `tenant '${tenant}' has ${n} jobs in flight (ingestions, re-rank and search jobs, batches, training runs), its maxConcurrentJobs quota ` +
            `(${QUOTA_CONFIG.maxConcurrentJobs} or the tenant's quota) of ${limits.maxConcurrentJobs}: nothing was accepted; retry after ${QUOTA_RETRY_AFTER_SECONDS} s, once one has finished`,
          'maxConcurrentJobs',
          limits.maxConcurrentJobs,
          n,
          1,
          429,
          QUOTA_RETRY_AFTER_SECONDS,
        );
      }
      return async () => {
        await this.deps.inFlight.remove(tenant, member).catch(() => undefined);
      };
    });
  }

  /** The tenant's usage (documents and bytes from S3, jobs in flight from the tracked set, finished ones dropped). */
  async usage(tenant: string): Promise<TenantUsage> {
    const live = await this.inFlight(tenant);
    let committedDocuments = 0;
    let bytes = 0;
    for (const id of await this.deps.collections.list(tenant)) {
      const manifest = await this.deps.generations.manifest(tenant, id);
      if (!manifest) continue;
      committedDocuments += manifest.documents ?? manifest.segments.reduce((s, x) => s + x.documents - (x.tombstones?.length ?? 0), 0);
      bytes += manifest.segments.reduce((s, x) => s + x.bytes, 0);
    }
    const pendingDocuments = live.reduce((s, m) => s + m.pending, 0);
    return { documents: committedDocuments + pendingDocuments, committedDocuments, pendingDocuments, bytes, concurrentJobs: live.length };
  }

  async status(tenant: string): Promise<TenantQuotaStatus> {
    const [limits, record, usage] = await Promise.all([this.limits(tenant), this.repository.get(tenant), this.usage(tenant)]);
    const overrides: TenantQuotaStatus['overrides'] = {};
    for (const name of QUOTA_NAMES) if (record?.[name] !== undefined) overrides[name] = record[name];
    if (record) overrides.updatedAt = record.updatedAt;
    return { tenant, limits, defaults: this.defaults(), overrides, usage };
  }

  async put(tenant: string, update: TenantQuotaUpdate): Promise<TenantQuotaStatus> {
    await this.repository.put(tenant, update);
    return this.status(tenant);
  }

  /** The tracked jobs still in flight (with the documents an ingestion has not committed yet); finished ones are removed. */
  private async inFlight(tenant: string): Promise<{ member: string; pending: number }[]> {
    const entries = await this.deps.inFlight.members(tenant);
    const now = Date.now();
    const checked = await Promise.all(
      entries.map(async (e) => {
        if (now - e.at > MAX_AGE_MS) return { ...e, alive: false, pending: 0 };
        let job: InFlightJob;
        try {
          job = JSON.parse(e.member) as InFlightJob;
        } catch {
          return { ...e, alive: false, pending: 0 };
        }
        const r = await this.alive(tenant, job);
        // Not found yet: the request that reserved it is still writing it (or failed before it was queued).
        if (r === null) return { ...e, alive: now - e.at < RESERVE_GRACE_MS, pending: job.kind === 'ingest' ? job.documents : 0 };
        return { ...e, ...r };
      }),
    );
    const dead = checked.filter((c) => !c.alive).map((c) => c.member);
    if (dead.length) await this.deps.inFlight.remove(tenant, ...dead);
    return checked.filter((c) => c.alive).map((c) => ({ member: c.member, pending: c.pending }));
  }

  /** Whether a tracked job is still in flight (null: not found), and an ingestion's documents not yet committed. */
  private async alive(tenant: string, job: InFlightJob): Promise<{ alive: boolean; pending: number } | null> {
    if (job.kind === 'ingest') {
      const c = await this.deps.collections.get(tenant, job.collection);
      if (!c) return { alive: false, pending: 0 }; // the collection was deleted, and its documents with it
      const manifest = await this.deps.generations.manifest(tenant, job.collection);
      const s = await this.deps.ingestions.state(tenant, job.collection, job.id, manifest, codecVersions(c));
      if (!s) return null;
      return s.state === 'processing' ? { alive: true, pending: Math.max(0, s.stages.accepted - s.stages.indexed) } : { alive: false, pending: 0 };
    }
    if (job.kind === 'batch') {
      const r = await this.deps.store.getJson<{ state?: string }>(batchKeys.record(tenant, job.id));
      if (!r) return null;
      return { alive: !TERMINAL_BATCH.has(r.state ?? ''), pending: 0 };
    }
    const [queue, id] =
      job.kind === 'rerank'
        ? [QueueName.rerank, jobIds.rerank(tenant, job.id)]
        : job.kind === 'search'
          ? [QueueName.search, jobIds.search(tenant, job.id)]
          : [QueueName.train, trainingKeys.trainJob(tenant, job.id)];
    const j = await this.deps.jobs.read(queue, id);
    if (!j) return null;
    const state = j.state;
    return { alive: state !== 'completed' && state !== 'failed' && state !== 'unknown', pending: 0 };
  }

  private serialised<T>(tenant: string, fn: () => Promise<T>): Promise<T> {
    const prev = this.locks.get(tenant) ?? Promise.resolve();
    const run = prev.catch(() => undefined).then(fn);
    const tail = run.catch(() => undefined);
    this.locks.set(tenant, tail);
    void tail.then(() => {
      if (this.locks.get(tenant) === tail) this.locks.delete(tenant);
    });
    return run;
  }
}
