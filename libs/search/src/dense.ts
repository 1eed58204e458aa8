import { mergeHits } from './merge';
import { TopK } from './select';
import { DENSE_DOC_SLICE, DOC_SLICE, runSteps, type Steps } from './steps';
import { assertMask, assertTopN, type DocMask, type Hit, type HitExplain, type PrefixScan, type RowScorer, type SearchSegment, type SegmentHits } from './types';

/**
 * Exact single-vector search (SPEC 3.3), per segment then merged.
 * - `dense`: inner product of the pooled query vector with every document's pooled vector
 *   (the segment's docVectors, normalised by the pipeline, so a cosine).
 * - `mebert`: every document is represented by its first m stored token vectors; the score is
 *   max_j <q, d_j> over them. Scoring documents directly is the "search m x K vectors, then keep
 *   each document's best" of the paper without the detour: each document appears once, with
 *   its best vector (SPEC 5.9). Documents without tokens never score. A segment with a prefix
 *   section (PrefixScan) of at least m rows per document is scanned there instead of its code
 *   sections: it holds the same rows' codes, scored or decoded the same way, so the answers are
 *   the code scan's bit for bit; without one the first m rows come from the code sections.
 * Inner products are float64 sums in dimension order (as @lateral/scoring's dense / mebert),
 * computed four documents (or vectors) at a time.
 */

export interface DenseOptions {
  /** documents with mask[doc] === 0 never score */
  mask?: DocMask;
}

/** One segment's dense top-n. qVec: d. */
export function denseSegmentSearch(seg: SearchSegment, qVec: Float32Array, topN: number, opts: DenseOptions = {}): SegmentHits {
  return runSteps(denseSegmentSearchSteps(seg, qVec, topN, opts));
}

/** denseSegmentSearch in steps of DENSE_DOC_SLICE documents (steps.ts): the same result. */
export function* denseSegmentSearchSteps(seg: SearchSegment, qVec: Float32Array, topN: number, opts: DenseOptions = {}): Steps<SegmentHits> {
  const fn = 'denseSegmentSearch';
  assertTopN(fn, 'topN', topN);
  const d = seg.dims;
  if (qVec.length !== d) throw new RangeError(`${fn}: qVec has length ${qVec.length}, expected d = ${d}`);
  const V = seg.docVectors;
  if (!V) throw new RangeError(`${fn}: segment "${seg.name}" has no document vectors (written without docVectors)`);
  const D = seg.documents;
  if (V.length !== D * d) throw new RangeError(`${fn}: docVectors has length ${V.length}, expected documents x d = ${D * d}`);
  const mask = opts.mask;
  assertMask(fn, mask, D);
  const top = new TopK(topN, D);
  for (let from = 0; from < D; from += DENSE_DOC_SLICE) {
    if (from > 0) yield;
    denseRange(qVec, V, d, mask, from, Math.min(D, from + DENSE_DOC_SLICE), top);
  }
  const { scores, ids } = top.drain();
  return { docBase: seg.docBase, docs: ids, scores };
}

/** Scores documents [from, to) into top, in order; four at a time when nothing is masked (from: a multiple of 4). */
function denseRange(qVec: Float32Array, V: Float32Array, d: number, mask: DocMask | undefined, from: number, to: number, top: TopK): void {
  let i = from;
  if (!mask) {
    for (; i + 4 <= to; i += 4) {
      const b0 = i * d, b1 = b0 + d, b2 = b1 + d, b3 = b2 + d;
      let s0 = 0, s1 = 0, s2 = 0, s3 = 0;
      for (let t = 0; t < d; t++) {
        const x = qVec[t];
        s0 += x * V[b0 + t];
        s1 += x * V[b1 + t];
        s2 += x * V[b2 + t];
        s3 += x * V[b3 + t];
      }
      if (s0 >= top.floor) top.push(s0, i);
      if (s1 >= top.floor) top.push(s1, i + 1);
      if (s2 >= top.floor) top.push(s2, i + 2);
      if (s3 >= top.floor) top.push(s3, i + 3);
    }
  }
  for (; i < to; i++) {
    if (mask && mask[i] === 0) continue;
    const b = i * d;
    let s = 0;
    for (let t = 0; t < d; t++) s += qVec[t] * V[b + t];
    if (s >= top.floor) top.push(s, i);
  }
}

/** Dense over many segments: per-segment top-n, exact merge. */
export function denseSearch(parts: readonly { segment: SearchSegment; mask?: DocMask }[], qVec: Float32Array, topN: number): Hit[] {
  return runSteps(denseSearchSteps(parts, qVec, topN));
}

/** denseSearch in steps (each segment, and DENSE_DOC_SLICE documents within one): the same result. */
export function* denseSearchSteps(parts: readonly { segment: SearchSegment; mask?: DocMask }[], qVec: Float32Array, topN: number): Steps<Hit[]> {
  const perSegment: SegmentHits[] = [];
  for (const p of parts) {
    perSegment.push(yield* denseSegmentSearchSteps(p.segment, qVec, topN, { mask: p.mask }));
    yield;
  }
  return mergeHits(perSegment, topN);
}

export interface MebertOptions {
  mask?: DocMask;
  /** per hit: the winning token row and its similarity (one query vector, so one entry) */
  explain?: boolean;
}

/** One segment's ME-BERT top-n. qVec: d; mVecs: first-m token vectors per document (ME-BERT uses 3-8). */
export function mebertSegmentSearch(seg: SearchSegment, qVec: Float32Array, mVecs: number, topN: number, opts: MebertOptions = {}): SegmentHits {
  return runSteps(mebertSegmentSearchSteps(seg, qVec, mVecs, topN, opts));
}

/** mebertSegmentSearch in steps of DOC_SLICE documents (steps.ts): the same result. */
export function* mebertSegmentSearchSteps(seg: SearchSegment, qVec: Float32Array, mVecs: number, topN: number, opts: MebertOptions = {}): Steps<SegmentHits> {
  const fn = 'mebertSegmentSearch';
  assertTopN(fn, 'topN', topN);
  if (!Number.isInteger(mVecs) || mVecs < 1) throw new RangeError(`${fn}: mVecs must be an integer >= 1, got ${mVecs}`);
  const d = seg.dims;
  if (qVec.length !== d) throw new RangeError(`${fn}: qVec has length ${qVec.length}, expected d = ${d}`);
  const D = seg.documents;
  const mask = opts.mask;
  assertMask(fn, mask, D);
  const off = seg.tokenOffsets;
  const top = new TopK(topN, D);
  const bestRow = new Int32Array(D).fill(-1);
  const ps = seg.prefixScan;
  if (ps && mVecs <= ps.rows) {
    if (ps.start.length !== D + 1) throw new RangeError(`${fn}: segment "${seg.name}" has a prefix section of ${ps.start.length - 1} documents, expected ${D}`);
    // The section's rows scored from their codes when the segment scores its code sections so, else decoded.
    const fromPrefix = ps.rowScorer(qVec, 1);
    const scratch = { best: new Float64Array(Math.min(D, DOC_SLICE)), arg: new Int32Array(Math.min(D, DOC_SLICE)) };
    for (let from = 0; from < D; from += DOC_SLICE) {
      if (from > 0) yield;
      const to = Math.min(D, from + DOC_SLICE);
      if (fromPrefix) mebertPrefixRangeWith(fromPrefix, ps, mVecs, off, mask, from, to, bestRow, top, scratch);
      else mebertRange(qVec, mVecs, ps.decodePrefixes(from, to, mVecs), off, d, mask, from, to, bestRow, top);
    }
    return mebertHits(seg, top, bestRow, opts);
  }
  // Rows scored from their codes when the segment can (nothing decoded), else the first mVecs vectors decoded.
  const fromCodes = seg.rowScorer(qVec, 1);
  for (let from = 0; from < D; from += DOC_SLICE) {
    if (from > 0) yield;
    const to = Math.min(D, from + DOC_SLICE);
    if (fromCodes) mebertRangeWith(fromCodes, mVecs, off, mask, from, to, bestRow, top);
    else mebertRange(qVec, mVecs, seg.docPrefixTokens(from, to, mVecs), off, d, mask, from, to, bestRow, top);
  }
  return mebertHits(seg, top, bestRow, opts);
}

function mebertHits(seg: SearchSegment, top: TopK, bestRow: Int32Array, opts: MebertOptions): SegmentHits {
  const { scores, ids } = top.drain();
  const hits: SegmentHits = { docBase: seg.docBase, docs: ids, scores };
  if (opts.explain) {
    hits.explain = Array.from(ids, (doc, h): HitExplain => ({ rows: Int32Array.of(bestRow[doc]), similarities: Float64Array.of(scores[h]) }));
  }
  return hits;
}

/**
 * mebertRangeWith over a prefix section: document i's rows are the section's [start[i], ...);
 * bestRow records segment rows. With the scorer's maxRows (EDEN 4-bit: the rowMaxima kernel), the
 * documents' best rows in one call (`best` / `arg`: at least to - from entries), the same values.
 */
function mebertPrefixRangeWith(scorer: RowScorer, ps: PrefixScan, mVecs: number, off: Uint32Array, mask: DocMask | undefined, from: number, to: number, bestRow: Int32Array, top: TopK, scratch: { best: Float64Array; arg: Int32Array }): void {
  const start = ps.start;
  if (scorer.maxRows) {
    const { best, arg } = scratch;
    scorer.maxRows(0, start, from, to, mVecs, best, arg);
    for (let i = from; i < to; i++) {
      if (start[i + 1] === start[i] || (mask && mask[i] === 0)) continue;
      const s = best[i - from];
      bestRow[i] = off[i] + arg[i - from];
      if (s >= top.floor) top.push(s, i);
    }
    return;
  }
  for (let i = from; i < to; i++) {
    if (mask && mask[i] === 0) continue;
    const a = start[i];
    const k = Math.min(mVecs, start[i + 1] - a);
    if (k === 0) continue;
    let best = -Infinity;
    let arg = 0;
    for (let j = 0; j < k; j++) {
      const s = scorer.score(0, a + j);
      if (s > best) {
        best = s;
        arg = j;
      }
    }
    bestRow[i] = off[i] + arg;
    if (best >= top.floor) top.push(best, i);
  }
}

/**
 * Scores documents [from, to): each its best of the first mVecs token vectors. `prefixes` holds
 * those vectors, document after document (docPrefixTokens); bestRow records segment rows.
 */
function mebertRange(
  qVec: Float32Array, mVecs: number, prefixes: Float32Array, off: Uint32Array, d: number, mask: DocMask | undefined, from: number, to: number, bestRow: Int32Array, top: TopK,
): void {
  let at = 0; // the document's first row in `prefixes`
  for (let i = from; i < to; i++) {
    const start = off[i];
    const end = Math.min(off[i + 1], start + mVecs);
    const first = at;
    at += end - start;
    if (mask && mask[i] === 0) continue;
    if (end === start) continue;
    let best = -Infinity;
    let arg = start;
    for (let r = start; r < end; r++) {
      const b = (first + r - start) * d;
      let s = 0;
      for (let t = 0; t < d; t++) s += qVec[t] * prefixes[b + t];
      if (s > best) {
        best = s;
        arg = r;
      }
    }
    bestRow[i] = arg;
    if (best >= top.floor) top.push(best, i);
  }
}

/** mebertRange with a row scorer (rows scored from their codes). */
function mebertRangeWith(scorer: RowScorer, mVecs: number, off: Uint32Array, mask: DocMask | undefined, from: number, to: number, bestRow: Int32Array, top: TopK): void {
  for (let i = from; i < to; i++) {
    if (mask && mask[i] === 0) continue;
    const start = off[i];
    const end = Math.min(off[i + 1], start + mVecs);
    if (end === start) continue;
    let best = -Infinity;
    let arg = start;
    for (let r = start; r < end; r++) {
      const s = scorer.score(0, r);
      if (s > best) {
        best = s;
        arg = r;
      }
    }
    bestRow[i] = arg;
    if (best >= top.floor) top.push(best, i);
  }
}

/** ME-BERT over many segments: per-segment top-n, exact merge. */
export function mebertSearch(parts: readonly { segment: SearchSegment; mask?: DocMask }[], qVec: Float32Array, mVecs: number, topN: number, opts: { explain?: boolean } = {}): Hit[] {
  return runSteps(mebertSearchSteps(parts, qVec, mVecs, topN, opts));
}

/** mebertSearch in steps (each segment, and DOC_SLICE documents within one): the same result. */
export function* mebertSearchSteps(parts: readonly { segment: SearchSegment; mask?: DocMask }[], qVec: Float32Array, mVecs: number, topN: number, opts: { explain?: boolean } = {}): Steps<Hit[]> {
  const perSegment: SegmentHits[] = [];
  for (const p of parts) {
    perSegment.push(yield* mebertSegmentSearchSteps(p.segment, qVec, mVecs, topN, { mask: p.mask, explain: opts.explain }));
    yield;
  }
  return mergeHits(perSegment, topN);
}
