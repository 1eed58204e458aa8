import { kernels } from '@lateral/simd';
import { mergeHits } from './merge';
import { XtrWorkspace, xtrAggregateSegment } from './xtr-aggregate';
import { XTR_MAX_QUERY_TOKENS, xtrMergeSteps, type XtrSegmentLists } from './xtr-merge';
import type { SegmentIndex } from './segment-index';
import { TopK } from './select';
import { XTR_CHUNK_ROWS, runSteps, type Steps } from './steps';
import { assertMask, assertQuery, type DocMask, type Hit, type RowScorer, type SearchSegment, type SegmentHits } from './types';

/**
 * XTR two-stage inference (XTR section 3.2, SPEC 3.2), written as per-segment retrieval plus an
 * exact merge (ARCHITECTURE "Serving"):
 *
 * 1. `xtrProbe` (once per query): the nprobe centroids nearest each query token.
 * 2. `xtrSegmentSearch` (per segment): for each query token, every token row in its probed IVF
 *    lists is scored exactly against the decoded vectors (inner product, float64 sum in dimension
 *    order, as `maxsim` in @lateral/scoring does); the top-k' (score, doc, row) are kept. Masked
 *    documents are skipped before scoring, so they never take a place in a list.
 * 3. `xtrMerge`: per query token, the k-way merge of the segments' lists cut at k' is exactly the
 *    list one segment holding every document would give (same order: score descending, global
 *    doc key ascending, row ascending). Its last score is m_i, the imputation of query token i
 *    (an empty list imputes 0). It also says how many entries of each segment's list survived.
 * 4. `xtrAggregateSegment` (per segment): score(D) = sum_i m_i + sum_{i in R(D)} (s_iD - m_i),
 *    divided by n unless normalize is false; s_iD = D's first (best) entry in the surviving part
 *    of list i. Direct-addressed accumulators over the segment's documents (no hash map): one
 *    float64 and one 16-bit "last query token" tag per document. Candidates are the documents
 *    with at least one surviving entry; the rest score sum_i m_i (/ n) and are not returned.
 * 5. `mergeHits`: global top-n.
 *
 * Every step is deterministic and independent of how documents are cut into segments (given
 * docBase = the number of documents before the segment), so many segments return bit for bit
 * what one segment returns. With nprobe = K and k' >= T, m_i is the global minimum similarity
 * and every document's score is maxsim / n up to float64 rounding of the different summation
 * (sum of m_i plus deltas instead of the plain sum).
 *
 * Steps 1-2 and the whole search are here; the merge (step 3) is in xtr-merge.ts, the aggregation
 * (step 4) in xtr-aggregate.ts, and the merge folded over segments one at a time (segment passes)
 * in xtr-running-merge.ts.
 */

export interface XtrProbe {
  n: number;
  nprobe: number;
  /** n x nprobe centroid indices, best first (ties: lower index) */
  centroids: Uint32Array;
}

/** The nprobe centroids nearest each query token. q: n x d; centroids: K x d. */
export function xtrProbe(q: Float32Array, n: number, centroids: Float32Array, d: number, nprobe: number): XtrProbe {
  assertQuery('xtrProbe', q, n, d);
  if (!Number.isInteger(d) || d < 1 || centroids.length % d !== 0) throw new RangeError(`xtrProbe: centroids has length ${centroids.length}, expected K x d with d = ${d}`);
  const K = centroids.length / d;
  if (!Number.isInteger(nprobe) || nprobe < 1 || nprobe > K) throw new RangeError(`xtrProbe: nprobe must be an integer in [1, K = ${K}], got ${nprobe}`);
  const out = new Uint32Array(n * nprobe);
  for (let i = 0; i < n; i++) {
    const top = new TopK(nprobe);
    const a = i * d;
    for (let c = 0; c < K; c++) {
      const b = c * d;
      let s = 0;
      for (let t = 0; t < d; t++) s += q[a + t] * centroids[b + t];
      if (s >= top.floor) top.push(s, c);
    }
    out.set(top.drain().ids, i * nprobe);
  }
  return { n, nprobe, centroids: out };
}

export interface XtrSegmentOptions {
  kPrime: number;
  mask?: DocMask;
}

/**
 * Per segment, per query token: the top-k' token rows among the probed IVF lists, scored
 * exactly against the segment's decoded token vectors. q: n x d. Rows of masked documents are
 * never scored. Ties: lower row first (= lower global key, then position).
 */
export function xtrSegmentSearch(seg: SearchSegment, index: SegmentIndex, q: Float32Array, n: number, probe: XtrProbe, opts: XtrSegmentOptions): XtrSegmentLists {
  return runSteps(xtrSegmentSearchSteps(seg, index, q, n, probe, opts));
}

/** xtrSegmentSearch in steps of one query token per chunk of rows (steps.ts): the same lists. */
export function* xtrSegmentSearchSteps(seg: SearchSegment, index: SegmentIndex, q: Float32Array, n: number, probe: XtrProbe, opts: XtrSegmentOptions): Steps<XtrSegmentLists> {
  const fn = 'xtrSegmentSearch';
  const d = seg.dims;
  assertQuery(fn, q, n, d);
  const { kPrime, mask } = opts;
  if (!Number.isInteger(kPrime) || kPrime < 1) throw new RangeError(`${fn}: kPrime must be an integer >= 1, got ${kPrime}`);
  if (n > XTR_MAX_QUERY_TOKENS) throw new RangeError(`${fn}: at most ${XTR_MAX_QUERY_TOKENS} query tokens, got ${n}`);
  const T = seg.tokenOffsets[seg.documents];
  if (index.documents !== seg.documents || index.tokens !== T || index.dims !== d) {
    throw new RangeError(`${fn}: index (${index.documents} docs, ${index.tokens} tokens, d ${index.dims}) does not belong to segment "${seg.name}" (${seg.documents}, ${T}, ${d})`);
  }
  if (probe.n !== n) throw new RangeError(`${fn}: probe is for ${probe.n} query tokens, q has ${n}`);
  assertMask(fn, mask, seg.documents);
  const K = index.centroidCount;
  const { listOffsets, rows } = index.ivf;
  const owner = seg.tokenDoc;
  const np = probe.nprobe;
  let longest = 0;
  for (let c = 0; c < K; c++) longest = Math.max(longest, listOffsets[c + 1] - listOffsets[c]);
  const scratch = mask ? new Uint32Array(longest) : null;
  // One top-k' per query token, filled chunk by chunk: the segment is read in ranges of whole
  // documents of about XTR_CHUNK_ROWS rows (its decoded vectors are the working memory, never
  // the whole segment's). The lists are ascending, so each probed list is walked once across the
  // chunks by its cursor; TopK keeps the k' best by (score, lower row), whatever the order of
  // the pushes, so the lists are those of one pass over the whole segment.
  const tops: TopK[] = [];
  const cursor = new Uint32Array(n * np);
  for (let i = 0; i < n; i++) {
    let capacity = 0;
    for (let p = 0; p < np; p++) {
      const c = probe.centroids[i * np + p];
      if (c >= K) throw new RangeError(`${fn}: probe centroid ${c} is out of range (the index has K = ${K})`);
      capacity += listOffsets[c + 1] - listOffsets[c];
      cursor[i * np + p] = listOffsets[c];
    }
    tops.push(new TopK(kPrime, capacity));
  }
  const off = seg.tokenOffsets;
  const D = seg.documents;
  // Rows scored from their codes when the segment can (no vectors decoded), else from decoded ranges.
  const fromCodes = seg.rowScorer(q, n);
  let scored = 0;
  let steps = 0;
  for (let from = 0; from < D; ) {
    let to = from + 1;
    while (to < D && off[to + 1] - off[from] <= XTR_CHUNK_ROWS) to++;
    const rowLo = off[from];
    const rowHi = off[to];
    let tokens: Float32Array | null = null; // decoded when a probed list has a row in the chunk
    for (let i = 0; i < n; i++) {
      if (steps++ > 0) yield;
      for (let p = 0; p < np; p++) {
        const c = probe.centroids[i * np + p];
        const lo = cursor[i * np + p];
        const end = listOffsets[c + 1];
        // The last chunk takes the rest of every list (its rows all lie below T); the others walk to rowHi.
        let hi = to === D ? end : lo;
        while (hi < end && rows[hi] < rowHi) hi++;
        cursor[i * np + p] = hi;
        if (hi === lo) continue;
        let list = rows;
        let a = lo;
        let b = hi;
        if (scratch && mask) {
          let m = 0;
          for (let r = lo; r < hi; r++) if (mask[owner[rows[r]]] !== 0) scratch[m++] = rows[r];
          list = scratch;
          a = 0;
          b = m;
        }
        if (b === a) continue;
        scored += b - a;
        if (fromCodes) scoreRowsWith(fromCodes, i, list, a, b, tops[i]);
        else {
          tokens ??= seg.docTokens(from, to);
          scoreRows(q, i * d, tokens, rowLo, d, list, a, b, tops[i]);
        }
      }
    }
    from = to;
  }
  const perToken = tops.map((t) => t.drain());
  const offsets = new Uint32Array(n + 1);
  for (let i = 0; i < n; i++) offsets[i + 1] = offsets[i] + perToken[i].ids.length;
  const total = offsets[n];
  const scores = new Float64Array(total);
  const outRows = new Uint32Array(total);
  const docs = new Uint32Array(total);
  for (let i = 0; i < n; i++) {
    scores.set(perToken[i].scores, offsets[i]);
    outRows.set(perToken[i].ids, offsets[i]);
  }
  for (let e = 0; e < total; e++) docs[e] = owner[outRows[e]];
  return { n, kPrime, documents: seg.documents, docBase: seg.docBase, offsets, scores, docs, rows: outRows, scored };
}

/** Scores rows list[lo..hi) against query token i with a row scorer (from the codes) into top. */
function scoreRowsWith(scorer: RowScorer, i: number, list: Uint32Array, lo: number, hi: number, top: TopK): void {
  for (let p = lo; p < hi; p++) {
    const r = list[p];
    const s = scorer.score(i, r);
    if (s >= top.floor) top.push(s, r);
  }
}

/** Scratch for one call's row scores. */
let rowScores = new Float64Array(256);

/**
 * Scores rows list[lo..hi) against query row q[qo..qo+d) into top: the scoreRows kernel of
 * @lateral/simd (4 rows at a time, each a float64 sum in dimension order), then the top-k'
 * pushes. `tokens` holds the rows from `base` on. The WARP benchmark compares its lookup tables
 * with this kernel.
 */
export function scoreRows(q: Float32Array, qo: number, tokens: Float32Array, base: number, d: number, list: Uint32Array, lo: number, hi: number, top: TopK): void {
  const count = hi - lo;
  if (count <= 0) return;
  if (rowScores.length < count) rowScores = new Float64Array(Math.max(count, rowScores.length * 2));
  const out = rowScores;
  kernels().scoreRows(q, qo, tokens, base, d, list, lo, hi, out);
  for (let p = 0; p < count; p++) {
    const s = out[p];
    if (s >= top.floor) top.push(s, list[lo + p]);
  }
}
export interface XtrSearchOptions {
  kPrime: number;
  nprobe: number;
  topN: number;
  /**
   * The probe computed elsewhere (the search processor's ONNX Runtime GEMM, OnnxIvfProbe in
   * @lateral/kernels); default `xtrProbe` here. Must be for these n query tokens and nprobe.
   */
  probe?: XtrProbe;
  normalize?: boolean;
  explain?: boolean;
}

export interface XtrSearchResult {
  hits: Hit[];
  /** m_i per query token */
  imputed: Float64Array;
  /** token rows scored over all segments */
  scored: number;
}

/**
 * XTR over many segments in one call: probe, per-segment lists, merge, per-segment aggregation,
 * merge of the hits. centroids: K x d, the ones the indexes were built with. q: n x d.
 */
export function xtrSearch(
  parts: readonly { segment: SearchSegment; index: SegmentIndex; mask?: DocMask }[],
  q: Float32Array, n: number, centroids: Float32Array, opts: XtrSearchOptions,
): XtrSearchResult {
  return runSteps(xtrSearchSteps(parts, q, n, centroids, opts));
}

/** xtrSearch in steps (each segment's lists, query token by query token; the merge; each segment's aggregation): the same result. */
export function* xtrSearchSteps(
  parts: readonly { segment: SearchSegment; index: SegmentIndex; mask?: DocMask }[],
  q: Float32Array, n: number, centroids: Float32Array, opts: XtrSearchOptions,
): Steps<XtrSearchResult> {
  if (parts.length === 0) return { hits: [], imputed: new Float64Array(n), scored: 0 };
  const d = parts[0].segment.dims;
  if (opts.probe && (opts.probe.n !== n || opts.probe.nprobe !== opts.nprobe || opts.probe.centroids.length !== n * opts.nprobe)) {
    throw new RangeError(`xtrSearch: the given probe is for ${opts.probe.n} query tokens x nprobe ${opts.probe.nprobe}, expected ${n} x ${opts.nprobe}`);
  }
  const probe = opts.probe ?? xtrProbe(q, n, centroids, d, opts.nprobe);
  const lists: XtrSegmentLists[] = [];
  for (const p of parts) {
    lists.push(yield* xtrSegmentSearchSteps(p.segment, p.index, q, n, probe, { kPrime: opts.kPrime, mask: p.mask }));
    yield;
  }
  const merged = yield* xtrMergeSteps(lists);
  yield;
  const workspace = new XtrWorkspace();
  const hits: SegmentHits[] = [];
  for (let s = 0; s < lists.length; s++) {
    hits.push(xtrAggregateSegment(lists[s], merged, s, { topN: opts.topN, normalize: opts.normalize, explain: opts.explain, workspace }));
    yield;
  }
  return { hits: mergeHits(hits, opts.topN), imputed: merged.imputed, scored: lists.reduce((a, l) => a + l.scored, 0) };
}
