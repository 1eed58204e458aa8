import type { Hit, SegmentHits } from './types';

/**
 * One ranked list for a k-way merge: entries best first by (score descending, key ascending,
 * sub ascending). `key` is the global document key (docBase + doc); `sub` an optional further
 * tie-break (XTR: the token row). Lists may be subarrays of larger buffers.
 */
export interface RankedList {
  scores: ArrayLike<number>;
  keys: ArrayLike<number>;
  sub?: ArrayLike<number>;
}

export interface MergedPositions {
  /** which input list each output entry came from */
  list: Uint32Array;
  /** its position in that list */
  pos: Uint32Array;
}

/**
 * The total order of every result list: a before b (negative) when a's score is higher, then
 * its key lower, then its sub lower. NaN scores rank last. Exported so callers that re-sort
 * (e.g. after hybrid fusion) keep the same tie-breaks.
 */
export function compareRanked(sa: number, ka: number, sb: number, kb: number, subA = 0, subB = 0): number {
  if (sa !== sb) {
    if (sa !== sa) return sb !== sb ? 0 : 1;
    if (sb !== sb) return -1;
    return sa > sb ? -1 : 1;
  }
  if (ka !== kb) return ka < kb ? -1 : 1;
  return subA - subB;
}

/**
 * Exact top-n merge of sorted lists (k-way, binary heap over the lists' heads on typed arrays):
 * O(n log L) for L lists, touching at most n + L entries, so merging 100 segments' k' = 40,000
 * lists costs what the output costs. Ties beyond (score, key, sub) go to the lower list index,
 * so the result is deterministic. Throws when a list is not in that order (checked on the
 * entries it visits).
 */
export function kWayMerge(lists: readonly RankedList[], n: number): MergedPositions {
  if (!Number.isInteger(n) || n < 0) throw new RangeError(`kWayMerge: n must be an integer >= 0, got ${n}`);
  const L = lists.length;
  let total = 0;
  for (let l = 0; l < L; l++) {
    const { scores, keys, sub } = lists[l];
    if (keys.length !== scores.length || (sub && sub.length !== scores.length)) {
      throw new RangeError(`kWayMerge: list ${l} has ${scores.length} scores, ${keys.length} keys${sub ? ` and ${sub.length} subs` : ''}; all must match`);
    }
    total += scores.length;
  }
  const out = Math.min(n, total);
  const list = new Uint32Array(out);
  const pos = new Uint32Array(out);
  if (out === 0) return { list, pos };
  // heap of list indices, best head at the root
  const heap = new Uint32Array(L);
  const head = new Uint32Array(L);
  let size = 0;
  const better = (a: number, b: number): boolean => {
    const la = lists[a], lb = lists[b];
    const c = compareRanked(
      la.scores[head[a]], la.keys[head[a]], lb.scores[head[b]], lb.keys[head[b]],
      la.sub ? la.sub[head[a]] : 0, lb.sub ? lb.sub[head[b]] : 0,
    );
    return c < 0 || (c === 0 && a < b);
  };
  const down = (p: number) => {
    const x = heap[p];
    for (;;) {
      const l = 2 * p + 1;
      if (l >= size) break;
      let c = l;
      if (l + 1 < size && better(heap[l + 1], heap[l])) c = l + 1;
      if (!better(heap[c], x)) break;
      heap[p] = heap[c];
      p = c;
    }
    heap[p] = x;
  };
  for (let l = 0; l < L; l++) if (lists[l].scores.length > 0) heap[size++] = l;
  for (let p = (size >> 1) - 1; p >= 0; p--) down(p);
  for (let o = 0; o < out; o++) {
    const l = heap[0];
    list[o] = l;
    pos[o] = head[l];
    const h = ++head[l];
    const cur = lists[l];
    if (h < cur.scores.length) {
      const c = compareRanked(cur.scores[h - 1], cur.keys[h - 1], cur.scores[h], cur.keys[h], cur.sub ? cur.sub[h - 1] : 0, cur.sub ? cur.sub[h] : 0);
      if (c > 0) throw new RangeError(`kWayMerge: list ${l} is not in (score desc, key asc) order at entries ${h - 1}, ${h}`);
    } else {
      heap[0] = heap[--size];
    }
    if (size > 0) down(0);
  }
  return { list, pos };
}

/** Global document keys of one segment's hits: docBase + doc. */
export function hitKeys(hits: SegmentHits): Float64Array {
  const keys = new Float64Array(hits.docs.length);
  for (let i = 0; i < keys.length; i++) keys[i] = hits.docBase + hits.docs[i];
  return keys;
}

/**
 * Global top-n from per-segment top-n lists (each at least n long where the segment has that many
 * hits), ordered by score descending then global key ascending. `segment` in each hit is the
 * index of its list in `perSegment`.
 */
export function mergeHits(perSegment: readonly SegmentHits[], n: number): Hit[] {
  const ranked = perSegment.map((h, s) => {
    if (h.docs.length !== h.scores.length) throw new RangeError(`mergeHits: segment ${s} has ${h.docs.length} docs but ${h.scores.length} scores`);
    if (h.explain && h.explain.length !== h.docs.length) throw new RangeError(`mergeHits: segment ${s} has ${h.docs.length} docs but ${h.explain.length} explanations`);
    return { scores: h.scores, keys: hitKeys(h) };
  });
  const { list, pos } = kWayMerge(ranked, n);
  const out: Hit[] = [];
  for (let o = 0; o < list.length; o++) {
    const h = perSegment[list[o]];
    const p = pos[o];
    const hit: Hit = { segment: list[o], doc: h.docs[p], key: h.docBase + h.docs[p], score: h.scores[p] };
    if (h.explain) hit.explain = h.explain[p];
    out.push(hit);
  }
  return out;
}

/** Drains a TopK of local documents into SegmentHits. */
export function segmentHits(docBase: number, drained: { scores: Float64Array; ids: Uint32Array }): SegmentHits {
  return { docBase, docs: drained.ids, scores: drained.scores };
}

/**
 * A running top-n over segments visited one at a time: `running` (the top-n so far, best first)
 * merged with one more segment's hits, cut at n. Folding every segment in order through it gives
 * exactly `mergeHits` over all of them (keys are unique across segments, so the order is total),
 * while holding n hits instead of n per segment. `segment` is stored in each new hit.
 */
export function mergeIntoHits(running: readonly Hit[], next: SegmentHits, segment: number, n: number): Hit[] {
  if (next.docs.length !== next.scores.length) throw new RangeError(`mergeIntoHits: segment ${segment} has ${next.docs.length} docs but ${next.scores.length} scores`);
  if (next.explain && next.explain.length !== next.docs.length) throw new RangeError(`mergeIntoHits: segment ${segment} has ${next.docs.length} docs but ${next.explain.length} explanations`);
  const out: Hit[] = [];
  let a = 0;
  let b = 0;
  const B = next.docs.length;
  while (out.length < n && (a < running.length || b < B)) {
    let takeA = b >= B;
    if (!takeA && a < running.length) {
      const r = running[a];
      takeA = compareRanked(r.score, r.key, next.scores[b], next.docBase + next.docs[b]) <= 0;
    }
    if (takeA) {
      out.push(running[a++]);
    } else {
      if (b > 0 && compareRanked(next.scores[b - 1], next.docs[b - 1], next.scores[b], next.docs[b]) > 0) {
        throw new RangeError(`mergeIntoHits: segment ${segment}'s hits are not in (score desc, doc asc) order at ${b - 1}, ${b}`);
      }
      const hit: Hit = { segment, doc: next.docs[b], key: next.docBase + next.docs[b], score: next.scores[b] };
      if (next.explain) hit.explain = next.explain[b];
      out.push(hit);
      b++;
    }
  }
  return out;
}
