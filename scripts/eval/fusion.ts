/**
 * `npm run eval -- fusion [--datasets DIR,DIR] [--model NAME] [--depth 100] [--sample N] [--json]`
 * (--sample N: N documents per collection, every judged-relevant one and a seeded sample of the rest;
 * --bm25-only: BM25 alone over every document, no model)
 *
 * How hybrid search should fuse by default (issue 32 item 7): on each collection (default
 * ../shared/datasets/cranfield and ../shared/datasets/vaswani), in this process, with the
 * service's own functions: the documents and judged queries encoded with the model (ONNX
 * Runtime, as the encode and search jobs do; document vectors rounded to fp16 as segments store
 * them), MaxSim over the union of dense's and BM25's top POOL (200) per query (standing in for
 * exhaustive MaxSim, the reference of the `xtr` base: scoring every document in JavaScript took
 * too long on a loaded 2-core machine) and BM25
 * over the `english` analyser (the defaults of new collections: k1 0.9, b 0.4), each part's top
 * `depth` (100, the hybrid's default) fused by the search job's `fuse` (libs/serving hits.ts) for
 * every setting of the grid: linear with normalisation none / minmax / zscore and lambda in
 * LAMBDAS, and RRF (k 60). Reported per collection: nDCG@10 of each part and of every setting, and
 * per setting its margin over the better part; the default is the setting whose smallest margin
 * over the collections is largest (ties: the first in grid order). No tuning half: the figures say
 * which settings never lose on these collections, the choice is the one that loses least.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { getEncoder } from '@lateral/model';
import { roundToHalf } from '@lateral/codec';
import { dense, maxsim } from '@lateral/scoring';
import { analyzeTexts, bm25Query, bm25SegmentSearch, buildBm25Postings, englishTermIds, segmentBm25Stats, termHash, TopK, type Hit, type SearchSegment } from '@lateral/search';
import { fuse } from '@lateral/serving';
import { loadConfig, mulberry32, type SearchMode } from '@lateral/shared';
import { intFlag, parseCliOrExit } from '../lib/cli';
import { hasRelevant, mean, ndcgAt } from '../lib/metrics';
import { loadRetrievalDataset, type RetrievalDataset } from '../lib/retrieval-dataset';

export const LAMBDAS = [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 1, 1.25, 1.5, 2, 3];
export const NORMALIZATIONS = ['minmax', 'zscore', 'none'] as const;

type Hybrid = Extract<SearchMode, { name: 'hybrid' }>;
export interface FusionSetting {
  label: string;
  mode: Hybrid;
}

/** The grid: linear (each normalisation x lambda), then RRF. */
export function fusionGrid(depth: number): FusionSetting[] {
  const base = { name: 'hybrid', base: 'exhaustive', rrfK: 60, depth, kPrime: 1000, nprobe: 32, k1: 0.9, b: 0.4 } as const;
  const out: FusionSetting[] = [];
  for (const normalization of NORMALIZATIONS) for (const lambda of LAMBDAS) out.push({ label: `linear ${normalization} ${lambda}`, mode: { ...base, fusion: 'linear', normalization, lambda } });
  out.push({ label: 'rrf 60', mode: { ...base, fusion: 'rrf', normalization: 'minmax' } });
  return out;
}

/** Per query, each part's top `depth` as hits keyed by document index. */
interface QueryRuns {
  id: string;
  base: Hit[];
  bm25: Hit[];
}

const hit = (doc: number, score: number): Hit => ({ key: doc, segment: 0, doc, score });

/** The dataset restricted to `n` documents: every judged-relevant one, then a seeded sample of the others (the order kept). */
function sampled(ds: RetrievalDataset, n: number | undefined): RetrievalDataset {
  if (n === undefined || n >= ds.docs.length) return ds;
  const keep = new Set<string>();
  for (const j of ds.qrels.values()) for (const [d, g] of j) if (g > 0) keep.add(d);
  const r = mulberry32(7);
  const rest = ds.docs.filter((d) => !keep.has(d.id)).map((d) => ({ d, k: r() })).sort((a, b) => a.k - b.k);
  for (const { d } of rest) {
    if (keep.size >= n) break;
    keep.add(d.id);
  }
  return { ...ds, docs: ds.docs.filter((d) => keep.has(d.id)) };
}

/** Candidates MaxSim scores per query: the union of dense's and BM25's top POOL. */
export const POOL = 200;

async function runsOf(dir: string, modelDir: string, depth: number, sample: number | undefined, log: (m: string) => void): Promise<{ runs: QueryRuns[]; docIds: string[]; qrels: Map<string, Map<string, number>> }> {
  const ds = sampled(loadRetrievalDataset(dir), sample);
  const queries = ds.queries.filter((q) => hasRelevant(ds.qrels.get(q.id)));
  const encoder = await getEncoder(modelDir, { executionProvider: 'cpu' });
  const t0 = performance.now();
  const encQ = await encoder.encodeQueries(queries.map((q) => q.text));
  const pooledQ = encQ.map((q) => encoder.pool(q));
  // Documents encoded a slice at a time; their fp16-rounded vectors kept (MaxSim of the pool below).
  const docs: { vectors: Float32Array; length: number }[] = [];
  const denseScores = queries.map(() => new Float32Array(ds.docs.length));
  const SLICE = 128;
  for (let s = 0; s < ds.docs.length; s += SLICE) {
    const enc = await encoder.encodeDocuments(ds.docs.slice(s, s + SLICE).map((d) => d.text));
    enc.forEach((e, j) => {
      docs.push({ vectors: roundToHalf(e.vectors), length: e.length });
      const p = roundToHalf(encoder.pool(e));
      pooledQ.forEach((q, qi) => (denseScores[qi][s + j] = dense(q, p)));
    });
    if ((s / SLICE) % 8 === 0) log(`  ${path.basename(dir)}: ${Math.min(s + SLICE, ds.docs.length)} / ${ds.docs.length} documents encoded (${((performance.now() - t0) / 1000).toFixed(0)} s)`);
  }
  const { tokenIds, tokenOffsets } = analyzeTexts(ds.docs.map((d) => d.text));
  const index = { documents: ds.docs.length, bm25: buildBm25Postings(tokenIds, tokenOffsets) } as Parameters<typeof bm25SegmentSearch>[1];
  const seg = { name: 'all', documents: ds.docs.length, docBase: 0 } as SearchSegment;
  const stats = segmentBm25Stats(index);
  const runs = queries.map((q, qi) => {
    const bm = bm25SegmentSearch(seg, index, bm25Query(englishTermIds(q.text), stats), Math.max(depth, POOL));
    const dn = new TopK(POOL, ds.docs.length);
    for (let d = 0; d < ds.docs.length; d++) dn.push(denseScores[qi][d], d);
    const pool = new Set<number>([...Array.from(bm.docs), ...Array.from(dn.drain().ids)]);
    const top = new TopK(depth, pool.size);
    for (const d of pool) top.push(maxsim(encQ[qi].vectors, encQ[qi].length, docs[d].vectors, docs[d].length, encoder.dims), d);
    const b = top.drain();
    return { id: q.id, base: Array.from(b.ids, (d, r) => hit(d, b.scores[r])), bm25: Array.from(bm.docs.subarray(0, depth), (d, r) => hit(d, bm.scores[r])) };
  });
  log(`  ${path.basename(dir)}: done in ${((performance.now() - t0) / 1000).toFixed(0)} s`);
  return { runs, docIds: ds.docs.map((d) => d.id), qrels: ds.qrels };
}

export interface FusionResult {
  datasets: { name: string; queries: number; exhaustive: number; bm25: number; settings: Record<string, number> }[];
  /** per setting: its smallest margin over the better part across the collections */
  worstMargin: Record<string, number>;
  chosen: string;
}

export async function evaluateFusion(opts: { datasets: string[]; model?: string; depth?: number; sample?: number; log?: (m: string) => void }): Promise<FusionResult> {
  const log = opts.log ?? ((m: string) => process.stderr.write(`${m}\n`));
  const config = loadConfig(process.env);
  const modelDir = path.resolve(config.MODELS_DIR, opts.model ?? config.DEFAULT_MODEL);
  const depth = opts.depth ?? 100;
  const grid = fusionGrid(depth);
  const out: FusionResult = { datasets: [], worstMargin: {}, chosen: '' };
  for (const dir of opts.datasets) {
    const { runs, docIds, qrels } = await runsOf(dir, modelDir, depth, opts.sample, log);
    const ndcg = (hits: Hit[], q: string) => ndcgAt(hits.slice(0, 10).map((h) => docIds[h.doc]), qrels.get(q)!, 10);
    const row = { name: path.basename(dir), queries: runs.length, exhaustive: mean(runs.map((r) => ndcg(r.base, r.id))), bm25: mean(runs.map((r) => ndcg(r.bm25, r.id))), settings: {} as Record<string, number> };
    for (const s of grid) row.settings[s.label] = mean(runs.map((r) => ndcg(fuse(r.base, r.bm25, s.mode, 10), r.id)));
    out.datasets.push(row);
  }
  let best = -Infinity;
  for (const s of grid) {
    const m = Math.min(...out.datasets.map((d) => d.settings[s.label] - Math.max(d.exhaustive, d.bm25)));
    out.worstMargin[s.label] = m;
    if (m > best + 1e-12) {
      best = m;
      out.chosen = s.label;
    }
  }
  return out;
}

/**
 * BM25's terms for `--bm25-only`: the service's `english` analyser, or `plain` words (the text
 * lowercased, runs of 2+ word characters, no stop words, no stemming: bm25s's default tokenizer
 * without its stop words, what the issue's textbook figures 0.3276 / 0.3697 turn out to be).
 */
export const BM25_EVAL_ANALYSES = {
  english: englishTermIds,
  plain: (text: string) => Int32Array.from(text.toLowerCase().match(/\b\w\w+\b/g) ?? [], termHash),
} as const;

/**
 * BM25 alone, in process, over every document of each collection (k1 0.9, b 0.4), with the
 * `english` analyser (default) or `plain` words: nDCG@10 over the judged queries (`--bm25-only`;
 * no model needed).
 */
export function bm25Ndcg(dir: string, analysis: keyof typeof BM25_EVAL_ANALYSES = 'english'): { documents: number; queries: number; terms: number; 'ndcg@10': number } {
  const terms = BM25_EVAL_ANALYSES[analysis];
  const ds = loadRetrievalDataset(dir);
  const queries = ds.queries.filter((q) => hasRelevant(ds.qrels.get(q.id)));
  const parts = ds.docs.map((d) => terms(d.text));
  const tokenOffsets = new Uint32Array(parts.length + 1);
  parts.forEach((p, i) => (tokenOffsets[i + 1] = tokenOffsets[i] + p.length));
  const tokenIds = new Int32Array(tokenOffsets[parts.length]);
  parts.forEach((p, i) => tokenIds.set(p, tokenOffsets[i]));
  const index = { documents: ds.docs.length, bm25: buildBm25Postings(tokenIds, tokenOffsets) } as Parameters<typeof bm25SegmentSearch>[1];
  const seg = { name: 'all', documents: ds.docs.length, docBase: 0 } as SearchSegment;
  const stats = segmentBm25Stats(index);
  const nd = queries.map((q) => ndcgAt(Array.from(bm25SegmentSearch(seg, index, bm25Query(terms(q.text), stats), 10).docs, (d) => ds.docs[d].id), ds.qrels.get(q.id)!, 10));
  return { documents: ds.docs.length, queries: queries.length, terms: index.bm25.terms.length, 'ndcg@10': mean(nd) };
}

const USAGE = `usage: npm run eval -- fusion [--datasets DIR,DIR (../shared/datasets/cranfield,../shared/datasets/vaswani)] [--model NAME] [--depth N (100)] [--sample N] [--bm25-only] [--json]
  --sample N    N documents per collection: every judged-relevant one and a seeded sample of the rest
  --bm25-only   BM25 alone over every document, no model: the 'english' analyser and plain words (no stop words, no stems)
  --export DIR  with --bm25-only: also write each collection's documents, judged queries and judgments as DIR/<name>.json
                (what scripts/eval/bm25s_check.py scores with bm25s, the textbook cross-check)`;

export async function runFusionEval(argv: string[]): Promise<FusionResult | ReturnType<typeof bm25Ndcg>[]> {
  const { values: v } = parseCliOrExit('eval fusion', USAGE, argv, {
    datasets: { type: 'string', default: '../shared/datasets/cranfield,../shared/datasets/vaswani' },
    model: { type: 'string' },
    depth: { type: 'string' },
    sample: { type: 'string' },
    'bm25-only': { type: 'boolean' },
    export: { type: 'string' },
    json: { type: 'boolean' },
  }, {}, (parsed) => {
    if (parsed.values.depth !== undefined) intFlag('depth', parsed.values.depth);
    if (parsed.values.sample !== undefined) intFlag('sample', parsed.values.sample);
    return parsed;
  });
  const datasets = v.datasets.split(',').map((d) => path.resolve(d));
  if (v['bm25-only']) {
    const rows = datasets.flatMap((d) => (['english', 'plain'] as const).map((analysis) => ({ dataset: path.basename(d), analysis, ...bm25Ndcg(d, analysis) })));
    for (const r of rows) console.log(`${r.dataset}: BM25 (${r.analysis}, k1 0.9, b 0.4) nDCG@10 ${r['ndcg@10'].toFixed(4)} over ${r.queries} judged queries, ${r.documents} documents, ${r.terms} distinct terms`);
    if (v.export) {
      mkdirSync(v.export, { recursive: true });
      for (const d of datasets) {
        const ds = loadRetrievalDataset(d);
        const queries = ds.queries.filter((q) => hasRelevant(ds.qrels.get(q.id)));
        const qrels = Object.fromEntries(queries.map((q) => [q.id, Object.fromEntries(ds.qrels.get(q.id)!)]));
        writeFileSync(path.join(v.export, `${path.basename(d)}.json`), JSON.stringify({ docs: ds.docs, queries, qrels }));
      }
    }
    return rows;
  }
  const { depth, sample } = v;
  const r = await evaluateFusion({ datasets, model: v.model, depth: depth === undefined ? undefined : Number(depth), sample: sample === undefined ? undefined : Number(sample) });
  console.log(`nDCG@10 (base: MaxSim over the union of dense's and BM25's top ${POOL}, BM25 'english' k1 0.9 b 0.4; top ${depth ?? 100} each, fused${sample ? `; ${sample} documents: the judged-relevant ones and a seeded sample` : ''})`);
  console.log(['setting', ...r.datasets.map((d) => `${d.name} (${d.queries} q)`), 'worst margin over the better part'].join(' | '));
  console.log(['exhaustive', ...r.datasets.map((d) => d.exhaustive.toFixed(4)), ''].join(' | '));
  console.log(['bm25', ...r.datasets.map((d) => d.bm25.toFixed(4)), ''].join(' | '));
  for (const label of Object.keys(r.worstMargin)) console.log([label, ...r.datasets.map((d) => d.settings[label].toFixed(4)), r.worstMargin[label].toFixed(4)].join(' | '));
  console.log(`chosen: ${r.chosen}`);
  return r;
}
