import os from 'node:os';
import path from 'node:path';
import { randomUUID } from 'node:crypto';
import {
  HEARTBEAT_INTERVAL_MS,
  HEARTBEAT_TTL_SECONDS,
  heartbeatFields,
  heartbeatKeys,
  type CacheFigures,
  type WorkerHeartbeat,
} from '@lateral/shared';
import { metricsRegistry, type Runtime, type WorkerHost } from '@lateral/infra';

const APPS = ['all-in-one', 'api', 'encoder-worker', 'scorer-worker'];

/** The app this process runs, from its command line (apps/<name>/..., or `start.cjs <name>`); else the script's name. */
export function processName(argv: string[] = process.argv): string {
  for (const a of argv.slice(1)) {
    const m = /apps[\\/]([^\\/]+)[\\/]/.exec(a);
    if (m) return m[1];
    if (APPS.includes(a)) return a;
  }
  return path.basename(argv[1] ?? 'node').replace(/\.[cm]?[jt]s$/, '');
}

export interface HeartbeatOptions {
  process?: string;
  intervalMs?: number;
}

/**
 * The caches this process registered for its metrics (registerCacheMetrics: the scorer's segment
 * and disk caches), read from the same Prometheus registry: bytes held and hit ratio per cache.
 */
export async function cacheFigures(): Promise<Record<string, CacheFigures>> {
  const registry = await metricsRegistry();
  const read = async (name: string) => {
    const out = new Map<string, number>();
    const metric = registry.getSingleMetric(name);
    for (const v of metric ? (await metric.get()).values : []) if (typeof v.labels.cache === 'string') out.set(v.labels.cache, v.value);
    return out;
  };
  const [bytes, hits, misses] = await Promise.all([read('lateral_cache_bytes'), read('lateral_cache_hits_total'), read('lateral_cache_misses_total')]);
  const out: Record<string, CacheFigures> = {};
  for (const [cache, b] of bytes) {
    const h = hits.get(cache) ?? 0;
    const lookups = h + (misses.get(cache) ?? 0);
    out[cache] = { bytes: b, hitRatio: lookups > 0 ? h / lookups : null };
  }
  return out;
}

/**
 * Writes this process's heartbeat (WorkerHeartbeat, libs/shared/src/worker-heartbeat.ts) to Redis
 * every few seconds, with a TTL, and counts the jobs its workers finish. Stops, and removes the
 * heartbeat, once the host has closed (it wraps host.close). A failed write (Redis down) is skipped:
 * the next beat tries again.
 */
export function startHeartbeat(rt: Runtime, host: WorkerHost, opts: HeartbeatOptions = {}): { stop(): Promise<void> } {
  // A process that serves no queue (an API-only all-in-one) is not a worker.
  if (host.started.length === 0) return { stop: async () => undefined };
  const prefix = rt.config.REDIS_PREFIX;
  const id = `${os.hostname()}-${process.pid}-${randomUUID().slice(0, 8)}`;
  const key = heartbeatKeys.worker(prefix, id);
  const startedAt = Date.now();
  const finishedAt: number[] = [];
  let completed = 0;
  let failed = 0;
  let active = 0;
  for (const w of host.started) {
    w.on('active', () => active++);
    w.on('completed', () => {
      active = Math.max(0, active - 1);
      completed++;
      finishedAt.push(Date.now());
    });
    w.on('failed', () => {
      active = Math.max(0, active - 1);
      failed++;
      finishedAt.push(Date.now());
    });
  }
  const c = rt.config;
  const beat = async () => {
    const now = Date.now();
    while (finishedAt.length && finishedAt[0] < now - 60_000) finishedAt.shift();
    const window = Math.min(60_000, Math.max(1_000, now - startedAt));
    const record: WorkerHeartbeat = {
      id,
      process: opts.process ?? processName(),
      host: os.hostname(),
      pid: process.pid,
      // Every queue served, the shard queues (shard-<i>) included: which process holds which shard.
      queues: host.started.map((w) => w.name),
      concurrency: Object.fromEntries(host.started.map((w) => [w.name, w.concurrency])),
      executionProvider: c.ORT_EXECUTION_PROVIDER,
      model: c.DEFAULT_MODEL,
      startedAt,
      beatAt: now,
      completed,
      failed,
      active,
      jobsPerSecond: Math.round((finishedAt.length / (window / 1000)) * 1000) / 1000,
      caches: await cacheFigures().catch(() => ({})),
    };
    await rt.redis
      .multi()
      .hset(key, heartbeatFields(record))
      .expire(key, HEARTBEAT_TTL_SECONDS)
      .zadd(heartbeatKeys.index(prefix), now, id)
      .exec();
  };
  let stopped = false;
  const tick = () => beat().catch(() => undefined);
  void tick();
  const timer = setInterval(tick, opts.intervalMs ?? HEARTBEAT_INTERVAL_MS);
  timer.unref();
  const stop = async () => {
    if (stopped) return;
    stopped = true;
    clearInterval(timer);
    await rt.redis
      .multi()
      .del(key)
      .zrem(heartbeatKeys.index(prefix), id)
      .exec()
      .catch(() => undefined);
  };
  const close = host.close.bind(host);
  host.close = async (graceMs?: number) => {
    await close(graceMs);
    await stop();
  };
  return { stop };
}
