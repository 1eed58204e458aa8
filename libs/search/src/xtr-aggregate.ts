import { mulberry32 } from '@lateral/shared';
import { TopK } from './select';
import { assertTopN, type HitExplain, type SegmentHits } from './types';
import { XTR_MAX_QUERY_TOKENS, type XtrMerged, type XtrSegmentLists } from './xtr-merge';

/** XTR's aggregation (step 4 of xtr.ts): the direct-addressed accumulator, a segment's candidates and hits, and the accumulator's bench. */

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
