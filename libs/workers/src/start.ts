import os from 'node:os';
import { QueueName, ShardJobPayloadSchema, loadConfig, scorerShards, shardQueueName, type ShardJobPayload, type ShardJobResult } from '@lateral/shared';
import type { Job } from 'bullmq';
import { WorkerHost, deliverWebhook, enqueueWebhook, webhookEventFor, createLogger, createRuntime, recordInference, recordSimdKernels, requireServices, startMetricsServer, stopOnSignal, type HandlerRegistry, type Runtime } from '@lateral/infra';
import { setInferenceObserver } from '@lateral/kernels';
import { simdStatus } from '@lateral/simd';
import { dropShardWorkOfFailedJob } from '@lateral/pipeline';
import { HANDLED_QUEUES, pipelineHandlers } from './handlers';
import { ComputePool } from './compute/pool';
import { MAINTENANCE_QUEUES, MaintenanceLanes } from './compute/lanes';
import { startHeartbeat } from './heartbeat';
import { startTextCacheCleanup } from './text-cache-cleanup';
import { startReconciler } from './reconciler';

/** Queues whose jobs go to the thread that holds their collection's caches (segments, texts). */
const COLLECTION_AFFINITY = new Set<string>([QueueName.search, QueueName.rerank, QueueName.batch, QueueName.encodeTexts, QueueName.train, 'shard']);

/**
 * The registry of a process with compute threads: every pipeline queue's processor runs in the
 * pool (compute/pool.ts), merges and refits in their maintenance threads when the process has them
 * (compute/lanes.ts); webhook deliveries (I/O only) stay here.
 */
function pooledHandlers(rt: Runtime, pool: ComputePool | null, lanes: MaintenanceLanes | null): HandlerRegistry {
  const out: Record<string, (p: unknown, job: Job) => Promise<unknown>> = {};
  for (const q of HANDLED_QUEUES) {
    if (q === QueueName.webhook) continue;
    if (lanes?.handles(q)) out[q] = (p, job) => lanes.run(q, p, job);
    else if (pool) out[q] = (p, job) => pool.run(q, p, job, q, affinityOf(q, p));
    else out[q] = () => Promise.reject(new Error(`queue ${q} is not served by this process's compute threads`));
  }
  out[QueueName.webhook] = (p) => deliverWebhook(rt.config, p as never);
  return out as HandlerRegistry;
}

function affinityOf(kind: string, p: unknown): string | undefined {
  if (!COLLECTION_AFFINITY.has(kind)) return undefined;
  const { tenantId, collectionId } = (p ?? {}) as { tenantId?: unknown; collectionId?: unknown };
  return typeof tenantId === 'string' ? `${tenantId}/${typeof collectionId === 'string' ? collectionId : ''}` : undefined;
}

const poolsOf = new WeakMap<WorkerHost, ComputePool>();
const lanesOf = new WeakMap<WorkerHost, MaintenanceLanes>();

/**
 * Resolves once the compute threads of a host that startWorkers started have loaded their modules
 * and runtime (at once without threads). The all-in-one server waits for it before it answers: a
 * service that took documents while its one compute thread was still loading (~3 s of CPU on the
 * 2-core machine) ran that start-up beside its first jobs (issue 29's ingest bench counted it as
 * pipeline work). The same for the maintenance threads started with the process (ingestLanesAtStart).
 * A thread that fails to start is not waited for here (it is started again, and its jobs are
 * retried meanwhile), nor one that takes longer than `timeoutMs`.
 */
export async function workersReady(host: WorkerHost, timeoutMs = 60_000): Promise<void> {
  const pool = poolsOf.get(host);
  const lanes = lanesOf.get(host);
  if (!pool && !lanes) return;
  let timer: NodeJS.Timeout | undefined;
  const ready = Promise.all([pool?.ready().catch(() => undefined), lanes?.ready().catch(() => undefined)]);
  await Promise.race([ready, new Promise<void>((resolve) => (timer = setTimeout(resolve, timeoutMs).unref()))]);
  clearTimeout(timer);
}

/**
 * Starts BullMQ workers for `queues` in this process, with the pipeline's handlers: in
 * COMPUTE_THREADS worker threads (compute/pool.ts) or, with COMPUTE_THREADS=0, on this event loop.
 */
export function startWorkers(rt: Runtime, queues: QueueName[]): WorkerHost {
  const { config } = rt;
  // ONNX Runtime run times and encoder batch sizes -> this process's metrics.
  setInferenceObserver(recordInference);
  const host = new WorkerHost({
    redisUrl: rt.services.redisUrl,
    prefix: config.REDIS_PREFIX,
    logger: rt.logger.child('worker'),
    // Stalled jobs and shutdown (docs/deploy.md): a killed worker's job is resumed within
    // JOB_LOCK_SECONDS + JOB_STALLED_CHECK_SECONDS, a stall uses one of JOB_ATTEMPTS, and SIGTERM
    // gives active jobs SHUTDOWN_GRACE_SECONDS before handing them back.
    lockDuration: config.JOB_LOCK_SECONDS * 1000,
    stalledInterval: config.JOB_STALLED_CHECK_SECONDS * 1000,
    maxStalledCount: config.JOB_ATTEMPTS,
    graceMs: config.SHUTDOWN_GRACE_SECONDS * 1000,
    concurrency: {
      encode: config.ENCODE_CONCURRENCY,
      compress: config.COMPRESS_CONCURRENCY,
      index: config.INDEX_CONCURRENCY,
      commit: config.COMMIT_CONCURRENCY,
      merge: config.MERGE_CONCURRENCY,
      refit: config.REFIT_CONCURRENCY,
      rerank: config.RERANK_CONCURRENCY,
      search: config.SEARCH_CONCURRENCY,
      'encode-texts': config.ENCODE_TEXTS_CONCURRENCY,
      batch: config.BATCH_CONCURRENCY,
      webhook: config.WEBHOOK_CONCURRENCY,
    },
    onFinalFailure: async (queue, job, err) => {
      // A re-rank or search with a callback tells it that it failed (a job of the webhook queue).
      const cb = job.data as { callback?: unknown; tenantId?: string; collectionId?: string; rerankId?: string; searchId?: string };
      if ((queue === QueueName.rerank || queue === QueueName.search) && typeof cb.callback === 'string' && cb.tenantId) {
        const event = webhookEventFor(queue, { ...cb, tenantId: cb.tenantId }, { error: err.message });
        await enqueueWebhook(rt.queues, config, cb.tenantId, cb.callback, event);
      }
      // A sharded re-rank or search that failed for good leaves its rounds' inputs and its shards'
      // partial results in S3 (a completed one removes them itself): removed here (nothing to list when unsharded).
      await dropShardWorkOfFailedJob(rt.store, queue, cb);
      // A batch that failed for good is recorded in S3, so its ingestion reports it and never looks stuck.
      const d = job.data as { tenantId?: string; collectionId?: string; ingestionId?: string | null; batchId?: string; documents?: number };
      if ((queue === QueueName.encode || queue === QueueName.compress || queue === QueueName.index || queue === QueueName.commit) && d.tenantId && d.collectionId && d.batchId) {
        // It will not become a segment: no longer in flight for ingest back-pressure.
        await rt.ingestBacklog.done(d.tenantId, d.collectionId, d.batchId).catch((e: Error) => rt.logger.warn(`ingest backlog: batch ${d.batchId} not removed: ${e.message}`));
      }
      if ((queue === QueueName.encode || queue === QueueName.compress || queue === QueueName.index || queue === QueueName.commit) && d.tenantId && d.collectionId && d.batchId && d.ingestionId) {
        await rt.ingestions.recordFailure(d.tenantId, d.collectionId, {
          batchId: d.batchId,
          ingestionId: d.ingestionId,
          queue,
          documents: d.documents ?? 0,
          error: err.message.slice(0, 2000),
          failedAt: new Date().toISOString(),
        });
      }
    },
  });
  const extra: Parameters<typeof pipelineHandlers>[1] = {};
  // Only the queues this process serves decide whether it needs the threads (a webhook-only process does not).
  const threaded = config.COMPUTE_THREADS > 0 && queues.some((q) => q !== QueueName.webhook);
  // Merges and refits in threads of their own (MAINTENANCE_THREADS, compute/lanes.ts): a refit's
  // minutes of k-means and rebuild no longer hold the encode, index and commit jobs (issue 32).
  const lanes =
    threaded && config.MAINTENANCE_THREADS > 0 && queues.some((q) => MAINTENANCE_QUEUES.has(q))
      ? new MaintenanceLanes({
          threads: config.MAINTENANCE_THREADS,
          firstIndex: config.COMPUTE_THREADS,
          refitNice: config.REFIT_NICE,
          config,
          redisUrl: rt.services.redisUrl,
          s3Endpoint: rt.services.s3Endpoint,
          logger: rt.logger,
        })
      : null;
  const pool =
    threaded && queues.some((q) => q !== QueueName.webhook && !lanes?.handles(q))
      ? new ComputePool({
          threads: config.COMPUTE_THREADS,
          config,
          redisUrl: rt.services.redisUrl,
          s3Endpoint: rt.services.s3Endpoint,
          logger: rt.logger,
          // An encoder process: the encoder's threads first, the compute threads' other work below them (COMPUTE_NICE).
          nice: queues.includes(QueueName.encode) ? config.COMPUTE_NICE : 0,
        })
      : null;
  host.start(queues, pool || lanes ? pooledHandlers(rt, pool, lanes) : pipelineHandlers(rt, extra));
  if (pool || lanes) host.onClosed(async () => void (await Promise.all([pool?.close(), lanes?.close()])));
  if (pool) poolsOf.set(host, pool);
  if (lanes && ingestLanesAtStart(config, queues)) {
    lanes.startFor(queues);
    lanesOf.set(host, lanes);
  }
  // A scorer (a process working on rerank or search) serves the shard queues of the shards it holds.
  if (queues.includes(QueueName.rerank) || queues.includes(QueueName.search)) {
    const shards = scorerShards(config.SCORER_SHARDS, config.COLLECTION_MAX_SHARDS, config.SCORER_SHARD_FROM_HOSTNAME, os.hostname());
    const shardChild = (p: ShardJobPayload, job: Job) => (pool ? (pool.run('shard', p, job, job.queueName, affinityOf('shard', p)) as Promise<ShardJobResult>) : extra.shardChild!(p));
    for (const i of shards) host.startExtra(shardQueueName(i), (d) => ShardJobPayloadSchema.parse(d), shardChild, config.SCORER_SHARD_CONCURRENCY);
    if (shards.length < config.COLLECTION_MAX_SHARDS) rt.logger.info(`holding shards ${shards.length ? shards.join(', ') : 'none'} (SCORER_SHARDS)`);
  }
  reportKernels(rt, queues);
  startHeartbeat(rt, host);
  startTextCacheCleanup(rt, queues);
  // The processes that take ingestion work put back what Redis lost (reconciler.ts).
  if (queues.includes(QueueName.encode)) host.onClose(startReconciler(rt));
  return host;
}

/**
 * Whether a process starts its maintenance threads with itself rather than on their first jobs:
 * one that commits ingested batches (commit queue, with encode: an ingest process) and merges after
 * every commit (MERGE_AFTER_COMMIT) asks for a merge at its first commit, and a WARP collection's
 * commits ask for refits, so its lanes would start during its first ingestion, their module
 * loading (~3.7 s of CPU for the merge thread, ~1.4 s for the refit thread in issue 29's profile of
 * a 512-document ingest, 2026-11-28) running beside that ingestion's last index jobs on the same
 * cores. Other processes (scorers, a service with MERGE_AFTER_COMMIT off, the integration tests)
 * keep starting a lane on its first job.
 */
export function ingestLanesAtStart(config: Pick<ReturnType<typeof loadConfig>, 'MERGE_AFTER_COMMIT'>, queues: readonly QueueName[]): boolean {
  return config.MERGE_AFTER_COMMIT && queues.includes(QueueName.encode) && queues.includes(QueueName.commit) && (queues.includes(QueueName.merge) || queues.includes(QueueName.refit));
}

/**
 * Says which scoring kernels this process runs (the compute threads load the same module file):
 * a warning when it is the JavaScript fallback, which gives the same results about 2x slower
 * (a module not built for this source, e.g. after an update without `node scripts/ensure-deps.cjs`),
 * and the `lateral_simd_kernels` gauge either way. Only processes that score or build indexes.
 */
function reportKernels(rt: Runtime, queues: QueueName[]): void {
  if (!queues.some((q) => q !== QueueName.webhook)) return;
  const s = simdStatus();
  recordSimdKernels(s.kind);
  if (s.kind === 'wasm') rt.logger.info(`scoring kernels: WebAssembly SIMD (${s.module})`);
  else rt.logger.warn(`scoring kernels: JavaScript fallback (${s.reason}; ${s.module}): the same results, about 2x slower; \`node scripts/ensure-deps.cjs\` builds the module`);
}

/**
 * Entry shared by the standalone worker apps: the queues come from WORKER_QUEUES when set,
 * otherwise from the app's defaults. Closes gracefully on SIGTERM (finishes active jobs).
 */
export async function runWorkerApp(name: string, defaults: QueueName[]): Promise<void> {
  const config = loadConfig();
  const logger = createLogger(config.LOG_LEVEL, name);
  const rt = await createRuntime(config, requireServices(config), logger);
  const queues = config.WORKER_QUEUES.length ? config.WORKER_QUEUES : defaults;
  const host = startWorkers(rt, queues);
  const metrics = config.METRICS_PORT > 0 ? await startMetricsServer(config.METRICS_PORT, config.HOST) : null;
  // The process's own deadline leaves the workers their grace period (SHUTDOWN_GRACE_SECONDS) and 30 s more.
  stopOnSignal(async () => {
    logger.info(`closing workers (active jobs get SHUTDOWN_GRACE_SECONDS = ${config.SHUTDOWN_GRACE_SECONDS} s, then go back to their queues)`);
    await host.close();
    await metrics?.close();
    await rt.close();
  }, { timeoutMs: (config.SHUTDOWN_GRACE_SECONDS + 30) * 1000 });
  // After the handlers: a signal sent as soon as this line is seen finds them installed.
  logger.info(`${name} working on ${queues.join(', ')} (onnx: ${config.ORT_EXECUTION_PROVIDER}; compute threads: ${config.COMPUTE_THREADS}${maintenanceNote(config, queues)}${metrics ? `; metrics: http://${config.HOST}:${metrics.port}/metrics` : ''})`);
}

/** The start-up line's note on maintenance threads (MAINTENANCE_THREADS), when the process has them. */
function maintenanceNote(config: ReturnType<typeof loadConfig>, queues: QueueName[]): string {
  if (config.COMPUTE_THREADS <= 0 || config.MAINTENANCE_THREADS <= 0 || !queues.some((q) => MAINTENANCE_QUEUES.has(q))) return '';
  return config.MAINTENANCE_THREADS >= 2 ? `; merges and refits in threads of their own (refits at nice ${config.REFIT_NICE})` : `; merges and refits in a thread of their own (nice ${config.REFIT_NICE})`;
}
