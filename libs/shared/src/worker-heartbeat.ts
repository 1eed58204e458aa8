/**
 * Worker heartbeats: each worker process writes one Redis hash every HEARTBEAT_INTERVAL_MS, with
 * a TTL, and adds its id to a sorted set scored by the time of its last beat. The API's operations
 * dashboard reads them; nothing else depends on them (a lost heartbeat only hides a worker from
 * the dashboard until its next beat).
 */
export const HEARTBEAT_INTERVAL_MS = 5_000;
/** A worker whose last beat is older than this is flagged stale (three beats missed). */
export const HEARTBEAT_STALE_MS = 3 * HEARTBEAT_INTERVAL_MS;
/** The hash expires after this; the dashboard shows a stale worker until then. */
export const HEARTBEAT_TTL_SECONDS = 120;

export const heartbeatKeys = {
  /** Sorted set: worker id -> time of its last beat (ms). */
  index: (prefix: string) => `${prefix}:workers`,
  /** Hash of one worker process (fields of WorkerHeartbeat, as strings). */
  worker: (prefix: string, id: string) => `${prefix}:worker:${id}`,
};

/** What one worker process reports (stored as a Redis hash, so every field is a string there). */
export interface WorkerHeartbeat {
  id: string;
  /** The app: all-in-one, encoder-worker, scorer-worker, ... */
  process: string;
  host: string;
  pid: number;
  queues: string[];
  /** Concurrency per queue served. */
  concurrency: Record<string, number>;
  /** ONNX Runtime execution provider configured for this process (cpu, cuda). */
  executionProvider: string;
  /** The default model of this process (collections may name others). */
  model: string;
  startedAt: number;
  beatAt: number;
  /** Jobs this process has finished since it started. */
  completed: number;
  failed: number;
  /** Jobs being worked on now. */
  active: number;
  /** Jobs finished (completed or failed) per second over the last minute. */
  jobsPerSecond: number;
  /** The process's caches (e.g. scorer-segments, scorer-disk): bytes held and hits / (hits + misses). */
  caches: Record<string, CacheFigures>;
}

export interface CacheFigures {
  bytes: number;
  /** null before the first lookup. */
  hitRatio: number | null;
}

/** Hash fields -> WorkerHeartbeat (tolerant: missing numbers become 0, bad JSON an empty object). */
export function parseHeartbeat(h: Record<string, string>): WorkerHeartbeat | null {
  if (!h.id) return null;
  const num = (v: string | undefined) => (v === undefined || v === '' || !Number.isFinite(Number(v)) ? 0 : Number(v));
  const json = <T>(v: string | undefined, fallback: T): T => {
    try {
      return (v ? JSON.parse(v) : fallback) as T;
    } catch {
      return fallback;
    }
  };
  const concurrency = json<Record<string, number>>(h.concurrency, {});
  return {
    id: h.id,
    process: h.process ?? '',
    host: h.host ?? '',
    pid: num(h.pid),
    queues: (h.queues ?? '').split(',').filter(Boolean),
    concurrency,
    executionProvider: h.executionProvider ?? '',
    model: h.model ?? '',
    startedAt: num(h.startedAt),
    beatAt: num(h.beatAt),
    completed: num(h.completed),
    failed: num(h.failed),
    active: num(h.active),
    jobsPerSecond: num(h.jobsPerSecond),
    caches: json<Record<string, CacheFigures>>(h.caches, {}),
  };
}

/** WorkerHeartbeat -> hash fields. */
export function heartbeatFields(b: WorkerHeartbeat): Record<string, string> {
  return {
    id: b.id,
    process: b.process,
    host: b.host,
    pid: String(b.pid),
    queues: b.queues.join(','),
    concurrency: JSON.stringify(b.concurrency),
    executionProvider: b.executionProvider,
    model: b.model,
    startedAt: String(b.startedAt),
    beatAt: String(b.beatAt),
    completed: String(b.completed),
    failed: String(b.failed),
    active: String(b.active),
    jobsPerSecond: String(b.jobsPerSecond),
    caches: JSON.stringify(b.caches),
  };
}
