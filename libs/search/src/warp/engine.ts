import { kernels } from '@lateral/simd';
import { mergeHits } from '../merge';
import { TopK } from '../select';
import { runSteps, type Steps } from '../steps';
import { assertMask, assertQuery, assertTopN, type DocMask, type Hit, type SegmentHits } from '../types';
import { assertWarpCodec, warpCodeBytes, type WarpCodec } from './codec';
import type { WarpList, WarpListSource } from './layout';
import { drainCandidates, imputedBase, WarpWorkspace } from './workspace';

export { WarpWorkspace };

/**
 * WARP's search (SPEC 3.5; Scheerer et al., SIGIR 2025) over segments' centroid-major layouts.
 *
 * Once per query (`warpQuery`):
 * 1. centroid scores S = Q C^T (n x K), or given (an ONNX Runtime GEMM);
 * 2. per query token i, the centroids in order of score (descending, ties: lower index), cut at
 *    `bound`; the first `nprobe` are probed;
 * 3. the imputed missing similarity m_i: walking that order, the score of the first centroid at
 *    which the cumulative collection-wide list size reaches t' (the count of centroids whose
 *    cumulative size is below t', clamped to bound - 1). The sizes are summed over every segment,
 *    so every segment imputes the same m_i and their scores are comparable;
 * 4. per query token and packed byte position p, a 256-entry table
 *    T_i[p][v] = sum over the dimensions j packed in byte p of q_ij w_j[code_j(v)] (float32),
 *    so a token's score is q_i . (c + r) = S_ic + sum_p T_i[p][byte_p]: one lookup per byte,
 *    never a decode to floats (64 lookups for d = 128, b = 4; 32 for b = 2).
 *
 * Per segment (`warpSegmentSearch`), with the lists of the probed centroids:
 * 5. s_iD = the max of the token scores of D over query token i's probed lists;
 * 6. score(D) = sum_i (s_iD if D was reached by i, else m_i), written m + sum_{i reached} (s_iD - m_i)
 *    with m = sum_i m_i, and divided by n unless normalize is false (as XTR's `xtrAggregateSegment`).
 *    Candidates are the documents reached by at least one query token; the rest score m (/ n)
 *    and are not returned, as in XTR.
 * 7. `mergeHits`: the exact global top-n (score descending, global key ascending). A document's
 *    score depends only on its own segment's lists and the global m_i, so cutting the collection
 *    into segments changes nothing.
 *
 * With nprobe = K every token of every document is scored, the imputation never applies, and
 * score(D) = sum_i max_t q_i . (c_t + r_t) / n: XTR (SPEC 3.2) with k' >= T on the decoded vectors.
 */

export const WARP_DEFAULT_BOUND = 128;

/**
 * WARP's default t' for a collection of `tokens` token vectors: floor(sqrt(8 tokens) / 1000) x
 * 1000, at least 1000 (the published engine's rule).
 */
export function warpTPrime(tokens: number): number {
  if (!Number.isFinite(tokens) || tokens < 0) throw new RangeError(`warpTPrime: tokens must be a finite number >= 0, got ${tokens}`);
  return Math.max(1000, Math.floor(Math.sqrt(8 * tokens) / 1000) * 1000);
}

/**
 * Q C^T. q: n x d, centroids: K x d. Shape: -> n x K (float32; each a float64 sum in dimension
 * order). The dots kernel of @lateral/simd (WebAssembly SIMD, or its JavaScript twin).
 */
export function warpCentroidScores(q: Float32Array, n: number, centroids: Float32Array, d: number): Float32Array {
  assertQuery('warpCentroidScores', q, n, d);
  if (!Number.isInteger(d) || d < 1 || centroids.length % d !== 0) throw new RangeError(`warpCentroidScores: centroids has length ${centroids.length}, expected K x d with d = ${d}`);
  const K = centroids.length / d;
  const out = new Float32Array(n * K);
  kernels().prepare(q, n, d).dots(centroids, 0, K, out);
  return out;
}

/**
 * The lookup tables of implicit decompression. q: n x dims. Shape: -> n x bytesPerToken x 256,
 * table (i, p) at (i bytesPerToken + p) 256: entry v = sum over the dimensions j of byte p
 * (j = p 8/b .. p 8/b + 8/b - 1, j < dims) of q_ij w_j[code_j(v)], code_j(v) = bits
 * [(j - p 8/b) b, ...) of v. Built as two 16-entry nibble tables per byte (the low and the high
 * 4 bits: one dimension each for b = 4, two for b = 2), entry v = low[v & 15] + high[v >> 4]:
 * 256 additions per byte. A dimension past the last contributes 0 to every entry, so the
 * padding bits of a partial last byte are ignored. The warpTables kernel of @lateral/simd.
 */
export function warpTables(q: Float32Array, n: number, codec: WarpCodec, out?: Float32Array): Float32Array {
  const { dims, bits, weights } = codec;
  assertWarpCodec('warpTables', codec);
  assertQuery('warpTables', q, n, dims);
  const bpt = warpCodeBytes(dims, bits);
  const tables = out ?? new Float32Array(n * bpt * 256);
  if (tables.length < n * bpt * 256) throw new RangeError(`warpTables: out has ${tables.length} entries, needs ${n * bpt * 256}`);
  kernels().warpTables({ q, n, dims, bits, weights, bytesPerToken: bpt }, tables);
  return tables;
}

/**
 * Whether a query's best `k` centroids per token (n x k ids, best first, as WarpQueryOptions.centroidTop)
 * are enough for warpQuery to give the same query as with any larger bound: every token's walk over
 * cumulative list sizes reaches tPrime within its first k centroids (so its imputed value is the
 * score at the same position whatever the bound beyond k). Then warpQuery with bound k and these
 * k equals warpQuery with bound B >= k and the best B (the first k of the best B are these k: the
 * same scores, ties to the lower index). n x k additions at most.
 */
export function warpTopSuffices(ids: Uint32Array, n: number, k: number, listSizes: ArrayLike<number>, tPrime: number): boolean {
  if (ids.length !== n * k) throw new RangeError(`warpTopSuffices: ${ids.length} ids, expected n x k = ${n * k}`);
  for (let i = 0; i < n; i++) {
    let cum = 0;
    let p = 0;
    for (; p < k; p++) {
      cum += listSizes[ids[i * k + p]];
      if (cum >= tPrime) break;
    }
    if (p === k) return false;
  }
  return true;
}

/** The t' warpQuery uses: the option when given, else warpTPrime of the collection's tokens (the sum of listSizes). */
export function warpQueryTPrime(listSizes: ArrayLike<number>, tPrime?: number): number {
  if (tPrime !== undefined) return tPrime;
  let total = 0;
  for (let c = 0; c < listSizes.length; c++) total += listSizes[c];
  return warpTPrime(total);
}

export interface WarpQueryOptions {
  /** lists probed per query token, in [1, K] */
  nprobe: number;
  /** t' of the imputation (tokens), an integer >= 1; default warpTPrime(sum of listSizes) */
  tPrime?: number;
  /** centroids considered for the imputation, in [nprobe, K] after clamping; default 128 */
  bound?: number;
  /** n x K precomputed Q C^T (e.g. an ONNX Runtime GEMM); default warpCentroidScores */
  centroidScores?: Float32Array;
  /**
   * Precomputed best centroids per query token instead of Q C^T: n x k ids and scores, each row
   * best first (ties: lower index), k >= the clamped bound (e.g. ONNX Runtime's MatMul + TopK:
   * OnnxIvfProbe.top). The engine then never touches the n x K matrix.
   */
  centroidTop?: { k: number; ids: Uint32Array; scores: Float32Array };
  /**
   * Storage for the tables, reused when it has at least n x bytesPerToken x 256 entries (a fresh
   * 2 MiB array per query measured ~0.7 ms of 1.7 for n = 32, d = 128, b = 4). The query keeps a
   * view of it: one buffer per concurrent search.
   */
  tables?: Float32Array;
}

/** Everything a query needs for every segment: built once per query, never per segment. */
export interface WarpQuery {
  n: number;
  dims: number;
  bits: number;
  centroidCount: number;
  nprobe: number;
  tPrime: number;
  bytesPerToken: number;
  /** n x nprobe probed centroids, best first (ties: lower index) */
  probes: Uint32Array;
  /** n x nprobe their scores q_i . c */
  probeScores: Float64Array;
  /** n: m_i */
  imputed: Float64Array;
  /**
   * n x bytesPerToken x 256 (warpTables), built on first read (into the `tables` option's buffer
   * when it is large enough): the resident WebAssembly scan never reads them, it builds each
   * query token's tables in the module from `rows` as it scores that token.
   */
  readonly tables: Float32Array;
  /** the query's rows (n x dims) the tables are built from, with the codec's bucket weights */
  rows: Float32Array;
  codec: WarpCodec;
}

/**
 * Probe, imputation and tables for a query. q: n x dims, centroids: K x dims, listSizes: K
 * collection-wide list sizes (warpListSizes over every segment of the generation).
 */
export function warpQuery(q: Float32Array, n: number, centroids: Float32Array, codec: WarpCodec, listSizes: ArrayLike<number>, opts: WarpQueryOptions): WarpQuery {
  const fn = 'warpQuery';
  const d = codec.dims;
  assertWarpCodec(fn, codec);
  assertQuery(fn, q, n, d);
  if (centroids.length === 0 || centroids.length % d !== 0) throw new RangeError(`${fn}: centroids has length ${centroids.length}, expected K x d with K >= 1, d = ${d}`);
  const K = centroids.length / d;
  if (listSizes.length !== K) throw new RangeError(`${fn}: listSizes has ${listSizes.length} entries, expected K = ${K}`);
  const { nprobe } = opts;
  if (!Number.isInteger(nprobe) || nprobe < 1 || nprobe > K) throw new RangeError(`${fn}: nprobe must be an integer in [1, K = ${K}], got ${nprobe}`);
  const tPrime = warpQueryTPrime(listSizes, opts.tPrime);
  if (!Number.isInteger(tPrime) || tPrime < 1) throw new RangeError(`${fn}: tPrime must be an integer >= 1, got ${tPrime}`);
  const boundOpt = opts.bound ?? WARP_DEFAULT_BOUND;
  if (!Number.isInteger(boundOpt) || boundOpt < 1) throw new RangeError(`${fn}: bound must be an integer >= 1, got ${boundOpt}`);
  const bound = Math.max(nprobe, Math.min(K, boundOpt));
  const given = opts.centroidTop;
  if (given && (!Number.isInteger(given.k) || given.k < bound || given.k > K || given.ids.length !== n * given.k || given.scores.length !== n * given.k)) {
    throw new RangeError(`${fn}: centroidTop has k = ${given.k} (needs ${bound} <= k <= K = ${K}) and ${given.ids.length} ids / ${given.scores.length} scores (expected n x k)`);
  }
  let S = opts.centroidScores;
  if (S && S.length !== n * K) throw new RangeError(`${fn}: centroidScores has length ${S.length}, expected n x K = ${n * K}`);
  if (!given) S ??= warpCentroidScores(q, n, centroids, d);
  const need = n * warpCodeBytes(d, codec.bits) * 256;
  const reuse = opts.tables && opts.tables.length >= need ? opts.tables.subarray(0, need) : undefined;
  const probes = new Uint32Array(n * nprobe);
  const probeScores = new Float64Array(n * nprobe);
  const imputed = new Float64Array(n);
  const top = new TopK(bound);
  for (let i = 0; i < n; i++) {
    let scores: ArrayLike<number>;
    let ids: ArrayLike<number>;
    if (given) {
      scores = given.scores.subarray(i * given.k, i * given.k + bound);
      ids = given.ids.subarray(i * given.k, i * given.k + bound);
    } else {
      const o = i * K;
      for (let c = 0; c < K; c++) {
        const s = S![o + c];
        if (s >= top.floor) top.push(s, c);
      }
      ({ scores, ids } = top.drain());
    }
    for (let p = 0; p < nprobe; p++) {
      probes[i * nprobe + p] = ids[p];
      probeScores[i * nprobe + p] = scores[p];
    }
    let cum = 0;
    let at = 0;
    while (at < bound - 1) {
      cum += listSizes[ids[at]];
      if (cum >= tPrime) break;
      at++;
    }
    imputed[i] = scores[at];
  }
  let tables: Float32Array | undefined;
  return {
    n, dims: d, bits: codec.bits, centroidCount: K, nprobe, tPrime, bytesPerToken: warpCodeBytes(d, codec.bits),
    probes, probeScores, imputed, rows: q, codec,
    get tables() {
      return (tables ??= warpTables(q, n, codec, reuse));
    },
  };
}

/** One segment as the engine sees it. */
export interface WarpSegment {
  /** the segment's documents (local ids in [0, documents)) */
  documents: number;
  /** global key of local document 0 (SearchSegment.docBase) */
  docBase: number;
  /** its probed lists (a WarpLayoutReader, warpLayoutLists, or the scorer's fetched ranges) */
  lists: WarpListSource;
  /** non-zero = searchable (filters, tombstones) */
  mask?: DocMask;
}

export interface WarpSegmentOptions {
  topN: number;
  /** divide by n (XTR's normalisation); default true */
  normalize?: boolean;
  workspace?: WarpWorkspace;
}

export interface WarpSegmentHits extends SegmentHits {
  /** list entries read (work done; masked documents' entries are read, not scored) */
  scored: number;
  /** documents reached by at least one query token */
  candidates: number;
}

/** Scratch for one list's token scores (a list is scored whole before its per-document max). */
let listScores = new Float64Array(1024);

function listScratch(count: number): Float64Array {
  if (listScores.length < count) listScores = new Float64Array(Math.max(count, listScores.length * 2));
  return listScores;
}

/**
 * Scores a whole list against query token i: out[e] = S_ic + the table sum of entry e (the
 * kernel warpSegmentSearch fuses with its per-document max; the benchmark times it alone).
 * cs: the centroid's score q_i . c. Shape: -> count.
 */
export function warpScoreList(query: WarpQuery, i: number, cs: number, list: WarpList, out: Float64Array): Float64Array {
  const bpt = query.bytesPerToken;
  const { codes, words, count } = list;
  if (codes.length < count * bpt || out.length < count) throw new RangeError(`warpScoreList: ${codes.length} code bytes and ${out.length} outputs for ${count} entries of ${bpt} bytes`);
  kernels().lookupSums(query.tables, i * bpt * 256, codes, words ?? null, 0, count, bpt, cs, out);
  return out;
}

/** Work counters of one segment's search. */
interface SegmentCounters {
  candidates: number;
  scored: number;
}

/**
 * Query token i against its probed lists of one segment: s_iD for every document reached
 * (best[], tagged i + 1), then acc[D] += s_iD - m_i; new candidates appended. The hot loop.
 */
function scoreQueryToken(fn: string, query: WarpQuery, i: number, seg: WarpSegment, ws: WarpWorkspace, counters: SegmentCounters): void {
  const { nprobe: np, probes, probeScores, imputed, tables, bytesPerToken: bpt } = query;
  const { best, tag, touched } = ws;
  const D = seg.documents;
  const mask = seg.mask;
  const stamp = i + 1;
  const tBase = i * bpt * 256;
  const w4 = bpt >> 2;
  const k = kernels();
  let nt = 0;
  for (let p = 0; p < np; p++) {
    const c = probes[i * np + p];
    const list = seg.lists.list(c);
    const { count, docs, codes, words } = list;
    if (count === 0) continue;
    if (docs.length < count || codes.length < count * bpt) throw new RangeError(`${fn}: list of centroid ${c} has ${docs.length} ids and ${codes.length} code bytes for ${count} entries`);
    if (words && (bpt & 3 || words.length < count * w4)) throw new RangeError(`${fn}: list of centroid ${c} has ${words.length} code words for ${count} entries of ${bpt} bytes`);
    const scores = listScratch(count);
    k.lookupSums(tables, tBase, codes, words ?? null, 0, count, bpt, probeScores[i * np + p], scores);
    for (let e = 0; e < count; e++) {
      const doc = docs[e];
      if (doc >= D) throw new RangeError(`${fn}: list of centroid ${c} names document ${doc}, the segment has ${D}`);
      if (mask && mask[doc] === 0) continue;
      const s = scores[e];
      if (tag[doc] !== stamp) {
        tag[doc] = stamp;
        best[doc] = s;
        touched[nt++] = doc;
      } else if (s > best[doc]) best[doc] = s;
    }
    counters.scored += count;
  }
  foldTokenMaxima(ws, nt, imputed[i], counters);
}

/**
 * The document-level step of one query token over one segment: each of the `nt` documents it
 * reached (touched[0..nt)) adds its token maximum less the token's imputed value, m_i, to acc[D];
 * documents reached for the first time are appended to the candidates.
 */
function foldTokenMaxima(ws: WarpWorkspace, nt: number, mi: number, counters: SegmentCounters): void {
  const { best, acc, reached, touched, candidates } = ws;
  let nc = counters.candidates;
  for (let k = 0; k < nt; k++) {
    const doc = touched[k];
    if (reached[doc] === 0) {
      reached[doc] = 1;
      candidates[nc++] = doc;
    }
    acc[doc] += best[doc] - mi;
  }
  counters.candidates = nc;
}

/**
 * A query token's probed lists over every segment, gathered once per token (module-level, reused):
 * the `count` non-empty lists in segment order, then probe order, with each one's segment, probe
 * position and centroid score; `scored[s]` the entries of segment s. The JavaScript path reads
 * them (the resident WebAssembly scan finds its lists by source and centroid itself).
 */
const probed = {
  count: 0,
  lists: [] as WarpList[],
  codes: [] as Uint8Array[],
  segs: new Uint32Array(1024),
  probe: new Uint32Array(1024),
  cs: new Float64Array(1024),
  /** entries summed over the gathered lists */
  total: 0,
};

/**
 * Gathers query token i's probed lists of every segment into `probed` (empty lists left out), each
 * checked against its count; `scored[s]` += the entries of segment s. Returns the list count.
 */
function gatherProbed(fn: string, query: WarpQuery, i: number, segs: readonly WarpSegment[], scored: number[]): number {
  const { nprobe: np, probes, probeScores, bytesPerToken: bpt } = query;
  const S = segs.length;
  const cap = S * np;
  if (probed.segs.length < cap) {
    probed.segs = new Uint32Array(cap);
    probed.probe = new Uint32Array(cap);
    probed.cs = new Float64Array(cap);
  }
  let m = 0;
  let total = 0;
  for (let s = 0; s < S; s++) {
    const src = segs[s].lists;
    for (let p = 0; p < np; p++) {
      const c = probes[i * np + p];
      const list = src.list(c);
      const { count, docs, codes } = list;
      if (count === 0) continue;
      if (docs.length < count || codes.length < count * bpt) throw new RangeError(`${fn}: list of centroid ${c} has ${docs.length} ids and ${codes.length} code bytes for ${count} entries`);
      probed.lists[m] = list;
      probed.codes[m] = codes.length === count * bpt ? codes : codes.subarray(0, count * bpt);
      probed.segs[m] = s;
      probed.probe[m] = p;
      probed.cs[m++] = probeScores[i * np + p];
      scored[s] += count;
      total += count;
    }
  }
  probed.count = m;
  probed.total = total;
  probed.lists.length = m;
  probed.codes.length = m;
  return m;
}

/** Drops the gathered lists (nothing kept alive between scans). */
function releaseProbed(): void {
  probed.count = 0;
  probed.lists.length = 0;
  probed.codes.length = 0;
}

/**
 * scoreQueryToken for query token i over every segment, with one kernel call for all their probed
 * lists (lookupSumsMany: sums with cs = -0, then cs + sum here, bit for bit lookupSums with cs):
 * a segment's lists hold a few entries each (571k tokens over 8,192 centroids and tens of
 * segments), so a call per list cost more than its lookups. The same per-document maxima and
 * sums, in the same order, as scoreQueryToken per segment.
 */
function scoreQueryTokenAll(fn: string, query: WarpQuery, i: number, segs: readonly WarpSegment[], wss: readonly WarpWorkspace[], counters: SegmentCounters[], scored: number[]): void {
  const { nprobe: np, probes, imputed, tables, bytesPerToken: bpt } = query;
  const S = segs.length;
  const m = gatherProbed(fn, query, i, segs, scored);
  const scores = listScratch(probed.total);
  if (probed.total > 0) kernels().lookupSumsMany(tables, i * bpt * 256, probed.codes, bpt, scores);
  const stamp = i + 1;
  const mi = imputed[i];
  let at = 0;
  let l = 0;
  for (let s = 0; s < S; s++) {
    const seg = segs[s];
    const { best, tag, touched } = wss[s];
    const D = seg.documents;
    const mask = seg.mask;
    const counter = counters[s];
    let nt = 0;
    for (; l < m && probed.segs[l] === s; l++) {
      const { count, docs } = probed.lists[l];
      const cs = probed.cs[l];
      for (let e = 0; e < count; e++) {
        const doc = docs[e];
        if (doc >= D) throw new RangeError(`${fn}: list of centroid ${probes[i * np + probed.probe[l]]} names document ${doc}, the segment has ${D}`);
        if (mask && mask[doc] === 0) continue;
        const sc = cs + scores[at + e];
        if (tag[doc] !== stamp) {
          tag[doc] = stamp;
          best[doc] = sc;
          touched[nt++] = doc;
        } else if (sc > best[doc]) best[doc] = sc;
      }
      at += count;
    }
    foldTokenMaxima(wss[s], nt, mi, counter);
  }
  releaseProbed();
}

/** One segment's top-n documents by WARP's score (steps 5 and 6), from its probed lists. */
export function warpSegmentSearch(query: WarpQuery, seg: WarpSegment, opts: WarpSegmentOptions): WarpSegmentHits {
  return runSteps(warpSegmentSearchSteps(query, seg, opts));
}

/**
 * warpSegmentSearch in steps of one query token (steps.ts): the same hits. An error (a corrupt
 * or missing list) or an abandoned generator leaves the workspace clean for other segments.
 */
export function* warpSegmentSearchSteps(query: WarpQuery, seg: WarpSegment, opts: WarpSegmentOptions): Steps<WarpSegmentHits> {
  const fn = 'warpSegmentSearch';
  assertTopN(fn, 'topN', opts.topN);
  const D = seg.documents;
  if (!Number.isInteger(D) || D < 0) throw new RangeError(`${fn}: documents must be an integer >= 0, got ${D}`);
  assertMask(fn, seg.mask, D);
  const { n, imputed } = query;
  const ws = opts.workspace ?? new WarpWorkspace();
  ws.ensure(D);
  const counters: SegmentCounters = { candidates: 0, scored: 0 };
  let finished = false;
  try {
    for (let i = 0; i < n; i++) {
      if (i > 0) yield;
      scoreQueryToken(fn, query, i, seg, ws, counters);
    }
    finished = true;
  } finally {
    if (!finished) ws.clear(D);
  }
  const nc = counters.candidates;
  const { scores, ids } = drainCandidates(ws, nc, imputedBase(imputed, n), (opts.normalize ?? true) ? n : 1, opts.topN);
  return { docBase: seg.docBase, docs: ids, scores, scored: counters.scored, candidates: nc };
}


/**
 * warpSegmentSearchSteps over several segments at once, query token by query token: token i
 * scores its probed lists in every segment before token i + 1 starts, so its lookup tables
 * (bytesPerToken x 256 float32: 196 KB at d = 384, b = 4) stay in the CPU's cache while every
 * segment's lists stream past them (segment by segment, the n tables of a query, 3 MB at n = 16,
 * were fetched again for each segment's few entries per list). The same hits, bit for bit, as
 * warpSegmentSearch on each segment alone: each document's maxima and sums are taken in the same
 * order. One workspace per segment (`workspaces`, grown as needed, left clean; an error or an
 * abandoned generator clears them). Yields once per query token.
 */
export function* warpSegmentsSearchSteps(query: WarpQuery, segs: readonly WarpSegment[], opts: Omit<WarpSegmentOptions, 'workspace'> & { workspaces?: WarpWorkspace[]; resident?: boolean }): Steps<WarpSegmentHits[]> {
  const fn = 'warpSegmentSearch';
  assertTopN(fn, 'topN', opts.topN);
  const S = segs.length;
  for (let s = 0; s < S; s++) {
    const D = segs[s].documents;
    if (!Number.isInteger(D) || D < 0) throw new RangeError(`${fn}: documents must be an integer >= 0, got ${D}`);
    assertMask(fn, segs[s].mask, D);
  }
  if (opts.resident ?? true) {
    const got = yield* residentSegmentsSearchSteps(query, segs, opts);
    if (got) return got;
  }
  const wss = opts.workspaces ?? [];
  for (let s = 0; s < S; s++) {
    wss[s] ??= new WarpWorkspace();
    wss[s].ensure(segs[s].documents);
  }
  const { n, imputed } = query;
  const counters: SegmentCounters[] = segs.map(() => ({ candidates: 0, scored: 0 }));
  const scored = new Array<number>(S).fill(0);
  let finished = false;
  try {
    for (let i = 0; i < n; i++) {
      if (i > 0) yield;
      scoreQueryTokenAll(fn, query, i, segs, wss, counters, scored);
    }
    finished = true;
  } finally {
    if (!finished) for (let s = 0; s < S; s++) wss[s].clear(segs[s].documents);
  }
  const base = imputedBase(imputed, n);
  const divide = (opts.normalize ?? true) ? n : 1;
  return segs.map((seg, s) => {
    const nc = counters[s].candidates;
    const { scores, ids } = drainCandidates(wss[s], nc, base, divide, opts.topN);
    return { docBase: seg.docBase, docs: ids, scores, scored: scored[s], candidates: nc };
  });
}

/**
 * warpSegmentsSearchSteps with the token maxima and document sums in the WebAssembly module
 * (Kernels.warpResident): the lists' codes and ids are copied into its memory once, when first
 * probed, instead of once per query, and no per-entry work runs in JavaScript; per query token,
 * the scan is handed the token's probes and finds each segment's lists by source and centroid
 * (WarpListSource.list(c) must give the same entries for as long as the source lives), and
 * builds that token's lookup tables in the module just before (196 KB at d = 384, b = 4: still in
 * the CPU's cache for the lookups; the query's n x 196 KB are never copied out to JavaScript). The same hits, bit
 * for bit (the same float64 operations in the same order). null: not available (JavaScript
 * kernels, another scan holds the module's state) or the state was lost between two query tokens
 * (another scan's kernels used the module's memory meanwhile): the caller runs the JavaScript path.
 */
function* residentSegmentsSearchSteps(query: WarpQuery, segs: readonly WarpSegment[], opts: { topN: number; normalize?: boolean }): Steps<WarpSegmentHits[] | null> {
  const { n, dims, codec, nprobe: np, probes, probeScores, imputed, rows, bytesPerToken } = query;
  const tables = { q: rows, n, dims, bits: codec.bits, weights: codec.weights, bytesPerToken };
  const scan = kernels().warpResident?.(segs.map((s) => s.documents), segs.map((s) => s.mask), segs.map((s) => s.lists), tables);
  if (!scan) return null;
  try {
    const scored = new Array<number>(segs.length).fill(0);
    for (let i = 0; i < n; i++) {
      if (i > 0) yield;
      if (!scan.token(i, probes, probeScores, i * np, np, imputed[i], scored)) return null;
    }
    let base = 0;
    for (let i = 0; i < n; i++) base += imputed[i];
    const divide = (opts.normalize ?? true) ? n : 1;
    // Each segment's top n in the module (the kernels' warpTop: TopK's pushes and drain over its candidates, the same pairs in the same order).
    const out: WarpSegmentHits[] = [];
    for (let s = 0; s < segs.length; s++) {
      const top = scan.top(s, base, divide, opts.topN);
      if (!top) return null;
      out.push({ docBase: segs[s].docBase, docs: top.ids, scores: top.scores, scored: scored[s], candidates: top.candidates });
    }
    return out;
  } finally {
    scan.end();
  }
}

export interface WarpSearchOptions extends WarpQueryOptions {
  topN: number;
  normalize?: boolean;
}

export interface WarpSearchResult {
  hits: Hit[];
  /** m_i per query token */
  imputed: Float64Array;
  /** list entries read over all segments */
  scored: number;
  query: WarpQuery;
}

/**
 * WARP over many segments in one call: warpQuery once, warpSegmentSearch per segment with one
 * workspace, the exact merge. listSizes: the collection-wide sizes (warpListSizes), which must
 * cover every segment of the generation even when only some are searched here (shards).
 */
export function warpSearch(
  segments: readonly WarpSegment[], q: Float32Array, n: number, centroids: Float32Array, codec: WarpCodec, listSizes: ArrayLike<number>, opts: WarpSearchOptions,
): WarpSearchResult {
  return runSteps(warpSearchSteps(segments, q, n, centroids, codec, listSizes, opts));
}

/** warpSearch in steps (the query; each segment query token by query token; the merge): the same result. */
export function* warpSearchSteps(
  segments: readonly WarpSegment[], q: Float32Array, n: number, centroids: Float32Array, codec: WarpCodec, listSizes: ArrayLike<number>, opts: WarpSearchOptions,
): Steps<WarpSearchResult> {
  const query = warpQuery(q, n, centroids, codec, listSizes, opts);
  const workspace = new WarpWorkspace();
  const hits: SegmentHits[] = [];
  let scored = 0;
  for (const seg of segments) {
    yield;
    const h = yield* warpSegmentSearchSteps(query, seg, { topN: opts.topN, normalize: opts.normalize, workspace });
    scored += h.scored;
    hits.push(h);
  }
  return { hits: mergeHits(hits, opts.topN), imputed: query.imputed, scored, query };
}
