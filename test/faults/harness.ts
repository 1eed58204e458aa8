import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { randomBytes, randomUUID } from 'node:crypto';
import { QueueName, loadConfig, type Config } from '@lateral/shared';
import { readSegment } from '@lateral/codec';
import { createLogger, startEmbeddedRedis, startEmbeddedS3Thread, type EmbeddedRedis, type EmbeddedS3 } from '@lateral/infra';
import { startServer, type Server } from '../../apps/all-in-one/src/server';
import { fetchRetrying } from '../../scripts/lib/client';
import { http, until } from '../helpers';

/**
 * The fault suite's cluster, every part on loopback and owned by the test: a redis-server and an
 * in-process S3 server (in its own thread) of its own (not the run's shared ones, since the tests stop, restart and
 * break them), the API in this process (with the re-rank and search workers), and the ingestion
 * workers (encode, compress, index, commit) in child processes that a test can kill -9 and start
 * again, exactly as `npm run start:encoder` runs them (apps/encoder-worker with WORKER_QUEUES).
 */

const ROOT = path.resolve('.');
const WORKER_ENTRY = 'apps/encoder-worker/src/main.ts';
export const INGEST_QUEUES = [QueueName.encode, QueueName.compress, QueueName.index, QueueName.commit, QueueName.merge, QueueName.refit];

export interface WorkerProc {
  child: ChildProcess;
  output: () => string;
  exited: Promise<void>;
  /** Sends SIGKILL and waits for the exit. */
  kill9(): Promise<void>;
}

export interface Cluster {
  dir: string;
  redis: EmbeddedRedis;
  s3: EmbeddedS3;
  /** The environment the API and the workers share (REDIS_URL, S3_ENDPOINT, prefix, bucket ...). */
  vars: Record<string, string>;
  config: Config;
  server: Server;
  workers: WorkerProc[];
  api: (method: string, url: string, body?: unknown) => ReturnType<typeof http>;
  /** Every 503 / 429 the harness's client retried (status, error code, path). */
  retried: { status: number; code: string; url: string }[];
  /** The in-process server's log lines (warn and up; quiet), as printed. */
  serverLog: () => string;
  spawnWorker(queues?: QueueName[]): Promise<WorkerProc>;
  /** What was left where when a wait failed: the queues, the failed jobs, each worker's last lines. */
  diagnose(): Promise<string>;
  stop(): Promise<void>;
}

/**
 * The harness's client: a 503 or 429 is retried after its Retry-After through the shared client
 * (scripts/lib/client.ts; bounded, a line on stderr per wait), as any client of the service
 * should. Not the health endpoints: their 503 is the state a case observes, not a refusal.
 */
export const retryingUnlessHealth = (url: string, init: RequestInit) => (/\/v1\/health(\/|\?|$)/.test(new URL(url).pathname) ? fetch(url, init) : fetchRetrying(url, init));

const children = new Set<ChildProcess>();
// The test's children never outlive it, even when an expectation failed mid-way.
process.once('exit', () => {
  for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
});

export async function startCluster(opts: {
  /** Redis with its append-only file (for restarts that must keep the queues). */
  persistentRedis?: boolean;
  /** Where the API and workers reach S3 (a fault proxy in front of `s3.endpoint`); default the server itself. */
  s3Via?: (s3Endpoint: string) => Promise<string>;
  env?: Record<string, string>;
  /** Ingestion worker processes to start (default 1). */
  workers?: number;
}): Promise<Cluster> {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'lateral-faults-'));
  const redis = await startEmbeddedRedis({ dir: path.join(dir, 'redis'), persistent: opts.persistentRedis ?? false });
  const bucket = 'faults';
  // In a thread of its own, as the all-in-one runs it: off the event loop of the API and scorer in this process.
  const s3 = await startEmbeddedS3Thread({ dir: path.join(dir, 's3'), bucket, accessKeyId: 'S3RVER', secretAccessKey: 'S3RVER' });
  const endpoint = opts.s3Via ? await opts.s3Via(s3.endpoint) : s3.endpoint;
  const tag = randomUUID().slice(0, 8);
  const vars: Record<string, string> = {
    REDIS_URL: redis.url,
    S3_ENDPOINT: endpoint,
    S3_BUCKET: bucket,
    REDIS_PREFIX: `f${tag}`,
    PORT: '0',
    LOG_LEVEL: 'warn',
    DATA_DIR: path.join(dir, 'data'),
    MODELS_DIR: path.resolve('.cache/models'),
    DEFAULT_MODEL: 'glove-ctx-100d',
    ENCODE_BATCH_DOCUMENTS: '20',
    ADMIN_TOKEN: randomBytes(24).toString('base64url'),
    ...opts.env,
  };
  const config = loadConfig(vars);
  // The server's warnings still reach stderr, and a case can count them (serverLog).
  let serverLines = '';
  const logger = createLogger('warn', 'lateral', {
    destination: {
      write: (line: string) => {
        serverLines += line;
        process.stderr.write(line);
      },
    },
  });
  const server = await startServer(config, { queues: [QueueName.rerank, QueueName.search], quiet: true, closeGraceMs: 5000, logger });
  const retried: Cluster['retried'] = [];
  const send = (url: string, init: RequestInit) =>
    /\/v1\/health(\/|\?|$)/.test(new URL(url).pathname) ? fetch(url, init) : fetchRetrying(url, init, { onRetry: (r) => retried.push({ status: r.status, code: r.code, url: r.url }) });
  const workers: WorkerProc[] = [];
  const spawnWorker = async (queues: QueueName[] = INGEST_QUEUES): Promise<WorkerProc> => {
    const env: NodeJS.ProcessEnv = { ...process.env, ...vars, LOG_LEVEL: 'info', WORKER_QUEUES: queues.join(','), METRICS_PORT: '0', NODE_ENV: 'production' };
    const child = spawn(process.execPath, ['--import', 'tsx', WORKER_ENTRY], { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
    children.add(child);
    let out = '';
    child.stdout!.on('data', (b: Buffer) => (out += b.toString()));
    child.stderr!.on('data', (b: Buffer) => (out += b.toString()));
    const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
    await until(async () => {
      if (child.exitCode !== null) throw new Error(`worker exited ${child.exitCode} before working:\n${out.slice(-3000)}`);
      return /working on/.test(out);
    }, 90_000);
    const w: WorkerProc = {
      child,
      output: () => out,
      exited,
      kill9: async () => {
        if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
        await exited;
      },
    };
    workers.push(w);
    return w;
  };
  for (let i = 0; i < (opts.workers ?? 1); i++) await spawnWorker();
  const current = server;
  const cluster: Cluster = {
    dir,
    redis,
    s3,
    vars,
    config,
    server: current,
    workers,
    api: (method, url, body) => http(current.url, method, url, body, {}, send),
    retried,
    serverLog: () => serverLines,
    spawnWorker,
    diagnose: async () => {
      const ov = await http(current.url, 'GET', '/v1/admin/overview', undefined, { authorization: `Bearer ${vars.ADMIN_TOKEN}` }).catch((e: Error) => ({ body: e.message }));
      const o = ov.body as { queues?: unknown; failedJobs?: unknown } | string;
      const state = typeof o === 'string' ? o : JSON.stringify({ queues: o?.queues, failedJobs: o?.failedJobs });
      return `${state.slice(0, 4000)}\n${workers.map((w, i) => `worker ${i}:\n${w.output().slice(-2000)}`).join('\n')}`;
    },
    stop: async () => {
      for (const w of workers) await w.kill9();
      await current.stop().catch(() => undefined);
      await cluster.redis.stop();
      await s3.stop();
      rmSync(dir, { recursive: true, force: true });
    },
  };
  return cluster;
}

export interface Doc {
  id: string;
  text: string;
}

export interface IngestionWatch {
  /** Polls the ingestion's status until it is done (or failed: throws); every answer is checked. */
  done: Promise<{ state: string; stages: Record<string, number> }>;
  /** Status answers seen (state and indexed count), and answers that were not 200 (during an outage). */
  seen: { state: string; indexed: number; accepted: number }[];
  errors: number;
  /** A `done` seen while fewer documents than accepted were indexed. */
  earlyDone: boolean;
}

/** Polls an ingestion's status every `everyMs` until `done`, recording whether `done` ever came early. */
export function watchIngestion(api: Cluster['api'], statusUrl: string, timeoutMs = 240_000, everyMs = 100): IngestionWatch {
  const watch: IngestionWatch = { seen: [], errors: 0, earlyDone: false, done: undefined as never };
  watch.done = until(async () => {
    const s = await api('GET', statusUrl).catch(() => null);
    if (!s || s.status !== 200) {
      watch.errors++;
      return null;
    }
    const { state, stages } = s.body as { state: string; stages: Record<string, number> };
    watch.seen.push({ state, indexed: stages.indexed, accepted: stages.accepted });
    if (state === 'failed') throw new Error(`ingestion failed: ${JSON.stringify(s.body)}`);
    if (state === 'done') {
      if (stages.indexed < stages.accepted || stages.failed > 0) watch.earlyDone = true;
      return s.body as { state: string; stages: Record<string, number> };
    }
    return null;
  }, timeoutMs, everyMs);
  return watch;
}

export interface Census {
  /** Distinct ids the collection lists. */
  listed: number;
  /** Ids re-ranked back (each candidate once), ids among them more than once, ids never returned. */
  searchable: number;
  duplicated: number;
  lost: number;
  /** Hits whose text differs from the text ingested. */
  wrongText: number;
  /** The collection's own document count, and the live documents its manifest's segments hold. */
  collectionDocuments: number;
  manifestDocuments: number;
}

/** What a census reads: the API, and S3 through a runtime of the test's own (the collection's manifests and segments). */
export interface CensusTarget {
  api: Cluster['api'];
  config: Pick<Config, 'DEFAULT_TENANT'>;
  server: { runtime: Pick<Cluster['server']['runtime'], 'generations' | 'store' | 'codecs'> };
}

/**
 * Counts the collection: the ids it lists (paged), a re-rank of every expected id in one query
 * (topK = all, with `include: ['text']`, so each document must come back exactly once with the
 * text it was ingested with), the collection's count and its current manifest's live documents.
 */
export async function census(cluster: CensusTarget, collection: string, expected: Doc[]): Promise<Census> {
  const { api } = cluster;
  const ids: string[] = [];
  let cursor: string | undefined;
  for (;;) {
    const page = await api('GET', `/v1/collections/${collection}/documents?limit=1000${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`);
    if (page.status !== 200) throw new Error(`listing: ${page.status} ${JSON.stringify(page.body)}`);
    ids.push(...(page.body.documents as string[]));
    cursor = page.body.nextCursor;
    if (!cursor) break;
  }
  const byId = new Map(expected.map((d) => [d.id, d.text]));
  const returned = new Map<string, number>();
  let wrongText = 0;
  // One query per chunk of candidates (MAX_CANDIDATES_PER_QUERY is far above; chunks keep jobs small).
  const chunk = 500;
  for (let i = 0; i < expected.length; i += chunk) {
    const part = expected.slice(i, i + chunk);
    const rr = await api('POST', '/v1/rerank?wait=60', {
      collection,
      queries: [{ id: 'census', text: 'boundary layer flow', candidates: part.map((d) => d.id) }],
      topK: part.length,
      include: ['text'],
    });
    if (rr.body?.status !== 'completed') throw new Error(`census re-rank: ${rr.status} ${JSON.stringify(rr.body).slice(0, 2000)}`);
    for (const h of rr.body.result.results[0].hits as { id: string; text?: string }[]) {
      returned.set(h.id, (returned.get(h.id) ?? 0) + 1);
      if (h.text !== byId.get(h.id)) wrongText++;
    }
  }
  const coll = await api('GET', `/v1/collections/${collection}`);
  const manifest = await cluster.server.runtime.generations.manifest(cluster.config.DEFAULT_TENANT, collection);
  const manifestDocuments = (manifest?.segments ?? []).reduce((s, seg) => s + seg.documents - (seg.tombstones?.length ?? 0), 0);
  return {
    listed: new Set(ids).size,
    searchable: [...returned.keys()].filter((id) => byId.has(id)).length,
    duplicated: [...returned.values()].filter((n) => n > 1).length + (ids.length - new Set(ids).size),
    lost: expected.filter((d) => !returned.has(d.id)).length,
    wrongText,
    collectionDocuments: coll.body.documents,
    manifestDocuments,
  };
}

/** Live ids over the current manifest's segments (each segment's id table minus its tombstones), with repeats. */
export async function liveIdTable(cluster: CensusTarget, collection: string): Promise<{ live: number; repeated: number }> {
  const { generations, store, codecs } = cluster.server.runtime;
  const tenant = cluster.config.DEFAULT_TENANT;
  const manifest = await generations.manifest(tenant, collection);
  const seen = new Map<string, number>();
  for (const seg of manifest?.segments ?? []) {
    const bytes = await store.get(seg.key);
    if (!bytes) throw new Error(`segment ${seg.key} of the current generation is missing`);
    const ids = readSegment(bytes, seg.key, await codecs.get(tenant, collection, seg.codecVersion)).docIds;
    const dead = new Set(seg.tombstones ?? []);
    ids.forEach((id, i) => {
      if (!dead.has(i)) seen.set(id, (seen.get(id) ?? 0) + 1);
    });
  }
  return { live: seen.size, repeated: [...seen.values()].filter((n) => n > 1).length };
}

/** Every committed manifest of the collection, and the segment objects each names that are missing from S3. */
export async function manifestsAndMissingSegments(cluster: Cluster, collection: string): Promise<{ generations: number; missing: string[] }> {
  const { generations } = cluster.server.runtime;
  const tenant = cluster.config.DEFAULT_TENANT;
  const latest = await generations.manifest(tenant, collection);
  const missing: string[] = [];
  const n = latest?.generation ?? 0;
  for (let g = 1; g <= n; g++) {
    const m = await generations.manifest(tenant, collection, g);
    if (!m) {
      missing.push(`manifest ${g}`);
      continue;
    }
    for (const seg of m.segments) if (!(await cluster.server.runtime.store.exists(seg.key))) missing.push(seg.key);
  }
  return { generations: n, missing };
}

/** One line per test with its figures, collected by the report (grep FAULT in the output). */
export function report(name: string, figures: Record<string, unknown>): void {
  console.log(`FAULT ${name} ${JSON.stringify(figures)}`);
}
