import { mergeHits } from './merge';
import { TopK } from './select';
import { assertMask, assertTopN, type DocMask, type Hit, type HitExplain, type SearchSegment, type SegmentHits } from './types';

/**
 * Exact single-vector search (SPEC 3.3), per segment then merged.
 * - `dense`: inner product of the pooled query vector with every document's pooled vector
 *   (the segment's docVectors, normalised by the pipeline, so a cosine).
 * - `mebert`: every document is represented by its first m stored token vectors; the score is
 *   max_j <q, d_j> over them. Scoring documents directly is the "search m x K vectors, then keep
 *   each document's best" of the paper without the detour: each document appears once, with
 *   its best vector (SPEC 5.9). Documents without tokens never score.
 * Inner products are float64 sums in dimension order (as @lateral/scoring's dense / mebert),
 * computed four documents (or vectors) at a time.
 */

export interface DenseOptions {
  /** documents with mask[doc] === 0 never score */
  mask?: DocMask;
}

/** One segment's dense top-n. qVec: d. */
export function denseSegmentSearch(seg: SearchSegment, qVec: Float32Array, topN: number, opts: DenseOptions = {}): SegmentHits {
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
  let i = 0;
  if (!mask) {
    for (; i + 4 <= D; i += 4) {
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
  for (; i < D; i++) {
    if (mask && mask[i] === 0) continue;
    const b = i * d;
    let s = 0;
    for (let t = 0; t < d; t++) s += qVec[t] * V[b + t];
    if (s >= top.floor) top.push(s, i);
  }
  const { scores, ids } = top.drain();
  return { docBase: seg.docBase, docs: ids, scores };
}

/** Dense over many segments: per-segment top-n, exact merge. */
export function denseSearch(parts: readonly { segment: SearchSegment; mask?: DocMask }[], qVec: Float32Array, topN: number): Hit[] {
  return mergeHits(parts.map((p) => denseSegmentSearch(p.segment, qVec, topN, { mask: p.mask })), topN);
}

export interface MebertOptions {
  mask?: DocMask;
  /** per hit: the winning token row and its similarity (one query vector, so one entry) */
  explain?: boolean;
}

/** One segment's ME-BERT top-n. qVec: d; mVecs: first-m token vectors per document (ME-BERT uses 3-8). */
export function mebertSegmentSearch(seg: SearchSegment, qVec: Float32Array, mVecs: number, topN: number, opts: MebertOptions = {}): SegmentHits {
  const fn = 'mebertSegmentSearch';
  assertTopN(fn, 'topN', topN);
  if (!Number.isInteger(mVecs) || mVecs < 1) throw new RangeError(`${fn}: mVecs must be an integer >= 1, got ${mVecs}`);
  const d = seg.dims;
  if (qVec.length !== d) throw new RangeError(`${fn}: qVec has length ${qVec.length}, expected d = ${d}`);
  const D = seg.documents;
  const mask = opts.mask;
  assertMask(fn, mask, D);
  const tokens = seg.tokens;
  const off = seg.tokenOffsets;
  const top = new TopK(topN, D);
  const bestRow = new Int32Array(D).fill(-1);
  for (let i = 0; i < D; i++) {
    if (mask && mask[i] === 0) continue;
    const start = off[i];
    const end = Math.min(off[i + 1], start + mVecs);
    if (end === start) continue;
    let best = -Infinity;
    let arg = start;
    for (let r = start; r < end; r++) {
      const b = r * d;
      let s = 0;
      for (let t = 0; t < d; t++) s += qVec[t] * tokens[b + t];
      if (s > best) {
        best = s;
        arg = r;
      }
    }
    bestRow[i] = arg;
    if (best >= top.floor) top.push(best, i);
  }
  const { scores, ids } = top.drain();
  const hits: SegmentHits = { docBase: seg.docBase, docs: ids, scores };
  if (opts.explain) {
    hits.explain = Array.from(ids, (doc, h): HitExplain => ({ rows: Int32Array.of(bestRow[doc]), similarities: Float64Array.of(scores[h]) }));
  }
  return hits;
}

/** ME-BERT over many segments: per-segment top-n, exact merge. */
export function mebertSearch(parts: readonly { segment: SearchSegment; mask?: DocMask }[], qVec: Float32Array, mVecs: number, topN: number, opts: { explain?: boolean } = {}): Hit[] {
  return mergeHits(parts.map((p) => mebertSegmentSearch(p.segment, qVec, mVecs, topN, { mask: p.mask, explain: opts.explain })), topN);
}
