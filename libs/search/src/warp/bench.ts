import { mulberry32 } from '@lateral/shared';
import { normalizeRows } from '../kmeans';
import { buildSegmentIndex } from '../segment-index';
import { TopK } from '../select';
import { searchSegment, type SegmentSource } from '../types';
import { scoreRows, xtrProbe, xtrSearch } from '../xtr';
import { fitWarpCodec, warpResiduals, type WarpBits } from './codec';
import { warpCentroidScores, warpQuery, warpScoreList, warpSegmentSearch, warpTables, WarpWorkspace } from './engine';
import { buildWarpLayout, warpLayoutLists, warpListSizes } from './layout';

export interface WarpBenchOptions {
  /** token vectors in the segment; default 100,000 */
  tokens?: number;
  /** default 128 */
  dims?: number;
  /** default 4 */
  bits?: WarpBits;
  /** IVF centroids K; default 1,024 (~100 tokens per list) */
  centroids?: number;
  /** tokens per document; default 100 */
  docLength?: number;
  /** query tokens; default 32 */
  n?: number;
  /** default 32 */
  nprobe?: number;
  /** XTR's k' for the float path's per-token top-k'; default 1,000 */
  kPrime?: number;
  /** timed repetitions (median reported); default 9 */
  repeats?: number;
  seed?: number;
}

export interface WarpBench {
  tokens: number;
  dims: number;
  bits: number;
  centroids: number;
  documents: number;
  n: number;
  nprobe: number;
  /** token scores per query (n x the probed lists' sizes) */
  scoredPerQuery: number;
  /** Q C^T (plain loop) */
  centroidScoresMs: number;
  /** the n x bytesPerToken x 256 lookup tables */
  tableMs: number;
  /** table sums over the probed lists' packed codes (warpScoreList) */
  lookupMs: number;
  /** the same tokens scored from float32 vectors by XTR's kernel (scoreRows into a top-k' per query token) */
  floatMs: number;
  /** floatMs / (tableMs + lookupMs) */
  kernelRatio: number;
  /** whole WARP search of the segment: warpQuery (centroid scores, probe, imputation, tables) + warpSegmentSearch, top-100 */
  warpSearchMs: number;
  /** whole XTR search of the same segment from decoded float32 vectors: xtrProbe + xtrSearch (k', top-100) */
  xtrSearchMs: number;
  /** xtrSearchMs / warpSearchMs */
  searchRatio: number;
  /** |WARP top-10 and XTR top-10| / 10 (the engines agree where the imputations allow) */
  top10Overlap: number;
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const h = s.length >> 1;
  return s.length % 2 ? s[h] : (s[h - 1] + s[h]) / 2;
}

/**
 * Median ms of each function over `repeats` rounds, the functions run one after the other in
 * every round (after one warm-up round), so a shared machine's load falls on all of them alike.
 */
function interleavedMs(fns: (() => void)[], repeats: number): number[] {
  for (const fn of fns) fn(); // warm-up (JIT, caches)
  const t: number[][] = fns.map(() => []);
  for (let r = 0; r < repeats; r++) {
    fns.forEach((fn, k) => {
      const s = performance.now();
      fn();
      t[k].push(performance.now() - s);
    });
  }
  return t.map(median);
}

/** The timed workloads of benchWarp on its synthetic segment, for a caller that times them its own way. */
export interface WarpBenchFixture {
  shape: Pick<WarpBench, 'tokens' | 'dims' | 'bits' | 'centroids' | 'documents' | 'n' | 'nprobe' | 'scoredPerQuery'>;
  runs: { centroidScores: () => void; tables: () => void; lookups: () => void; float: () => void; warpSearch: () => void; xtrSearch: () => void };
  /** |WARP top-10 and XTR top-10| / 10 */
  top10Overlap: () => number;
  /** the sum of the runs' consumed results (print it conditionally, so no timed work is dead code) */
  sink: () => number;
}

/**
 * Micro-benchmark of WARP's kernels against XTR's float scoring on the same synthetic segment
 * (seeded): T unit token vectors drawn around K random unit centroids (assigned to the centroid
 * they were drawn from), a b-bit codec fitted on their residuals, n query tokens near random
 * centroids. Times table build and lookup-sum over the probed lists against `scoreRows` over the
 * same rows of the float32 vectors, and the whole per-segment searches.
 */
export function benchWarp(opts: WarpBenchOptions = {}): WarpBench {
  const f = warpBenchFixture(opts);
  const { centroidScores, tables, lookups, float, warpSearch, xtrSearch } = f.runs;
  const [centroidScoresMs, tableMs, lookupMs, floatMs, warpSearchMs, xtrSearchMs] = interleavedMs([centroidScores, tables, lookups, float, warpSearch, xtrSearch], opts.repeats ?? 9);
  if (f.sink() === 42.4242) console.log(''); // keeps the timed work observable
  return {
    ...f.shape,
    centroidScoresMs, tableMs, lookupMs, floatMs, kernelRatio: floatMs / (tableMs + lookupMs),
    warpSearchMs, xtrSearchMs, searchRatio: xtrSearchMs / warpSearchMs, top10Overlap: f.top10Overlap(),
  };
}

/** benchWarp's segment, query and workloads (seeded), untimed. */
export function warpBenchFixture(opts: WarpBenchOptions = {}): WarpBenchFixture {
  const T = opts.tokens ?? 100_000;
  const d = opts.dims ?? 128;
  const bits = opts.bits ?? 4;
  const K = opts.centroids ?? 1024;
  const L = opts.docLength ?? 100;
  const n = opts.n ?? 32;
  const nprobe = opts.nprobe ?? 32;
  const kPrime = opts.kPrime ?? 1000;
  const r = mulberry32(opts.seed ?? 1);
  const gauss = () => r() + r() + r() - 1.5;
  const centroids = normalizeRows(Float32Array.from({ length: K * d }, gauss), K, d);
  const assignment = Uint32Array.from({ length: T }, () => Math.floor(r() * K));
  const raw = new Float32Array(T * d);
  for (let t = 0; t < T; t++) for (let j = 0; j < d; j++) raw[t * d + j] = centroids[assignment[t] * d + j] + 0.08 * gauss();
  const vectors = normalizeRows(raw, T, d);
  const D = Math.ceil(T / L);
  const tokenOffsets = Uint32Array.from({ length: D + 1 }, (_, i) => Math.min(T, i * L));
  const sample = Math.min(T, 20_000);
  const codec = fitWarpCodec(warpResiduals(vectors.subarray(0, sample * d), sample, d, centroids, assignment.subarray(0, sample)), sample, d, bits);
  const layout = buildWarpLayout({ vectors, dims: d, tokenOffsets, centroids, codec, assignment });
  const lists = warpLayoutLists(layout);
  const sizes = warpListSizes([layout]);
  const qRaw = new Float32Array(n * d);
  for (let i = 0; i < n; i++) {
    const c = Math.floor(r() * K);
    for (let j = 0; j < d; j++) qRaw[i * d + j] = centroids[c * d + j] + 0.3 * gauss();
  }
  const q = normalizeRows(qRaw, n, d);

  const query = warpQuery(q, n, centroids, codec, sizes, { nprobe });
  let scoredPerQuery = 0;
  let longest = 0;
  for (let e = 0; e < n * nprobe; e++) {
    const count = lists.list(query.probes[e]).count;
    scoredPerQuery += count;
    longest = Math.max(longest, count);
  }
  let sink = 0; // consumed results, so no timed work is dead code
  const centroidScoresRun = () => {
    sink += warpCentroidScores(q, n, centroids, d)[0];
  };
  const tables = new Float32Array(n * query.bytesPerToken * 256);
  const tableRun = () => {
    sink += warpTables(q, n, codec, tables)[0];
  };
  const out = new Float64Array(longest);
  const lookupRun = () => {
    for (let i = 0; i < n; i++) {
      for (let p = 0; p < nprobe; p++) {
        const e = i * nprobe + p;
        const l = lists.list(query.probes[e]);
        warpScoreList(query, i, query.probeScores[e], l, out);
        sink += out[0];
      }
    }
  };

  // XTR's float path over the same tokens: the IVF rows of each probed list, in document order
  const segment = searchSegment({
    name: 'bench', documents: D, dims: d, docIds: Array.from({ length: D }, (_, i) => `d${i}`), tokenOffsets, tokenIds: new Int32Array(T), docVectors: null,
    metadata: () => null, decodeAll: () => vectors,
  } as SegmentSource);
  const index = buildSegmentIndex(segment, centroids, d, { assignments: assignment });
  const { listOffsets, rows } = index.ivf;
  const floatRun = () => {
    for (let i = 0; i < n; i++) {
      const top = new TopK(kPrime);
      for (let p = 0; p < nprobe; p++) {
        const c = query.probes[i * nprobe + p];
        scoreRows(q, i * d, vectors, 0, d, rows, listOffsets[c], listOffsets[c + 1], top);
      }
      sink += top.floor;
    }
  };

  const workspace = new WarpWorkspace();
  const tableBuffer = new Float32Array(n * query.bytesPerToken * 256); // as a long-running scorer keeps one
  const warpSearchRun = () => {
    const wq = warpQuery(q, n, centroids, codec, sizes, { nprobe, tables: tableBuffer });
    sink += warpSegmentSearch(wq, { documents: D, docBase: 0, lists }, { topN: 100, workspace }).scored;
  };
  const xtrSearchRun = () => {
    const probe = xtrProbe(q, n, centroids, d, nprobe);
    sink += xtrSearch([{ segment, index }], q, n, centroids, { kPrime, nprobe, topN: 100, probe }).scored;
  };
  const top10Overlap = () => {
    const warpTop = warpSegmentSearch(warpQuery(q, n, centroids, codec, sizes, { nprobe }), { documents: D, docBase: 0, lists }, { topN: 10 }).docs;
    const xtrTop = new Set(xtrSearch([{ segment, index }], q, n, centroids, { kPrime, nprobe, topN: 10 }).hits.map((h) => h.doc));
    return [...warpTop].filter((doc) => xtrTop.has(doc)).length / 10;
  };
  return {
    shape: { tokens: T, dims: d, bits, centroids: K, documents: D, n, nprobe, scoredPerQuery },
    runs: { centroidScores: centroidScoresRun, tables: tableRun, lookups: lookupRun, float: floatRun, warpSearch: warpSearchRun, xtrSearch: xtrSearchRun },
    top10Overlap,
    sink: () => sink,
  };
}
