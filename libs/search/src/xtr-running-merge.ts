import { compareRanked, mergeIntoHits } from './merge';
import type { Steps } from './steps';
import type { Hit } from './types';
import { XtrWorkspace, xtrAggregateSegment, type XtrAggregateOptions } from './xtr-aggregate';
import type { XtrMerged, XtrSegmentLists } from './xtr-merge';

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
