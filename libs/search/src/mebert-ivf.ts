import { kernels } from '@lateral/simd';
import { assignNearest, type AssignFn } from './kmeans';
import { mergeHits } from './merge';
import { copyRowList } from './prefix-scan';
import { mebertSegmentSearchSteps } from './dense';
import { TopK } from './select';
import { DOC_SLICE, runSteps, type Steps } from './steps';
import { assertMask, assertTopN, type DocMask, type Hit, type HitExplain, type PrefixScan, type RowScorer, type SearchSegment, type SegmentHits } from './types';

/**
 * ME-BERT through an IVF over the prefix rows (issue 32 item 6; docs/scaling.md, "ME-BERT through
 * an IVF over the prefix rows"). Per segment, each document's prefix rows (the `PFXV` section's
 * first min(rows, tokens) rows) are listed under their nearest centroid of the collection's IVF:
 * list c holds the local ids of the documents with a row there, ascending, each once. A query
 * scores its one vector against the centroids once, probes the `nprobe` best, and takes as
 * candidates every unmasked document with a row (of its first m) in a probed list of the segment;
 * each candidate is then scored exactly as the prefix scan scores it (its best of the first m
 * rows, from the same codes with the same row scorer, through PrefixScan.gather), or, with
 * `rescore` r, its probed rows are scored first and the best r documents by them rescored, so:
 * - with every list probed the candidates are every document with a row, and the answer is
 *   mebertSearch's, bit for bit (scores, order, explained rows);
 * - with fewer, a document is scored iff one of its prefix rows lies in a probed list, and then
 *   exactly: the answer is the exact top-n of the candidates (recall below 1, set by nprobe).
 * The lists are what a WARP layout's lists hold (WarpListSource.list(c).docs, one "token" per
 * prefix row), so a segment's stored lists can be a WARP layout over its prefix rows (the
 * residual codes unused here) or these document-only lists.
 */

/** One segment's lists: list(c).docs[0 .. count) are local document ids, ascending (a WarpListSource fits). */
export interface MebertListSource {
  /** `first`: the list's first entry among all the segment's entries (the index `rows` scores), with list codes */
  list(centroid: number): { count: number; docs: ArrayLike<number>; places?: ArrayLike<number>; first?: number };
  /**
   * Optional (lists that hold their rows' codes, list-major): a scorer of the query over every
   * entry's row, entry e as row e (the same scores as the prefix section's scorer gives that row).
   * A probed list is then one contiguous range of codes, scored without gathering.
   */
  rows?(q: Float32Array): RowScorer | null;
}

/** 0, 1, 2, ...: the start array of entries scored one row each (grown on demand, shared). */
let identity = new Uint32Array(0);
function identityOf(n: number): Uint32Array {
  if (identity.length < n + 1) {
    identity = new Uint32Array(Math.max(n + 1, identity.length * 2));
    for (let i = 0; i < identity.length; i++) identity[i] = i;
  }
  return identity;
}

/** A segment's ME-BERT lists in memory: list c is docs[listOffsets[c] .. listOffsets[c + 1]). */
export interface MebertLists {
  centroidCount: number;
  documents: number;
  /** K + 1 */
  listOffsets: Uint32Array;
  /** local document ids, list-major, ascending within a list (a document once per row listed there) */
  docs: Uint16Array | Uint32Array;
  /** per entry, the row's place among its document's prefix rows (0 .. rows - 1) */
  places: Uint8Array;
}

export interface BuildMebertListsInput {
  /** documents + 1: document i's prefix rows are rows [start[i], start[i + 1]) (PrefixScan.start) */
  start: Uint32Array;
  /** one centroid per prefix row (start[documents] entries), each < centroidCount */
  assignment: Uint32Array;
  centroidCount: number;
}

/**
 * The lists of one segment from its prefix rows' centroids: a counting sort by centroid, stable,
 * so within a list entries stay in document (then row) order: one entry per row, its document and
 * its place among the document's rows (WARP's layout with one "token" per prefix row, without codes).
 */
export function buildMebertLists(input: BuildMebertListsInput): MebertLists {
  const fn = 'buildMebertLists';
  const { start, assignment, centroidCount: K } = input;
  if (!Number.isInteger(K) || K < 1) throw new RangeError(`${fn}: centroidCount must be an integer >= 1, got ${K}`);
  const D = start.length - 1;
  if (D < 0) throw new RangeError(`${fn}: start must have documents + 1 entries`);
  const R = start[D];
  if (start[0] !== 0) throw new RangeError(`${fn}: start[0] must be 0, got ${start[0]}`);
  for (let i = 0; i < D; i++) if (start[i + 1] < start[i]) throw new RangeError(`${fn}: start must be non-decreasing (at document ${i})`);
  if (assignment.length !== R) throw new RangeError(`${fn}: assignment has ${assignment.length} entries, expected the ${R} prefix rows`);
  for (let r = 0; r < R; r++) if (assignment[r] >= K) throw new RangeError(`${fn}: assignment[${r}] = ${assignment[r]} is not a centroid (K = ${K})`);
  if (R > 0 && D > 0) for (let i = 0; i < D; i++) if (start[i + 1] - start[i] > 255) throw new RangeError(`${fn}: document ${i} has ${start[i + 1] - start[i]} prefix rows, at most 255`);
  const listOffsets = new Uint32Array(K + 1);
  for (let r = 0; r < R; r++) listOffsets[assignment[r] + 1]++;
  for (let c = 0; c < K; c++) listOffsets[c + 1] += listOffsets[c];
  const docs = D <= 65536 ? new Uint16Array(R) : new Uint32Array(R);
  const places = new Uint8Array(R);
  const cursor = listOffsets.slice(0, K);
  for (let i = 0; i < D; i++) {
    for (let r = start[i]; r < start[i + 1]; r++) {
      const e = cursor[assignment[r]]++;
      docs[e] = i;
      places[e] = r - start[i];
    }
  }
  return { centroidCount: K, documents: D, listOffsets, docs, places };
}

/**
 * The lists of a segment as built (views). With `rowCodes` (the prefix section's codes and norms,
 * PrefixScan.start, and the factory of its row scorer: prefixScanOf's `rowScorer`), the lists also
 * hold their rows' codes, list-major (a copy of the section's bytes in list order, as a WARP layout
 * holds its tokens' codes), so a probed list's rows are scored where they lie (`rows`).
 */
export function mebertListSource(
  lists: MebertLists,
  rowCodes?: { codes: Uint8Array; norms: Uint8Array; start: Uint32Array; rowBytes: { codes: number; norms: number }; scorer: (q: Float32Array, n: number, rows: { codes: Uint8Array; norms: Uint8Array }) => RowScorer | null },
): MebertListSource {
  const { listOffsets, docs, places, centroidCount: K } = lists;
  const source: MebertListSource = {
    list(c: number) {
      if (!(Number.isInteger(c) && c >= 0 && c < K)) throw new RangeError(`mebert lists: centroid ${c} is out of range (K = ${K})`);
      const a = listOffsets[c], b = listOffsets[c + 1];
      return { count: b - a, docs: docs.subarray(a, b), places: places.subarray(a, b), first: a };
    },
  };
  if (rowCodes) {
    const { codes: cb, norms: nb } = rowCodes.rowBytes;
    const E = docs.length;
    if (rowCodes.start.length !== lists.documents + 1) throw new RangeError(`mebertListSource: start has ${rowCodes.start.length} entries, expected documents + 1 = ${lists.documents + 1}`);
    const codes = new Uint8Array(E * cb);
    const norms = new Uint8Array(E * nb);
    const rows = new Uint32Array(E);
    for (let e = 0; e < E; e++) rows[e] = rowCodes.start[docs[e]] + places[e];
    copyRowList(rowCodes.codes, codes, cb, rows, E);
    copyRowList(rowCodes.norms, norms, nb, rows, E);
    source.rows = (q: Float32Array) => rowCodes.scorer(q, 1, { codes, norms });
  }
  return source;
}

/**
 * A segment's lists from its prefix section's rows decoded (ps.decodePrefixes over every document,
 * all its rows), each assigned to its nearest centroid (`assign`, default assignNearest: float64
 * inner products, ties to the lower centroid). centroids: K x dims.
 */
export function buildMebertListsFromPrefix(ps: PrefixScan, dims: number, centroids: Float32Array, assign: AssignFn = assignNearest): MebertLists {
  if (!Number.isInteger(dims) || dims < 1 || centroids.length === 0 || centroids.length % dims !== 0) throw new RangeError(`buildMebertListsFromPrefix: centroids has length ${centroids.length}, expected K x dims with dims = ${dims}`);
  const K = centroids.length / dims;
  const D = ps.start.length - 1;
  const R = ps.start[D];
  const rows = R === 0 ? new Float32Array(0) : ps.decodePrefixes(0, D, ps.rows);
  const assignment = R === 0 ? new Uint32Array(0) : assign(rows, R, centroids, K, dims).index;
  return buildMebertLists({ start: ps.start, assignment, centroidCount: K });
}

/**
 * The centroids a query probes: the nprobe best by <q, c> (float64 sums in dimension order,
 * rounded to float32 as WARP's centroid scores; ties to the lower centroid), ascending.
 * nprobe >= K probes every list.
 */
export function mebertProbe(qVec: Float32Array, centroids: Float32Array, dims: number, nprobe: number): Uint32Array {
  const fn = 'mebertProbe';
  if (qVec.length !== dims) throw new RangeError(`${fn}: qVec has length ${qVec.length}, expected d = ${dims}`);
  if (!Number.isInteger(dims) || dims < 1 || centroids.length === 0 || centroids.length % dims !== 0) throw new RangeError(`${fn}: centroids has length ${centroids.length}, expected K x d with d = ${dims}`);
  if (!Number.isInteger(nprobe) || nprobe < 1) throw new RangeError(`${fn}: nprobe must be an integer >= 1, got ${nprobe}`);
  const K = centroids.length / dims;
  if (nprobe >= K) return Uint32Array.from({ length: K }, (_, c) => c);
  const scores = new Float32Array(K);
  kernels().prepare(qVec, 1, dims).dots(centroids, 0, K, scores);
  // the nprobe best: a TopK over (score, centroid) keeps ties to the lower centroid
  const top = new TopK(nprobe, K);
  for (let c = 0; c < K; c++) if (scores[c] >= top.floor) top.push(scores[c], c);
  const { ids } = top.drain();
  return ids.sort();
}

export interface MebertIvfOptions {
  mask?: DocMask;
  explain?: boolean;
  /**
   * Absent: every candidate document is rescored exactly (all its first m rows). A number r >= topN:
   * the probed rows alone are scored first (each list entry's row, from the same codes, one score a
   * row; a document's score there is the best of its probed rows, a lower bound of its exact score,
   * equal to it when its best row was probed), and only the best r documents by that bound are
   * rescored exactly. With every list probed the bounds are the exact scores, so the answer is the
   * scan's; with fewer, r trades rescoring for recall. Needs lists with places and a gathering
   * prefix scan that scores from codes; otherwise every candidate is rescored.
   */
  rescore?: number;
}

/** What one segment's IVF search did (the bench's and the service's figures). */
export interface MebertIvfStats {
  /** documents with a probed row (candidates after the mask) */
  candidates: number;
  /** list entries read */
  entries: number;
  /** rows scored (probed rows, then the rescored documents' rows) */
  rows: number;
  /** true when a segment was scanned (no prefix section, or m above its rows) */
  scanned: boolean;
}

/** A zeroed MebertIvfStats. */
export function mebertIvfStats(): MebertIvfStats {
  return { candidates: 0, entries: 0, rows: 0, scanned: false };
}

/** One segment's ME-BERT top-n through its lists (probed: ascending distinct centroids, mebertProbe). */
export function mebertIvfSegmentSearch(
  seg: SearchSegment, lists: MebertListSource | null, probed: Uint32Array, qVec: Float32Array, mVecs: number, topN: number, opts: MebertIvfOptions = {}, stats?: MebertIvfStats,
): SegmentHits {
  return runSteps(mebertIvfSegmentSearchSteps(seg, lists, probed, qVec, mVecs, topN, opts, stats));
}

/**
 * mebertIvfSegmentSearch in steps of DOC_SLICE candidates. A segment without lists (null), without
 * a prefix section, or asked for m above its section's rows is scanned whole (mebertSegmentSearch).
 */
export function* mebertIvfSegmentSearchSteps(
  seg: SearchSegment, lists: MebertListSource | null, probed: Uint32Array, qVec: Float32Array, mVecs: number, topN: number, opts: MebertIvfOptions = {}, stats?: MebertIvfStats,
): Steps<SegmentHits> {
  const fn = 'mebertIvfSegmentSearch';
  assertTopN(fn, 'topN', topN);
  if (!Number.isInteger(mVecs) || mVecs < 1) throw new RangeError(`${fn}: mVecs must be an integer >= 1, got ${mVecs}`);
  const rescore = opts.rescore;
  if (rescore !== undefined && !(Number.isInteger(rescore) && rescore >= topN)) throw new RangeError(`${fn}: rescore must be an integer >= topN (${topN}), got ${rescore}`);
  const d = seg.dims;
  if (qVec.length !== d) throw new RangeError(`${fn}: qVec has length ${qVec.length}, expected d = ${d}`);
  const D = seg.documents;
  const mask = opts.mask;
  assertMask(fn, mask, D);
  const ps = seg.prefixScan;
  if (!lists || !ps || mVecs > ps.rows) {
    if (stats) {
      stats.candidates += D;
      stats.rows += ps && mVecs <= ps.rows ? ps.start[D] : seg.tokenOffsets[D];
      stats.scanned = true;
    }
    return yield* mebertSegmentSearchSteps(seg, qVec, mVecs, topN, { mask, explain: opts.explain });
  }
  if (ps.start.length !== D + 1) throw new RangeError(`${fn}: segment "${seg.name}" has a prefix section of ${ps.start.length - 1} documents, expected ${D}`);
  const start = ps.start;
  // Per document, its probed rows (places below m) counted: a document with one is a candidate.
  const count = new Uint8Array(D);
  let entries = 0;
  for (let e = 0; e < probed.length; e++) {
    const l = lists.list(probed[e]);
    const docs = l.docs, places = l.places;
    entries += l.count;
    if (places) {
      for (let k = 0; k < l.count; k++) if (places[k] < mVecs) count[docs[k]]++;
    } else for (let k = 0; k < l.count; k++) count[docs[k]] = 1;
  }
  let n = 0;
  for (let i = 0; i < D; i++) if (count[i] !== 0 && start[i + 1] > start[i] && (!mask || mask[i] !== 0)) n++;
  const cand = new Uint32Array(n);
  n = 0;
  for (let i = 0; i < D; i++) if (count[i] !== 0 && start[i + 1] > start[i] && (!mask || mask[i] !== 0)) cand[n++] = i;
  if (stats) {
    stats.candidates += n;
    stats.entries += entries;
  }
  yield;
  let exactDocs: Uint32Array = cand;
  let exactCount = n;
  const listRows = rescore !== undefined && rescore < n && lists.rows ? lists.rows(qVec) : null;
  const bounds = !listRows && rescore !== undefined && rescore < n && ps.gatherRows ? ps.rowScorer(qVec, 1) : null;
  if (listRows) {
    // The probed lists' rows scored where they lie (list-major codes), each document's best kept.
    const bound = new Float64Array(D).fill(-Infinity);
    let maxCount = 0;
    for (let e = 0; e < probed.length; e++) maxCount = Math.max(maxCount, lists.list(probed[e]).count);
    const best = new Float64Array(Math.min(maxCount, 4096));
    const place = new Int32Array(best.length);
    let scored = 0;
    for (let e = 0; e < probed.length; e++) {
      const l = lists.list(probed[e]);
      const docs = l.docs, places = l.places!, first = l.first!;
      for (let a = 0; a < l.count; a += best.length) {
        const b = Math.min(l.count, a + best.length);
        if (listRows.maxRows) listRows.maxRows(0, identityOf(first + b), first + a, first + b, 1, best, place);
        else for (let k = a; k < b; k++) best[k - a] = listRows.score(0, first + k);
        scored += b - a;
        for (let k = a; k < b; k++) {
          const i = docs[k];
          if (places[k] < mVecs && best[k - a] > bound[i]) bound[i] = best[k - a];
        }
      }
      if (e % 16 === 15) yield;
    }
    const top = new TopK(rescore!, n);
    for (let k = 0; k < n; k++) {
      const i = cand[k];
      if (bound[i] >= top.floor) top.push(bound[i], i);
    }
    if (stats) stats.rows += scored;
    exactDocs = top.drain().ids.sort();
    exactCount = exactDocs.length;
    yield;
  } else if (bounds && ps.gatherRows) {
    // The probed rows alone: grouped by candidate (ascending), scored, each candidate's best kept.
    const at = new Int32Array(D).fill(-1);
    const rowStart = new Uint32Array(n + 1);
    for (let k = 0; k < n; k++) {
      at[cand[k]] = k;
      rowStart[k + 1] = rowStart[k] + count[cand[k]];
    }
    const rows = new Uint32Array(rowStart[n]);
    const fill = rowStart.slice(0, n);
    for (let e = 0; e < probed.length; e++) {
      const l = lists.list(probed[e]);
      const docs = l.docs, places = l.places!;
      for (let k = 0; k < l.count; k++) {
        const c = at[docs[k]];
        if (c >= 0 && places[k] < mVecs) rows[fill[c]++] = start[docs[k]] + places[k];
      }
    }
    const sub = ps.gatherRows(cand, rowStart, rows, n);
    const scorer = sub.rowScorer(qVec, 1)!;
    const top = new TopK(rescore!, n);
    const best = new Float64Array(Math.min(n, DOC_SLICE));
    const place = new Int32Array(Math.min(n, DOC_SLICE));
    for (let from = 0; from < n; from += DOC_SLICE) {
      if (from > 0) yield;
      const to = Math.min(n, from + DOC_SLICE);
      if (scorer.maxRows) {
        scorer.maxRows(0, rowStart, from, to, ps.rows, best, place);
        for (let k = from; k < to; k++) if (best[k - from] >= top.floor) top.push(best[k - from], cand[k]);
      } else {
        for (let k = from; k < to; k++) pushBest(k, rowStart[k], rowStart[k + 1] - rowStart[k], (r) => scorer.score(0, r), place, top, cand);
      }
    }
    if (stats) stats.rows += rows.length;
    exactDocs = top.drain().ids.sort();
    exactCount = exactDocs.length;
    yield;
  }
  return yield* exactTopSteps(seg, ps, exactDocs, exactCount, qVec, mVecs, topN, opts.explain === true, stats);
}

/** The exact top-n of documents docs[0 .. n) (ascending, each with rows): each its best of its first m rows, as the prefix scan scores it. */
function* exactTopSteps(seg: SearchSegment, ps: PrefixScan, cand: Uint32Array, n: number, qVec: Float32Array, mVecs: number, topN: number, explain: boolean, stats?: MebertIvfStats): Steps<SegmentHits> {
  const d = seg.dims;
  const start = ps.start;
  const off = seg.tokenOffsets;
  const top = new TopK(topN, n);
  const arg = new Int32Array(n);
  if (stats) for (let k = 0; k < n; k++) stats.rows += Math.min(mVecs, start[cand[k] + 1] - start[cand[k]]);
  if (ps.gather) {
    // The candidates' rows copied together: the prefix scan's row scorer over them (the same bits).
    const sub = ps.gather(cand, n);
    const scorer = sub.rowScorer(qVec, 1);
    const best = new Float64Array(Math.min(n, DOC_SLICE));
    const place = new Int32Array(Math.min(n, DOC_SLICE));
    for (let from = 0; from < n; from += DOC_SLICE) {
      if (from > 0) yield;
      const to = Math.min(n, from + DOC_SLICE);
      if (scorer?.maxRows) {
        scorer.maxRows(0, sub.start, from, to, mVecs, best, place);
        for (let k = from; k < to; k++) {
          arg[k] = place[k - from];
          const s = best[k - from];
          if (s >= top.floor) top.push(s, cand[k]);
        }
      } else if (scorer) {
        for (let k = from; k < to; k++) pushBest(k, sub.start[k], Math.min(mVecs, sub.start[k + 1] - sub.start[k]), (r) => scorer.score(0, r), arg, top, cand);
      } else {
        const rows = sub.decodePrefixes(from, to, mVecs);
        let at = 0;
        for (let k = from; k < to; k++) {
          const rk = Math.min(mVecs, sub.start[k + 1] - sub.start[k]);
          const first = at;
          at += rk;
          pushBest(k, 0, rk, (j) => dot(qVec, rows, (first + j) * d, d), arg, top, cand);
        }
      }
    }
  } else {
    // No gather: each candidate's rows in place, one at a time (the same values).
    const scorer = ps.rowScorer(qVec, 1);
    for (let from = 0; from < n; from += DOC_SLICE) {
      if (from > 0) yield;
      const to = Math.min(n, from + DOC_SLICE);
      for (let k = from; k < to; k++) {
        const i = cand[k];
        const rk = Math.min(mVecs, start[i + 1] - start[i]);
        if (scorer) pushBest(k, start[i], rk, (r) => scorer.score(0, r), arg, top, cand);
        else {
          const rows = ps.decodePrefixes(i, i + 1, mVecs);
          pushBest(k, 0, rk, (j) => dot(qVec, rows, j * d, d), arg, top, cand);
        }
      }
    }
  }
  const { scores, ids } = top.drain();
  const hits: SegmentHits = { docBase: seg.docBase, docs: ids, scores };
  if (explain) {
    hits.explain = Array.from(ids, (doc, h): HitExplain => {
      const k = lowerBound(cand, n, doc);
      return { rows: Int32Array.of(off[doc] + arg[k]), similarities: Float64Array.of(scores[h]) };
    });
  }
  return hits;
}

/** A float64 sum in dimension order, as mebertRange's. */
function dot(q: Float32Array, x: Float32Array, b: number, d: number): number {
  let s = 0;
  for (let t = 0; t < d; t++) s += q[t] * x[b + t];
  return s;
}

/** Candidate k's best of rows r0 .. r0 + rows - 1 (the first on ties), as the prefix scan keeps it. */
function pushBest(k: number, r0: number, rows: number, score: (r: number) => number, arg: Int32Array, top: TopK, cand: Uint32Array): void {
  let best = -Infinity;
  let a = 0;
  for (let j = 0; j < rows; j++) {
    const s = score(r0 + j);
    if (s > best) {
      best = s;
      a = j;
    }
  }
  arg[k] = a;
  if (best >= top.floor) top.push(best, cand[k]);
}

function lowerBound(a: Uint32Array, n: number, x: number): number {
  let lo = 0, hi = n;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (a[mid] < x) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/** ME-BERT over many segments through their lists (one probe per query): per-segment top-n, exact merge. */
export function mebertIvfSearch(
  parts: readonly { segment: SearchSegment; lists: MebertListSource | null; mask?: DocMask }[], probed: Uint32Array, qVec: Float32Array, mVecs: number, topN: number, opts: { explain?: boolean; rescore?: number } = {}, stats?: MebertIvfStats,
): Hit[] {
  return runSteps(mebertIvfSearchSteps(parts, probed, qVec, mVecs, topN, opts, stats));
}

/** mebertIvfSearch in steps (each segment, and DOC_SLICE candidates within one): the same result. */
export function* mebertIvfSearchSteps(
  parts: readonly { segment: SearchSegment; lists: MebertListSource | null; mask?: DocMask }[], probed: Uint32Array, qVec: Float32Array, mVecs: number, topN: number, opts: { explain?: boolean; rescore?: number } = {}, stats?: MebertIvfStats,
): Steps<Hit[]> {
  const perSegment: SegmentHits[] = [];
  for (const p of parts) {
    perSegment.push(yield* mebertIvfSegmentSearchSteps(p.segment, p.lists, probed, qVec, mVecs, topN, { mask: p.mask, explain: opts.explain, rescore: opts.rescore }, stats));
    yield;
  }
  return mergeHits(perSegment, topN);
}
