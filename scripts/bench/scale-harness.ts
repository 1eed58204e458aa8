/**
 * The scale bench's plumbing (scale.ts): the processes it starts (each its own, output kept,
 * killed with the bench), what /proc says of them, the API calls with the bulk-load retry bounds,
 * and the figures of a collection built over several runs.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync, readdirSync, statSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fetchRetrying, type RetryPolicy } from '../lib/client';
import { round } from './scale-docs';


/** The repository root: where the processes run from. */
export const ROOT = path.resolve(__dirname, '..', '..');
/** glibc allocator settings the images set for every process (infra/Dockerfile). */
export const IMAGE_ALLOCATOR_ENV: NodeJS.ProcessEnv = { MALLOC_ARENA_MAX: '2', MALLOC_MMAP_THRESHOLD_: '1048576' };
export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** VmRSS and VmHWM of a process in MB, or null when it is gone. */
export function procMem(pid: number | undefined): { rss: number; hwm: number } | null {
  if (!pid) return null;
  try {
    const s = readFileSync(`/proc/${pid}/status`, 'utf8');
    const kb = (k: string) => Number(new RegExp(`${k}:\\s+(\\d+) kB`).exec(s)?.[1]);
    return { rss: kb('VmRSS') / 1024, hwm: kb('VmHWM') / 1024 };
  } catch {
    return null;
  }
}

/** CPU seconds (user + system) a process has used so far, or null when it is gone. */
export function procCpuSeconds(pid: number | undefined): number | null {
  if (!pid) return null;
  try {
    // Fields after the command's closing parenthesis: utime and stime are the 12th and 13th.
    const f = readFileSync(`/proc/${pid}/stat`, 'utf8').split(')').at(-1)!.trim().split(' ');
    return (Number(f[11]) + Number(f[12])) / 100;
  } catch {
    return null;
  }
}

export function duBytes(dir: string): number {
  let n = 0;
  // The collector removes batches while this walks: an entry gone in between counts 0.
  let entries;
  try {
    entries = readdirSync(dir, { withFileTypes: true });
  } catch {
    return 0;
  }
  for (const e of entries) {
    const p = path.join(dir, e.name);
    if (e.isDirectory()) n += duBytes(p);
    else if (e.isFile()) n += statSync(p, { throwIfNoEntry: false })?.size ?? 0;
  }
  return n;
}

export interface Proc {
  role: string;
  child: ChildProcess;
  tail: () => string;
  stop(): Promise<void>;
}

const children = new Set<ChildProcess>();
process.once('exit', () => {
  for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
});
// Stopped from outside (a long run given up): the 'exit' handler above still takes the children along.
for (const sig of ['SIGTERM', 'SIGINT'] as const) process.once(sig, () => process.exit(130));

/** Starts `node --import tsx <entry>` and waits for `ready` in its output; keeps the last 20 KB of it. */
export async function startProc(role: string, entry: string, args: string[], env: NodeJS.ProcessEnv, ready: RegExp): Promise<Proc & { match: RegExpExecArray }> {
  const child = spawn(process.execPath, ['--import', 'tsx', entry, ...args], { cwd: ROOT, env, stdio: ['pipe', 'pipe', 'pipe'] });
  children.add(child);
  let out = '';
  const add = (b: Buffer) => {
    out += b.toString();
    if (out.length > 40_000) out = out.slice(-20_000);
  };
  child.stdout!.on('data', add);
  child.stderr!.on('data', add);
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const deadline = Date.now() + 180_000;
  let match: RegExpExecArray | null;
  while (!(match = ready.exec(out))) {
    if (child.exitCode !== null) throw new Error(`${role} exited ${child.exitCode} before it was ready:\n${out.slice(-3000)}`);
    if (Date.now() > deadline) throw new Error(`${role} was not ready within 180 s:\n${out.slice(-3000)}`);
    await sleep(100);
  }
  return {
    role,
    child,
    match,
    tail: () => out.slice(-3000),
    stop: async () => {
      if (child.exitCode !== null || child.signalCode !== null) return;
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 40_000);
      await exited;
      clearTimeout(timer);
      children.delete(child);
    },
  };
}

/**
 * fetch with JSON through the shared client (scripts/lib/client.ts): 503 / 429 retried after their
 * Retry-After (counted in `retries`), each wait on stderr. The bounds are wider than the default:
 * a bulk load holds the encode queue at MAX_QUEUE_BACKLOG for most of its run, and every request
 * that feeds it waits its turn (at most 500 tries and 30 minutes per request).
 */
// eslint-disable-next-line @typescript-eslint/no-explicit-any -- the API's JSON, read field by field as the bench needs it
export type Json = any;
const BULK_RETRY: RetryPolicy = { attempts: 500, totalMs: 30 * 60_000 };
export async function api(base: string, method: string, url: string, body?: string, contentType = 'application/json', retries?: { n: number }): Promise<{ status: number; body: Json }> {
  const res = await fetchRetrying(base + url, { method, headers: body === undefined ? {} : { 'content-type': contentType }, body }, { ...BULK_RETRY, onRetry: () => retries && retries.n++ });
  const text = await res.text();
  const json = text ? JSON.parse(text) : null;
  if (res.status >= 400) throw new Error(`${method} ${url} -> ${res.status}: ${json?.message ?? text.slice(0, 500)}`);
  return { status: res.status, body: json };
}

/** One run's ingest, as a resumed collection's figures list them (ingest_parts). */
export function ingestPart(r: Json, docs: number) {
  return { docs, seconds: r.ingest.seconds, docs_per_s: r.ingest_docs_per_s, tokens_per_s: r.ingest_tokens_per_s, docs_per_cpu_s: r.ingest_docs_per_cpu_s, cpu_seconds: r.ingest.cpu_seconds, failed: r.ingest.failed, rss_ingest_mb: r.rss_ingest_mb, loadavg: r.loadavg };
}

/**
 * The figures of a collection built in several runs (--reuse of a kept collection with a larger
 * --docs): totals over the runs (documents, seconds, CPU, accepted, failed), the collection as it
 * is now, and each run's own ingest in ingest_parts (RSS is per run: the processes are new).
 */
export function resumedResult(prev: Json, now: Json, docsNow: number): Record<string, unknown> {
  const parts = [...(prev.ingest_parts ?? [ingestPart(prev, prev.docs)]), ingestPart(now, docsNow)];
  const seconds = parts.reduce((a: number, p: Json) => a + p.seconds, 0);
  const cpu: Record<string, number> = {};
  for (const p of parts) for (const [k, v] of Object.entries(p.cpu_seconds as Record<string, number>)) cpu[k] = round((cpu[k] ?? 0) + v, 1);
  const pipelineCpu = ['api', 'ingest-worker', 's3', 'redis'].reduce((a, k) => a + (cpu[k] ?? 0), 0);
  const docs = now.docs as number;
  return {
    ...now,
    ingest_docs_per_s: round(docs / seconds),
    ingest_tokens_per_s: round(now.tokens / seconds, 0),
    ingest: { ...now.ingest, seconds: round(seconds, 1), accepted: prev.ingest.accepted + now.ingest.accepted, committed: prev.ingest.committed + now.ingest.committed, failed: prev.ingest.failed + now.ingest.failed, retried_requests: prev.ingest.retried_requests + now.ingest.retried_requests, cpu_seconds: cpu },
    ingest_cpu_seconds_per_doc: round(pipelineCpu / docs, 5),
    ingest_docs_per_cpu_s: round(docs / pipelineCpu, 1),
    projection_1m_wall_hours_at_measured_rate: round(1e6 / (docs / seconds) / 3600, 2),
    projection_1m_hours_idle_machine: round((1e6 * pipelineCpu) / docs / os.cpus().length / 3600, 2),
    ingest_parts: parts,
  };
}
