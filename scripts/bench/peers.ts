/**
 * `npm run bench -- peers [--dataset DIR] [--quick] [--json] [--peers a,b] [--no-install] [--threads N] [--layout warp|ivf] [--data DIR] [--docs N] [--modes xtr,exhaustive,bm25] [--nprobe N[,N..]] [--exact N[,N..]] [--tprime N] [--as-is] [--no-alternate]`
 *
 * lateral beside the engines users would pick instead, on one collection, in one run:
 *   xtr-warp-rs (WARP, XTR token retrieval), fast-plaid (PLAID), maxsim-cpu (an exact MaxSim
 *   kernel), bm25s (BM25 on sparse matrices).
 * They are installed from PyPI into a virtual environment under .cache/peers-venv (a peer that
 * will not install or import is skipped with the reason printed). No peer code is in this
 * repository: scripts/bench/peers.py only calls their published Python APIs.
 *
 * Same data for everyone: the dataset (default ../shared/datasets/vaswani) is ingested into
 * lateral through the service (HTTP, queues, S3); then the token vectors lateral STORED are read
 * back from its segments in S3 and decoded (not re-encoded), and the queries are encoded once by
 * the same model as lateral's search does. The peers index those vectors; bm25s gets the texts.
 *
 * Per engine: index build time, bytes per token of what it keeps, nDCG@10 and recall@100 on the
 * judged queries, single-query latency p50 / p95 and queries per second (one query at a time,
 * after one warm-up query), and the ratio lateral / peer for its counterpart:
 *   xtr-warp-rs and fast-plaid  <->  lateral xtr (k' 1000; nprobe the service's default for the layout, or --nprobe N)
 *   maxsim-cpu                  <->  lateral exhaustive
 *   bm25s                       <->  lateral bm25
 * Threads: `--threads N` (default 1: single-threaded, as lateral's search job is) for the peers'
 * search calls, and lateral's ONNX Runtime sessions (ORT_INTRA_OP_THREADS, unless set). Layout: `--layout warp` (default) creates the collection with WARP's
 * centroid-major search layout (`search: {layout: 'warp', bits: 4}`), so lateral xtr is WARP's
 * engine; `--layout ivf` the segment index's IVF path. For warp, lateral xtr also reports the search
 * layout's bytes per token (layouts + centroids + codec) and the bytes / ranged reads per query.
 * `--docs N`: the dataset's first N documents only (judgments kept for those; queries with none
 * left out), for a machine too loaded to ingest the whole collection in time; a --data collection
 * holding other documents is built again (its nDCG would be measured against cut judgments).
 * `--nprobe N`: lateral xtr's lists per query token, and xtr-warp-rs's too (same probe work);
 * without it xtr-warp-rs chooses its own (for top-100 on Vaswani ~5 lists and a centroid score
 * threshold; its settings print what it chose) while lateral probes its default (32 over the IVF,
 * WARP_DEFAULT_NPROBE over WARP).
 * `--exact N` / `--tprime N`: lateral xtr's `exact` (WARP's first N hits re-scored by exact MaxSim;
 * 0 off; absent: the service's default) and `tPrime` (WARP's imputation threshold).
 * A sweep: `--nprobe 4,8,16,32 --exact 0,32,64` measures lateral xtr at every (nprobe, exact) pair
 * (lateral alone: --peers none), the pairs alternated per query (each query sent at every pair
 * before the next query, the order rotated per query) so that load drifts alike over all of them;
 * one line per pair, and `sweep` in the JSON.
 * Top-10 overlap with exhaustive MaxSim: when both xtr and exhaustive are measured, each xtr
 * setting reports per judged query |top 10 of xtr ∩ top 10 of exhaustive| / 10 (`topOverlap`, as
 * `bench scale`'s `overlap_with_exhaustive`): the mean and the worst query (`overlap_at_10`,
 * `overlap_at_10_min`), and its nDCG@10 over exhaustive's (`ndcg_vs_exhaustive`).
 * `--as-is` (with --data): the kept collection measured as it holds, nothing ingested, judgments
 * cut to its documents (a copy of a run's data folder while that run still ingests); the service
 * then runs only its search workers, so jobs the copy still holds (ingests, merges, refits) stay queued.
 * `--peers none` measures lateral alone; `--modes` the lateral modes measured (default all three), e.g.
 * `--peers none --modes xtr` under `node --cpu-prof` profiles lateral's WARP search in this process.
 * `--data DIR`: the service's data folder (S3 objects, Redis), kept after the run; a later run with
 * the same DIR and dataset finds the collection holding every document and measures it again
 * without ingesting (after code changes to the search path).
 * Alternation (the default; `--no-alternate` the old way): on a shared machine the load changes
 * between lateral's half of a run and a peer's, so each peer whose lateral counterpart is measured
 * runs as a server (peers.py --serve, its own process): it builds its index before lateral is
 * measured, then answers one query index a line on its stdin with its search time and ranking.
 * lateral's counterpart mode and the peer get each judged query in turns, the order rotated per query
 * (lateral first on even queries, the peer first on odd ones; with two served peers of one mode
 * the three sides rotate), after one warm-up each. Per served peer the bench reports, beside the
 * usual figures, `paired`: both sides' p50 / p95 (lateral's search job, with and without its query
 * encoding), lateral / peer of the p50s, the median over queries of lateral / peer for the same
 * query, and the load average at the start and end of the turns. A peer whose counterpart is not
 * measured, or any peer under --no-alternate, runs after lateral in one process as before
 * (`settings.measured` says which). The peers' rankings and quality are the same either way
 * (`rankings_digest` compares runs).
 * lateral's latency is a client's wall clock through HTTP and the queue (POST /v1/search?wait=60),
 * the peers' an in-process Python call: the ratio includes lateral's service overhead, and says
 * so. lateral's build time is the sum of its index jobs (IVF fit + per-segment postings), taken
 * from BullMQ's job records; its bytes per token count segments, indexes and centroids in S3.
 */
import { spawn, spawnSync, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { Queue } from 'bullmq';
import { QueueName, WARP_DEFAULT_EXACT, WARP_DEFAULT_NPROBE, loadConfig, s3Keys } from '@lateral/shared';
import { readSegment, type SegmentReader } from '@lateral/codec';
import { getEncoder } from '@lateral/model';
import { BULLMQ_CONNECTION_OPTIONS, createRedis } from '@lateral/infra';
import { startServer, type Server } from '../../apps/all-in-one/src/server';
import { getCollection, ingest, recreateCollection, search } from '../lib/client';
import { hasRelevant } from '../lib/metrics';
import { CliUsageError, intFlag, intListFlag, parseCliOrExit } from '../lib/cli';
import { loadRetrievalDataset } from '../lib/retrieval-dataset';
import { percentile, queryMetrics, quickSubset } from '../eval/retrieval';
import { topOverlap } from './scale-docs';

export const PEERS = ['xtr-warp-rs', 'fast-plaid', 'maxsim-cpu', 'bm25s'] as const;
type Peer = (typeof PEERS)[number];
const COUNTERPART: Record<Peer, string> = { 'xtr-warp-rs': 'xtr', 'fast-plaid': 'xtr', 'maxsim-cpu': 'exhaustive', bm25s: 'bm25' };
const PIP_NAME: Record<Peer, string> = { 'xtr-warp-rs': 'xtr-warp-rs', 'fast-plaid': 'fast-plaid', 'maxsim-cpu': 'maxsim-cpu', bm25s: 'bm25s' };
const TOP_K = 100;
const VENV = path.resolve('.cache/peers-venv');

export interface EngineFigures {
  engine: string;
  status: 'ok' | 'skipped';
  reason?: string;
  build_s?: number;
  bytes_per_token?: number;
  'ndcg@10'?: number;
  'recall@100'?: number;
  p50_ms?: number;
  p95_ms?: number;
  qps?: number;
  /** lateral only: the search job's own time (timings.totalMs), without HTTP and the queue. */
  search_job_p50_ms?: number;
  search_job_p95_ms?: number;
  /**
   * lateral only: the search job less its query encoding (timings.totalMs - encodeQueriesMs), per
   * query: what the peers' in-process calls do, as they are given the encoded query vectors.
   */
  search_job_unencoded_p50_ms?: number;
  encode_queries_p50_ms?: number;
  /** lateral xtr with WARP's exact final stage: its own time per query (timings.exactMs), p50 and p95. */
  exact_stage_p50_ms?: number;
  exact_stage_p95_ms?: number;
  /** lateral xtr on a WARP layout: search-layout objects (+ centroids and codec) per token. */
  layout_bytes_per_token?: number;
  /** lateral xtr on a WARP layout: p50 bytes of list ranges read per query, and ranged reads. */
  bytes_read_p50?: number;
  ranges_p50?: number;
  /** lateral xtr on a WARP layout: the centroids (newest epoch) and epochs the segments were at, and segments scanned. */
  warp_centroids?: number;
  warp_epochs?: number;
  warp_segments?: number;
  /**
   * lateral xtr, when exhaustive is measured too: per judged query |top 10 ∩ exhaustive's top 10| / 10,
   * the mean and the worst query, over `overlap_queries` queries; and nDCG@10 over exhaustive's.
   */
  overlap_at_10?: number;
  overlap_at_10_min?: number;
  overlap_queries?: number;
  ndcg_vs_exhaustive?: number;
  /** peers: a digest of the rankings (doc indices per judged query), to compare runs */
  rankings_digest?: string;
  settings?: Record<string, unknown>;
}

/** p50 / p95 / qps of per-query latencies in ms (qps from the mean, one query at a time). */
export function latencyFigures(ms: readonly number[]): { p50_ms: number; p95_ms: number; qps: number } {
  const meanMs = ms.reduce((a, x) => a + x, 0) / Math.max(1, ms.length);
  return { p50_ms: round(percentile(ms, 0.5), 2), p95_ms: round(percentile(ms, 0.95), 2), qps: round(meanMs > 0 ? 1000 / meanMs : 0, 1) };
}

/** lateral / peer for every figure both have; > 1 means lateral's figure is larger. */
export function ratios(lateral: EngineFigures, peer: EngineFigures): Record<string, number | null> {
  const keys = ['build_s', 'bytes_per_token', 'ndcg@10', 'recall@100', 'p50_ms', 'p95_ms', 'qps'] as const;
  return Object.fromEntries(keys.map((k) => [k, lateral[k] !== undefined && peer[k] ? round(lateral[k]! / peer[k]!, 3) : null]));
}

/**
 * The order in which query `qi` goes to the `n` sides of an alternation (lateral's variants, then
 * the served peers): rotated by one per query, so each side goes first as often as the others
 * (n = 2: lateral first on even queries, the peer first on odd ones).
 */
export function turnOrder(qi: number, n: number): number[] {
  return Array.from({ length: n }, (_, j) => (qi + j) % n);
}

/** Per query lateral / peer of two series timed in turns (same query index), and their median; a query either side lacks, or the peer timed at 0, is left out. */
export function pairedRatios(lateralMs: readonly (number | undefined)[], peerMs: readonly (number | undefined)[]): { ratios: number[]; median: number | null } {
  if (lateralMs.length !== peerMs.length) throw new Error(`paired series differ in length: ${lateralMs.length} lateral, ${peerMs.length} peer`);
  const ratios: number[] = [];
  for (let i = 0; i < lateralMs.length; i++) {
    const l = lateralMs[i], p = peerMs[i];
    if (l === undefined || p === undefined || !Number.isFinite(l) || !Number.isFinite(p) || p <= 0) continue;
    ratios.push(l / p);
  }
  return { ratios, median: ratios.length ? percentile(ratios, 0.5) : null };
}

/** lateral's search job beside a served peer, the two timed in turns query by query (`--no-alternate` off). */
export interface PairedFigures {
  peer: string;
  lateral: string;
  /** queries both sides answered (the warm-up of each not counted) */
  queries: number;
  /** lateral's search job (timings.totalMs) and the same less its query encoding, p50 / p95 */
  lateral_job_p50_ms: number;
  lateral_job_p95_ms: number;
  lateral_job_unencoded_p50_ms: number | null;
  lateral_job_unencoded_p95_ms: number | null;
  /** the peer's in-process search call */
  peer_p50_ms: number;
  peer_p95_ms: number;
  /** lateral p50 / peer p50 */
  p50_ratio: number | null;
  p50_ratio_unencoded: number | null;
  /** median over queries of lateral / peer for that query */
  paired_ratio_median: number | null;
  paired_ratio_median_unencoded: number | null;
  load_average_start: number;
  load_average_end: number;
}

/**
 * The paired figures of one alternation: `jobMs[i]` / `encodeMs[i]` lateral's search job and its
 * query encoding for query i, `peerMs[i]` the peer's time for the same query (undefined where a
 * side has no time for it; such a query is left out of both sides).
 */
export function pairedFigures(
  names: { peer: string; lateral: string },
  jobMs: readonly (number | undefined)[],
  encodeMs: readonly (number | undefined)[],
  peerMs: readonly (number | undefined)[],
  load: { start: number; end: number },
): PairedFigures {
  const both = jobMs.map((j, i) => j !== undefined && peerMs[i] !== undefined);
  const lat = jobMs.filter((_, i) => both[i]) as number[];
  const peer = peerMs.filter((_, i) => both[i]) as number[];
  const enc = encodeMs.filter((_, i) => both[i]);
  const unencoded = enc.every((e) => e !== undefined) && lat.length ? lat.map((t, i) => t - enc[i]!) : null;
  const p = (xs: number[], q: number) => round(percentile(xs, q), 2);
  const ratio = (a: number, b: number) => (b > 0 ? round(a / b, 3) : null);
  const paired = pairedRatios(lat, peer).median;
  const pairedU = unencoded ? pairedRatios(unencoded, peer).median : null;
  return {
    ...names,
    queries: lat.length,
    lateral_job_p50_ms: p(lat, 0.5),
    lateral_job_p95_ms: p(lat, 0.95),
    lateral_job_unencoded_p50_ms: unencoded ? p(unencoded, 0.5) : null,
    lateral_job_unencoded_p95_ms: unencoded ? p(unencoded, 0.95) : null,
    peer_p50_ms: p(peer, 0.5),
    peer_p95_ms: p(peer, 0.95),
    p50_ratio: lat.length ? ratio(percentile(lat, 0.5), percentile(peer, 0.5)) : null,
    p50_ratio_unencoded: unencoded ? ratio(percentile(unencoded, 0.5), percentile(peer, 0.5)) : null,
    paired_ratio_median: paired === null ? null : round(paired, 3),
    paired_ratio_median_unencoded: pairedU === null ? null : round(pairedU, 3),
    load_average_start: round(load.start, 2),
    load_average_end: round(load.end, 2),
  };
}

/** One reply line of a served peer (scripts/bench/peers.py --serve), checked: what it is, or why it is not one. */
export function parsePeerLine(line: string):
  | { kind: 'ready'; build_s: number; index_bytes: number; queries: number }
  | { kind: 'skipped'; reason: string }
  | { kind: 'answer'; q: number; ms: number; ranking: number[] }
  | { kind: 'done'; settings: Record<string, unknown> }
  | { kind: 'bad'; why: string } {
  let o: Record<string, unknown>;
  try {
    o = JSON.parse(line) as Record<string, unknown>;
  } catch {
    return { kind: 'bad', why: `not JSON: ${line.slice(0, 200)}` };
  }
  if (o === null || typeof o !== 'object') return { kind: 'bad', why: `not an object: ${line.slice(0, 200)}` };
  const num = (k: string) => typeof o[k] === 'number' && Number.isFinite(o[k]);
  if (o.status === 'ready' && num('build_s') && num('index_bytes') && num('queries')) return { kind: 'ready', build_s: o.build_s as number, index_bytes: o.index_bytes as number, queries: o.queries as number };
  if (o.status === 'skipped') return { kind: 'skipped', reason: String(o.reason ?? 'no reason given') };
  if (o.status === 'done') return { kind: 'done', settings: (o.settings ?? {}) as Record<string, unknown> };
  if (num('q') && num('ms') && Array.isArray(o.ranking) && o.ranking.every((d) => Number.isInteger(d))) return { kind: 'answer', q: o.q as number, ms: o.ms as number, ranking: o.ranking as number[] };
  return { kind: 'bad', why: `unexpected line: ${line.slice(0, 200)}` };
}

/**
 * A peer in its own Python process (peers.py --serve) with its index built, answering one query at
 * a time: peers.ts sends it each query in turn with lateral's, so both are timed under the same load.
 */
class PeerServer {
  private readonly lines: string[] = [];
  private readonly waiters: { resolve: (l: string) => void; reject: (e: Error) => void }[] = [];
  private readonly stderrTail: string[] = [];
  private exited: string | undefined;

  private constructor(
    readonly peer: Peer,
    private readonly child: ChildProcessWithoutNullStreams,
  ) {
    createInterface({ input: child.stdout }).on('line', (l) => {
      const w = this.waiters.shift();
      if (w) w.resolve(l);
      else this.lines.push(l);
    });
    createInterface({ input: child.stderr }).on('line', (l) => {
      this.stderrTail.push(l);
      if (this.stderrTail.length > 20) this.stderrTail.shift();
    });
    child.stdin.on('error', () => undefined); // a peer that died: its exit says why
    child.on('close', (code, signal) => {
      this.exited = signal ? `crashed (${signal})` : `exited with ${code}`;
      for (const w of this.waiters.splice(0)) w.reject(new Error(this.why()));
    });
  }

  /** Starts the peer and waits for its index; a peer that will not build says why. */
  static async start(dir: string, peer: Peer, threads: number): Promise<{ server: PeerServer; build_s: number; index_bytes: number } | { reason: string }> {
    const child = spawn(path.join(VENV, 'bin', 'python'), [path.resolve('scripts/bench/peers.py'), dir, peer, '--serve'], { stdio: ['pipe', 'pipe', 'pipe'], env: peerEnv(threads) });
    const server = new PeerServer(peer, child);
    const first = await server.next().catch((err: Error) => err);
    if (first instanceof Error) return { reason: `${first.message} on this machine` };
    const r = parsePeerLine(first);
    if (r.kind === 'ready') return { server, build_s: r.build_s, index_bytes: r.index_bytes };
    server.kill();
    return { reason: r.kind === 'skipped' ? r.reason : r.kind === 'bad' ? r.why : `unexpected ${r.kind} before ready` };
  }

  /** Query `qi` of the exported queries: the peer's search time and its ranking (doc indices). */
  async query(qi: number): Promise<{ ms: number; ranking: number[] }> {
    this.child.stdin.write(`${JSON.stringify({ q: qi })}\n`);
    const r = parsePeerLine(await this.next());
    if (r.kind !== 'answer' || r.q !== qi) throw new Error(r.kind === 'bad' ? r.why : `answered ${r.kind === 'answer' ? `query ${r.q}` : r.kind} to query ${qi}`);
    return { ms: r.ms, ranking: r.ranking };
  }

  /** Ends the input; the peer reports its settings and exits. */
  async close(): Promise<Record<string, unknown>> {
    this.child.stdin.end();
    const r = parsePeerLine(await this.next());
    if (r.kind !== 'done') throw new Error(r.kind === 'bad' ? r.why : `answered ${r.kind} to the end of its input`);
    return r.settings;
  }

  kill(): void {
    if (this.exited === undefined) this.child.kill('SIGKILL');
  }

  private why(): string {
    const tail = this.stderrTail.slice(-3).join(' | ');
    return `${this.exited ?? 'failed'}${tail ? `; last output: ${tail}` : ''}`;
  }

  private next(): Promise<string> {
    const l = this.lines.shift();
    if (l !== undefined) return Promise.resolve(l);
    if (this.exited !== undefined) return Promise.reject(new Error(this.why()));
    return new Promise((resolve, reject) => this.waiters.push({ resolve, reject }));
  }
}

/**
 * A peer process's environment: OpenMP's pool at --threads (unless OMP_NUM_THREADS is set).
 * torch.set_num_threads alone left xtr-warp-rs with an OpenMP pool of one thread per core whose
 * waits spin: on the 2-core machine at load ~6, a query after 20 ms of other work took 19 ms
 * (22 ms of CPU) against 3 ms back to back; with OMP_NUM_THREADS=1, 6 ms (4 ms of CPU).
 */
export function peerEnv(threads: number, env: NodeJS.ProcessEnv = process.env): NodeJS.ProcessEnv {
  return { ...env, TQDM_DISABLE: '1', OMP_NUM_THREADS: env.OMP_NUM_THREADS ?? String(threads) };
}

/** A served peer during the run: its index's figures, its time and ranking per judged query, and its paired figures once alternated. */
interface ServedPeer {
  server: PeerServer;
  build_s: number;
  index_bytes: number;
  ms: (number | undefined)[];
  rankings: number[][];
  failed?: string;
  paired?: PairedFigures;
}

/** A short digest of a peer's rankings (doc indices per query): equal digests, equal rankings, e.g. served vs --no-alternate. */
export function rankingsDigest(rankings: readonly (readonly number[])[]): string {
  return createHash('sha256').update(JSON.stringify(rankings)).digest('hex').slice(0, 16);
}

/** A served peer's figures, as the batch path reports them (quality from its rankings), once its input is closed. */
async function servedFigures(
  p: Peer,
  sp: ServedPeer,
  judged: { id: string }[],
  qrels: Map<string, Map<string, number>>,
  docIds: string[],
  tokens: number,
  log: (m: string) => void,
): Promise<EngineFigures> {
  if (sp.failed !== undefined) return { engine: p, status: 'skipped', reason: `stopped answering while alternated: ${sp.failed}` };
  const settings = await sp.server.close().catch((err: Error) => {
    log(`peers: ${p} did not report its settings: ${err.message}`);
    return { unknown: err.message } as Record<string, unknown>;
  });
  const run = { build_s: sp.build_s, index_bytes: sp.index_bytes, rankings: sp.rankings, latencies_ms: sp.ms.filter((x): x is number => x !== undefined), settings };
  return peerFigures(p, run, `served, in turns with lateral ${COUNTERPART[p]} query by query`, judged, qrels, docIds, tokens);
}

/** A peer's figures from its run (served or batch): quality from its rankings against the judgments, size, latency, digest. */
function peerFigures(
  p: Peer,
  run: { build_s: number; index_bytes: number; rankings: number[][]; latencies_ms: number[]; settings: Record<string, unknown> },
  measured: string,
  judged: { id: string }[],
  qrels: Map<string, Map<string, number>>,
  docIds: string[],
  tokens: number,
): EngineFigures {
  const metrics = judged.map((q, i) => queryMetrics((run.rankings[i] ?? []).map((d) => docIds[d]!), qrels.get(q.id)!));
  return {
    engine: p,
    status: 'ok',
    build_s: round(run.build_s, 2),
    bytes_per_token: round(run.index_bytes / tokens, 1),
    'ndcg@10': round(mean(metrics.map((m) => m.ndcg)), 4),
    'recall@100': round(mean(metrics.map((m) => m.recall)), 4),
    ...latencyFigures(run.latencies_ms),
    rankings_digest: rankingsDigest(run.rankings),
    settings: { ...run.settings, measured },
  };
}

/** Creates the virtual environment and installs each peer; returns why a peer is unavailable. */
function ensureVenv(peers: Peer[], log: (m: string) => void, install: boolean): Map<Peer, string> {
  const missing = new Map<Peer, string>();
  const py = path.join(VENV, 'bin', 'python');
  if (!existsSync(py)) {
    if (!install) {
      for (const p of peers) missing.set(p, `no virtual environment at ${VENV} (--no-install)`);
      return missing;
    }
    log(`peers: creating ${VENV}`);
    const r = spawnSync('python3', ['-m', 'venv', VENV], { stdio: 'inherit' });
    if (r.status !== 0) {
      for (const p of peers) missing.set(p, 'python3 -m venv failed');
      return missing;
    }
  }
  for (const p of peers) {
    const module = { 'xtr-warp-rs': 'xtr_warp', 'fast-plaid': 'fast_plaid', 'maxsim-cpu': 'maxsim_cpu', bm25s: 'bm25s' }[p];
    if (spawnSync(py, ['-c', `import ${module}`], { stdio: 'ignore' }).status === 0) continue;
    if (!install) {
      missing.set(p, `not installed in ${VENV} (--no-install)`);
      continue;
    }
    log(`peers: pip install ${PIP_NAME[p]} (PyPI) into ${VENV}`);
    const r = spawnSync(py, ['-m', 'pip', 'install', '-q', '--disable-pip-version-check', PIP_NAME[p]], { encoding: 'utf8' });
    if (r.status !== 0) missing.set(p, `pip install ${PIP_NAME[p]} failed: ${(r.stderr || r.stdout).trim().split('\n').slice(-1)[0]}`);
    else if (spawnSync(py, ['-c', `import ${module}`], { stdio: 'ignore' }).status !== 0) missing.set(p, `installed but 'import ${module}' fails`);
  }
  return missing;
}

/** Writes an .npy file (version 1.0) of a little-endian float32 or int64 array. */
export function npy(file: string, data: Float32Array | BigInt64Array, shape: number[]): void {
  const descr = data instanceof Float32Array ? '<f4' : '<i8';
  let header = `{'descr': '${descr}', 'fortran_order': False, 'shape': (${shape.join(', ')}${shape.length === 1 ? ',' : ''}), }`;
  const pad = 64 - ((10 + header.length + 1) % 64);
  header = header + ' '.repeat(pad % 64) + '\n';
  const head = Buffer.alloc(10);
  head.write('\x93NUMPY', 0, 'latin1');
  head[6] = 1;
  head[7] = 0;
  head.writeUInt16LE(header.length, 8);
  writeFileSync(file, Buffer.concat([head, Buffer.from(header, 'latin1'), Buffer.from(data.buffer, data.byteOffset, data.byteLength)]));
}

/** The token vectors lateral stores for `collection`, decoded from its current generation's segments. */
async function exportStored(server: Server, collection: string): Promise<{ docIds: string[]; lens: number[]; vectors: Float32Array; dims: number; segmentBytes: number; indexBytes: number; layoutBytes: number }> {
  const rt = server.runtime;
  const tenant = rt.config.DEFAULT_TENANT;
  const manifest = await rt.generations.manifest(tenant, collection);
  if (!manifest) throw new Error(`collection ${collection} has no committed generation`);
  const owner = new Map<string, { seg: number; doc: number }>();
  const readers: SegmentReader[] = [];
  for (const [si, ref] of manifest.segments.entries()) {
    const bytes = await rt.store.get(ref.key);
    if (!bytes) throw new Error(`segment ${ref.key} missing`);
    const artifact = await rt.codecs.get(tenant, collection, ref.codecVersion);
    const r = readSegment(bytes, ref.key, artifact);
    readers.push(r);
    r.docIds.forEach((id, di) => owner.set(id, { seg: si, doc: di }));
  }
  const dims = readers[0]!.dims;
  const decoded = readers.map((r) => r.decodeAll());
  const docIds = [...owner.keys()];
  const lens = docIds.map((id) => {
    const { seg, doc } = owner.get(id)!;
    return readers[seg]!.tokenOffsets[doc + 1]! - readers[seg]!.tokenOffsets[doc]!;
  });
  const vectors = new Float32Array(lens.reduce((a, x) => a + x, 0) * dims);
  let at = 0;
  for (const id of docIds) {
    const { seg, doc } = owner.get(id)!;
    const r = readers[seg]!;
    const part = decoded[seg]!.subarray(r.tokenOffsets[doc]! * dims, r.tokenOffsets[doc + 1]! * dims);
    vectors.set(part, at);
    at += part.length;
  }
  const prefix = `tenants/${tenant}/collections/${collection}/`;
  const objects = await rt.store.list(prefix);
  const live = new Set(manifest.segments.map((s) => s.key));
  const segmentBytes = objects.filter((o) => live.has(o.key)).reduce((a, o) => a + o.size, 0);
  const indexBytes = objects.filter((o) => /\/(indexes|ivf)\//.test(o.key)).reduce((a, o) => a + o.size, 0);
  // The WARP search: the live segments' layouts, and the centroids and residual codec they were built with.
  const layoutKeys = new Set(manifest.segments.map((s) => s3Keys.searchLayout(tenant, collection, s.batchId, s.codecVersion, s.warpEpoch)));
  const epochs = new Set(manifest.segments.map((s) => s.warpEpoch ?? 0));
  const centroidKeys = new Set([...epochs].flatMap((e) => [s3Keys.ivfCentroids(tenant, collection, manifest.codecVersion, e), s3Keys.warpCodec(tenant, collection, manifest.codecVersion, e)]));
  const layoutBytes = objects.filter((o) => layoutKeys.has(o.key) || centroidKeys.has(o.key)).reduce((a, o) => a + o.size, 0);
  return { docIds, lens, vectors, dims, segmentBytes, indexBytes, layoutBytes };
}

/** The dataset's first n documents, the judgments of those, and the queries that still have a relevant one. */
function firstDocuments(ds: ReturnType<typeof loadRetrievalDataset>, n: number): ReturnType<typeof loadRetrievalDataset> {
  if (!Number.isInteger(n) || n < 1) throw new Error(`--docs must be an integer >= 1, got ${n}`);
  return keepDocuments(ds, new Set(ds.docs.slice(0, n).map((d) => d.id)));
}

/** The dataset's documents in `keep`, the judgments of those, and the queries that still have a relevant one. */
function keepDocuments(ds: ReturnType<typeof loadRetrievalDataset>, keep: ReadonlySet<string>): ReturnType<typeof loadRetrievalDataset> {
  const docs = ds.docs.filter((d) => keep.has(d.id));
  const qrels = new Map([...ds.qrels].map(([q, m]) => [q, new Map([...m].filter(([d]) => keep.has(d)))] as const));
  return { ...ds, docs, qrels, queries: ds.queries.filter((q) => hasRelevant(qrels.get(q.id))) };
}

/** Ids of the documents in the collection's committed generation (segments read, nothing decoded). */
async function storedIds(server: Server, collection: string): Promise<Set<string>> {
  const rt = server.runtime;
  const tenant = rt.config.DEFAULT_TENANT;
  const manifest = await rt.generations.manifest(tenant, collection);
  const ids = new Set<string>();
  for (const ref of manifest?.segments ?? []) {
    let bytes: Uint8Array | null = null;
    // a loaded machine's embedded S3 can time out a read: tried again
    for (let attempt = 1; ; attempt++) {
      try {
        bytes = await rt.store.get(ref.key);
        break;
      } catch (err) {
        if (attempt >= 5) throw err;
        await new Promise((r) => setTimeout(r, 3000));
      }
    }
    if (!bytes) continue;
    const dead = new Set(ref.tombstones ?? []);
    readSegment(bytes, ref.key, await rt.codecs.get(tenant, collection, ref.codecVersion)).docIds.forEach((id, i) => dead.has(i) || ids.add(id));
  }
  return ids;
}

/** Seconds spent in the collection's completed index jobs (BullMQ processedOn -> finishedOn). */
async function indexSeconds(server: Server): Promise<number> {
  const rt = server.runtime;
  const q = new Queue('index', { ...BULLMQ_CONNECTION_OPTIONS, connection: createRedis(rt.services.redisUrl, 'producer'), prefix: rt.config.REDIS_PREFIX });
  try {
    const jobs = await q.getJobs(['completed'], 0, -1);
    return jobs.reduce((a, j) => a + ((j.finishedOn ?? 0) - (j.processedOn ?? 0)) / 1000, 0);
  } finally {
    await q.close();
    await (await q.client).quit().catch(() => undefined);
  }
}

const USAGE = `usage: npm run bench -- peers [--dataset DIR (../shared/datasets/vaswani)] [--quick] [--json]
  [--peers a,b|none (${PEERS.join(',')})] [--no-install] [--threads N (1)] [--layout warp|ivf (warp)] [--data DIR]
  [--docs N] [--modes xtr,exhaustive,bm25 (all three)] [--nprobe N[,N..] (the service's default for the layout)] [--exact N[,N..] (the service's default; 0 off)]
  [--tprime N] [--as-is (with --data)] [--no-alternate]
  (comma lists of --nprobe / --exact: a sweep of lateral xtr over every pair, with --peers none)
  By default each peer whose lateral counterpart is measured (xtr-warp-rs and fast-plaid: xtr,
  maxsim-cpu: exhaustive, bm25s: bm25) builds its index first and then serves one query at a time;
  lateral and the peer get each query in turns (lateral first on even queries, the peer first on
  odd ones; one warm-up each), and the bench reports both p50 / p95, lateral / peer of the p50s,
  the median of the per-query ratios and the load average at the start and end of the turns.
  --no-alternate: the old way, each peer measured in its own process after lateral is done.`;

const LATERAL_MODES = ['xtr', 'exhaustive', 'bm25'];

/** The command line of the peers bench, read whole before anything is installed or started: an unknown flag or a bad value exits 2 with the usage. */
export function parsePeersFlags(args: string[]) {
  return parseCliOrExit(
    'bench peers',
    USAGE,
    args,
    {
      dataset: { type: 'string', default: '../shared/datasets/vaswani' },
      quick: { type: 'boolean' },
      json: { type: 'boolean' },
      peers: { type: 'string' },
      'no-install': { type: 'boolean' },
      threads: { type: 'string', default: '1' },
      layout: { type: 'string', default: 'warp' },
      data: { type: 'string' },
      docs: { type: 'string' },
      modes: { type: 'string', default: LATERAL_MODES.join(',') },
      nprobe: { type: 'string' },
      exact: { type: 'string' },
      tprime: { type: 'string' },
      'as-is': { type: 'boolean' },
      'no-alternate': { type: 'boolean' },
    },
    {},
    ({ values: v }) => {
      const peers = (v.peers === 'none' ? [] : (v.peers?.split(',') ?? [...PEERS])) as Peer[];
      for (const p of peers) if (!PEERS.includes(p)) throw new CliUsageError(`--peers: unknown peer '${p}' (known: ${PEERS.join(', ')}, or none)`);
      const modes = v.modes.split(',');
      for (const m of modes) if (!LATERAL_MODES.includes(m)) throw new CliUsageError(`--modes: unknown mode '${m}' (known: ${LATERAL_MODES.join(', ')})`);
      if (v.layout !== 'warp' && v.layout !== 'ivf') throw new CliUsageError(`--layout must be warp or ivf, got ${v.layout}`);
      if (v['as-is'] && v.data === undefined) throw new CliUsageError('--as-is measures the collection kept in --data DIR: give --data');
      // One value keeps intFlag's message; a comma list is a sweep.
      const list = (flag: string, text: string | undefined, min: number): (number | undefined)[] => (text === undefined ? [undefined] : text.includes(',') ? intListFlag(flag, text, min) : [intFlag(flag, text, min)]);
      const nprobes = list('nprobe', v.nprobe, 1);
      const exacts = list('exact', v.exact, 0);
      if (nprobes.length * exacts.length > 1 && peers.length > 0) throw new CliUsageError('--nprobe / --exact lists (a sweep) measure lateral alone: give --peers none');
      if (nprobes.length * exacts.length > 1 && !modes.includes('xtr')) throw new CliUsageError('--nprobe / --exact lists sweep lateral xtr: --modes must include xtr');
      return {
        dataset: path.resolve(v.dataset),
        quick: v.quick === true,
        peers,
        install: v['no-install'] !== true,
        threads: intFlag('threads', v.threads),
        layout: v.layout,
        data: v.data === undefined ? undefined : path.resolve(v.data),
        docs: v.docs === undefined ? undefined : intFlag('docs', v.docs),
        modes,
        nprobes,
        exacts,
        tPrime: v.tprime === undefined ? undefined : intFlag('tprime', v.tprime),
        asIs: v['as-is'] === true,
        alternate: v['no-alternate'] !== true,
      };
    },
  );
}

export async function runPeersBench(args: string[]): Promise<Record<string, unknown>> {
  const { dataset, quick, peers, install, threads, layout, data, docs, modes, nprobes, exacts, tPrime, asIs, alternate } = parsePeersFlags(args);
  // xtr-warp-rs probes as many lists per query token as lateral when --nprobe names one (no sweep with peers).
  const nprobe = nprobes.length === 1 ? nprobes[0] : undefined;
  const log = (m: string) => process.stderr.write(`${m}\n`);
  const loadAtStart = os.loadavg()[0];
  const unavailable = ensureVenv(peers, log, install);
  for (const [p, why] of unavailable) log(`peers: skipping ${p}: ${why}`);

  let ds = loadRetrievalDataset(dataset);
  if (quick) ds = quickSubset(ds);
  if (docs !== undefined) ds = firstDocuments(ds, docs);
  const judged = ds.queries.filter((q) => hasRelevant(ds.qrels.get(q.id)));
  const tmp = mkdtempSync(path.join(os.tmpdir(), 'lateral-peers-'));
  const dataDir = data ?? path.join(tmp, 'data');
  // lateral's ONNX sessions (query encoding, the centroid GEMM) get the peers' thread count too, unless set.
  const config = loadConfig({ ...process.env, PORT: '0', LOG_LEVEL: process.env.LOG_LEVEL ?? 'warn', DATA_DIR: dataDir, ORT_INTRA_OP_THREADS: process.env.ORT_INTRA_OP_THREADS ?? String(threads) });
  const model = config.DEFAULT_MODEL;
  const server = await startServer(config, { quiet: true, ...(asIs ? { queues: [QueueName.search] } : {}) });
  const engines: EngineFigures[] = [];
  const lateral: Record<string, EngineFigures> = {};
  // Peers serving query by query (the default): built before lateral is measured, then timed in turns with it.
  const served = new Map<Peer, ServedPeer>();
  try {
    const collection = `peers-${path.basename(dataset)}`.replace(/[^A-Za-z0-9_.-]/g, '-');
    const kept = data !== undefined ? await getCollection(server.url, collection).catch(() => null) : null;
    let ing = { seconds: 0 };
    // The collection kept in --data DIR must hold exactly the measured documents: one holding others
    // (an earlier run without --docs, or with another N) would be searched against judgments cut
    // to this run's documents, so it is built again.
    const have = kept ? await storedIds(server, collection) : new Set<string>();
    if (asIs) {
      // The kept collection measured as it is (e.g. copied from a run still ingesting): judgments cut to the documents it holds.
      if (!kept) throw new Error(`--as-is: no collection ${collection} in ${dataDir}`);
      ds = keepDocuments(ds, have);
      judged.splice(0, judged.length, ...ds.queries.filter((q) => hasRelevant(ds.qrels.get(q.id))));
      log(`peers: --as-is: ${collection} holds ${have.size} documents; ${judged.length} judged queries`);
    }
    const wanted = new Set(ds.docs.map((d) => d.id));
    const extra = [...have].filter((id) => !wanted.has(id)).length;
    if (kept && extra > 0) log(`peers: ${collection} in ${dataDir} holds ${extra} documents outside the measured ${ds.docs.length}: built again`);
    if (kept && extra === 0 && have.size === ds.docs.length) log(`peers: ${collection} in ${dataDir} already holds the ${ds.docs.length} documents: not ingested again`);
    else if (kept && extra === 0) {
      // An earlier run stopped part-way (--data): only the documents its committed generation lacks.
      const rest = ds.docs.filter((d) => !have.has(d.id));
      log(`peers: ${collection} in ${dataDir} holds ${have.size} of the documents: ingesting the other ${rest.length}`);
      ing = await ingest(server.url, collection, rest, { label: 'ingest', progress: false });
    } else {
      await recreateCollection(server.url, collection, model, { search: layout === 'warp' ? { layout: 'warp', bits: 4 } : { layout: 'ivf' } });
      log(`peers: ingesting ${ds.docs.length} documents of ${dataset} into lateral (${model}) over HTTP`);
      ing = await ingest(server.url, collection, ds.docs, { label: 'ingest', progress: false });
    }
    // Merges and centroid refits settle before anything is measured (--as-is: nothing runs them).
    if (!asIs) await maintenanceIdle(server);
    const info = await getCollection(server.url, collection);
    const exported = await exportStored(server, collection);
    const tokens = exported.lens.reduce((a, x) => a + x, 0);
    const buildS = await indexSeconds(server);
    log(`peers: lateral ingested in ${ing.seconds.toFixed(1)} s (${tokens} tokens, ${info.segments} segments; index jobs ${buildS.toFixed(1)} s)`);

    // The peers' input, written before lateral is measured (a served peer builds its index from it first):
    // the stored vectors, the judged queries encoded as lateral's search encodes them, and the texts.
    const runnable = peers.filter((p) => !unavailable.has(p));
    const dir = path.join(tmp, 'export');
    if (runnable.length > 0) {
      mkdirSync(dir, { recursive: true });
      const encoder = await getEncoder(path.resolve(config.MODELS_DIR, model), { executionProvider: 'cpu' });
      const encoded = await encoder.encodeQueries(judged.map((q) => q.text));
      const qLens = encoded.map((e) => e.length);
      const qVectors = new Float32Array(qLens.reduce((a, x) => a + x, 0) * exported.dims);
      let at = 0;
      for (const e of encoded) {
        qVectors.set(e.vectors, at);
        at += e.vectors.length;
      }
      npy(path.join(dir, 'doc_vectors.npy'), exported.vectors, [tokens, exported.dims]);
      npy(path.join(dir, 'doc_lens.npy'), BigInt64Array.from(exported.lens, BigInt), [exported.lens.length]);
      npy(path.join(dir, 'query_vectors.npy'), qVectors, [qVectors.length / exported.dims, exported.dims]);
      npy(path.join(dir, 'query_lens.npy'), BigInt64Array.from(qLens, BigInt), [qLens.length]);
      const text = new Map(ds.docs.map((d) => [d.id, d.text]));
      writeFileSync(path.join(dir, 'texts.json'), JSON.stringify({ docs: exported.docIds.map((id) => text.get(id) ?? ''), queries: judged.map((q) => q.text) }));
      // --nprobe: xtr-warp-rs probes as many lists per query token as lateral (else its own defaults, chosen per query).
      writeFileSync(path.join(dir, 'settings.json'), JSON.stringify({ top_k: TOP_K, threads, nprobe: nprobe ?? null }));
    }
    // Without --nprobe / --exact the xtr mode names none: the service's default for the layout (nprobe 32 over the
    // IVF, WARP_DEFAULT_NPROBE and WARP_DEFAULT_EXACT over WARP's). A sweep names each (nprobe, exact) pair.
    const sweep = nprobes.length * exacts.length > 1;
    const xtrSettings = nprobes.flatMap((np) => exacts.map((ex) => ({ nprobe: np, exact: ex })));
    const xtrName = (c: { nprobe?: number; exact?: number }) => (sweep ? `xtr nprobe=${c.nprobe ?? 'default'} exact=${c.exact ?? 'default'}` : 'xtr');
    // Each group's variants are alternated per query (one variant but for a sweep).
    const groups: { name: string; mode: string | Record<string, unknown>; setting?: { nprobe?: number; exact?: number } }[][] = [];
    if (modes.includes('xtr'))
      groups.push(xtrSettings.map((c) => ({ name: xtrName(c), setting: c, mode: { name: 'xtr', kPrime: 1000, ...(c.nprobe !== undefined ? { nprobe: c.nprobe } : {}), ...(c.exact !== undefined ? { exact: c.exact } : {}), ...(tPrime !== undefined ? { tPrime } : {}) } })));
    for (const m of ['exhaustive', 'bm25']) if (modes.includes(m)) groups.push([{ name: m, mode: m }]);
    // Served peers: each whose counterpart mode is measured builds its index now, one after another, and
    // then waits for queries; nothing else runs while lateral is measured (a waiting peer reads its stdin).
    const startFailed = new Map<Peer, string>();
    if (alternate && !sweep) {
      for (const p of runnable.filter((p) => modes.includes(COUNTERPART[p]))) {
        log(`peers: ${p} building its index on the exported vectors (${threads} threads), then serving queries in turns with lateral ${COUNTERPART[p]}`);
        const r = await PeerServer.start(dir, p, threads);
        if ('reason' in r) {
          log(`peers: ${p}: ${r.reason}`);
          startFailed.set(p, r.reason);
          continue;
        }
        served.set(p, { ...r, ms: judged.map(() => undefined), rankings: judged.map(() => []) });
      }
    }
    const rankings: Record<string, Map<string, string[]>> = {};
    for (const group of groups) {
      // The served peers whose counterpart this group is (never a sweep's: it measures lateral alone).
      const counterpart = group[0]!.setting !== undefined ? 'xtr' : group[0]!.name;
      const turnPeers = [...served].filter(([p, sp]) => COUNTERPART[p] === counterpart && sp.failed === undefined).map(([p, sp]) => ({ peer: p, sp }));
      const peerTurn = async ({ peer, sp }: { peer: Peer; sp: ServedPeer }, qi: number, warmUp = false) => {
        if (sp.failed !== undefined) return;
        try {
          const r = await sp.server.query(qi);
          if (warmUp) return;
          sp.ms[qi] = r.ms;
          sp.rankings[qi] = r.ranking;
        } catch (err) {
          sp.failed = (err as Error).message;
          log(`peers: ${peer} stopped answering: ${sp.failed}`);
        }
      };
      for (const v of group) await search(server.url, { collection, mode: v.mode, topK: TOP_K, queries: [judged[0]!] });
      for (const t of turnPeers) await peerTurn(t, 0, true);
      const loadStart = os.loadavg()[0];
      const acc = new Map(
        group.map((v) => [
          v.name,
          { ms: [] as number[], jobByQuery: judged.map(() => undefined as number | undefined), encodeByQuery: judged.map(() => undefined as number | undefined), serverMs: [] as number[], encodeMs: [] as number[], exactMs: [] as number[], bytesRead: [] as number[], ranges: [] as number[], warpShape: undefined as { centroids?: number; epochs?: number; segments: number } | undefined, metrics: [] as { ndcg: number; recall: number }[], top: new Map<string, string[]>() },
        ]),
      );
      for (const [qi, q] of judged.entries()) {
        // lateral's variants and the served peers, in turns rotated per query.
        for (const j of turnOrder(qi, group.length + turnPeers.length)) {
          if (j >= group.length) {
            await peerTurn(turnPeers[j - group.length]!, qi);
            continue;
          }
          const v = group[j]!;
          const a = acc.get(v.name)!;
          const r = await search(server.url, { collection, mode: v.mode, topK: TOP_K, queries: [q] });
          a.ms.push(r.ms);
          a.jobByQuery[qi] = r.timings?.totalMs;
          a.encodeByQuery[qi] = r.timings?.encodeQueriesMs;
          if (r.timings?.totalMs !== undefined) a.serverMs.push(r.timings.totalMs);
          if (r.timings?.encodeQueriesMs !== undefined) a.encodeMs.push(r.timings.encodeQueriesMs);
          if (r.timings?.exactMs !== undefined) a.exactMs.push(r.timings.exactMs);
          if (r.stats?.warp) a.warpShape = { centroids: r.stats.warp.centroids, epochs: r.stats.warp.epochs, segments: r.stats.warp.segments };
          for (const w of r.stats?.warp?.queries ?? []) {
            a.bytesRead.push(w.bytesRead);
            a.ranges.push(w.ranges);
          }
          const ids = (r.results[0]?.hits ?? []).map((h) => h.id);
          a.top.set(q.id, ids);
          a.metrics.push(queryMetrics(ids, ds.qrels.get(q.id)!));
        }
      }
      const loadEnd = os.loadavg()[0];
      for (const { peer, sp } of turnPeers) {
        if (sp.failed !== undefined) continue;
        const a = acc.get(group[0]!.name)!;
        sp.paired = pairedFigures({ peer, lateral: `lateral ${group[0]!.name}` }, a.jobByQuery, a.encodeByQuery, sp.ms, { start: loadStart, end: loadEnd });
      }
      for (const v of group) {
        const { name, mode } = v;
        const { ms, serverMs, encodeMs, exactMs, bytesRead, ranges, warpShape, metrics, top } = acc.get(name)!;
        const isXtr = v.setting !== undefined;
        rankings[name] = top;
        lateral[name] = {
          engine: `lateral ${name}`,
          status: 'ok',
          build_s: isXtr ? round(buildS, 2) : undefined,
          // xtr keeps the segments (token codes) and the IVF + postings; exhaustive only the segments;
          // bm25's postings share the index objects with the IVF, so no separate figure.
          bytes_per_token: isXtr ? round((exported.segmentBytes + exported.indexBytes) / tokens, 1) : name === 'exhaustive' ? round(exported.segmentBytes / tokens, 1) : undefined,
          'ndcg@10': round(mean(metrics.map((m) => m.ndcg)), 4),
          'recall@100': round(mean(metrics.map((m) => m.recall)), 4),
          ...latencyFigures(ms),
          ...(serverMs.length ? { search_job_p50_ms: round(percentile(serverMs, 0.5), 2), search_job_p95_ms: round(percentile(serverMs, 0.95), 2) } : {}),
          ...(exactMs.length ? { exact_stage_p50_ms: round(percentile(exactMs, 0.5), 2), exact_stage_p95_ms: round(percentile(exactMs, 0.95), 2) } : {}),
          ...(encodeMs.length === serverMs.length && serverMs.length ? { search_job_unencoded_p50_ms: round(percentile(serverMs.map((t, i) => t - encodeMs[i]!), 0.5), 2), encode_queries_p50_ms: round(percentile(encodeMs, 0.5), 2) } : {}),
          ...(isXtr && bytesRead.length ? { layout_bytes_per_token: round(exported.layoutBytes / tokens, 1), bytes_read_p50: Math.round(percentile(bytesRead, 0.5)), ranges_p50: Math.round(percentile(ranges, 0.5)), warp_centroids: warpShape?.centroids, warp_epochs: warpShape?.epochs, warp_segments: warpShape?.segments } : {}),
          settings: { mode, layout: isXtr ? layout : undefined, through: 'HTTP + queue (POST /v1/search?wait=60)', model, ...(sweep ? { alternated_with: group.length - 1 } : {}), ...(turnPeers.length ? { alternated_with_peers: turnPeers.map((t) => t.peer) } : {}) },
        };
        log(`peers: lateral ${name}: nDCG@10 ${lateral[name]['ndcg@10']} p50 ${lateral[name].p50_ms} ms`);
        engines.push(lateral[name]);
      }
    }
    // Each xtr setting's top 10 against exhaustive MaxSim's, per judged query (bench scale's overlap_with_exhaustive).
    const xtrNames = xtrSettings.map(xtrName).filter((n) => lateral[n]);
    if (rankings.exhaustive) {
      for (const n of xtrNames) {
        const o = topOverlap(rankings.exhaustive, rankings[n]!, 10);
        if (!o) continue;
        Object.assign(lateral[n]!, { overlap_at_10: round(o.mean, 3), overlap_at_10_min: round(o.min, 2), overlap_queries: o.queries, ndcg_vs_exhaustive: round(lateral[n]!['ndcg@10']! / lateral.exhaustive!['ndcg@10']!, 4) });
      }
    }
    // Effective settings of a sweep's rows (a setting left out is the service's default for the layout).
    const sweepRows = sweep
      ? xtrSettings.map((c) => {
          const e = lateral[xtrName(c)]!;
          return {
            nprobe: c.nprobe ?? (layout === 'warp' ? WARP_DEFAULT_NPROBE : 32),
            exact: layout === 'warp' ? (c.exact ?? WARP_DEFAULT_EXACT) : null,
            overlap_at_10: e.overlap_at_10 ?? null,
            overlap_at_10_min: e.overlap_at_10_min ?? null,
            'ndcg@10': e['ndcg@10'],
            ndcg_vs_exhaustive: e.ndcg_vs_exhaustive ?? null,
            'recall@100': e['recall@100'],
            search_job_p50_ms: e.search_job_p50_ms ?? null,
            search_job_p95_ms: e.search_job_p95_ms ?? null,
            exact_stage_p50_ms: e.exact_stage_p50_ms ?? null,
          };
        })
      : undefined;

    if (runnable.length > 0) {
      for (const p of runnable) {
        const sp = served.get(p);
        if (sp) {
          engines.push(await servedFigures(p, sp, judged, ds.qrels, exported.docIds, tokens, log));
          continue;
        }
        if (startFailed.has(p)) {
          engines.push({ engine: p, status: 'skipped', reason: startFailed.get(p)! });
          continue;
        }
        log(`peers: ${p} on the exported vectors (${threads} threads)${alternate && !sweep ? `: not alternated (lateral ${COUNTERPART[p]} is not measured)` : ''}`);
        const r = spawnSync(path.join(VENV, 'bin', 'python'), [path.resolve('scripts/bench/peers.py'), dir, p], { encoding: 'utf8', env: peerEnv(threads) });
        const file = path.join(dir, `peer-${p}.json`);
        if (r.status !== 0 || !existsSync(file)) {
          const why = r.signal ? `crashed (${r.signal})` : `exited with ${r.status}`;
          log(`peers: ${p} ${why}; last output: ${(r.stderr || r.stdout || '').trim().split('\n').slice(-3).join(' | ')}`);
          engines.push({ engine: p, status: 'skipped', reason: `${why} on this machine` });
          continue;
        }
        const o = JSON.parse(readFileSync(file, 'utf8')) as { status: string; reason?: string; build_s: number; index_bytes: number; latencies_ms: number[]; rankings: number[][]; settings: Record<string, unknown> };
        if (o.status !== 'ok') {
          engines.push({ engine: p, status: 'skipped', reason: o.reason ?? 'no output' });
          continue;
        }
        engines.push(peerFigures(p, o, 'after lateral, in its own process (not alternated)', judged, ds.qrels, exported.docIds, tokens));
      }
    }
    for (const [p, why] of unavailable) engines.push({ engine: p, status: 'skipped', reason: why });

    const comparisons = engines
      .filter((e) => e.status === 'ok' && (PEERS as readonly string[]).includes(e.engine) && lateral[COUNTERPART[e.engine as Peer]])
      .map((e) => {
        const paired = served.get(e.engine as Peer)?.paired;
        return { peer: e.engine, lateral: `lateral ${COUNTERPART[e.engine as Peer]}`, 'lateral/peer': ratios(lateral[COUNTERPART[e.engine as Peer]]!, e), ...(paired ? { paired } : {}) };
      });
    const result = { dataset, documents: exported.docIds.length, tokens, queries: judged.length, model, threads, quick, alternate, engines, comparisons, ...(sweepRows ? { sweep: sweepRows } : {}), load_average_start: round(loadAtStart, 2), load_average: os.loadavg()[0] };
    {
      console.log(`peers on ${path.basename(dataset)}: ${result.documents} documents, ${tokens} tokens, ${judged.length} judged queries, ${model}, ${threads} threads`);
      console.log(`${'engine'.padEnd(18)} ${'build s'.padStart(8)} ${'B/token'.padStart(8)} ${'nDCG@10'.padStart(8)} ${'R@100'.padStart(7)} ${'p50 ms'.padStart(8)} ${'p95 ms'.padStart(8)} ${'q/s'.padStart(7)}`);
      for (const e of engines) {
        if (e.status !== 'ok') {
          console.log(`${e.engine.padEnd(18)} skipped: ${e.reason}`);
          continue;
        }
        const f = (x: number | undefined, w: number) => (x === undefined ? '-' : String(x)).padStart(w);
        console.log(`${e.engine.padEnd(18)} ${f(e.build_s, 8)} ${f(e.bytes_per_token, 8)} ${f(e['ndcg@10'], 8)} ${f(e['recall@100'], 7)} ${f(e.p50_ms, 8)} ${f(e.p95_ms, 8)} ${f(e.qps, 7)}`);
      }
      for (const c of comparisons) console.log(`${c.lateral} / ${c.peer}: ${Object.entries(c['lateral/peer']).filter(([, v]) => v !== null).map(([k, v]) => `${k} ${v}x`).join(', ')}`);
      for (const c of comparisons) {
        if (!('paired' in c) || !c.paired) continue;
        const f = c.paired;
        console.log(`  ${f.lateral} search job / ${f.peer}, in turns query by query (${f.queries} queries, load ${f.load_average_start} -> ${f.load_average_end}): p50 ${f.lateral_job_p50_ms} / ${f.peer_p50_ms} ms (${f.p50_ratio}x), p95 ${f.lateral_job_p95_ms} / ${f.peer_p95_ms} ms; per-query ratio median ${f.paired_ratio_median}x`);
        if (f.lateral_job_unencoded_p50_ms !== null) console.log(`    without lateral's query encoding: p50 ${f.lateral_job_unencoded_p50_ms} / ${f.peer_p50_ms} ms (${f.p50_ratio_unencoded}x), p95 ${f.lateral_job_unencoded_p95_ms} ms; per-query ratio median ${f.paired_ratio_median_unencoded}x`);
      }
      console.log("lateral's latencies are a client's wall clock through HTTP and the queue; the peers' are in-process Python calls.");
      for (const [name, e] of Object.entries(lateral)) if (e.search_job_p50_ms !== undefined) console.log(`  lateral ${name}: the search job itself (timings.totalMs) p50 ${e.search_job_p50_ms} ms, p95 ${e.search_job_p95_ms} ms, of the ${e.p50_ms} ms; without query encoding (p50 ${e.encode_queries_p50_ms} ms) p50 ${e.search_job_unencoded_p50_ms} ms`);
      for (const n of xtrNames) {
        const e = lateral[n]!;
        if (e.overlap_at_10 !== undefined) console.log(`  lateral ${n}: top-10 overlap with exhaustive MaxSim mean ${e.overlap_at_10}, worst ${e.overlap_at_10_min} (${e.overlap_queries} queries); nDCG@10 ${e.ndcg_vs_exhaustive}x exhaustive's`);
      }
      if (sweepRows) {
        console.log(`sweep of lateral xtr (${layout}; pairs alternated per query):`);
        console.log(`${'nprobe'.padStart(6)} ${'exact'.padStart(5)} ${'ovl@10'.padStart(7)} ${'worst'.padStart(6)} ${'nDCG@10'.padStart(8)} ${'x exh'.padStart(7)} ${'R@100'.padStart(7)} ${'job p50'.padStart(8)} ${'job p95'.padStart(8)} ${'exact p50'.padStart(9)}`);
        const f = (x: number | null | undefined, w: number) => (x === null || x === undefined ? '-' : String(x)).padStart(w);
        for (const r of sweepRows) console.log(`${f(r.nprobe, 6)} ${f(r.exact, 5)} ${f(r.overlap_at_10, 7)} ${f(r.overlap_at_10_min, 6)} ${f(r['ndcg@10'], 8)} ${f(r.ndcg_vs_exhaustive, 7)} ${f(r['recall@100'], 7)} ${f(r.search_job_p50_ms, 8)} ${f(r.search_job_p95_ms, 8)} ${f(r.exact_stage_p50_ms, 9)}`);
      }
      const x = lateral.xtr;
      if (x?.exact_stage_p50_ms !== undefined) console.log(`  lateral xtr (warp): the exact final stage itself (timings.exactMs) p50 ${x.exact_stage_p50_ms} ms, p95 ${x.exact_stage_p95_ms} ms per query`);
      if (x?.layout_bytes_per_token !== undefined) console.log(`  lateral xtr (warp): search layout ${x.layout_bytes_per_token} B/token; per query p50 ${x.bytes_read_p50} bytes read in ${x.ranges_p50} ranged reads; ${x.warp_segments} segments, ${x.warp_centroids} centroids (${x.warp_epochs} epoch(s))`);
      for (const e of engines) {
        if (e.status !== 'ok' || !x?.search_job_p50_ms || !e.p50_ms || !(e.engine in COUNTERPART) || COUNTERPART[e.engine as Peer] !== 'xtr') continue;
        const quality = lateral.exhaustive ? `; nDCG@10 lateral xtr / lateral exhaustive: ${round(x['ndcg@10']! / lateral.exhaustive['ndcg@10']!, 4)}x` : '';
        const unencoded = x.search_job_unencoded_p50_ms !== undefined ? ` (without query encoding ${round(x.search_job_unencoded_p50_ms / e.p50_ms, 3)}x)` : '';
        console.log(`  lateral xtr search job p50 / ${e.engine} p50 (${threads} thread${threads > 1 ? 's' : ''}): ${round(x.search_job_p50_ms / e.p50_ms, 3)}x${unencoded}${quality}`);
        if (x.layout_bytes_per_token !== undefined && e.bytes_per_token) console.log(`  search-layout bytes per token lateral / ${e.engine}: ${round(x.layout_bytes_per_token / e.bytes_per_token, 3)}x`);
      }
    }
    return result;
  } finally {
    for (const sp of served.values()) sp.server.kill();
    await server.stop();
    rmSync(tmp, { recursive: true, force: true }); // --data DIR is outside tmp: kept
  }
}

/**
 * Waits until the merge and refit queues (merges, and WARP's centroid refits on a queue of their own)
 * have no job waiting or running, seen so twice 2 s apart: a merge queues a refit when one is due and
 * a refit's commit can queue a merge. Waiting on merges alone measured full Vaswani at its first
 * index job's 1,024 centroids while the refit to 8,192 was still running.
 */
async function maintenanceIdle(server: Server): Promise<void> {
  const rt = server.runtime;
  const queues = [QueueName.merge, QueueName.refit].map((name) => new Queue(name, { ...BULLMQ_CONNECTION_OPTIONS, connection: createRedis(rt.services.redisUrl, 'producer'), prefix: rt.config.REDIS_PREFIX }));
  const idle = async () => (await Promise.all(queues.map((q) => q.getJobCounts('active', 'waiting', 'delayed', 'prioritized')))).every((c) => Object.values(c).every((n) => n === 0));
  try {
    for (let seen = 0; seen < 2; ) {
      seen = (await idle()) ? seen + 1 : 0;
      await new Promise((r) => setTimeout(r, seen > 0 ? 2000 : 1000));
    }
  } finally {
    for (const q of queues) {
      await q.close();
      await (await q.client).quit().catch(() => undefined);
    }
  }
}

function mean(xs: number[]): number {
  return xs.reduce((a, x) => a + x, 0) / Math.max(1, xs.length);
}

function round(x: number, digits = 1): number {
  return Number(x.toFixed(digits));
}
