import { kernels } from '@lateral/simd';
import { mulberry32 } from '@lateral/shared';
import { compareRanked, kWayMerge, mergeHits, mergeIntoHits, type RankedList } from './merge';
import type { SegmentIndex } from './segment-index';
import { TopK } from './select';
import { XTR_CHUNK_ROWS, runSteps, type Steps } from './steps';
import { assertMask, assertQuery, assertTopN, type DocMask, type Hit, type HitExplain, type RowScorer, type SearchSegment, type SegmentHits } from './types';

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

/** One segment's per-query-token top-k' lists (CSR over query tokens), best first. */
export interface XtrSegmentLists {
  n: number;
  kPrime: number;
  documents: number;
  docBase: number;
  /** n + 1: list i is [offsets[i], offsets[i+1]) */
  offsets: Uint32Array;
  scores: Float64Array;
  /** local documents */
  docs: Uint32Array;
  /** token rows of the segment */
  rows: Uint32Array;
  /** token rows scored (work done) */
  scored: number;
}

export interface XtrSegmentOptions {
  kPrime: number;
  mask?: DocMask;
}

export const XTR_MAX_QUERY_TOKENS = 65535;

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

/** The exact global per-query-token lists. */
export interface XtrMerged {
  n: number;
  kPrime: number;
  /** n + 1 */
  offsets: Uint32Array;
  scores: Float64Array;
  /** index of the segment (in the merged array) of each entry */
  segments: Uint32Array;
  docs: Uint32Array;
  rows: Uint32Array;
  /** global document keys, docBase + doc */
  keys: Float64Array;
  /** n: m_i, the last score of list i (0 when empty) */
  imputed: Float64Array;
  /** S x n: entries of segment s's list i inside the global list i (always a prefix) */
  survivors: Uint32Array;
}

/** Merges the segments' lists into the exact global top-k' lists and their imputation scores. */
export function xtrMerge(lists: readonly XtrSegmentLists[]): XtrMerged {
  return runSteps(xtrMergeSteps(lists));
}

/** xtrMerge in steps (each segment's keys, then query token by query token): the same merge. */
export function* xtrMergeSteps(lists: readonly XtrSegmentLists[]): Steps<XtrMerged> {
  const S = lists.length;
  const n = S > 0 ? lists[0].n : 0;
  const kPrime = S > 0 ? lists[0].kPrime : 0;
  for (let s = 1; s < S; s++) {
    if (lists[s].n !== n || lists[s].kPrime !== kPrime) throw new RangeError(`xtrMerge: segment ${s} has n = ${lists[s].n}, k' = ${lists[s].kPrime}; segment 0 has ${n}, ${kPrime}`);
  }
  const keys: Float64Array[] = [];
  for (const l of lists) {
    const k = new Float64Array(l.docs.length);
    for (let e = 0; e < k.length; e++) k[e] = l.docBase + l.docs[e];
    keys.push(k);
    if (keys.length % 64 === 0) yield;
  }
  const survivors = new Uint32Array(S * n);
  const imputed = new Float64Array(n);
  const parts: { list: Uint32Array; pos: Uint32Array }[] = [];
  const offsets = new Uint32Array(n + 1);
  for (let i = 0; i < n; i++) {
    yield;
    const ranked: RankedList[] = lists.map((l, s) => {
      const a = l.offsets[i], b = l.offsets[i + 1];
      return { scores: l.scores.subarray(a, b), keys: keys[s].subarray(a, b), sub: l.rows.subarray(a, b) };
    });
    const m = kWayMerge(ranked, kPrime);
    parts.push(m);
    offsets[i + 1] = offsets[i] + m.list.length;
    for (let o = 0; o < m.list.length; o++) survivors[m.list[o] * n + i]++;
  }
  const total = offsets[n];
  const scores = new Float64Array(total);
  const segments = new Uint32Array(total);
  const docs = new Uint32Array(total);
  const rows = new Uint32Array(total);
  const gkeys = new Float64Array(total);
  for (let i = 0; i < n; i++) {
    if (i % 8 === 0) yield;
    const { list, pos } = parts[i];
    for (let o = 0; o < list.length; o++) {
      const l = lists[list[o]];
      const e = l.offsets[i] + pos[o];
      const g = offsets[i] + o;
      scores[g] = l.scores[e];
      segments[g] = list[o];
      docs[g] = l.docs[e];
      rows[g] = l.rows[e];
      gkeys[g] = keys[list[o]][e];
    }
    imputed[i] = list.length > 0 ? scores[offsets[i + 1] - 1] : 0;
  }
  return { n, kPrime, offsets, scores, segments, docs, rows, keys: gkeys, imputed, survivors };
}

/**
 * The XTR accumulator (SPEC 3.2), direct-addressed: for each query token i in order and each
 * entry r of its list (entries offsets[i] .. offsets[i] + counts[i], best first), the first entry
 * of each document adds scores[r] - imputed[i] to acc[doc]; `seen` holds the last tag (i + 1)
 * per document, zero initially, so afterwards seen[doc] !== 0 marks the candidates.
 * acc, seen: one slot per document of the segment; seen is a Uint8Array for n <= 255 (a quarter
 * of the cache footprint of 32-bit tags), else a Uint16Array. No candidate list is kept in the
 * loop (it cost a third of the time): `xtrCandidates` scans the tags afterwards.
 */
export function xtrAccumulate(
  n: number, offsets: Uint32Array, counts: Uint32Array, docs: Uint32Array, scores: Float64Array, imputed: Float64Array,
  acc: Float64Array, seen: Uint8Array | Uint16Array,
): void {
  for (let i = 0; i < n; i++) {
    const tag = i + 1;
    const mi = imputed[i];
    const end = offsets[i] + counts[i];
    for (let r = offsets[i]; r < end; r++) {
      const doc = docs[r];
      if (seen[doc] !== tag) {
        seen[doc] = tag;
        acc[doc] += scores[r] - mi;
      }
    }
  }
}

/**
 * Reusable, zeroed accumulators for xtrAccumulate, grown to the largest segment seen. Reusing one
 * workspace across segments keeps the arrays hot in cache: freshly allocated arrays measured
 * about 1.5x slower per update. `release(D)` zeroes what a segment used.
 */
export class XtrWorkspace {
  private acc = new Float64Array(0);
  private tags8 = new Uint8Array(0);
  private tags16 = new Uint16Array(0);

  /** acc (D) and tags (D, padded to 32-bit words): Uint8Array for n <= 255, else Uint16Array. */
  take(n: number, documents: number): { acc: Float64Array; seen: Uint8Array | Uint16Array } {
    if (n > XTR_MAX_QUERY_TOKENS) throw new RangeError(`XtrWorkspace: at most ${XTR_MAX_QUERY_TOKENS} query tokens, got ${n}`);
    if (this.acc.length < documents) this.acc = new Float64Array(documents);
    if (n <= 255) {
      const len = (documents + 3) & ~3;
      if (this.tags8.length < len) this.tags8 = new Uint8Array(len);
      return { acc: this.acc, seen: this.tags8.subarray(0, len) };
    }
    const len = (documents + 1) & ~1;
    if (this.tags16.length < len) this.tags16 = new Uint16Array(len);
    return { acc: this.acc, seen: this.tags16.subarray(0, len) };
  }

  /** Zeroes the first `documents` slots (call after each segment). */
  release(documents: number): void {
    this.acc.fill(0, 0, documents);
    this.tags8.fill(0, 0, Math.min(this.tags8.length, (documents + 3) & ~3));
    this.tags16.fill(0, 0, Math.min(this.tags16.length, (documents + 1) & ~1));
  }
}

/**
 * Feeds every candidate (seen[doc] !== 0, doc < documents) to `top` with score
 * (base + acc[doc]) / divide. Once `top` is full, a document
 * whose acc cannot reach its floor is skipped before the division (a conservative bound with a
 * 1e-12 relative margin; the exact comparison is then made on the score itself). When candidates
 * are sparse (`sparse`), zero tag words are skipped 32 bits at a time.
 */
export function xtrCandidates(seen: Uint8Array | Uint16Array, documents: number, acc: Float64Array, base: number, divide: number, top: TopK, sparse = false): void {
  const state = { floor: top.floor, raw: -Infinity };
  if (!sparse) {
    candidateRange(seen, 0, documents, acc, base, divide, top, state);
    return;
  }
  const words = new Uint32Array(seen.buffer, seen.byteOffset, seen.byteLength >> 2);
  const per = 4 / seen.BYTES_PER_ELEMENT;
  for (let w = 0; w < words.length; w++) if (words[w] !== 0) candidateRange(seen, w * per, Math.min(documents, (w + 1) * per), acc, base, divide, top, state);
}

/** Documents with a non-zero tag among the first `documents` (the candidates of xtrAccumulate). */
export function xtrCandidateCount(seen: Uint8Array | Uint16Array, documents: number): number {
  let c = 0;
  for (let doc = 0; doc < documents; doc++) if (seen[doc] !== 0) c++;
  return c;
}

function candidateRange(
  seen: Uint8Array | Uint16Array, from: number, to: number, acc: Float64Array, base: number, divide: number, top: TopK,
  state: { floor: number; raw: number },
): void {
  let { floor, raw } = state;
  for (let doc = from; doc < to; doc++) {
    const a = acc[doc];
    if (a < raw || seen[doc] === 0) continue;
    const s = (base + a) / divide;
    if (s >= floor) {
      top.push(s, doc);
      if (top.floor !== floor) {
        floor = top.floor;
        const f = floor * divide;
        raw = f - base - (Math.abs(f) + Math.abs(base)) * 1e-12;
      }
    }
  }
  state.floor = floor;
  state.raw = raw;
}

export interface XtrAggregateOptions {
  topN: number;
  /** divide by n (SPEC 3.2's f'); default true */
  normalize?: boolean;
  /** per hit and query token, the retrieved row and its score (row -1 and m_i when imputed) */
  explain?: boolean;
  /** accumulators to reuse across segments (one per concurrent search) */
  workspace?: XtrWorkspace;
}

/**
 * One segment's XTR top-n from its own lists, cut where the global merge cut them, and the
 * global imputation scores. `segment`: this segment's index in the array given to xtrMerge.
 */
export function xtrAggregateSegment(lists: XtrSegmentLists, merged: XtrMerged, segment: number, opts: XtrAggregateOptions): SegmentHits {
  const fn = 'xtrAggregateSegment';
  assertTopN(fn, 'topN', opts.topN);
  const { n } = lists;
  if (merged.n !== n) throw new RangeError(`${fn}: merged lists are for ${merged.n} query tokens, the segment's for ${n}`);
  if (!Number.isInteger(segment) || segment < 0 || (segment + 1) * n > merged.survivors.length) {
    throw new RangeError(`${fn}: segment ${segment} is not one of the merged segments`);
  }
  const counts = merged.survivors.subarray(segment * n, (segment + 1) * n);
  let updates = 0;
  for (let i = 0; i < n; i++) {
    if (counts[i] > lists.offsets[i + 1] - lists.offsets[i]) throw new RangeError(`${fn}: merged survivors exceed segment ${segment}'s list ${i}; were these lists the ones merged?`);
    updates += counts[i];
  }
  const D = lists.documents;
  const workspace = opts.workspace ?? new XtrWorkspace();
  const { acc, seen } = workspace.take(n, D);
  xtrAccumulate(n, lists.offsets, counts, lists.docs, lists.scores, merged.imputed, acc, seen);
  let base = 0;
  for (let i = 0; i < n; i++) base += merged.imputed[i];
  const normalize = opts.normalize ?? true;
  const top = new TopK(opts.topN, Math.min(D, updates));
  xtrCandidates(seen, D, acc, base, normalize ? n : 1, top, updates * 16 < D);
  workspace.release(D);
  const { scores, ids } = top.drain();
  const hits: SegmentHits = { docBase: lists.docBase, docs: ids, scores };
  if (opts.explain) hits.explain = explainXtr(lists, counts, merged.imputed, ids, D);
  return hits;
}

function explainXtr(lists: XtrSegmentLists, counts: Uint32Array, imputed: Float64Array, hitDocs: Uint32Array, D: number): HitExplain[] {
  const n = lists.n;
  const slot = new Int32Array(D).fill(-1);
  const out: HitExplain[] = [];
  hitDocs.forEach((doc, h) => {
    slot[doc] = h;
    const rows = new Int32Array(n).fill(-1);
    out.push({ rows, similarities: Float64Array.from(imputed) });
  });
  for (let i = 0; i < n; i++) {
    const end = lists.offsets[i] + counts[i];
    for (let r = lists.offsets[i]; r < end; r++) {
      const h = slot[lists.docs[r]];
      if (h >= 0 && out[h].rows[i] === -1) {
        out[h].rows[i] = lists.rows[r];
        out[h].similarities[i] = lists.scores[r];
      }
    }
  }
  return out;
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

export interface XtrAccumulatorBenchOptions {
  /** query tokens; default 32 */
  n?: number;
  /** entries per query token's global list; default 40,000 */
  kPrime?: number;
  /** documents in the whole collection the hits spread over; default 1,000,000 */
  documents?: number;
  /** segments the documents are cut into (each gets its own accumulators); default 64 (15,625 documents each: 140 KB of accumulators, in L2) */
  segments?: number;
  /** timed repetitions (the best is reported); default 5 */
  repeats?: number;
  seed?: number;
}

export interface XtrAccumulatorBench {
  n: number;
  kPrime: number;
  documents: number;
  segments: number;
  /** n x k' accumulator updates per repetition */
  updates: number;
  /** documents that received at least one update */
  candidates: number;
  /** best time of xtrAccumulate over all segments */
  seconds: number;
  updatesPerSecond: number;
  /** best time of the whole aggregation: xtrAccumulate, each segment's top-100 (xtrCandidates) and zeroing the workspace */
  secondsTotal: number;
}

/**
 * Micro-benchmark of the XTR aggregation (issue 9's kernel target: >= 100 M updates/s, i.e.
 * n = 32, k' = 40,000 over a million documents in under 13 ms). Synthetic lists: each query
 * token's k' hits go to uniformly random documents, with descending scores; the documents are
 * cut into equal segments, each aggregated with its own direct-addressed arrays.
 */
export function benchXtrAccumulator(opts: XtrAccumulatorBenchOptions = {}): XtrAccumulatorBench {
  const n = opts.n ?? 32;
  const kPrime = opts.kPrime ?? 40_000;
  const documents = opts.documents ?? 1_000_000;
  const S = opts.segments ?? 64;
  const repeats = opts.repeats ?? 5;
  const rand = mulberry32(opts.seed ?? 1);
  const per = Math.ceil(documents / S);
  // global lists -> per-segment CSR lists
  const segOf = new Uint32Array(n * kPrime);
  const docOf = new Uint32Array(n * kPrime);
  const counts = new Uint32Array(S * n);
  for (let e = 0; e < n * kPrime; e++) {
    const g = Math.floor(rand() * documents);
    segOf[e] = Math.floor(g / per);
    docOf[e] = g - segOf[e] * per;
    counts[segOf[e] * n + Math.floor(e / kPrime)]++;
  }
  const segLists = Array.from({ length: S }, (_, s) => {
    const offsets = new Uint32Array(n + 1);
    for (let i = 0; i < n; i++) offsets[i + 1] = offsets[i] + counts[s * n + i];
    return { offsets, docs: new Uint32Array(offsets[n]), scores: new Float64Array(offsets[n]), fill: offsets.slice(0, n) };
  });
  for (let e = 0; e < n * kPrime; e++) {
    const i = Math.floor(e / kPrime);
    const l = segLists[segOf[e]];
    const p = l.fill[i]++;
    l.docs[p] = docOf[e];
    l.scores[p] = 1 - (e % kPrime) / kPrime;
  }
  const imputed = new Float64Array(n).fill(1 / kPrime);
  let best = Infinity;
  let bestSetup = Infinity;
  let candidates = 0;
  const sizes = segLists.map((_, s) => Math.min(per, documents - s * per));
  const workspace = new XtrWorkspace();
  workspace.take(n, per); // the one allocation, outside the timing, as in a long-running scorer
  for (let rep = 0; rep < repeats; rep++) {
    let accumulate = 0;
    let counting = 0;
    let cand = 0;
    const t0 = performance.now();
    segLists.forEach((l, s) => {
      const { acc, seen } = workspace.take(n, sizes[s]);
      const t1 = performance.now();
      xtrAccumulate(n, l.offsets, counts.subarray(s * n, (s + 1) * n), l.docs, l.scores, imputed, acc, seen);
      accumulate += performance.now() - t1;
      const top = new TopK(100, sizes[s]);
      xtrCandidates(seen, sizes[s], acc, 0, n, top, l.offsets[n] * 16 < sizes[s]);
      top.drain();
      const t2 = performance.now();
      cand += xtrCandidateCount(seen, sizes[s]);
      counting += performance.now() - t2;
      workspace.release(sizes[s]);
    });
    const total = performance.now() - t0 - counting;
    best = Math.min(best, accumulate / 1000);
    bestSetup = Math.min(bestSetup, total / 1000);
    candidates = cand;
  }
  const updates = n * kPrime;
  return { n, kPrime, documents, segments: S, updates, candidates, seconds: best, updatesPerSecond: updates / best, secondsTotal: bestSetup };
}

/** One query token's global list so far (best first). */
interface RunningList {
  scores: Float64Array;
  keys: Float64Array;
  segments: Uint32Array;
  docs: Uint32Array;
  rows: Uint32Array;
}

const EMPTY_RUNNING: RunningList = { scores: new Float64Array(0), keys: new Float64Array(0), segments: new Uint32Array(0), docs: new Uint32Array(0), rows: new Uint32Array(0) };

/**
 * XTR's merge as a fold over segments visited one at a time (issue 10: a search holds what the
 * request needs, not what the collection holds). Each `add` merges one segment's lists into the
 * global top-k' of each query token and lets the segment's lists go, so a pass over S segments
 * holds n x k' entries instead of S x n x k'. After the segments were added in the order of their
 * indices, `merged()` is exactly `xtrMerge` over the same lists (the order is total: keys are
 * unique across segments and rows within a document), and `aggregateSteps` gives the hits
 * `xtrSearch` gives.
 */
export class XtrRunningMerge {
  private readonly lists: RunningList[];
  /** documents and docBase of each segment that kept an entry at some point */
  private readonly segmentShape = new Map<number, { documents: number; docBase: number }>();
  /** segments added (each may come once, in any order: entries are ordered by global key, not by arrival) */
  private readonly added = new Set<number>();

  constructor(
    readonly n: number,
    readonly kPrime: number,
  ) {
    if (!Number.isInteger(kPrime) || kPrime < 1) throw new RangeError(`XtrRunningMerge: kPrime must be an integer >= 1, got ${kPrime}`);
    this.lists = Array.from({ length: n }, () => EMPTY_RUNNING);
  }

  /** Merges segment `segment`'s lists (each segment once, in any order). */
  add(l: XtrSegmentLists, segment: number): void {
    if (l.n !== this.n || l.kPrime !== this.kPrime) throw new RangeError(`XtrRunningMerge: segment ${segment} has n = ${l.n}, k' = ${l.kPrime}; expected ${this.n}, ${this.kPrime}`);
    if (this.added.has(segment)) throw new RangeError(`XtrRunningMerge: segment ${segment} added twice`);
    this.added.add(segment);
    const K = this.kPrime;
    let kept = false;
    for (let i = 0; i < this.n; i++) {
      const from = l.offsets[i], to = l.offsets[i + 1];
      if (from === to) continue;
      const cur = this.lists[i];
      const A = cur.scores.length;
      // A full list whose last entry beats the segment's best keeps every entry it has.
      if (A === K && compareRanked(cur.scores[A - 1], cur.keys[A - 1], l.scores[from], l.docBase + l.docs[from], cur.rows[A - 1], l.rows[from]) <= 0) continue;
      const size = Math.min(K, A + (to - from));
      const next: RunningList = { scores: new Float64Array(size), keys: new Float64Array(size), segments: new Uint32Array(size), docs: new Uint32Array(size), rows: new Uint32Array(size) };
      let a = 0;
      let b = from;
      for (let o = 0; o < size; o++) {
        let takeA = b >= to;
        if (!takeA && a < A) {
          takeA = compareRanked(cur.scores[a], cur.keys[a], l.scores[b], l.docBase + l.docs[b], cur.rows[a], l.rows[b]) <= 0;
        }
        if (takeA) {
          next.scores[o] = cur.scores[a];
          next.keys[o] = cur.keys[a];
          next.segments[o] = cur.segments[a];
          next.docs[o] = cur.docs[a];
          next.rows[o] = cur.rows[a];
          a++;
        } else {
          if (b > from && compareRanked(l.scores[b - 1], l.docs[b - 1], l.scores[b], l.docs[b], l.rows[b - 1], l.rows[b]) > 0) {
            throw new RangeError(`XtrRunningMerge: segment ${segment}'s list ${i} is not in (score desc, doc asc, row asc) order at ${b - from - 1}, ${b - from}`);
          }
          next.scores[o] = l.scores[b];
          next.keys[o] = l.docBase + l.docs[b];
          next.segments[o] = segment;
          next.docs[o] = l.docs[b];
          next.rows[o] = l.rows[b];
          b++;
          kept = true;
        }
      }
      this.lists[i] = next;
    }
    if (kept) this.segmentShape.set(segment, { documents: l.documents, docBase: l.docBase });
  }

  /** The global lists as `xtrMerge` returns them; `segments`: how many segment indices there are (survivors is segments x n). */
  merged(segments: number): XtrMerged {
    const n = this.n;
    const offsets = new Uint32Array(n + 1);
    for (let i = 0; i < n; i++) offsets[i + 1] = offsets[i] + this.lists[i].scores.length;
    const total = offsets[n];
    const out: XtrMerged = {
      n, kPrime: this.kPrime, offsets,
      scores: new Float64Array(total), segments: new Uint32Array(total), docs: new Uint32Array(total), rows: new Uint32Array(total), keys: new Float64Array(total),
      imputed: new Float64Array(n), survivors: new Uint32Array(segments * n),
    };
    for (let i = 0; i < n; i++) {
      const l = this.lists[i];
      const o = offsets[i];
      out.scores.set(l.scores, o);
      out.segments.set(l.segments, o);
      out.docs.set(l.docs, o);
      out.rows.set(l.rows, o);
      out.keys.set(l.keys, o);
      out.imputed[i] = l.scores.length > 0 ? l.scores[l.scores.length - 1] : 0;
      for (let e = 0; e < l.segments.length; e++) {
        if (l.segments[e] >= segments) throw new RangeError(`XtrRunningMerge.merged: an entry of segment ${l.segments[e]}, but only ${segments} segments`);
        out.survivors[l.segments[e] * n + i]++;
      }
    }
    return out;
  }

  /**
   * The hits: each segment with a surviving entry aggregated from its surviving entries
   * (`xtrAggregateSegment`, which reads only that prefix of its lists), merged into the global
   * top-n. Segments with no surviving entry have no candidate. `cut` (a shard's round 2,
   * shards.ts): the global imputation scores and how many entries of this merge's list i survive
   * the cut over every shard (a prefix); default this merge's own, as one process searching every
   * segment (what `xtrShardHits` computes from every segment's lists, here from the merge alone).
   */
  *aggregateSteps(segments: number, opts: XtrAggregateOptions, cut?: { imputed: ArrayLike<number>; survivors: ArrayLike<number> }): Steps<Hit[]> {
    const merged = this.merged(segments);
    const n = this.n;
    if (cut) {
      merged.imputed = Float64Array.from(cut.imputed);
      if (merged.imputed.length !== n || cut.survivors.length !== n) throw new RangeError(`XtrRunningMerge: the cut is for ${merged.imputed.length} / ${cut.survivors.length} query tokens, the merge for ${n}`);
      merged.survivors.fill(0);
      for (let i = 0; i < n; i++) {
        const a = merged.offsets[i];
        const keep = cut.survivors[i];
        if (!(Number.isInteger(keep) && keep >= 0 && keep <= merged.offsets[i + 1] - a)) throw new RangeError(`XtrRunningMerge: ${keep} survivors for query token ${i}, the list has ${merged.offsets[i + 1] - a}`);
        for (let o = 0; o < keep; o++) merged.survivors[merged.segments[a + o] * n + i]++;
      }
    }
    // Each segment's surviving entries, per query token in global order (= its own list order).
    const bySegment = new Map<number, { offsets: Uint32Array; fill: Uint32Array; scores: Float64Array; docs: Uint32Array; rows: Uint32Array }>();
    for (const [s] of [...this.segmentShape].sort((x, y) => x[0] - y[0])) {
      const offsets = new Uint32Array(n + 1);
      for (let i = 0; i < n; i++) offsets[i + 1] = offsets[i] + merged.survivors[s * n + i];
      const total = offsets[n];
      if (total === 0) continue;
      bySegment.set(s, { offsets, fill: offsets.slice(0, n), scores: new Float64Array(total), docs: new Uint32Array(total), rows: new Uint32Array(total) });
    }
    for (let i = 0; i < n; i++) {
      const a = merged.offsets[i];
      const end = cut ? a + cut.survivors[i] : merged.offsets[i + 1];
      for (let g = a; g < end; g++) {
        const t = bySegment.get(merged.segments[g])!;
        const at = t.fill[i]++;
        t.scores[at] = merged.scores[g];
        t.docs[at] = merged.docs[g];
        t.rows[at] = merged.rows[g];
      }
    }
    yield;
    const workspace = opts.workspace ?? new XtrWorkspace();
    let hits: Hit[] = [];
    for (const [s, t] of bySegment) {
      const shape = this.segmentShape.get(s)!;
      const lists: XtrSegmentLists = { n, kPrime: this.kPrime, documents: shape.documents, docBase: shape.docBase, offsets: t.offsets, scores: t.scores, docs: t.docs, rows: t.rows, scored: 0 };
      hits = mergeIntoHits(hits, xtrAggregateSegment(lists, merged, s, { ...opts, workspace }), s, opts.topN);
      yield;
    }
    return hits;
  }
}
