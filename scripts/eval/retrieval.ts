/**
 * `npm run eval -- retrieval --dataset DIR [--model NAME|DIR] [--layout warp|ivf] [--bits 2|4] [--json] [--plot out.svg] [--quick]`
 *
 * Full retrieval through the service, as a user runs it: the all-in-one server (API + workers,
 * embedded Redis and S3 under a temporary DATA_DIR unless REDIS_URL / S3_ENDPOINT are set) is
 * started, the folder's documents are ingested over HTTP (queues, encoder, codec, index and commit
 * jobs, S3), and every judged query is sent to POST /v1/search?wait=60, one query per request, for
 * every mode:
 *   exhaustive (exact MaxSim over every document, the reference), xtr@100 / xtr@1000 / xtr@10000
 *   (k' document tokens per query token, nprobe at the API's default), bm25, dense, mebert, and
 *   hybrid (base xtr at its defaults, linear fusion of min-max normalised scores with BM25 over
 *   the union of both top-100s) with lambda tuned on one half of the judged queries (the 1st, 3rd,
 *   5th, ... in file order, sent as one batched request per grid value) and reported on the other
 *   half (2nd, 4th, ...). Every other mode is also reported on that same half, for comparison.
 *   `hybrid@default` is hybrid as a request naming only the mode gets it (base xtr, the default
 *   fusion: minmax, DEFAULT_HYBRID_LAMBDA), on every judged query.
 *
 * Metrics (scripts/lib/metrics): nDCG@10 with linear gain over the judged queries with at least
 * one relevant document (Cranfield: gain 5 - grade for grades 1..4, -1 -> 0; binary qrels: gain 1;
 * see scripts/lib/retrieval-dataset.ts), recall@100 (topK 100; relevant = gain > 0), and the
 * per-query latency p50 / p95 (linear interpolation), the client's wall clock from the POST until
 * the completed answer. One warm-up request per mode (the collection's segments and indexes are
 * loaded then) is not counted.
 *
 * --dataset: a folder in the format of ../shared/datasets/vaswani (TREC ad hoc) or of
 *   ../shared/datasets/cranfield (Glasgow, any file names), told apart by content
 *   (scripts/lib/retrieval-dataset.ts); --docs / --queries / --qrels FILE name a file when the
 *   folder has several candidates. Default: the vendored data/cranfield.
 * --model: a model under MODELS_DIR (default DEFAULT_MODEL, minilm-l6-384) or a model directory.
 * --nprobe N: lists probed per query token by the xtr modes and the hybrid's base (default: the
 *   API's for the layout, WARP_DEFAULT_NPROBE on WARP and 32 on the IVF).
 * --modes a,b: only these modes (names as reported: exhaustive, xtr@100, xtr@1000, xtr@10000, bm25,
 *   dense, mebert, hybrid@default); the tuned hybrid always runs.
 * --layout warp|ivf [--bits 2|4]: the collection's search layout, named explicitly at creation.
 *   warp (default, as the service's; `search: { layout: 'warp', bits }`, default bits 4): WARP's
 *   centroid-major search layout, the xtr modes and the hybrid's base run WARP's engine (kPrime does
 *   not apply to it: xtr@100 / @1000 / @10000 then differ only by noise); ivf (`search: { layout:
 *   'ivf' }`): XTR over the segment index's IVF.
 *   Every mode also reports its search job's own p50 / p95 (the result's timings.searchMs) and, for
 *   the modes WARP serves, the bytes of list ranges and the ranged reads per query (stats.warp);
 *   the result names the layout's bytes per token (`search_layout`).
 * --quick: 20 judged queries and 300 documents: every document judged relevant to them (the first
 *   300 if there are more) and a seeded random sample of the others; judgments of documents left
 *   out are dropped.
 * --plot out.svg: nDCG@10 against median latency per mode.
 * With --json the last line is one JSON object {"modes": {"exhaustive": {"ndcg@10", "recall@100",
 * "p50_ms", "p95_ms", "queries"}, "xtr@100": ..., "hybrid": ... (test half)}, "test_half": {...},
 * "hybrid": {lambda, grid, ...}, "dataset", "model", "documents", "queries", "ingest_seconds", ...}.
 */
import { existsSync, mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { DEFAULT_WARP_BITS, loadConfig, mulberry32, type Config, type SearchLayoutSettings, type WarpLayoutSettings } from '@lateral/shared';
import { startServer } from '../../apps/all-in-one/src/server';
import { getCollection, ingest, recreateCollection, search } from '../lib/client';
import { hasRelevant, mean, ndcgAt, recallAt, type Judgments } from '../lib/metrics';
import { intFlag, parseCliOrExit } from '../lib/cli';
import { loadRetrievalDataset, type RetrievalDataset, type Role } from '../lib/retrieval-dataset';
import { escapeXml, logXPlot } from '../lib/svg-plot';

/** The search modes of the table, by the name they are reported under. */
export const MODES: { name: string; mode: string | Record<string, unknown> }[] = [
  { name: 'exhaustive', mode: 'exhaustive' },
  { name: 'xtr@100', mode: { name: 'xtr', kPrime: 100 } },
  { name: 'xtr@1000', mode: { name: 'xtr', kPrime: 1000 } },
  { name: 'xtr@10000', mode: { name: 'xtr', kPrime: 10_000 } },
  { name: 'bm25', mode: 'bm25' },
  { name: 'dense', mode: 'dense' },
  { name: 'mebert', mode: 'mebert' },
  /** Hybrid exactly as a request naming only the mode gets it: base xtr, the default fusion (DEFAULT_HYBRID_LAMBDA, or the collection's fitted weight). */
  { name: 'hybrid@default', mode: 'hybrid' },
];
/** Hybrid: XTR (API defaults: k' 1000, nprobe 32) + BM25, min-max normalised, linear; lambda tuned. */
export const HYBRID = { name: 'hybrid', base: 'xtr', fusion: 'linear', normalization: 'minmax', depth: 100 } as const;
export const LAMBDA_GRID = [0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1, 1.5, 2, 3, 5];
export const TOP_K = 100;
/** The API's default nprobe (libs/shared/src/search.ts). */
export const DEFAULT_NPROBE = 32;

/** The modes with nprobe set on the xtr ones when it is given. */
export function modesWith(nprobe?: number, only?: readonly string[]): { name: string; mode: string | Record<string, unknown> }[] {
  return MODES.filter((m) => !only || only.includes(m.name)).map((m) => (nprobe !== undefined && typeof m.mode === 'object' && m.mode.name === 'xtr' ? { ...m, mode: { ...m.mode, nprobe } } : m));
}

export interface ModeFigures {
  'ndcg@10': number;
  'recall@100': number;
  p50_ms: number;
  p95_ms: number;
  queries: number;
  /** The search job's own time (the result's timings.searchMs: first stage and merge, after query encoding), p50 / p95. */
  search_job_p50_ms?: number;
  search_job_p95_ms?: number;
  /** Modes WARP serves: bytes of list ranges read per query (p50, mean) and ranged reads (p50), from stats.warp. */
  bytes_read_p50?: number;
  bytes_read_mean?: number;
  ranges_p50?: number;
}

export interface RetrievalEvalResult {
  modes: Record<string, ModeFigures>;
  test_half: { queries: number; query_ids: string[]; modes: Record<string, ModeFigures> };
  /** IVF lists probed per query token by the xtr modes. */
  nprobe: number;
  /** --layout warp (the default): the search layout, its bytes (every segment's object) and bytes per stored token; null: --layout ivf. */
  search_layout: { layout: 'warp'; bits: number; layout_bytes: number; bytes_per_token: number; segments: number; centroids: number } | null;
  hybrid: { settings: Record<string, unknown>; lambda: number; grid: { lambda: number; 'ndcg@10': number }[]; tuned_on: string; reported_on: string };
  dataset: string;
  format: string;
  files: Record<Role, string>;
  model: string;
  documents: number;
  tokens: number;
  segments: number;
  queries: number;
  queries_without_relevant: number;
  ingest_seconds: number;
  eval_seconds: number;
  quick: boolean;
  /** 1-minute load average of this machine when ingestion started and when the searches ended, and its cores: other processes skew the latencies. */
  load_average: { start: number; end: number; cores: number };
  gains: string;
  notes: string[];
}

/** Percentile p in [0, 1] with linear interpolation between order statistics (numpy's default). */
export function percentile(values: readonly number[], p: number): number {
  if (values.length === 0) return NaN;
  const s = [...values].sort((a, b) => a - b);
  const pos = p * (s.length - 1);
  const lo = Math.floor(pos), hi = Math.ceil(pos);
  return s[lo]! + (s[hi]! - s[lo]!) * (pos - lo);
}

/** Tuning half = 1st, 3rd, 5th, ... items; test half = 2nd, 4th, ... */
export function splitHalves<T>(items: readonly T[]): { tune: T[]; test: T[] } {
  return { tune: items.filter((_, i) => i % 2 === 0), test: items.filter((_, i) => i % 2 === 1) };
}

/** The grid value with the best score; the first (smallest lambda in grid order) among equals. */
export function bestLambda(grid: readonly { lambda: number; 'ndcg@10': number }[]): number {
  let best = grid[0]!;
  for (const g of grid) if (g['ndcg@10'] > best['ndcg@10'] + 1e-12) best = g;
  return best.lambda;
}

/**
 * --quick: the first `nQueries` judged queries and `nDocs` documents, those judged relevant to them
 * first (in corpus order, at most nDocs), the rest a seeded random sample; corpus order kept,
 * judgments of documents left out dropped.
 */
export function quickSubset(ds: RetrievalDataset, nQueries = 20, nDocs = 300, seed = 42): RetrievalDataset {
  const queries = ds.queries.filter((q) => hasRelevant(ds.qrels.get(q.id))).slice(0, nQueries);
  const relevant = new Set<string>();
  for (const q of queries) for (const [d, g] of ds.qrels.get(q.id)!) if (g > 0) relevant.add(d);
  const keep = new Set(ds.docs.filter((d) => relevant.has(d.id)).slice(0, nDocs).map((d) => d.id));
  const rest = ds.docs.filter((d) => !keep.has(d.id));
  const r = mulberry32(seed);
  for (let i = rest.length - 1; i > 0; i--) {
    const j = Math.floor(r() * (i + 1));
    [rest[i], rest[j]] = [rest[j]!, rest[i]!];
  }
  for (const d of rest) {
    if (keep.size >= nDocs) break;
    keep.add(d.id);
  }
  const qrels = new Map<string, Map<string, number>>();
  for (const q of queries) qrels.set(q.id, new Map([...ds.qrels.get(q.id)!].filter(([d]) => keep.has(d))));
  return {
    ...ds,
    docs: ds.docs.filter((d) => keep.has(d.id)),
    queries,
    qrels,
    notes: [...ds.notes, `--quick: ${queries.length} judged queries, ${keep.size} documents (${Math.min(relevant.size, nDocs)} judged relevant to them, the others drawn at random, seed ${seed})`],
  };
}

/** Per query: nDCG@10 and recall@100 of a ranking. */
export function queryMetrics(ranking: readonly string[], judged: Judgments): { ndcg: number; recall: number } {
  const relevant = new Set([...judged].filter(([, g]) => g > 0).map(([d]) => d));
  return { ndcg: ndcgAt(ranking, judged, 10), recall: recallAt(ranking, relevant, TOP_K) };
}

export interface PerQuery {
  id: string;
  ndcg: number;
  recall: number;
  ms: number;
  /** The search job's timings.searchMs (NaN when the answer has none). */
  jobMs?: number;
  /** WARP: bytes of list ranges and ranged reads of this query (stats.warp). */
  bytesRead?: number;
  ranges?: number;
}

export function summarize(rows: readonly PerQuery[]): ModeFigures {
  const ms = rows.map((r) => r.ms);
  const job = rows.map((r) => r.jobMs).filter((x): x is number => Number.isFinite(x));
  const warp = rows.filter((r) => r.bytesRead !== undefined);
  return {
    'ndcg@10': mean(rows.map((r) => r.ndcg)),
    'recall@100': mean(rows.map((r) => r.recall)),
    p50_ms: percentile(ms, 0.5),
    p95_ms: percentile(ms, 0.95),
    queries: rows.length,
    ...(job.length ? { search_job_p50_ms: percentile(job, 0.5), search_job_p95_ms: percentile(job, 0.95) } : {}),
    ...(warp.length
      ? { bytes_read_p50: percentile(warp.map((r) => r.bytesRead!), 0.5), bytes_read_mean: mean(warp.map((r) => r.bytesRead!)), ranges_p50: percentile(warp.map((r) => r.ranges!), 0.5) }
      : {}),
  };
}

export interface RetrievalEvalOptions {
  dataset: string;
  /** A model name under MODELS_DIR or a model directory; default DEFAULT_MODEL. */
  model?: string;
  quick?: boolean;
  plot?: string;
  /** IVF lists probed per query token (xtr modes and the hybrid's base); default the API's. */
  nprobe?: number;
  /** Only these modes of MODES (by their reported names); default all. The tuned hybrid always runs. */
  modes?: string[];
  /** The collection's search layout (--layout, --bits); absent: the service's default, WARP at 4 bits (named explicitly at creation). */
  layout?: SearchLayoutSettings;
  files?: Partial<Record<Role, string>>;
  /** Server configuration (tests); default: the environment, PORT 0, a temporary DATA_DIR. */
  config?: Config;
  log?: (line: string) => void;
  /** Where the tables go (stdout). */
  print?: (line: string) => void;
}

/** Runs the evaluation (see the module comment). */
export async function evaluateRetrieval(opts: RetrievalEvalOptions): Promise<RetrievalEvalResult> {
  const log = opts.log ?? ((m: string) => process.stderr.write(`${m}\n`));
  const print = opts.print ?? ((m: string) => console.log(m));
  if (opts.nprobe !== undefined && !(Number.isInteger(opts.nprobe) && opts.nprobe >= 1)) throw new Error(`--nprobe must be an integer >= 1, got ${opts.nprobe}`);
  const dir = path.resolve(opts.dataset);
  let ds = loadRetrievalDataset(dir, opts.files);
  if (opts.quick) ds = quickSubset(ds);
  const judged = ds.queries.filter((q) => hasRelevant(ds.qrels.get(q.id)));
  const without = ds.queries.length - judged.length;
  if (judged.length < 2) throw new Error(`${dir}: ${judged.length} quer(ies) with a relevant judgment; the evaluation needs at least 2 (one per half for the hybrid)`);
  log(`retrieval eval: ${dir} (${ds.format}: ${path.basename(ds.files.docs)}, ${path.basename(ds.files.queries)}, ${path.basename(ds.files.qrels)}): ${ds.docs.length} documents, ${judged.length} judged queries${without ? ` (${without} without a relevant judgment left out)` : ''}`);
  for (const n of ds.notes) log(`  ${n}`);

  let tmp: string | undefined;
  let config = opts.config;
  if (!config) {
    tmp = mkdtempSync(path.join(os.tmpdir(), 'lateral-retrieval-'));
    config = loadConfig({ ...process.env, PORT: '0', LOG_LEVEL: process.env.LOG_LEVEL ?? 'warn', DATA_DIR: tmp });
  }
  const model = resolveModel(config, opts.model);
  const server = await startServer(config, { quiet: true });
  const t0 = performance.now();
  const loadStart = os.loadavg()[0]!;
  try {
    const base = server.url;
    const collection = `retrieval-${path.basename(dir)}-${model}`.replace(/[^A-Za-z0-9_.-]/g, '-').slice(0, 120);
    const layout: SearchLayoutSettings = opts.layout ?? { layout: 'warp', bits: DEFAULT_WARP_BITS };
    await recreateCollection(base, collection, model, { search: layout });
    log(`ingesting ${ds.docs.length} documents into ${collection} (${model}) over HTTP`);
    const ing = await ingest(base, collection, ds.docs, { label: `ingest ${model}`, progress: false });
    const info = await getCollection(base, collection);
    log(`ingested in ${ing.seconds.toFixed(1)} s: ${ing.tokens} tokens, ${info.segments} segments`);

    let layoutSeen: { layoutBytes: number; segments: number; centroids?: number } | null = null;
    const run = async (mode: string | Record<string, unknown>, queries: { id: string; text: string }[], batched = false): Promise<PerQuery[]> => {
      const score = (id: string, hits: { id: string }[], ms: number, r?: Awaited<ReturnType<typeof search>>): PerQuery => {
        const w = r?.stats?.warp;
        if (w) layoutSeen = w;
        return { id, ms, ...queryMetrics(hits.map((h) => h.id), ds.qrels.get(id)!), jobMs: r?.timings?.searchMs ?? NaN, ...(w ? { bytesRead: w.queries[0]!.bytesRead, ranges: w.queries[0]!.ranges } : {}) };
      };
      if (batched) {
        const r = await search(base, { collection, mode, topK: TOP_K, queries });
        const byId = new Map(r.results.map((x) => [x.queryId, x.hits]));
        return queries.map((q) => score(q.id, byId.get(q.id) ?? [], NaN));
      }
      await search(base, { collection, mode, topK: TOP_K, queries: [queries[0]!] }); // warm-up, not counted
      const out: PerQuery[] = [];
      for (const q of queries) {
        const r = await search(base, { collection, mode, topK: TOP_K, queries: [q] });
        out.push(score(q.id, r.results[0]?.hits ?? [], r.ms, r));
      }
      return out;
    };

    const perMode = new Map<string, PerQuery[]>();
    const hybrid = { ...HYBRID, ...(opts.nprobe !== undefined ? { nprobe: opts.nprobe } : {}) };
    const unknown = opts.modes?.filter((n) => !MODES.some((m) => m.name === n)) ?? [];
    if (unknown.length) throw new Error(`--modes: unknown ${unknown.join(', ')} (${MODES.map((m) => m.name).join(', ')})`);
    for (const m of modesWith(opts.nprobe, opts.modes)) {
      const t = performance.now();
      const rows = await run(m.mode, judged);
      perMode.set(m.name, rows);
      const s = summarize(rows);
      log(`  ${m.name.padEnd(10)} nDCG@10 ${s['ndcg@10'].toFixed(4)}  R@100 ${s['recall@100'].toFixed(4)}  p50 ${s.p50_ms.toFixed(1)} ms (job ${s.search_job_p50_ms?.toFixed(1) ?? '-'} ms)${s.bytes_read_p50 !== undefined ? `  read ${Math.round(s.bytes_read_p50)} B in ${s.ranges_p50} ranges per query` : ''}  (${((performance.now() - t) / 1000).toFixed(1)} s)`);
    }

    const { tune, test } = splitHalves(judged);
    const grid: { lambda: number; 'ndcg@10': number }[] = [];
    for (const lambda of LAMBDA_GRID) {
      const rows = await run({ ...hybrid, lambda }, tune, true);
      grid.push({ lambda, 'ndcg@10': mean(rows.map((r) => r.ndcg)) });
    }
    const lambda = bestLambda(grid);
    log(`  hybrid lambda grid on the tuning half (${tune.length} queries): ${grid.map((g) => `${g.lambda}: ${g['ndcg@10'].toFixed(4)}`).join(', ')} -> lambda ${lambda}`);
    const hybridRows = await run({ ...hybrid, lambda }, test);

    const testIds = new Set(test.map((q) => q.id));
    const modes: Record<string, ModeFigures> = {};
    const testModes: Record<string, ModeFigures> = {};
    for (const [name, rows] of perMode) {
      modes[name] = summarize(rows);
      testModes[name] = summarize(rows.filter((r) => testIds.has(r.id)));
    }
    modes.hybrid = testModes.hybrid = summarize(hybridRows);

    const gains = ds.notes.find((n) => n.startsWith('judgments')) ?? '';
    const idList = (qs: { id: string }[]) => `${qs.slice(0, 6).map((q) => q.id).join(', ')}${qs.length > 6 ? ', ...' : ''}`;
    const result: RetrievalEvalResult = {
      modes,
      test_half: { queries: test.length, query_ids: test.map((q) => q.id), modes: testModes },
      nprobe: opts.nprobe ?? DEFAULT_NPROBE,
      search_layout: searchLayoutFigures(layout.layout === 'warp' ? layout : undefined, layoutSeen, ing.tokens),
      hybrid: {
        settings: { ...HYBRID, kPrime: 1000, nprobe: opts.nprobe ?? DEFAULT_NPROBE, note: `base xtr with kPrime 1000 (the API default), nprobe ${opts.nprobe ?? DEFAULT_NPROBE}; lambda weighs the min-max normalised BM25 score` },
        lambda,
        grid,
        tuned_on: `${tune.length} judged queries at odd positions (1st, 3rd, ...) in file order: ids ${idList(tune)}`,
        reported_on: `${test.length} judged queries at even positions (2nd, 4th, ...): ids ${idList(test)}`,
      },
      dataset: dir,
      format: ds.format,
      files: ds.files,
      model,
      documents: ds.docs.length,
      tokens: ing.tokens,
      segments: Number(info.segments),
      queries: judged.length,
      queries_without_relevant: without,
      ingest_seconds: round(ing.seconds, 2),
      eval_seconds: round((performance.now() - t0) / 1000 - ing.seconds, 1),
      quick: !!opts.quick,
      load_average: { start: round(loadStart, 2), end: round(os.loadavg()[0]!, 2), cores: os.cpus().length },
      gains,
      notes: ds.notes,
    };
    for (const line of formatTables(result)) print(line);
    if (opts.plot) {
      writeFileSync(opts.plot, retrievalPlotSvg(result));
      print(`plot: ${opts.plot}`);
    }
    return result;
  } finally {
    await server.stop();
    if (tmp) rmSync(tmp, { recursive: true, force: true });
  }
}

/** The layout's figures from what a WARP answer said (stats.warp: every segment's layout bytes), per stored token. */
export function searchLayoutFigures(
  layout: WarpLayoutSettings | undefined,
  seen: { layoutBytes: number; segments: number; centroids?: number } | null,
  tokens: number,
): RetrievalEvalResult['search_layout'] {
  if (!layout) return null;
  if (!seen) throw new Error('--layout warp: no xtr answer reported stats.warp (the collection was not served by WARP)');
  return { layout: 'warp', bits: layout.bits, layout_bytes: seen.layoutBytes, bytes_per_token: round(seen.layoutBytes / tokens, 2), segments: seen.segments, centroids: seen.centroids ?? 0 };
}

/** A model name under MODELS_DIR, or a directory linked there (as the demo does). */
function resolveModel(config: Config, model: string | undefined): string {
  if (!model) model = config.DEFAULT_MODEL;
  const dir = path.resolve(config.MODELS_DIR, model);
  if (!model.includes('/') && existsSync(path.join(dir, 'manifest.json'))) return model;
  const given = path.resolve(model);
  if (model.includes('/') && existsSync(path.join(given, 'manifest.json'))) {
    const name = path.basename(given);
    const link = path.resolve(config.MODELS_DIR, name);
    if (given !== link) {
      mkdirSync(config.MODELS_DIR, { recursive: true });
      rmSync(link, { force: true, recursive: false });
      symlinkSync(given, link);
    }
    return name;
  }
  throw new Error(`--model ${model}: no manifest.json in ${model.includes('/') ? given : dir} (build the built-in models with npm run build-model)`);
}

const round = (x: number, digits = 4) => Number(x.toFixed(digits));

/** The printed tables: every mode over all judged queries (hybrid: the test half), then all over the test half. */
export function formatTables(r: RetrievalEvalResult): string[] {
  // The modes the run measured (--modes), in table order, then the tuned hybrid.
  const names = [...MODES.map((m) => m.name), 'hybrid'].filter((n) => r.modes[n] !== undefined);
  const job = (x: number | undefined) => (x === undefined ? '-' : x.toFixed(1)).padStart(8);
  const bytes = (m: ModeFigures) => (r.search_layout ? `  ${(m.bytes_read_p50 === undefined ? '-' : String(Math.round(m.bytes_read_p50))).padStart(10)}` : '');
  const row = (name: string, m: ModeFigures, suffix = '') =>
    `${name.padEnd(11)} ${m['ndcg@10'].toFixed(4)}   ${m['recall@100'].toFixed(4)}   ${m.p50_ms.toFixed(1).padStart(8)}  ${m.p95_ms.toFixed(1).padStart(8)}  ${job(m.search_job_p50_ms)}  ${job(m.search_job_p95_ms)}  ${String(m.queries).padStart(4)}${bytes(m)}${suffix}`;
  const head = `mode        nDCG@10  R@100    p50 ms    p95 ms  job p50   job p95  queries${r.search_layout ? '  B read/q p50' : ''}`;
  const out = [
    `${path.basename(r.dataset)} (${r.format}), ${r.model}: ${r.documents} documents (${r.tokens} tokens, ${r.segments} segments, ingested in ${r.ingest_seconds} s), ${r.queries} judged queries${r.quick ? ' [--quick]' : ''}`,
    `gains: ${r.gains}; recall@100 counts gain > 0; latency = one query per POST /v1/search?wait=60, client wall clock; xtr nprobe ${r.nprobe}`,
    `load average ${r.load_average.start} at the start, ${r.load_average.end} at the end, ${r.load_average.cores} cores (other processes skew the latencies)`,
    ...(r.search_layout
      ? [`search layout: WARP, ${r.search_layout.bits} bits per residual dimension, ${r.search_layout.centroids} centroids, ${r.search_layout.layout_bytes} B over ${r.search_layout.segments} segments = ${r.search_layout.bytes_per_token} B per token; xtr modes and the hybrid's base run WARP's engine (kPrime does not apply)`]
      : []),
    head,
    ...names.map((n) => row(n, r.modes[n]!, n === 'hybrid' ? `  (test half only; lambda ${r.hybrid.lambda} tuned on the other half)` : '')),
    '',
    `same modes on the test half (${r.test_half.queries} queries: ${r.hybrid.reported_on}); hybrid lambda tuned on ${r.hybrid.tuned_on}`,
    head,
    ...names.map((n) => row(n, r.test_half.modes[n]!)),
    `hybrid lambda grid (tuning half nDCG@10): ${r.hybrid.grid.map((g) => `${g.lambda}: ${g['ndcg@10'].toFixed(4)}`).join(', ')}`,
  ];
  return out;
}

const COLORS: Record<string, string> = {
  exhaustive: '#000000', 'xtr@100': '#9ecae1', 'xtr@1000': '#4292c6', 'xtr@10000': '#08519c',
  bm25: '#d62728', dense: '#2ca02c', mebert: '#9467bd', hybrid: '#ff7f0e',
};

/**
 * Hand-written SVG in the style of the compression plot: x = median latency per query (ms, log
 * scale), y = nDCG@10; filled markers over all judged queries, hollow markers over the test half
 * (where the hybrid is reported).
 */
export function retrievalPlotSvg(r: RetrievalEvalResult): string {
  const W = 980, H = 620, L = 70, R = 220, Tm = 40, B = 60;
  const names = Object.keys(r.modes);
  const pts = [
    ...names.filter((n) => n !== 'hybrid').map((n) => ({ name: n, m: r.modes[n]!, hollow: false })),
    ...names.map((n) => ({ name: n, m: r.test_half.modes[n]!, hollow: true })),
  ].filter((p) => Number.isFinite(p.m.p50_ms) && p.m.p50_ms > 0);
  const frame = { width: W, height: H, left: L, right: R, top: Tm, bottom: B, yLabel: 'nDCG@10', roundCoords: true };
  const { out, X, Y } = logXPlot({ ...frame, xs: pts.map((p) => p.m.p50_ms), ys: pts.map((p) => p.m['ndcg@10']), title: `${path.basename(r.dataset)}, ${r.model}: nDCG@10 vs median latency per query (${r.documents} docs, ${r.queries} judged queries${r.quick ? ', --quick' : ''})`, xLabel: 'median latency per query, ms (one query per POST /v1/search?wait=60, client wall clock; log scale)' });
  for (const p of pts) {
    const color = COLORS[p.name] ?? '#000';
    const cx = X(p.m.p50_ms), cy = Y(p.m['ndcg@10']);
    const fill = p.hollow ? 'white' : color;
    const label = `${p.name}${p.hollow ? ' (test half)' : ''}`;
    out.push(`<circle cx="${cx.toFixed(1)}" cy="${cy.toFixed(1)}" r="4.5" fill="${fill}" stroke="${color}" stroke-width="1.5"><title>${escapeXml(`${label}: nDCG@10 ${p.m['ndcg@10'].toFixed(4)}, recall@100 ${p.m['recall@100'].toFixed(4)}, p50 ${p.m.p50_ms.toFixed(1)} ms, p95 ${p.m.p95_ms.toFixed(1)} ms`)}</title></circle>`);
    // Test-half markers of the other modes sit near their all-query ones: only their tooltips name them.
    if (!p.hollow || p.name === 'hybrid') out.push(`<text x="${(cx + 6).toFixed(1)}" y="${(cy - 4).toFixed(1)}" font-size="9" fill="${color}">${escapeXml(label)}</text>`);
  }
  const legend = [...names.map((n) => [COLORS[n] ?? '#000', n] as const)];
  legend.forEach(([color, label], i) => {
    out.push(`<circle cx="${W - R + 20}" cy="${Tm + 14 + 18 * i}" r="4.5" fill="${color}"/>`);
    out.push(`<text x="${W - R + 30}" y="${Tm + 18 + 18 * i}" font-size="11">${escapeXml(label)}</text>`);
  });
  const yl = Tm + 14 + 18 * legend.length + 10;
  out.push(`<circle cx="${W - R + 20}" cy="${yl}" r="4.5" fill="white" stroke="#000" stroke-width="1.5"/>`);
  out.push(`<text x="${W - R + 30}" y="${yl + 4}" font-size="11">hollow: test half (${r.test_half.queries} q.)</text>`);
  out.push(`<text x="${W - R + 10}" y="${yl + 24}" font-size="10" fill="#555">hybrid: lambda ${r.hybrid.lambda}, tuned on</text>`);
  out.push(`<text x="${W - R + 10}" y="${yl + 38}" font-size="10" fill="#555">the other half</text>`);
  out.push('</svg>');
  return out.join('\n');
}

const USAGE = `usage: npm run eval -- retrieval [--dataset DIR] [--docs FILE] [--queries FILE] [--qrels FILE] [--model NAME|DIR] [--nprobe N] [--modes a,b] [--layout warp|ivf] [--bits 2|4] [--quick] [--plot out.svg] [--json]
  (scripts/eval/retrieval.ts's opening comment says what each does; --data is --dataset)`;

const OPTIONS = {
  dataset: { type: 'string' },
  data: { type: 'string' },
  model: { type: 'string' },
  quick: { type: 'boolean' },
  plot: { type: 'string' },
  nprobe: { type: 'string' },
  modes: { type: 'string' },
  layout: { type: 'string' },
  bits: { type: 'string' },
  docs: { type: 'string' },
  queries: { type: 'string' },
  qrels: { type: 'string' },
  json: { type: 'boolean' },
} as const;

/** The CLI: `npm run eval -- retrieval ...` (see the module comment). */
export async function runRetrievalEvalCli(args: string[]): Promise<RetrievalEvalResult> {
  const v = parseCliOrExit('eval retrieval', USAGE, args, OPTIONS, {}, ({ values }) => {
    if (values.nprobe !== undefined) intFlag('nprobe', values.nprobe);
    if (values.layout !== undefined && values.layout !== 'warp' && values.layout !== 'ivf') throw new Error(`--layout: warp (the default) or ivf, got ${values.layout}`);
    if (values.bits !== undefined && values.bits !== '2' && values.bits !== '4') throw new Error(`--bits: 2 or 4, got ${values.bits}`);
    if (values.bits !== undefined && values.layout === 'ivf') throw new Error('--bits applies to --layout warp');
    return values;
  });
  return evaluateRetrieval({
    dataset: v.dataset ?? v.data ?? 'data/cranfield',
    model: v.model,
    quick: v.quick ?? false,
    plot: v.plot,
    nprobe: v.nprobe === undefined ? undefined : Number(v.nprobe),
    ...(v.modes ? { modes: v.modes.split(',') } : {}),
    layout: v.layout === 'ivf' ? { layout: 'ivf' } : { layout: 'warp', bits: v.bits === '2' ? 2 : 4 },
    files: { docs: v.docs, queries: v.queries, qrels: v.qrels },
  });
}
