/**
 * The pure parts of `npm run bench -- scale`: the synthetic document generator, percentiles,
 * the RSS summary and the JSON line. No I/O here except reading the vendored corpora.
 *
 * Documents are **the vendored corpora's passages with variations**: document i takes one source
 * passage (TREC DL 2019's BM25 top-100 passages, Vaswani's abstracts, Cranfield's abstracts),
 * shuffles the order of its sentences, and replaces each word with probability `substitution`
 * (default 0.15) by a word drawn from the corpora's unigram word model (a uniformly chosen word
 * occurrence of all three corpora, i.e. words drawn by their frequency). The length in words is the
 * source passage's, so the length distribution is the corpora's own. Everything is a function of
 * (seed, i): document i is the same on every machine and in every run, and a million documents
 * are never held in memory at once.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { mulberry32 } from '@lateral/shared';
import { loadCranfield } from '../lib/cranfield';
import { parseTrecDocuments, parseTrecTopics } from '../lib/vaswani';

export interface SourceCorpus {
  /** Passages, each as its sentences, each sentence as its words. */
  passages: string[][][];
  /** Every word occurrence of every passage: drawing an index uniformly draws a word by its frequency. */
  words: string[];
  /** Queries of the same corpora (TREC DL 2019, Vaswani, Cranfield), for re-rank and search. */
  queries: string[];
  /** Passages per source, for the report. */
  sources: Record<string, number>;
}

const splitSentences = (text: string): string[][] =>
  text
    .split(/(?<=[.!?])\s+/)
    .map((s) => s.split(/\s+/).filter(Boolean))
    .filter((s) => s.length > 0);

/** Builds the corpus from passage texts (exported for the spec). */
export function corpusFromTexts(bySource: Record<string, string[]>, queries: string[] = []): SourceCorpus {
  const passages: string[][][] = [];
  const words: string[] = [];
  const sources: Record<string, number> = {};
  for (const [name, texts] of Object.entries(bySource)) {
    let n = 0;
    for (const t of texts) {
      const sentences = splitSentences(t);
      if (!sentences.length) continue;
      passages.push(sentences);
      for (const s of sentences) for (const w of s) words.push(w);
      n++;
    }
    sources[name] = n;
  }
  if (!passages.length) throw new Error('no source passages');
  return { passages, words, queries, sources };
}

/** Reads the three vendored corpora from `datasetsDir` (../shared/datasets). */
export function loadSourceCorpus(datasetsDir: string): SourceCorpus {
  const dl = JSON.parse(readFileSync(path.join(datasetsDir, 'trec-dl-2019-passage', 'retrieve_results_dl19.json'), 'utf8')) as { query: string; hits: { content: string; docid: string }[] }[];
  const seen = new Set<string>();
  const dlPassages: string[] = [];
  for (const q of dl)
    for (const h of q.hits)
      if (!seen.has(h.docid)) {
        seen.add(h.docid);
        dlPassages.push(h.content);
      }
  const vaswaniDir = path.join(datasetsDir, 'vaswani');
  const vaswani = parseTrecDocuments(readFileSync(path.join(vaswaniDir, 'doc-text.trec'), 'utf8'), 'vaswani').map((d) => d.text.replace(/\s+/g, ' ').trim());
  const vaswaniQueries = parseTrecTopics(readFileSync(path.join(vaswaniDir, 'query-text.trec'), 'utf8'), 'vaswani queries').map((q) => q.text);
  const cran = loadCranfield(path.join(datasetsDir, 'cranfield'));
  return corpusFromTexts(
    { 'trec-dl-2019': dlPassages, vaswani, cranfield: cran.docs.map((d) => d.text) },
    [...dl.map((q) => q.query), ...vaswaniQueries, ...cran.queries.map((q) => q.text)].map((q) => q.replace(/\s+/g, ' ').trim()).filter(Boolean),
  );
}

/** A 32-bit hash of (seed, i), so document i has its own PRNG stream. */
function streamSeed(seed: number, i: number): number {
  let h = (Math.imul(seed ^ 0x9e3779b9, 0x85ebca6b) ^ Math.imul(i + 1, 0xc2b2ae35)) >>> 0;
  h = Math.imul(h ^ (h >>> 16), 0x7feb352d) >>> 0;
  h = Math.imul(h ^ (h >>> 15), 0x846ca68b) >>> 0;
  return (h ^ (h >>> 16)) >>> 0;
}

export const docId = (i: number): string => `scale-${String(i).padStart(7, '0')}`;

export class DocumentGenerator {
  constructor(
    private readonly corpus: SourceCorpus,
    private readonly seed = 1,
    private readonly substitution = 0.15,
  ) {
    if (!(substitution >= 0 && substitution <= 1)) throw new Error('substitution: a fraction from 0 to 1');
  }

  /** Document i (0-based): a varied copy of one source passage. */
  doc(i: number): { id: string; text: string } {
    const rng = mulberry32(streamSeed(this.seed, i));
    const { passages, words } = this.corpus;
    const src = passages[Math.floor(rng() * passages.length)];
    const order = src.map((_, k) => k);
    for (let k = order.length - 1; k > 0; k--) {
      const j = Math.floor(rng() * (k + 1));
      [order[k], order[j]] = [order[j], order[k]];
    }
    const out: string[] = [];
    for (const k of order) for (const w of src[k]) out.push(rng() < this.substitution ? words[Math.floor(rng() * words.length)] : w);
    return { id: docId(i), text: out.join(' ') };
  }
}

/** Percentile p (0..100) by linear interpolation between closest ranks; NaN for no samples. */
export function percentile(xs: readonly number[], p: number): number {
  if (!xs.length) return NaN;
  const v = [...xs].sort((a, b) => a - b);
  const r = (p / 100) * (v.length - 1);
  const lo = Math.floor(r);
  const hi = Math.ceil(r);
  return v[lo] + (v[hi] - v[lo]) * (r - lo);
}

export interface RssSample {
  t: number;
  phase: string;
  rssMb: number;
}

export interface RssSummary {
  /** Highest sampled VmRSS (MB). */
  peakMb: number;
  /** Median of the last third of the samples (MB). */
  steadyMb: number;
  /** Medians of the second and last quarters (MB): equal within noise when RSS is flat. */
  q2Mb: number;
  q4Mb: number;
  samples: number;
}

/** Peak and steady RSS of one process over its samples (in time order). */
export function summarizeRss(all: readonly number[]): RssSummary | null {
  const samples = all.filter(Number.isFinite);
  if (!samples.length) return null;
  const n = samples.length;
  const med = (a: number, b: number) => percentile(samples.slice(Math.floor(a * n), Math.max(Math.floor(a * n) + 1, Math.floor(b * n))), 50);
  return { peakMb: round(Math.max(...samples)), steadyMb: round(med(2 / 3, 1)), q2Mb: round(med(0.25, 0.5)), q4Mb: round(med(0.75, 1)), samples: n };
}

export const round = (x: number, d = 1): number => (Number.isFinite(x) ? Math.round(x * 10 ** d) / 10 ** d : x);

/** Keys the issue requires on the JSON line. */
export const REQUIRED_KEYS = ['docs', 'tokens', 'ingest_docs_per_s', 'bytes_per_token', 'rss_peak_mb', 'rerank_p50_ms', 'rerank_p95_ms', 'search_p50_ms'] as const;

/** Throws when a result lacks a key the issue requires, or a per-process / per-mode one is not an object of numbers. */
export function checkScaleResult(r: Record<string, unknown>): void {
  for (const k of REQUIRED_KEYS) if (!(k in r)) throw new Error(`scale result: missing ${k}`);
  for (const k of ['rss_peak_mb', 'search_p50_ms'] as const) {
    const o = r[k];
    if (typeof o !== 'object' || o === null || Array.isArray(o)) throw new Error(`scale result: ${k} must be an object keyed by ${k === 'rss_peak_mb' ? 'process' : 'mode'}`);
    for (const [name, v] of Object.entries(o)) if (typeof v !== 'number') throw new Error(`scale result: ${k}.${name} must be a number`);
  }
  for (const k of ['rerank_p50_ms', 'rerank_p95_ms'] as const) {
    const o = r[k];
    if (typeof o !== 'object' || o === null) throw new Error(`scale result: ${k} must be an object keyed by case (warm_100, cold_1000, ...)`);
  }
}

/**
 * Mean top-k agreement of `got` with the reference ranking `want` (query id -> ids, best first):
 * per query |top k of got ∩ top k of want| / |top k of want|, over the queries whose reference
 * has hits (a query missing from `got` counts 0). `min` is the worst query; null when no query
 * has reference hits.
 */
export function topOverlap(want: ReadonlyMap<string, readonly string[]>, got: ReadonlyMap<string, readonly string[]>, k = 10): { mean: number; min: number; queries: number } | null {
  const per: number[] = [];
  for (const [q, ids] of want) {
    const ref = ids.slice(0, k);
    if (ref.length === 0) continue;
    const have = new Set((got.get(q) ?? []).slice(0, k));
    per.push(ref.filter((id) => have.has(id)).length / ref.length);
  }
  if (per.length === 0) return null;
  return { mean: per.reduce((a, b) => a + b, 0) / per.length, min: Math.min(...per), queries: per.length };
}
