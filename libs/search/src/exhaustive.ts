import { kernels, type PreparedQuery } from '@lateral/simd';
import { mergeHits } from './merge';
import { TopK } from './select';
import { DOC_SLICE, runSteps, type Steps } from './steps';
import { assertMask, assertQuery, assertTopN, type DocMask, type Hit, type HitExplain, type SearchSegment, type SegmentHits } from './types';

/**
 * Exhaustive MaxSim (ColBERT, SPEC 1): every document of the segment, score = sum_i max_j
 * <q_i, d_j>, the reference the approximate modes are measured against. Every inner product is
 * a float64 sum in dimension order and the sum over query tokens runs in token order, so each
 * score equals @lateral/scoring's `maxsim` bit for bit; the loops (the maxima kernel of
 * @lateral/simd: WebAssembly SIMD, 2 query rows per lane pair, or its JavaScript twin) are blocked
 * for speed only. Documents without tokens (score -Infinity) are not returned. Ties in the max go
 * to the lower token row (explain).
 */

export interface ExhaustiveOptions {
  mask?: DocMask;
  /** divide by n (changes no ranking); default false, as maxsim */
  normalize?: boolean;
  /** per hit, per query token: the row achieving the max and the similarity */
  explain?: boolean;
}

/** One segment's exact MaxSim top-n. q: n x d. */
export function exhaustiveSegmentSearch(seg: SearchSegment, q: Float32Array, n: number, topN: number, opts: ExhaustiveOptions = {}): SegmentHits {
  return runSteps(exhaustiveSegmentSearchSteps(seg, q, n, topN, opts));
}

/** exhaustiveSegmentSearch in steps of DOC_SLICE documents (steps.ts): the same result. */
export function* exhaustiveSegmentSearchSteps(seg: SearchSegment, q: Float32Array, n: number, topN: number, opts: ExhaustiveOptions = {}): Steps<SegmentHits> {
  const fn = 'exhaustiveSegmentSearch';
  const d = seg.dims;
  assertQuery(fn, q, n, d);
  assertTopN(fn, 'topN', topN);
  const D = seg.documents;
  const mask = opts.mask;
  assertMask(fn, mask, D);
  const off = seg.tokenOffsets;
  const top = new TopK(topN, D);
  if (n === 0 || D === 0) return { docBase: seg.docBase, docs: new Uint32Array(0), scores: new Float64Array(0), ...(opts.explain ? { explain: [] } : {}) };
  const best = new Float64Array(n);
  const arg = new Int32Array(n);
  const kq = kernels().prepare(q, n, d);
  for (let from = 0; from < D; from += DOC_SLICE) {
    if (from > 0) yield;
    const to = Math.min(D, from + DOC_SLICE);
    // only this slice's vectors are decoded (a view when the segment's whole decode is kept)
    scoreDocs(kq, seg.docTokens(from, to), off[from], d, off, mask, from, to, !!opts.normalize, best, arg, top);
  }
  const { scores, ids } = top.drain();
  const hits: SegmentHits = { docBase: seg.docBase, docs: ids, scores };
  if (opts.explain) {
    // recomputed for the hits only (the same loops, so the same maxima and rows)
    hits.explain = Array.from(ids, (doc): HitExplain => {
      docMaxima(kq, seg.docTokens(doc, doc + 1), off[doc], off[doc], off[doc + 1], d, best, arg);
      return { rows: arg.slice(), similarities: best.slice() };
    });
  }
  return hits;
}

/** Scores documents [from, to) into top (documents in order, masked and empty ones skipped); `tokens` holds rows from `base` on. */
function scoreDocs(
  kq: PreparedQuery, tokens: Float32Array, base: number, d: number, off: Uint32Array, mask: DocMask | undefined, from: number, to: number, normalize: boolean,
  best: Float64Array, arg: Int32Array, top: TopK,
): void {
  for (let doc = from; doc < to; doc++) {
    if (mask && mask[doc] === 0) continue;
    const start = off[doc], end = off[doc + 1];
    if (end === start) continue;
    docMaxima(kq, tokens, base, start, end, d, best, arg);
    const n = kq.n;
    let total = 0;
    for (let i = 0; i < n; i++) total += best[i];
    const score = normalize ? total / n : total;
    if (score >= top.floor) top.push(score, doc);
  }
}

/**
 * Per query token, the max over rows [start, end) and its (lowest) row; x holds rows from `base`
 * on. The maxima kernel of @lateral/simd (the one MaxSim inner loop, shared with scoring's maxsimBatch).
 */
function docMaxima(k: PreparedQuery, x: Float32Array, base: number, start: number, end: number, d: number, best: Float64Array, arg: Int32Array): void {
  best.fill(-Infinity);
  arg.fill(-1);
  k.maxima(x, (start - base) * d, end - start, best, arg, start);
}

/** Exhaustive MaxSim over many segments: per-segment top-n, exact merge. */
export function exhaustiveSearch(parts: readonly { segment: SearchSegment; mask?: DocMask }[], q: Float32Array, n: number, topN: number, opts: Omit<ExhaustiveOptions, 'mask'> = {}): Hit[] {
  return runSteps(exhaustiveSearchSteps(parts, q, n, topN, opts));
}

/** exhaustiveSearch in steps (each segment, and DOC_SLICE documents within one): the same result. */
export function* exhaustiveSearchSteps(parts: readonly { segment: SearchSegment; mask?: DocMask }[], q: Float32Array, n: number, topN: number, opts: Omit<ExhaustiveOptions, 'mask'> = {}): Steps<Hit[]> {
  const perSegment: SegmentHits[] = [];
  for (const p of parts) {
    perSegment.push(yield* exhaustiveSegmentSearchSteps(p.segment, q, n, topN, { ...opts, mask: p.mask }));
    yield;
  }
  return mergeHits(perSegment, topN);
}
