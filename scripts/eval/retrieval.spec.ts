import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { testConfig } from '../../test/helpers';
import type { RetrievalDataset } from '../lib/retrieval-dataset';
import { bestLambda, evaluateRetrieval, modesWith, percentile, queryMetrics, quickSubset, retrievalPlotSvg, searchLayoutFigures, splitHalves, summarize, type RetrievalEvalResult } from './retrieval';

const dirs: string[] = [];
afterAll(() => dirs.forEach((d) => rmSync(d, { recursive: true, force: true })));

describe('eval retrieval: helpers', () => {
  it('--modes keeps the named modes in table order; nprobe reaches the xtr ones', () => {
    expect(modesWith(undefined, ['hybrid@default', 'bm25']).map((m) => m.name)).toEqual(['bm25', 'hybrid@default']);
    expect(modesWith(8, ['xtr@100']).map((m) => m.mode)).toEqual([{ name: 'xtr', kPrime: 100, nprobe: 8 }]);
    expect(modesWith().map((m) => m.name)).toContain('hybrid@default');
  });

  it('percentile interpolates linearly between order statistics', () => {
    expect(percentile([3, 1, 2], 0.5)).toBe(2);
    expect(percentile([1, 2, 3, 4], 0.5)).toBe(2.5);
    expect(percentile([0, 10], 0.95)).toBeCloseTo(9.5, 12);
    expect(percentile([7], 0.95)).toBe(7);
    expect(percentile([], 0.5)).toBeNaN();
  });

  it('splits the queries into odd (tuning) and even (test) positions; the best lambda is the first of the maxima', () => {
    expect(splitHalves(['a', 'b', 'c', 'd', 'e'])).toEqual({ tune: ['a', 'c', 'e'], test: ['b', 'd'] });
    expect(bestLambda([{ lambda: 0, 'ndcg@10': 0.2 }, { lambda: 0.5, 'ndcg@10': 0.4 }, { lambda: 1, 'ndcg@10': 0.4 }])).toBe(0.5);
  });

  it('nDCG@10 with graded gains and recall@100 over gain > 0; summaries average per query', () => {
    const judged = new Map([['d1', 4], ['d2', 1], ['d3', 0]]);
    const m = queryMetrics(['d3', 'd1', 'x'], judged);
    const idcg = 4 + 1 / Math.log2(3);
    expect(m.ndcg).toBeCloseTo(4 / Math.log2(3) / idcg, 12);
    expect(m.recall).toBe(0.5);
    const s = summarize([{ id: 'a', ndcg: 1, recall: 0.5, ms: 10 }, { id: 'b', ndcg: 0, recall: 1, ms: 30 }]);
    expect(s).toEqual({ 'ndcg@10': 0.5, 'recall@100': 0.75, p50_ms: 20, p95_ms: 29, queries: 2 });
  });

  it('summaries add the search job time and, for WARP answers, the bytes and ranged reads per query; the layout per stored token', () => {
    const s = summarize([
      { id: 'a', ndcg: 1, recall: 1, ms: 10, jobMs: 4, bytesRead: 1000, ranges: 3 },
      { id: 'b', ndcg: 0, recall: 1, ms: 30, jobMs: 8, bytesRead: 3000, ranges: 5 },
    ]);
    expect(s).toMatchObject({ search_job_p50_ms: 6, bytes_read_p50: 2000, bytes_read_mean: 2000, ranges_p50: 4 });
    expect(s.search_job_p95_ms).toBeCloseTo(7.8, 12);
    // answers without timings or stats add nothing
    expect(summarize([{ id: 'a', ndcg: 1, recall: 1, ms: 10, jobMs: NaN }])).not.toHaveProperty('search_job_p50_ms');
    expect(summarize([{ id: 'a', ndcg: 1, recall: 1, ms: 10 }])).not.toHaveProperty('bytes_read_p50');
    expect(searchLayoutFigures(undefined, null, 100)).toBeNull();
    expect(searchLayoutFigures({ layout: 'warp', bits: 2 }, { layoutBytes: 4321, segments: 3, centroids: 1024 }, 1000)).toEqual({ layout: 'warp', bits: 2, layout_bytes: 4321, bytes_per_token: 4.32, segments: 3, centroids: 1024 });
    expect(() => searchLayoutFigures({ layout: 'warp', bits: 4 }, null, 1000)).toThrow(/not served by WARP/);
  });

  it('--quick keeps 20 judged queries and 300 documents: the relevant ones, then a seeded sample; judgments of dropped documents go', () => {
    const docs = Array.from({ length: 1000 }, (_, i) => ({ id: String(i + 1), text: `doc ${i + 1}` }));
    const queries = Array.from({ length: 30 }, (_, i) => ({ id: String(i + 1), text: `q ${i + 1}` }));
    const qrels = new Map(queries.map((q, i) => [q.id, new Map([[String(900 + i), 1], [String(10 + i), 0]])]));
    qrels.set('1', new Map([['5', 0]])); // no relevant document: not among the 20
    const ds: RetrievalDataset = { format: 'glasgow', dir: '/x', files: { docs: 'a', queries: 'b', qrels: 'c' }, docs, queries, qrels, notes: [] };
    const q = quickSubset(ds);
    expect(q.queries.map((x) => x.id)).toEqual(Array.from({ length: 20 }, (_, i) => String(i + 2)));
    expect(q.docs).toHaveLength(300);
    const kept = new Set(q.docs.map((d) => d.id));
    for (let i = 1; i <= 20; i++) expect(kept.has(String(900 + i))).toBe(true);
    expect(q.docs.map((d) => Number(d.id))).toEqual([...q.docs.map((d) => Number(d.id))].sort((a, b) => a - b));
    for (const m of q.qrels.values()) for (const d of m.keys()) expect(kept.has(d)).toBe(true);
    expect(quickSubset(ds).docs).toEqual(q.docs);
    expect(q.notes.at(-1)).toMatch(/20 judged queries, 300 documents \(20 judged relevant/);
  });

  it('plots nDCG@10 against median latency, one labelled marker per mode and half', () => {
    const fig = (n: number, ms: number) => ({ 'ndcg@10': n, 'recall@100': 0.8, p50_ms: ms, p95_ms: 2 * ms, queries: 10 });
    const modes = { exhaustive: fig(0.4, 80), 'xtr@1000': fig(0.38, 40), bm25: fig(0.42, 20), hybrid: fig(0.45, 50) };
    const res = { modes, test_half: { queries: 5, query_ids: [], modes }, hybrid: { lambda: 0.5 }, dataset: '/d/vaswani', model: 'm', documents: 10, queries: 10, quick: false } as unknown as RetrievalEvalResult;
    const svg = retrievalPlotSvg(res);
    expect(svg).toMatch(/^<svg[^>]*xmlns="http:\/\/www.w3.org\/2000\/svg"/);
    expect(svg).toContain('vaswani, m: nDCG@10 vs median latency');
    expect(svg.match(/<circle [^>]*><title>/g)).toHaveLength(7); // 3 modes over all queries + 4 over the test half
    expect(svg).toContain('hybrid (test half): nDCG@10 0.4500');
    expect(svg.trim().endsWith('</svg>')).toBe(true);
  });
});

describe('eval retrieval: through the service (real Redis, S3 server, GloVe model)', () => {
  it.skipIf(!existsSync('.cache/models/glove-ctx-100d/manifest.json'))('--layout ivf: ingests over HTTP, searches per mode one query per request, tunes the hybrid on one half and writes the plot', async () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'retrieval-eval-'));
    dirs.push(dir);
    const topics = ['wing flutter at supersonic speed', 'laminar boundary layer transition', 'heat transfer in hypersonic flow', 'shock wave interaction', 'buckling of thin cylindrical shells', 'jet noise'];
    const docs = Array.from({ length: 36 }, (_, i) => `.I ${i + 1}\n.T\n${topics[i % 6]} study ${i}\n.A\nauthor ${i}\n.W\nwe measured ${topics[i % 6]} in experiment ${i} and compare with theory .\n`).join('');
    writeFileSync(path.join(dir, 'small.all'), docs);
    writeFileSync(path.join(dir, 'small.qry'), topics.map((t, i) => `.I ${String(2 * i + 1).padStart(3, '0')}\n.W\n${t} ?\n`).join(''));
    writeFileSync(path.join(dir, 'small.rel'), topics.flatMap((_, q) => [`${q + 1} ${q + 1} 1`, `${q + 1} ${q + 7} 2`, `${q + 1} ${q + 2} -1`]).join('\n'));
    const plot = path.join(dir, 'plot.svg');
    const printed: string[] = [];
    const res = await evaluateRetrieval({ dataset: dir, model: 'glove-ctx-100d', plot, layout: { layout: 'ivf' }, config: testConfig(), log: () => undefined, print: (l) => printed.push(l) });
    expect(res).toMatchObject({ format: 'glasgow', model: 'glove-ctx-100d', documents: 36, queries: 6, test_half: { queries: 3, query_ids: ['2', '4', '6'] } });
    // --layout ivf: the segment index's IVF, no search layout to report
    expect(res.search_layout).toBeNull();
    expect(Object.keys(res.modes)).toEqual(['exhaustive', 'xtr@100', 'xtr@1000', 'xtr@10000', 'bm25', 'dense', 'mebert', 'hybrid@default', 'hybrid']);
    expect(res.modes['hybrid@default']!.queries).toBe(6);
    for (const m of Object.values(res.modes)) {
      expect(m['ndcg@10']).toBeGreaterThanOrEqual(0);
      expect(m['ndcg@10']).toBeLessThanOrEqual(1);
      expect(m.p50_ms).toBeGreaterThan(0);
      expect(m.p95_ms).toBeGreaterThanOrEqual(m.p50_ms);
    }
    expect(res.modes.hybrid!.queries).toBe(3);
    expect(res.modes.exhaustive!.queries).toBe(6);
    // every relevant document shares the query's words: the lexical and exact modes find them all in the top 100
    expect(res.modes.bm25!['recall@100']).toBe(1);
    expect(res.modes.exhaustive!['recall@100']).toBe(1);
    expect(res.modes.bm25!['ndcg@10']).toBeGreaterThan(0.5);
    expect(res.hybrid.grid).toHaveLength(15);
    expect(res.ingest_seconds).toBeGreaterThan(0);
    expect(printed.join('\n')).toMatch(/mode +nDCG@10 +R@100 +p50 ms +p95 ms/);
    expect(printed.join('\n')).toMatch(/hybrid .*test half only; lambda/);
    expect(readFileSync(plot, 'utf8')).toContain('<svg');
  }, 180_000);

  it.skipIf(!existsSync('.cache/models/glove-ctx-100d/manifest.json'))('--layout warp: the xtr modes and the hybrid run WARP, and report the bytes each query read and the layout per token', async () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'retrieval-eval-'));
    dirs.push(dir);
    const topics = ['wing flutter at supersonic speed', 'laminar boundary layer transition', 'heat transfer in hypersonic flow', 'shock wave interaction'];
    const docs = Array.from({ length: 24 }, (_, i) => `.I ${i + 1}\n.T\n${topics[i % 4]} study ${i}\n.W\nwe measured ${topics[i % 4]} in experiment ${i} .\n`).join('');
    writeFileSync(path.join(dir, 'small.all'), docs);
    writeFileSync(path.join(dir, 'small.qry'), topics.map((t, i) => `.I ${String(i + 1).padStart(3, '0')}\n.W\n${t} ?\n`).join(''));
    writeFileSync(path.join(dir, 'small.rel'), topics.map((_, q) => `${q + 1} ${q + 1} 1`).join('\n'));
    const printed: string[] = [];
    const res = await evaluateRetrieval({ dataset: dir, model: 'glove-ctx-100d', layout: { layout: 'warp', bits: 2 }, config: testConfig(), log: () => undefined, print: (l) => printed.push(l) });
    expect(res.search_layout).toMatchObject({ layout: 'warp', bits: 2 });
    expect(res.search_layout!.bytes_per_token).toBeGreaterThan(0);
    expect(res.search_layout!.bytes_per_token).toBeCloseTo(res.search_layout!.layout_bytes / res.tokens, 2);
    for (const name of ['xtr@100', 'xtr@1000', 'xtr@10000', 'hybrid@default', 'hybrid']) {
      expect(res.modes[name]!.bytes_read_p50, name).toBeGreaterThan(0);
      expect(res.modes[name]!.bytes_read_p50!, name).toBeLessThanOrEqual(res.search_layout!.layout_bytes);
    }
    for (const name of ['exhaustive', 'bm25', 'dense', 'mebert']) expect(res.modes[name], name).not.toHaveProperty('bytes_read_p50');
    for (const m of Object.values(res.modes)) expect(m.search_job_p50_ms).toBeGreaterThanOrEqual(0);
    expect(printed.join('\n')).toContain('search layout: WARP, 2 bits per residual dimension');
  }, 180_000);
});
