/**
 * The score bench's @lateral/simd cases (score.ts: --simd-only, --simd-cranfield): the JavaScript
 * and WebAssembly kernels in alternation, results checked equal.
 */
import { resolve } from 'node:path';
import { maxsimBatch } from '@lateral/scoring';
import { assignNearest, buildWarpLayout, exhaustiveSearch, exhaustiveSegmentSearch, fitIvfCentroids, fitWarpCodec, searchSegment, warpBenchFixture, warpLayoutLists, warpListSizes, warpResiduals, warpSearch, type SegmentSource } from '@lateral/search';
import { TokenEncoder } from '@lateral/model';
import { loadCranfield } from '../lib/cranfield';
import { jsKernels, simdStatus, useKernels, wasmKernels, type Kernels, type ScoreRowsVariant } from '@lateral/simd';
import { seededUniform } from '@lateral/kernels';
import { M, D, N, median, randomUnit } from './score-timing';

/**
 * The numeric kernels of @lateral/simd (simdCase): each workload run on the JavaScript kernels and
 * on the WebAssembly SIMD module in alternation (useKernels), the same inputs, results checked
 * equal bit for bit; ratio = JS / WASM. Workloads: scoring's maxsimBatch (re-rank: 200 candidates
 * x 180 tokens x 128 vs 32 query tokens), exhaustive search of one segment (500 documents x 100
 * tokens), k-means' assignNearest (2,048 points x 1,024 centroids x 128), and on benchWarp's
 * segment (100,000 tokens, K = 1,024, b = 4, 32 query tokens, nprobe 32): Q C^T, the lookup
 * tables, the lookup-sums over the probed lists, XTR's scoreRows over the same rows of float32
 * vectors, and the whole per-segment WARP and XTR searches. Then the scoreRows variants of the
 * module (rows gathered into its memory) against the JavaScript kernel on 32 x 3,000 rows of a
 * 65,536-row chunk (XTR's shape): the basis of the choice in docs/benchmarks.md.
 */
export async function simdCase(quick: boolean, log: (m: string) => void): Promise<{ result: Record<string, unknown>; rows: [string, string][] }> {
  const wasm = wasmKernels();
  const status = simdStatus();
  if (!wasm) return { result: { simd_kind: status.kind, simd_reason: status.reason }, rows: [['@lateral/simd', `JavaScript kernels only: ${status.reason}`]] };
  const rounds = quick ? 3 : 9;
  const alternate = <T>(run: () => T) => alternateKernels(wasm, rounds, 2, run);
  const same = (a: ArrayLike<number>, b: ArrayLike<number>) => a.length === b.length && Array.prototype.every.call(a, (v: number, i: number) => Object.is(v, b[i]));
  const r = seededUniform(21);
  const result: Record<string, unknown> = { simd_kind: status.kind };
  const rows: [string, string][] = [];
  const f = (x: number, p = 2) => x.toFixed(p);
  const record = (key: string, label: string, m: { js: number; wasm: number }, equal: boolean | null) => {
    if (equal === false) throw new Error(`simd bench: ${label}: the WebAssembly result differs from the JavaScript one`);
    result[`simd_${key}_js_ms`] = m.js;
    result[`simd_${key}_wasm_ms`] = m.wasm;
    result[`simd_${key}_speedup`] = m.js / m.wasm;
    rows.push([`SIMD ${label}`, `JS ${f(m.js)} ms, WASM ${f(m.wasm)} ms: ${f(m.js / m.wasm)}x${equal ? ' (equal bit for bit)' : ''}`]);
  };

  log('score bench: @lateral/simd, MaxSim maxima (maxsimBatch, exhaustive, k-means)...');
  const Cb = 200;
  const q = randomUnit(r, N, D);
  const docs = randomUnit(r, Cb * M, D);
  const offsets = Uint32Array.from({ length: Cb + 1 }, (_, c) => c * M);
  const mb = alternate(() => maxsimBatch(q, N, docs, offsets, D));
  record('maxsim_batch', `maxsimBatch (re-rank), ${Cb} x ${M} x ${D} vs ${N}`, mb, same(mb.out[0], mb.out[1]));

  const docsN = 500, L = 100;
  const segVectors = randomUnit(r, docsN * L, D);
  const tokenOffsets = Uint32Array.from({ length: docsN + 1 }, (_, i) => i * L);
  const segment = searchSegment({
    name: 'simd-bench', documents: docsN, dims: D, docIds: Array.from({ length: docsN }, (_, i) => `d${i}`), tokenOffsets, tokenIds: new Int32Array(docsN * L), docVectors: null,
    metadata: () => null, decodeAll: () => segVectors,
  } as SegmentSource);
  const ex = alternate(() => exhaustiveSegmentSearch(segment, q, N, 100));
  record('exhaustive', `exhaustive search, ${docsN} documents x ${L} tokens x ${D} vs ${N}, top-100`, ex, same(ex.out[0].scores, ex.out[1].scores) && same(ex.out[0].docs, ex.out[1].docs));

  const points = randomUnit(r, 2048, D);
  const cents = randomUnit(r, 1024, D);
  const km = alternate(() => assignNearest(points, 2048, cents, 1024, D));
  record('kmeans_assign', `k-means assignNearest, 2048 points x 1024 centroids x ${D}`, km, same(km.out[0].similarity, km.out[1].similarity) && same(km.out[0].index, km.out[1].index));

  log('score bench: @lateral/simd, WARP kernels and searches on benchWarp\'s segment...');
  const fx = warpBenchFixture({});
  const { centroidScores, tables, lookups, float, warpSearch, xtrSearch } = fx.runs;
  record('warp_centroid_scores', `WARP Q C^T (${fx.shape.n} x ${fx.shape.centroids} x ${fx.shape.dims})`, alternate(centroidScores), null);
  record('warp_tables', `WARP lookup tables (${fx.shape.n} tokens, b = ${fx.shape.bits})`, alternate(tables), null);
  record('warp_lookups', `WARP lookup-sums over the probed lists (${fx.shape.scoredPerQuery} token scores)`, alternate(lookups), null);
  record('xtr_score_rows', 'XTR scoreRows over the same rows (float32 vectors)', alternate(float), null);
  const ws = alternate(warpSearch);
  record('warp_search', 'WARP whole segment search (query + segment, top-100)', ws, null);
  record('xtr_search', 'XTR whole segment search (probe + search, top-100)', alternate(xtrSearch), null);
  if (fx.sink() === 42.4242) console.log('');

  log('score bench: @lateral/simd, scoreRows variants...');
  const T = 65_536;
  const tokens = randomUnit(r, T, D);
  const list = Uint32Array.from({ length: 3000 }, (_, i) => Math.floor((i * T) / 3000));
  const out = new Float64Array(3000);
  const variants: ScoreRowsVariant[] = ['js', 'scalar', 'pairs', 'f32'];
  const vt: number[][] = variants.map(() => []);
  const runVariant = (v: ScoreRowsVariant) => { for (let i = 0; i < N; i++) wasm.scoreRowsWith(v, q, i * D, tokens, 0, D, list, 0, list.length, out); };
  variants.forEach(runVariant);
  for (let k = 0; k < rounds; k++) {
    variants.forEach((v, i) => {
      const s = performance.now();
      runVariant(v);
      vt[i].push(performance.now() - s);
    });
  }
  const vm = vt.map(median);
  variants.forEach((v, i) => { result[`simd_score_rows_${v}_ms`] = vm[i]; });
  rows.push(['SIMD scoreRows variants, 32 x 3000 rows of 65,536 x 128', variants.map((v, i) => `${v} ${f(vm[i])} ms (${f(vm[0] / vm[i])}x)`).join(', ')]);
  return { result, rows };
}

/**
 * End to end in process on real vectors (`--simd-cranfield`, simdCranfieldCase): Cranfield's
 * 1,400 documents and its queries encoded by glove-ctx-100d (d = 100; .cache/models), one segment.
 * Timed on the JavaScript kernels and the module in alternation, hits checked equal: an IVF fit
 * (k-means, K = 256 on 8,192 sampled tokens), exhaustive MaxSim over every document for the first
 * 50 queries, and WARP (b = 4 codec fitted on the residuals, layout built, nprobe 4 of 256) for the same
 * queries, top-100.
 */
export async function simdCranfieldCase(quick: boolean, log: (m: string) => void): Promise<{ result: Record<string, unknown>; rows: [string, string][] }> {
  const wasm = wasmKernels();
  if (!wasm) return { result: {}, rows: [['@lateral/simd, Cranfield', `JavaScript kernels only: ${simdStatus().reason}`]] };
  log('score bench: @lateral/simd on Cranfield (glove-ctx-100d): encoding...');
  const data = loadCranfield(resolve('data/cranfield'));
  const enc = await TokenEncoder.load(resolve('.cache/models/glove-ctx-100d'), { executionProvider: 'cpu' });
  const d = enc.dims;
  const docs = await enc.encodeDocuments(data.docs.map((x) => x.text));
  const queries = await enc.encodeQueries(data.queries.map((x) => x.text));
  const D = docs.length;
  const tokenOffsets = new Uint32Array(D + 1);
  docs.forEach((e, i) => { tokenOffsets[i + 1] = tokenOffsets[i] + e.length; });
  const T = tokenOffsets[D];
  const vectors = new Float32Array(T * d);
  docs.forEach((e, i) => vectors.set(e.vectors, tokenOffsets[i] * d));
  const segment = searchSegment({
    name: 'cranfield', documents: D, dims: d, docIds: data.docs.map((x) => x.id), tokenOffsets, tokenIds: new Int32Array(T), docVectors: null,
    metadata: () => null, decodeAll: () => vectors,
  } as SegmentSource);
  const qs = queries.filter((q) => q.length > 0).slice(0, 50);
  const rounds = quick ? 2 : 5;
  const alternate = <T>(run: () => T) => alternateKernels(wasm, rounds, 1, run);
  const sameHits = (a: { doc: number; score: number }[][], b: { doc: number; score: number }[][]) => a.every((h, i) => h.length === b[i].length && h.every((x, j) => x.doc === b[i][j].doc && Object.is(x.score, b[i][j].score)));
  log(`score bench: @lateral/simd on Cranfield: ${D} documents, ${T} tokens, ${qs.length} queries...`);
  const fit = alternate(() => fitIvfCentroids(vectors, T, d, { seed: 1, k: 256, sampleSize: 8192 }));
  if (!Object.is(fit.out[0].centroids.reduce((x, y) => x + y, 0), fit.out[1].centroids.reduce((x, y) => x + y, 0))) throw new Error('simd bench: Cranfield IVF fit differs');
  const ex = alternate(() => qs.map((q) => exhaustiveSearch([{ segment }], q.vectors, q.length, 100)));
  if (!sameHits(ex.out[0], ex.out[1])) throw new Error('simd bench: Cranfield exhaustive hits differ');
  const { centroids, k } = fit.out[1];
  const assignment = assignNearest(vectors, T, centroids, k, d).index;
  const codec = fitWarpCodec(warpResiduals(vectors, T, d, centroids, assignment), T, d, 4);
  const layout = buildWarpLayout({ vectors, dims: d, tokenOffsets, centroids, codec, assignment });
  const lists = warpLayoutLists(layout);
  const sizes = warpListSizes([layout]);
  const nprobe = Math.min(4, k); // 4 of 256 lists (1/64) per query token
  const wp = alternate(() => qs.map((q) => warpSearch([{ documents: D, docBase: 0, lists }], q.vectors, q.length, centroids, codec, sizes, { nprobe, topN: 100 }).hits));
  if (!sameHits(wp.out[0], wp.out[1])) throw new Error('simd bench: Cranfield WARP hits differ');
  const f = (x: number, p = 1) => x.toFixed(p);
  const per = (ms: number) => f(ms / qs.length, 2);
  return {
    result: {
      simd_cranfield_tokens: T, simd_cranfield_centroids: k, simd_cranfield_queries: qs.length,
      simd_cranfield_ivf_fit_js_ms: fit.js, simd_cranfield_ivf_fit_wasm_ms: fit.wasm,
      simd_cranfield_exhaustive_js_ms_per_query: ex.js / qs.length, simd_cranfield_exhaustive_wasm_ms_per_query: ex.wasm / qs.length,
      simd_cranfield_warp_js_ms_per_query: wp.js / qs.length, simd_cranfield_warp_wasm_ms_per_query: wp.wasm / qs.length,
    },
    rows: [
      [`SIMD Cranfield IVF fit (k-means, 8,192 of ${T} tokens x ${d}, K = ${k})`, `JS ${f(fit.js)} ms, WASM ${f(fit.wasm)} ms: ${f(fit.js / fit.wasm, 2)}x (same centroids)`],
      [`SIMD Cranfield exhaustive MaxSim, ${D} documents, per query (${qs.length} queries)`, `JS ${per(ex.js)} ms, WASM ${per(ex.wasm)} ms: ${f(ex.js / ex.wasm, 2)}x (same hits)`],
      [`SIMD Cranfield WARP (b = 4, nprobe ${nprobe}), per query`, `JS ${per(wp.js)} ms, WASM ${per(wp.wasm)} ms: ${f(wp.js / wp.wasm, 2)}x (same hits)`],
    ],
  };
}

/**
 * Median ms of run() on the JavaScript and the WebAssembly kernels, alternated round by round
 * after `warmRuns` untimed runs on each (the last one's result kept); and the two results.
 */
function alternateKernels<T>(wasm: Kernels, rounds: number, warmRuns: number, run: () => T): { js: number; wasm: number; out: T[] } {
  const sets: Kernels[] = [jsKernels, wasm];
  const out = sets.map((k) => {
    useKernels(k);
    for (let w = 1; w < warmRuns; w++) run();
    return run();
  });
  const t: number[][] = [[], []];
  for (let r = 0; r < rounds; r++) {
    sets.forEach((k, i) => {
      useKernels(k);
      const s = performance.now();
      run();
      t[i].push(performance.now() - s);
    });
  }
  useKernels(null);
  return { js: median(t[0]), wasm: median(t[1]), out };
}
