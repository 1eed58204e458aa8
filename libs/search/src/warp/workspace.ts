import { TopK } from '../select';

/**
 * Reusable per-document scratch for warpSegmentSearch, grown to the largest segment seen and
 * left clean after each segment (only the slots a segment touched are reset).
 */
export class WarpWorkspace {
  best = new Float64Array(0);
  acc = new Float64Array(0);
  /** per document: the last query token (i + 1) that reached it */
  tag = new Uint32Array(0);
  /** per document: 1 once any query token reached it */
  reached = new Uint8Array(0);
  /** documents reached by the current query token */
  touched = new Uint32Array(0);
  /** documents reached by any query token */
  candidates = new Uint32Array(0);

  /** Zeroes the first `documents` slots (after a segment's search failed midway). */
  clear(documents: number): void {
    this.acc.fill(0, 0, documents);
    this.tag.fill(0, 0, documents);
    this.reached.fill(0, 0, documents);
  }

  ensure(documents: number): void {
    if (this.best.length >= documents) return;
    this.best = new Float64Array(documents);
    this.acc = new Float64Array(documents);
    this.tag = new Uint32Array(documents);
    this.reached = new Uint8Array(documents);
    this.touched = new Uint32Array(documents);
    this.candidates = new Uint32Array(documents);
  }
}

/** The sum of the query tokens' imputed scores: every candidate's starting score. */
export function imputedBase(imputed: ArrayLike<number>, n: number): number {
  let base = 0;
  for (let i = 0; i < n; i++) base += imputed[i];
  return base;
}

/** A segment's first `topN` of its `nc` candidates by (base + accumulated) / divide; the workspace's per-document state reset for the next query. */
export function drainCandidates(ws: WarpWorkspace, nc: number, base: number, divide: number, topN: number) {
  const { acc, tag, reached, candidates } = ws;
  const top = new TopK(topN, nc);
  for (let k = 0; k < nc; k++) {
    const doc = candidates[k];
    top.push((base + acc[doc]) / divide, doc);
    acc[doc] = 0;
    tag[doc] = 0;
    reached[doc] = 0;
  }
  return top.drain();
}
