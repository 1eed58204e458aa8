import { mergeHits } from './merge';
import { TopK } from './select';
import { DOC_SLICE, runSteps, type Steps } from './steps';
import { assertMask, assertQuery, assertTopN, type DocMask, type Hit, type HitExplain, type SearchSegment, type SegmentHits } from './types';

/**
 * Exhaustive MaxSim (ColBERT, SPEC 1): every document of the segment, score = sum_i max_j
 * <q_i, d_j>, the reference the approximate modes are measured against. Every inner product is
 * a float64 sum in dimension order and the sum over query tokens runs in token order, so each
 * score equals @lateral/scoring's `maxsim` bit for bit; the loops are register-blocked
 * (2 query rows x 4 document rows) for speed only. Documents without tokens (score -Infinity)
 * are not returned. Ties in the max go to the lower token row (explain).
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
  for (let from = 0; from < D; from += DOC_SLICE) {
    if (from > 0) yield;
    const to = Math.min(D, from + DOC_SLICE);
    // only this slice's vectors are decoded (a view when the segment's whole decode is kept)
    scoreDocs(q, n, seg.docTokens(from, to), off[from], d, off, mask, from, to, !!opts.normalize, best, arg, top);
  }
  const { scores, ids } = top.drain();
  const hits: SegmentHits = { docBase: seg.docBase, docs: ids, scores };
  if (opts.explain) {
    // recomputed for the hits only (the same loops, so the same maxima and rows)
    hits.explain = Array.from(ids, (doc): HitExplain => {
      docMaxima(q, n, seg.docTokens(doc, doc + 1), off[doc], off[doc], off[doc + 1], d, best, arg);
      return { rows: arg.slice(), similarities: best.slice() };
    });
  }
  return hits;
}

/** Scores documents [from, to) into top (documents in order, masked and empty ones skipped); `tokens` holds rows from `base` on. */
function scoreDocs(
  q: Float32Array, n: number, tokens: Float32Array, base: number, d: number, off: Uint32Array, mask: DocMask | undefined, from: number, to: number, normalize: boolean,
  best: Float64Array, arg: Int32Array, top: TopK,
): void {
  for (let doc = from; doc < to; doc++) {
    if (mask && mask[doc] === 0) continue;
    const start = off[doc], end = off[doc + 1];
    if (end === start) continue;
    docMaxima(q, n, tokens, base, start, end, d, best, arg);
    let total = 0;
    for (let i = 0; i < n; i++) total += best[i];
    const score = normalize ? total / n : total;
    if (score >= top.floor) top.push(score, doc);
  }
}

/** Per query token, the max over rows [start, end) and its (lowest) row; x holds rows from `base` on. */
function docMaxima(q: Float32Array, n: number, x: Float32Array, base: number, start: number, end: number, d: number, best: Float64Array, arg: Int32Array): void {
  best.fill(-Infinity);
  arg.fill(-1);
  const n2 = n - (n % 2);
  let j = start;
  for (; j + 4 <= end; j += 4) {
    const b0 = (j - base) * d, b1 = b0 + d, b2 = b1 + d, b3 = b2 + d;
    let i = 0;
    for (; i < n2; i += 2) {
      const a0 = i * d, a1 = a0 + d;
      let s00 = 0, s01 = 0, s02 = 0, s03 = 0, s10 = 0, s11 = 0, s12 = 0, s13 = 0;
      for (let k = 0; k < d; k++) {
        const x0 = q[a0 + k], x1 = q[a1 + k];
        const y0 = x[b0 + k], y1 = x[b1 + k], y2 = x[b2 + k], y3 = x[b3 + k];
        s00 += x0 * y0; s01 += x0 * y1; s02 += x0 * y2; s03 += x0 * y3;
        s10 += x1 * y0; s11 += x1 * y1; s12 += x1 * y2; s13 += x1 * y3;
      }
      let m0 = best[i], m1 = best[i + 1];
      let g0 = arg[i], g1 = arg[i + 1];
      if (s00 > m0) { m0 = s00; g0 = j; }
      if (s01 > m0) { m0 = s01; g0 = j + 1; }
      if (s02 > m0) { m0 = s02; g0 = j + 2; }
      if (s03 > m0) { m0 = s03; g0 = j + 3; }
      if (s10 > m1) { m1 = s10; g1 = j; }
      if (s11 > m1) { m1 = s11; g1 = j + 1; }
      if (s12 > m1) { m1 = s12; g1 = j + 2; }
      if (s13 > m1) { m1 = s13; g1 = j + 3; }
      best[i] = m0; best[i + 1] = m1;
      arg[i] = g0; arg[i + 1] = g1;
    }
    if (i < n) {
      const a0 = i * d;
      let s0 = 0, s1 = 0, s2 = 0, s3 = 0;
      for (let k = 0; k < d; k++) {
        const x0 = q[a0 + k];
        s0 += x0 * x[b0 + k]; s1 += x0 * x[b1 + k]; s2 += x0 * x[b2 + k]; s3 += x0 * x[b3 + k];
      }
      let m0 = best[i];
      let g0 = arg[i];
      if (s0 > m0) { m0 = s0; g0 = j; }
      if (s1 > m0) { m0 = s1; g0 = j + 1; }
      if (s2 > m0) { m0 = s2; g0 = j + 2; }
      if (s3 > m0) { m0 = s3; g0 = j + 3; }
      best[i] = m0;
      arg[i] = g0;
    }
  }
  for (; j < end; j++) {
    const b0 = (j - base) * d;
    for (let i = 0; i < n; i++) {
      const a0 = i * d;
      let s = 0;
      for (let k = 0; k < d; k++) s += q[a0 + k] * x[b0 + k];
      if (s > best[i]) {
        best[i] = s;
        arg[i] = j;
      }
    }
  }
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
