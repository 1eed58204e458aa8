import { QueueName, batchKeys, jobIds, s3Keys, textJobIds, type BatchRecord } from '@lateral/shared';
import { ApiKeyRepository, LeaseBusyError, withRedisLease, type Runtime } from '@lateral/infra';
import { enqueueWarpRefit } from '@lateral/pipeline';

/** What one pass found and did. */
export interface ReconcileReport {
  /** Ingestion batches neither committed nor failed, across every collection. */
  unfinished: number;
  /** Of those, batches none of whose jobs Redis held, enqueued again at the step S3 says is next. */
  requeued: { encode: number; compress: number; index: number };
  /** Batches that can never finish (their accepted documents are gone from S3): recorded as failed, with the reason. */
  failed: number;
  /** Batch files (re-rank batches) validating or running with no job in Redis: their plan enqueued again. */
  batchFiles: number;
  /** WARP refits due (warpRefitDue) and asked for: a job queued, or already held under its deterministic id. */
  refits: number;
  ms: number;
}

/**
 * Nothing accepted is lost when Redis loses its data (issue 27 item 2). S3 holds every accepted
 * ingestion (its record, its documents, and the raw vectors and segments of the stages it passed)
 * and every batch file's record; Redis holds only the jobs that move them on. A pass walks what S3
 * holds and, for each unfinished ingestion batch none of whose jobs (encode, compress, index,
 * commit: deterministic ids) Redis holds, enqueues the step S3 says is next: `index` when the
 * segment of the collection's codec version exists, `compress` when its raw vectors do, `encode`
 * otherwise. Every stage is idempotent and job ids are deterministic, so a pass that races a
 * running pipeline adds nothing (BullMQ keeps the existing job) and a step re-run overwrites its
 * own output. A batch whose accepted documents are gone from S3 is recorded as failed with the
 * reason, so its ingestion ends `failed` instead of `processing` forever.
 *
 * Deletes and merges are not reconciled: a delete holds no "applied" mark in S3 (re-applying one
 * later could tombstone a document ingested again since), and a lost merge is asked again by the
 * merge policy at the next commit. A WARP refit that is due is asked for at every pass (its job id
 * names the collection and epoch, so a held one is kept): one lost with Redis, or cut off by a
 * shutdown, would otherwise wait for the collection's next commit, which an ingestion that has
 * ended never makes, and the collection would be served on too few centroids.
 */
export async function reconcile(rt: Runtime): Promise<ReconcileReport> {
  const t0 = Date.now();
  const report: ReconcileReport = { unfinished: 0, requeued: { encode: 0, compress: 0, index: 0 }, failed: 0, batchFiles: 0, refits: 0, ms: 0 };
  for (const tenantId of await tenants(rt)) {
    for (const collectionId of await rt.collections.list(tenantId)) await reconcileCollection(rt, tenantId, collectionId, report);
    await reconcileBatchFiles(rt, tenantId, report);
  }
  report.ms = Date.now() - t0;
  return report;
}

/**
 * Every tenant with something in S3: the common prefixes under `tenants/`, and (for S3-compatible
 * servers whose delimiter listing skips levels with no object of their own, as s3rver's does) the
 * default tenant and the tenants that hold API keys.
 */
async function tenants(rt: Runtime): Promise<string[]> {
  const keyed = (await new ApiKeyRepository(rt.store).list()).map((k) => k.tenantId);
  return [...new Set([...(await rt.collections.tenants(rt.config.DEFAULT_TENANT)), ...keyed])].sort();
}

async function hasJob(rt: Runtime, queue: QueueName, id: string): Promise<boolean> {
  return (await rt.queues.get(queue).getJob(id)) !== undefined;
}

async function reconcileCollection(rt: Runtime, tenantId: string, collectionId: string, report: ReconcileReport): Promise<void> {
  const collection = await rt.collections.get(tenantId, collectionId);
  if (!collection) return;
  const v = collection.codecVersion;
  // Jobs first, S3 second: a batch whose last job completes between the two reads is then seen committed.
  const manifestBefore = await rt.generations.manifest(tenantId, collectionId);
  if (manifestBefore) {
    const refit = await enqueueWarpRefit({ collections: rt.collections, generations: rt.generations, ivf: rt.ivf, ivfCentroids: rt.config.IVF_CENTROIDS }, rt.queues, tenantId, collectionId, { collection, manifest: manifestBefore });
    if (refit) report.refits++;
  }
  const candidates = await rt.ingestions.unfinished(tenantId, collectionId, manifestBefore, v);
  if (candidates.length === 0) return;
  const orphans: typeof candidates = [];
  for (const b of candidates) {
    const ids: [QueueName, string][] = [
      [QueueName.encode, jobIds.encode(tenantId, collectionId, b.batchId)],
      [QueueName.compress, jobIds.compress(tenantId, collectionId, b.batchId, v)],
      [QueueName.index, jobIds.index(tenantId, collectionId, b.batchId, v)],
      [QueueName.commit, jobIds.commit(tenantId, collectionId, b.batchId, v)],
    ];
    let held = false;
    for (const [q, id] of ids) if ((held = await hasJob(rt, q, id))) break;
    if (!held) orphans.push(b);
  }
  report.unfinished += candidates.length;
  if (orphans.length === 0) return;
  const now = new Set((await rt.ingestions.unfinished(tenantId, collectionId, await rt.generations.manifest(tenantId, collectionId), v)).map((b) => b.batchId));
  for (const b of orphans) {
    if (!now.has(b.batchId)) continue;
    const base = { tenantId, collectionId, ingestionId: b.ingestionId, batchId: b.batchId, documents: b.documents };
    if (b.compressed) {
      await rt.queues.add(QueueName.index, jobIds.index(tenantId, collectionId, b.batchId, v), { ...base, segmentKey: s3Keys.segment(tenantId, collectionId, b.batchId, v), codecVersion: v });
      report.requeued.index++;
    } else if (b.encoded) {
      await rt.queues.add(QueueName.compress, jobIds.compress(tenantId, collectionId, b.batchId, v), { ...base, rawKey: s3Keys.rawVectors(tenantId, collectionId, b.batchId), codecVersion: v });
      report.requeued.compress++;
    } else if (await rt.store.exists(s3Keys.batchDocuments(tenantId, collectionId, b.batchId))) {
      await rt.queues.add(QueueName.encode, jobIds.encode(tenantId, collectionId, b.batchId), { ...base, documentsKey: s3Keys.batchDocuments(tenantId, collectionId, b.batchId) });
      report.requeued.encode++;
    } else {
      await rt.ingestions.recordFailure(tenantId, collectionId, {
        batchId: b.batchId,
        ingestionId: b.ingestionId,
        queue: QueueName.encode,
        documents: b.documents,
        error: 'the batch cannot finish: its job was lost with Redis and its accepted documents are no longer in S3 (found by the reconciler)',
        failedAt: new Date().toISOString(),
      });
      report.failed++;
    }
  }
}

async function reconcileBatchFiles(rt: Runtime, tenantId: string, report: ReconcileReport): Promise<void> {
  const prefix = batchKeys.prefix(tenantId);
  for (const p of await rt.store.listPrefixes(prefix)) {
    const rerankBatchId = p.slice(prefix.length).replace(/\/$/, '');
    let record: BatchRecord | null;
    try {
      record = await rt.store.getJson<BatchRecord>(batchKeys.record(tenantId, rerankBatchId));
    } catch {
      continue; // being written: the next pass sees it
    }
    if (!record || (record.state !== 'validating' && record.state !== 'running')) continue;
    if ((await hasJob(rt, QueueName.batch, textJobIds.batchPlan(tenantId, rerankBatchId))) || (await hasJob(rt, QueueName.batch, textJobIds.batchFinalize(tenantId, rerankBatchId)))) continue;
    // The plan is idempotent: it cuts the same chunks again and adds the same flow (same job ids).
    await rt.queues.add(QueueName.batch, textJobIds.batchPlan(tenantId, rerankBatchId), { step: 'plan', tenantId, rerankBatchId });
    report.batchFiles++;
  }
}

const LEASE_TTL_MS = 120_000;
const SENTINEL_CHECK_MS = 10_000;

/**
 * Runs `reconcile` at start (unless another process's pass began within the interval), every
 * RECONCILE_INTERVAL_SECONDS, and within SENTINEL_CHECK_MS of Redis losing its data (the
 * sentinel key, which holds when the last pass began, is gone), one pass at a time
 * cluster-wide (a Redis lease; a process that finds it held skips that pass). Logs what a pass
 * did when it did anything. Returns a stop function.
 */
export function startReconciler(rt: Runtime, opts: { onPass?: (r: ReconcileReport) => void } = {}): () => void {
  const every = rt.config.RECONCILE_INTERVAL_SECONDS * 1000;
  if (every <= 0) return () => undefined;
  const redis = rt.redis;
  const leaseKey = `${rt.config.REDIS_PREFIX}:reconciler`;
  const sentinelKey = `${rt.config.REDIS_PREFIX}:reconciler:sentinel`;
  let running = false;
  let stopped = false;
  let last = 0;
  const pass = async (why: string) => {
    if (running || stopped) return;
    running = true;
    try {
      await redis.set(sentinelKey, String(Date.now()));
      const r = await withRedisLease(redis, leaseKey, () => reconcile(rt), { ttlMs: LEASE_TTL_MS, maxWaitMs: 0 });
      last = Date.now();
      const did = r.requeued.encode + r.requeued.compress + r.requeued.index + r.failed + r.batchFiles;
      if (did > 0) {
        rt.logger.warn(
          `reconciler (${why}): ${r.unfinished} unfinished ingestion batches; re-enqueued ${r.requeued.encode} encode, ${r.requeued.compress} compress, ${r.requeued.index} index, ${r.batchFiles} batch-file plans; ${r.failed} failed for good (${r.ms} ms)`,
        );
      }
      opts.onPass?.(r);
    } catch (err) {
      if (err instanceof LeaseBusyError) last = Date.now(); // another process runs this pass
      else rt.logger.warn(`reconciler (${why}): ${(err as Error).message}`);
    } finally {
      running = false;
    }
  };
  const tick = async () => {
    let lastPass: string | null;
    try {
      lastPass = await redis.get(sentinelKey);
    } catch {
      return; // Redis down: the next tick looks again
    }
    if (lastPass === null) return pass(last === 0 ? 'start' : 'Redis lost its data');
    // The sentinel holds when the cluster's last pass began: a process that starts beside others
    // waits out the interval from there instead of walking S3 again at once.
    last = Math.max(last, Number(lastPass) || 0);
    if (Date.now() - last >= every) return pass('interval');
  };
  const timer = setInterval(() => void tick(), Math.min(SENTINEL_CHECK_MS, every));
  timer.unref();
  const first = setTimeout(() => void tick(), 1_000);
  first.unref();
  return () => {
    stopped = true;
    clearInterval(timer);
    clearTimeout(first);
  };
}
