/**
 * `npm run bench -- load [--json] [--seconds N] [--docs N] [--candidates N] [--connections N] [--only search|rerank] [--layout warp|ivf] [--root DIR]`
 *
 * Load on the service as a user runs it (issue 12, item 6): the all-in-one process (API, every
 * worker, the in-process S3 server, and its redis-server as a separate process) is started as a
 * child on a fresh DATA_DIR, `--docs` Cranfield documents (default 300) are ingested, and then
 * this process (the load generator, a second process on loopback) drives re-rank and search
 * traffic at the same time for `--seconds` (default 60) with autocannon: `--connections`
 * (default 4) connections each, re-ranks of `--candidates` (default 100, as issue 31's target names) ids per query and
 * searches (xtr, top 10), both with `?wait=30` so a request's latency is the job's round trip,
 * on a collection created with `--layout` (default warp, the service's default: WARP's engine over
 * centroid-major search layouts, 4 bits; ivf: XTR over the segment index's IVF; the warm-up search
 * checks which one answered: `stats.warp` present or not),
 * the queries cycling through Cranfield's (`--only search` or `--only rerank`: that traffic alone,
 * so the CPU per request is that path's). Before the traffic the service's idle CPU is measured
 * for `--idle-seconds` (default 10) and the CPU per request is also given net of it. Prints throughput, p50 / p99 latency, non-2xx answers
 * and errors, and the RSS of each process (service, redis-server, load generator) at the start
 * of the traffic and at its end, with the machine's load average (1 min) at both (the bench shares
 * its cores with whatever else runs). With --json the last line is one JSON object: rerank_rps,
 * rerank_p50_ms, rerank_p99_ms, search_rps, search_p50_ms, search_p99_ms, and rss_start_mb /
 * rss_end_mb keyed by process, load_start / load_end.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import autocannon from 'autocannon';
import { CliUsageError, intFlag, parseCliOrExit } from '../lib/cli';
import { loadCranfield } from '../lib/cranfield';
import { fetchRetrying, ingest, recreateCollection } from '../lib/client';

const ROOT = path.resolve(__dirname, '..', '..');

const USAGE = 'usage: npm run bench -- load [--seconds N (60)] [--docs N (300)] [--candidates N (100)] [--connections N (4)] [--only search|rerank (both)] [--layout warp|ivf (warp)] [--idle-seconds N (10)] [--root DIR (this checkout)] [--json]';
const round = (x: number, d = 1) => Math.round(x * 10 ** d) / 10 ** d;

/** Resident set size of a process in MB (Linux /proc), or null when it cannot be read. */
function rssMb(pid: number | undefined): number | null {
  if (!pid) return null;
  try {
    const kb = Number(/VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1]);
    return Number.isFinite(kb) ? round(kb / 1024) : null;
  } catch {
    return null;
  }
}

export interface Service {
  child: ChildProcess;
  url: string;
  redisPid: number | undefined;
  stop(): Promise<void>;
}

export async function startService(dataDir: string, root = ROOT): Promise<Service> {
  const env: NodeJS.ProcessEnv = { ...process.env, PORT: '0', DATA_DIR: dataDir, LOG_LEVEL: 'info', NODE_ENV: 'production', DEFAULT_MODEL: 'glove-ctx-100d' };
  // The embedded services: the bench measures the service as `npm start` runs it.
  delete env.REDIS_URL;
  delete env.S3_ENDPOINT;
  // BENCH_SERVICE_NODE_ARGS: extra node flags for the service (e.g. `--cpu-prof --cpu-prof-dir=DIR`, which NODE_OPTIONS refuses).
  const nodeArgs = (process.env.BENCH_SERVICE_NODE_ARGS ?? '').split(' ').filter(Boolean);
  const child = spawn(process.execPath, [...nodeArgs, '--import', 'tsx', 'apps/all-in-one/src/main.ts'], { cwd: root, env, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  child.stdout!.on('data', (b: Buffer) => (out += b.toString()));
  child.stderr!.on('data', (b: Buffer) => (out += b.toString()));
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const deadline = Date.now() + 120_000;
  let url: string | undefined;
  while (!(url = /lateral all-in-one: API (http:\/\/\S+)/.exec(out)?.[1])) {
    if (child.exitCode !== null) throw new Error(`the service exited ${child.exitCode} before serving:\n${out.slice(-3000)}`);
    if (Date.now() > deadline) throw new Error(`the service did not start within 120 s:\n${out.slice(-3000)}`);
    await new Promise((r) => setTimeout(r, 100));
  }
  const redisPid = Number(/started redis-server on \S+ \(pid (\d+)/.exec(out)?.[1]) || undefined;
  return {
    child,
    url,
    redisPid,
    stop: async () => {
      if (child.exitCode !== null) return;
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 30_000);
      await exited;
      clearTimeout(timer);
    },
  };
}

/** CPU seconds (user + system, every thread) a process has used so far (Linux /proc; USER_HZ 100), or null. */
function cpuSeconds(pid: number | undefined): number | null {
  if (!pid) return null;
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(f[11]) + Number(f[12])) / 100;
  } catch {
    return null;
  }
}

interface Phase {
  rps: number;
  p50: number;
  p99: number;
  requests: number;
  non2xx: number;
  errors: number;
  timeouts: number;
}

/**
 * The measured phase (autocannon): a refusal (503 / 429) is counted as non-2xx and reported, not
 * retried, since a retry would hide overload inside the throughput figure. Everything before it
 * (ingest, warm-up) goes through the shared retrying client (scripts/lib/client.ts).
 */
function drive(url: string, pathAndQuery: string, bodies: string[], seconds: number, connections: number): Promise<Phase> {
  let next = 0;
  return new Promise((resolve, reject) => {
    autocannon(
      {
        url: url + pathAndQuery,
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        connections,
        duration: seconds,
        timeout: 60,
        requests: [{ setupRequest: (req) => ({ ...req, body: bodies[next++ % bodies.length] }) }],
      },
      (err, r) => {
        if (err) return reject(err);
        resolve({ rps: round(r.requests.average), p50: r.latency.p50, p99: r.latency.p99, requests: r.requests.total, non2xx: r.non2xx, errors: r.errors, timeouts: r.timeouts });
      },
    );
  });
}

export async function runLoadBench(args: string[]): Promise<Record<string, unknown>> {
  const { seconds, nDocs, nCandidates, connections, only, layout, idleSeconds, root, json } = parseCliOrExit(
    'bench load',
    USAGE,
    args,
    { seconds: { type: 'string', default: '60' }, docs: { type: 'string', default: '300' }, candidates: { type: 'string', default: '100' }, connections: { type: 'string', default: '4' }, only: { type: 'string' }, layout: { type: 'string', default: 'warp' }, 'idle-seconds': { type: 'string', default: '10' }, root: { type: 'string', default: ROOT }, json: { type: 'boolean' } },
    {},
    ({ values: v }) => {
      if (v.only !== undefined && v.only !== 'search' && v.only !== 'rerank') throw new CliUsageError(`--only: search or rerank (got ${v.only})`);
      if (v.layout !== 'warp' && v.layout !== 'ivf') throw new CliUsageError(`--layout: warp or ivf (got ${v.layout})`);
      return { layout: v.layout as 'warp' | 'ivf', seconds: intFlag('seconds', v.seconds), nDocs: intFlag('docs', v.docs), nCandidates: intFlag('candidates', v.candidates), connections: intFlag('connections', v.connections), idleSeconds: intFlag('idle-seconds', v['idle-seconds'], 0), only: v.only as 'search' | 'rerank' | undefined, root: path.resolve(v.root), json: v.json === true };
    },
  );
  const say = (s: string) => (json ? console.error(s) : console.log(s));

  const cran = loadCranfield(path.join(ROOT, 'data/cranfield'));
  const docs = cran.docs.slice(0, nDocs).map((d) => ({ id: d.id, text: d.text || 'empty' }));
  const dataDir = mkdtempSync(path.join(os.tmpdir(), 'lateral-bench-load-'));
  const service = await startService(dataDir, root);
  try {
    say(`service ${service.url} from ${root} (pid ${service.child.pid}, redis-server pid ${service.redisPid ?? '?'}); ingesting ${docs.length} documents`);
    await recreateCollection(service.url, 'bench-load', 'glove-ctx-100d', { search: layout === 'warp' ? { layout: 'warp', bits: 4 } : { layout: 'ivf' } });
    await ingest(service.url, 'bench-load', docs, { progress: false });
    const rerankBodies = cran.queries.map((q, i) =>
      JSON.stringify({
        collection: 'bench-load',
        queries: [{ id: q.id, text: q.text, candidates: Array.from({ length: Math.min(nCandidates, docs.length) }, (_, k) => docs[(i * 7 + k) % docs.length].id) }],
        topK: 10,
      }),
    );
    const searchBodies = cran.queries.map((q) => JSON.stringify({ collection: 'bench-load', queries: [{ id: q.id, text: q.text }], topK: 10 }));
    // One request of each before the clock: the first re-rank loads the model and the segments.
    for (const [p, b] of [['/v1/rerank?wait=60', rerankBodies[0]], ['/v1/search?wait=60', searchBodies[0]]] as const) {
      const res = await fetchRetrying(service.url + p, { method: 'POST', headers: { 'content-type': 'application/json' }, body: b });
      const body = (await res.json()) as { status?: string; result?: { stats?: { warp?: unknown } } };
      if (res.status !== 200 || body.status !== 'completed') throw new Error(`warm-up ${p}: ${res.status} ${JSON.stringify(body).slice(0, 500)}`);
      // The search path the traffic measures: WARP's answers carry stats.warp, the IVF's none.
      if (p.startsWith('/v1/search') && (body.result?.stats?.warp !== undefined) !== (layout === 'warp')) throw new Error(`warm-up search: --layout ${layout}, but the answer ${body.result?.stats?.warp ? 'came from' : 'did not come from'} WARP's engine`);
    }
    const pids = { service: service.child.pid, redis: service.redisPid, loadgen: process.pid };
    const rss = () => Object.fromEntries(Object.entries(pids).map(([k, pid]) => [k, rssMb(pid)]));
    const cpu = () => Object.fromEntries(Object.entries(pids).map(([k, pid]) => [k, cpuSeconds(pid)]));
    // The service's CPU with no traffic (BullMQ's polls and stalled checks, heartbeats, timers):
    // a fixed cost per second that the per-request figure would otherwise spread over however few
    // requests a loaded machine lets through.
    const idle0 = cpu();
    await new Promise((r) => setTimeout(r, idleSeconds * 1000));
    const idle1 = cpu();
    const idleCpuPerSecond = Object.fromEntries(Object.keys(pids).map((k) => [k, idle0[k] === null || idle1[k] === null || idleSeconds === 0 ? null : (idle1[k] - idle0[k]) / idleSeconds]));
    const rssStart = rss();
    const cpuStart = cpu();
    const tTraffic = Date.now();
    const loadStart = round(os.loadavg()[0], 2);
    say(`driving ${only ?? 're-rank and search'} (search layout ${layout}) for ${seconds} s (${connections} connections each, ${nCandidates} candidates per re-rank)`);
    const idle: Phase = { rps: 0, p50: 0, p99: 0, requests: 0, non2xx: 0, errors: 0, timeouts: 0 };
    const [rr, se] = await Promise.all([
      only === 'search' ? idle : drive(service.url, '/v1/rerank?wait=30', rerankBodies, seconds, connections),
      only === 'rerank' ? idle : drive(service.url, '/v1/search?wait=30', searchBodies, seconds, connections),
    ]);
    const rssEnd = rss();
    const cpuEnd = cpu();
    const trafficSeconds = (Date.now() - tTraffic) / 1000;
    // CPU the service and its redis-server spent over the traffic, per answered request: what a
    // request costs, much less sensitive than req/s to what else shares the cores.
    const cpuUsed = Object.fromEntries(Object.keys(pids).map((k) => [k, cpuStart[k] === null || cpuEnd[k] === null ? null : round(cpuEnd[k] - cpuStart[k], 2)]));
    const answered = rr.requests + se.requests;
    const cpuMsPerRequest = answered > 0 && cpuUsed.service !== null ? round((1000 * (cpuUsed.service + (cpuUsed.redis ?? 0))) / answered) : null;
    // The same, less what the service and redis-server used idle over as many seconds.
    const idleOver = idleCpuPerSecond.service === null ? null : (idleCpuPerSecond.service + (idleCpuPerSecond.redis ?? 0)) * trafficSeconds;
    const cpuMsPerRequestNet = cpuMsPerRequest === null || idleOver === null ? null : round((1000 * (cpuUsed.service! + (cpuUsed.redis ?? 0) - idleOver)) / answered);
    const loadEnd = round(os.loadavg()[0], 2);
    const line = (name: string, p: Phase) =>
      `${name.padEnd(7)} ${String(p.rps).padStart(8)} req/s  p50 ${String(p.p50).padStart(6)} ms  p99 ${String(p.p99).padStart(6)} ms  (${p.requests} requests, ${p.non2xx} non-2xx, ${p.errors} errors, ${p.timeouts} timeouts)`;
    say(line('rerank', rr));
    say(line('search', se));
    for (const k of Object.keys(pids)) say(`RSS ${k.padEnd(8)} start ${rssStart[k]} MB  end ${rssEnd[k]} MB`);
    say(`CPU over the traffic: service ${cpuUsed.service} s, redis-server ${cpuUsed.redis} s, load generator ${cpuUsed.loadgen} s; service + redis ${cpuMsPerRequest} ms per request`);
    say(`CPU idle (${idleSeconds} s before the traffic): service + redis ${idleOver === null ? '?' : round((1000 * idleOver) / trafficSeconds)} ms per second; net of it ${cpuMsPerRequestNet} ms per request`);
    say(`load average (1 min) ${loadStart} at the start, ${loadEnd} at the end, on ${os.cpus().length} cores`);
    return {
      bench: 'load',
      root,
      seconds,
      documents: docs.length,
      candidates: nCandidates,
      connections,
      only: only ?? 'both',
      layout,
      rerank_rps: rr.rps,
      rerank_p50_ms: rr.p50,
      rerank_p99_ms: rr.p99,
      rerank_requests: rr.requests,
      rerank_non2xx: rr.non2xx,
      rerank_errors: rr.errors + rr.timeouts,
      search_rps: se.rps,
      search_p50_ms: se.p50,
      search_p99_ms: se.p99,
      search_requests: se.requests,
      search_non2xx: se.non2xx,
      search_errors: se.errors + se.timeouts,
      rss_start_mb: rssStart,
      rss_end_mb: rssEnd,
      cpu_s: cpuUsed,
      cpu_ms_per_request: cpuMsPerRequest,
      idle_cpu_ms_per_s: idleOver === null ? null : round((1000 * idleOver) / trafficSeconds),
      cpu_ms_per_request_net: cpuMsPerRequestNet,
      load_start: loadStart,
      load_end: loadEnd,
      cpus: os.cpus().length,
    };
  } finally {
    await service.stop();
    rmSync(dataDir, { recursive: true, force: true });
  }
}
