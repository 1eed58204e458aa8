import {
  ALL_QUEUES,
  ConflictError,
  HEARTBEAT_STALE_MS,
  NotFoundError,
  QueueName,
  ValidationError,
  collectionShards,
  s3Keys,
  segmentBatches,
  type Collection,
  type CodecSettings,
  type WorkerHeartbeat,
} from '@lateral/shared';
import type { ApiRepositories, JobRecord } from '@lateral/infra';
import { ingestionWork, percentiles, rateAndEta, type Percentiles, type ProgressSample } from './admin-stats';
import { degradedOf } from '../collections/degraded';

const MINUTE = 60_000;
const HOUR = 60 * MINUTE;
/** Completed jobs read per queue for the latency percentiles (the most recent ones). */
const LATENCY_SAMPLE = 5_000;
const FAILED_SHOWN = 20;
/** finished train jobs listed after the running and queued ones */
const TRAINING_DONE_SHOWN = 5;
const RECENT_DONE_SHOWN = 5;
const S3_BYTES_TTL_MS = 30_000;
const PIPELINE_QUEUES: QueueName[] = [QueueName.encode, QueueName.compress, QueueName.index, QueueName.commit];

export interface QueueOverview {
  name: string;
  counts: Record<string, number>;
  /** Jobs finished per minute over the last hour, oldest first (60 values); minute i starts at throughputFrom + i min. */
  completedPerMinute: number[];
  failedPerMinute: number[];
}

export interface LatencyOverview {
  /** timestamp -> finishedOn: what a caller waits, queueing included (ms). */
  total: Percentiles;
  /** processedOn -> finishedOn: the worker's time (ms). */
  processing: Percentiles;
}

export interface IngestionOverview {
  tenant: string;
  collection: string;
  ingestionId: string;
  createdAt: string;
  state: 'processing' | 'done' | 'failed';
  documents: number;
  batches: number;
  stages: { accepted: number; encoded: number; compressed: number; indexed: number; committed: number; failed: number };
  /** null: a done ingestion this process never saw running (its end time is not known). */
  docsPerSecond: number | null;
  etaSeconds: number | null;
  failures: { batchId: string; stage: string; error: string }[];
}

/** One train job on the dashboard (progress as GET /v1/train/{id} shows it). */
export interface TrainingOverview {
  trainId: string;
  tenant: string | null;
  collection: string | null;
  state: 'running' | 'queued' | 'completed' | 'failed';
  stage: string | null;
  percent: number | null;
  epoch: number | null;
  maxEpochs: number | null;
  loss: number | null;
  etaSeconds: number | null;
  artifact: string | null;
  error: string | null;
  timestamp: number;
  finishedOn: number | null;
}

export interface FailedJobOverview {
  queue: string;
  id: string;
  failedReason: string;
  attemptsMade: number;
  attempts: number;
  finishedOn: number | null;
  timestamp: number;
  tenant: string | null;
  collection: string | null;
}

/** The repositories this service is given (app.ts passes only these: pickRepositories). */
export const ADMIN_REPOSITORIES = ['config', 'queues', 'jobs', 'heartbeats', 'collections', 'generations', 'ingestions', 'store'] as const satisfies readonly (keyof ApiRepositories)[];
/** What the overview reads: queue counts and jobs, the workers' heartbeats, collection records, manifests, ingestions and S3. */
export type AdminDeps = Pick<ApiRepositories, (typeof ADMIN_REPOSITORIES)[number]>;

/**
 * The operations overview (GET /v1/admin/overview) and the retry action. Reads only: BullMQ's
 * own keys (counts, the completed / failed sets scored by finish time, job hashes), the workers'
 * heartbeats, and S3 through the repositories. Ingestion rates come from samples this process
 * keeps between calls (the dashboard polls every 2 s).
 */
export class AdminService {
  private readonly samples = new Map<string, ProgressSample[]>();
  /**
   * Ingestions not re-read from S3 on every call: done ones for good (S3 never undoes that), failed
   * ones that stopped moving for a minute (a retry through this API forgets them at once).
   */
  private readonly settled = new Map<string, { o: IngestionOverview; until: number }>();
  private readonly s3Bytes = new Map<string, { at: number; bytes: number }>();
  private inflight: Promise<unknown> | null = null;
  private cached: { at: number; value: unknown } | null = null;

  constructor(private readonly deps: AdminDeps) {}

  /** Every tenant with something in S3 (DEFAULT_TENANT always). */
  private tenants(): Promise<string[]> {
    return this.deps.collections.tenants(this.deps.config.DEFAULT_TENANT);
  }

  /** One overview at most per second, shared by concurrent callers (several open dashboards). */
  async overview(): Promise<unknown> {
    if (this.cached && Date.now() - this.cached.at < 1000) return this.cached.value;
    this.inflight ??= this.build()
      .then((value) => {
        this.cached = { at: Date.now(), value };
        return value;
      })
      .finally(() => (this.inflight = null));
    return this.inflight;
  }

  private async build() {
    const now = Date.now();
    const [queues, latency, workers, failedJobs, collections, training] = await Promise.all([
      this.queues(now),
      this.latency(now),
      this.workers(now),
      this.failedJobs(),
      this.collections(now),
      this.training(),
    ]);
    return {
      at: now,
      tenants: collections.tenants,
      throughputFrom: Math.floor(now / MINUTE) * MINUTE - 59 * MINUTE,
      queues,
      latency,
      workers,
      ingestions: collections.ingestions,
      collections: collections.collections,
      failedJobs,
      training,
    };
  }

  /** Train jobs running or queued, then the latest finished ones: head, stage, epoch, loss and ETA from the job's progress. */
  private async training(): Promise<TrainingOverview[]> {
    const { active, waiting, finished } = await this.deps.jobs.listed(QueueName.train, 20, TRAINING_DONE_SHOWN);
    const out: TrainingOverview[] = [];
    const states: [string, JobRecord[]][] = [['active', active], ['waiting', waiting], ['finished', finished]];
    for (const [state, jobs] of states) {
      for (const j of jobs) {
        const d = (j.data ?? {}) as { tenantId?: string; collectionId?: string; trainId?: string; head?: string };
        const pr = (typeof j.progress === 'object' && j.progress ? j.progress : {}) as Record<string, unknown>;
        const num = (k: string) => (typeof pr[k] === 'number' && Number.isFinite(pr[k]) ? (pr[k] as number) : null);
        const rv = (j.returnvalue ?? null) as { artifact?: string; trainedCodec?: string } | null;
        out.push({
          trainId: d.trainId ?? j.id,
          tenant: d.tenantId ?? null,
          collection: d.collectionId ?? null,
          state: state === 'finished' ? (j.failedReason ? 'failed' : 'completed') : state === 'active' ? 'running' : 'queued',
          stage: typeof pr.stage === 'string' ? pr.stage : null,
          percent: num('percent'),
          epoch: num('epoch'),
          maxEpochs: num('maxEpochs'),
          loss: num('loss'),
          etaSeconds: num('etaSeconds'),
          artifact: rv?.artifact ?? rv?.trainedCodec ?? null,
          error: j.failedReason ? j.failedReason.slice(0, 500) : null,
          timestamp: j.timestamp,
          finishedOn: j.finishedOn ?? null,
        });
      }
    }
    return out;
  }

  private async queues(now: number): Promise<QueueOverview[]> {
    const counts = await this.deps.queues.counts();
    const from = Math.floor(now / MINUTE) * MINUTE - 59 * MINUTE;
    const finished = await this.deps.jobs.finishedPerMinute(from, 60, MINUTE);
    return ALL_QUEUES.map((name) => ({
      name,
      counts: counts[name] ?? {},
      completedPerMinute: finished.get(name)?.completed ?? [],
      failedPerMinute: finished.get(name)?.failed ?? [],
    }));
  }

  /** Re-rank and search latency percentiles over the last 5 and 60 minutes, from completed jobs' timestamps. */
  private async latency(now: number): Promise<Record<string, Record<'5m' | '60m', LatencyOverview>>> {
    const out: Record<string, Record<'5m' | '60m', LatencyOverview>> = {};
    for (const name of [QueueName.rerank, QueueName.search]) {
      const jobs = (await this.deps.jobs.completedTimes(name, now - HOUR, LATENCY_SAMPLE))
        .map(({ queuedAt, processedAt, finishedAt }) => ({ t: queuedAt, p: processedAt, f: finishedAt }))
        .filter((j) => Number.isFinite(j.t) && Number.isFinite(j.p) && Number.isFinite(j.f) && j.f > 0);
      const window = (ms: number): LatencyOverview => {
        const w = jobs.filter((j) => j.f >= now - ms);
        return { total: percentiles(w.map((j) => j.f - j.t)), processing: percentiles(w.map((j) => j.f - j.p)) };
      };
      out[name] = { '5m': window(5 * MINUTE), '60m': window(HOUR) };
    }
    return out;
  }

  private async workers(now: number): Promise<(WorkerHeartbeat & { ageMs: number; stale: boolean })[]> {
    // Workers whose heartbeat has expired are forgotten.
    const rows = await this.deps.heartbeats.live(now);
    return rows
      .map((w) => ({ ...w, ageMs: now - w.beatAt, stale: now - w.beatAt > HEARTBEAT_STALE_MS }))
      .sort((a, b) => a.process.localeCompare(b.process) || a.id.localeCompare(b.id));
  }

  private async failedJobs(): Promise<FailedJobOverview[]> {
    const all: FailedJobOverview[] = [];
    const perQueue = await Promise.all(ALL_QUEUES.map(async (name) => ({ name, jobs: await this.deps.jobs.failed(name, FAILED_SHOWN) })));
    for (const { name, jobs } of perQueue) {
      for (const j of jobs) {
        const d = (j.data ?? {}) as { tenantId?: string; collectionId?: string };
        all.push({
          queue: name,
          id: j.id,
          failedReason: (j.failedReason ?? '').slice(0, 2000),
          attemptsMade: j.attemptsMade,
          attempts: j.attempts,
          finishedOn: j.finishedOn,
          timestamp: j.timestamp,
          tenant: d.tenantId ?? null,
          collection: d.collectionId ?? null,
        });
      }
    }
    return all.sort((a, b) => (b.finishedOn ?? 0) - (a.finishedOn ?? 0)).slice(0, FAILED_SHOWN);
  }

  private async collections(now: number) {
    const tenants = await this.tenants();
    // Collections in parallel (each is a few S3 requests), listed in a stable order.
    const ids = (await Promise.all(tenants.map(async (tenant) => (await this.deps.collections.list(tenant)).sort().map((id) => ({ tenant, id }))))).flat();
    const rows = await Promise.all(
      ids.map(async ({ tenant, id }) => {
        const c = await this.deps.collections.get(tenant, id);
        if (!c) return null;
        const manifest = await this.deps.generations.manifest(tenant, id);
        const tokens = manifest?.segments.reduce((s, x) => s + x.tokens, 0) ?? 0;
        const segmentBytes = manifest?.segments.reduce((s, x) => s + x.bytes, 0) ?? 0;
        const [s3Bytes, ofCollection, degraded] = await Promise.all([this.collectionBytes(tenant, id, now), this.ingestionsOf(c, manifest, now), degradedOf(this.deps, tenant, id, manifest)]);
        const row = {
          tenant,
          id,
          model: c.model,
          codec: codecLabel(c.codec),
          codecVersion: c.codecVersion,
          recompressing: c.pending ? codecLabel(c.pending.codec) : null,
          generation: manifest?.generation ?? 0,
          segments: manifest?.segments.length ?? 0,
          documents: manifest?.documents ?? manifest?.segments.reduce((s, x) => s + x.documents, 0) ?? 0,
          tokens,
          segmentBytes,
          s3Bytes,
          bytesPerToken: tokens ? segmentBytes / tokens : null,
          // The shards the collection's segments are split into (fixed at creation; 1 for older records).
          shards: collectionShards(c),
          // Segments of the current generation scorers could not read (degraded.json), each with its object and reason.
          degradedSegments: degraded?.segments.length ?? 0,
          unavailableSegments: degraded?.segments ?? [],
        };
        return { row, ingestions: ofCollection };
      }),
    );
    const collections = rows.flatMap((r) => (r ? [r.row] : []));
    const ingestions: IngestionOverview[] = rows.flatMap((r) => r?.ingestions ?? []);
    const running = ingestions.filter((i) => i.state !== 'done').sort((a, b) => a.createdAt.localeCompare(b.createdAt));
    const recent = ingestions
      .filter((i) => i.state === 'done')
      .sort((a, b) => b.createdAt.localeCompare(a.createdAt))
      .slice(0, RECENT_DONE_SHOWN);
    return { tenants, collections, ingestions: [...running, ...recent] };
  }

  /** Every object of the collection in S3 (segments, raw vectors, indexes, documents), listed at most every 30 s. */
  private async collectionBytes(tenant: string, id: string, now: number): Promise<number> {
    const key = `${tenant}/${id}`;
    const hit = this.s3Bytes.get(key);
    if (hit && now - hit.at < S3_BYTES_TTL_MS) return hit.bytes;
    const objects = await this.deps.store.list(s3Keys.collectionPrefix(tenant, id));
    const bytes = objects.reduce((s, o) => s + o.size, 0);
    this.s3Bytes.set(key, { at: now, bytes });
    return bytes;
  }

  private async ingestionsOf(collection: Collection, manifest: Awaited<ReturnType<ApiRepositories['generations']['manifest']>>, now: number): Promise<IngestionOverview[]> {
    const versions = Array.from({ length: Math.max(collection.codecVersion, collection.pending?.codecVersion ?? 0) }, (_, i) => i + 1);
    const { tenantId, id: collectionId } = collection;
    const records = await this.deps.ingestions.list(tenantId, collectionId);
    const rows = await Promise.all(records.map(async (r): Promise<IngestionOverview | null> => {
      const key = `${tenantId}/${collectionId}/${r.ingestionId}`;
      const known = this.settled.get(key);
      if (known && known.until > now) return known.o;
      const s = await this.deps.ingestions.state(tenantId, collectionId, r.ingestionId, manifest, versions);
      if (!s) return null;
      // The search-index stage: a batch is indexed when its segment's index exists (any codec version).
      const indexed = new Set<string>();
      for (const v of versions) {
        const prefix = s3Keys.segmentIndex(tenantId, collectionId, `${r.ingestionId}-`, v).replace(/\.idx$/, '');
        for (const o of await this.deps.store.list(prefix)) indexed.add(o.key.slice(o.key.lastIndexOf('/') + 1).replace(/\.idx$/, ''));
      }
      const committedBatches = new Set(manifest?.segments.flatMap((x) => segmentBatches(x)) ?? []);
      const stages = {
        accepted: s.stages.accepted,
        encoded: s.stages.encoded,
        compressed: s.stages.compressed,
        indexed: r.batches.reduce((n, b) => n + (indexed.has(b.batchId) || committedBatches.has(b.batchId) ? b.documents : 0), 0),
        committed: s.stages.indexed,
        failed: s.stages.failed,
      };
      const series = this.samples.get(key) ?? [];
      series.push({ t: now, work: ingestionWork(stages) });
      while (series.length > 2 && series[0].t < now - 2 * MINUTE) series.shift();
      this.samples.set(key, series);
      const { docsPerSecond, etaSeconds } = rateAndEta(series, Date.parse(r.createdAt), r.documents, now);
      const o: IngestionOverview = {
        tenant: tenantId,
        collection: collectionId,
        ingestionId: r.ingestionId,
        createdAt: r.createdAt,
        state: s.state,
        documents: r.documents,
        batches: r.batches.length,
        stages,
        docsPerSecond,
        etaSeconds,
        failures: s.failures.map((f) => ({ batchId: f.batchId, stage: f.queue, error: f.error })),
      };
      if (s.state === 'done') {
        // Final rate: the whole ingestion's mean, when this process saw it running (else its end is not known).
        const secs = Math.max(0.001, (now - Date.parse(r.createdAt)) / 1000);
        o.docsPerSecond = series.length > 1 ? Math.round((r.documents / secs) * 100) / 100 : null;
        this.settled.set(key, { o, until: Infinity });
        this.samples.delete(key);
      } else if (s.state === 'failed' && series.length >= 2 && series[series.length - 1].work === series[series.length - 2].work) {
        this.settled.set(key, { o, until: now + MINUTE });
      }
      return o;
    }));
    return rows.filter((o): o is IngestionOverview => o !== null);
  }

  /**
   * Moves a failed job back to its queue (attempts counted from zero again). A pipeline batch's
   * failure record is removed from S3 first, so its ingestion reports `processing` again.
   */
  async retry(queue: string, jobId: string): Promise<{ queue: string; jobId: string; state: string; previousAttempts: number }> {
    if (!ALL_QUEUES.includes(queue as QueueName)) {
      throw new ValidationError(`unknown queue '${queue.slice(0, 64)}' (known: ${ALL_QUEUES.join(', ')})`, [{ field: 'path.queue', message: `one of ${ALL_QUEUES.join(', ')}` }]);
    }
    if (jobId.length === 0 || jobId.length > 512 || /[\u0000-\u001f]/.test(jobId)) {
      throw new ValidationError('invalid path parameter jobId: 1 to 512 characters, no control characters', [{ field: 'path.jobId', message: 'at most 512 characters, no control characters' }]);
    }
    const job = await this.deps.jobs.read(queue as QueueName, jobId);
    if (!job) throw new NotFoundError(`job '${jobId}' not found in queue ${queue} (failed jobs are kept 7 days)`);
    const state = job.state;
    if (state !== 'failed') throw new ConflictError(`job '${jobId}' is ${state}; only failed jobs can be retried`);
    // A pipeline job's batchId names an ingest batch (not a batch re-rank file, /v1/batches).
    const d = (job.data ?? {}) as { tenantId?: string; collectionId?: string; batchId?: string; ingestionId?: string | null };
    const ingestBatchId = PIPELINE_QUEUES.includes(queue as QueueName) ? d.batchId : undefined;
    if (d.tenantId && d.collectionId && ingestBatchId) {
      await this.deps.store.delete(s3Keys.batchFailure(d.tenantId, d.collectionId, ingestBatchId));
      if (d.ingestionId) this.settled.delete(`${d.tenantId}/${d.collectionId}/${d.ingestionId}`);
    }
    const previousAttempts = job.attemptsMade;
    await this.deps.jobs.retryFailed(queue as QueueName, jobId);
    this.cached = null;
    return { queue, jobId, state: 'waiting', previousAttempts };
  }
}

function codecLabel(c: CodecSettings): string {
  const parts: string[] = [c.kind];
  const x = c as CodecSettings & { bits?: number; dims?: number; layout?: string; sideInfo?: boolean };
  if (x.bits !== undefined) parts.push(`${x.bits}-bit`);
  if (x.dims !== undefined) parts.push(`${x.dims}d`);
  if (x.layout) parts.push(x.layout);
  if (x.sideInfo) parts.push('side-info');
  return parts.join(' ');
}
