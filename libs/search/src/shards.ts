import { kWayMerge, mergeHits } from './merge';
import { xtrAggregateSegment, XtrWorkspace } from './xtr-aggregate';
import type { XtrMerged, XtrSegmentLists } from './xtr-merge';
import { runSteps, type Steps } from './steps';
import type { Hit, SegmentHits } from './types';

/**
 * Merges across shards (issue 10 item 4). A shard is a group of segments served by its own
 * scorers; a sharded search ranks each shard's documents with global figures and merges the
 * shards' answers, and must equal one process searching every segment: document keys are global
 * (docBase over the whole generation), so (score, key) orders every list the same way.
 */

/**
 * The global top-k' list of one query token from the shards' own top-k' lists (each the merge
 * of its segments' lists, best first by score, global key, row): the imputation score m_i (the
 * last score of the global list, 0 when empty) and how many entries of each shard's list are in
 * it (always a prefix). The same cut as xtrMerge over every segment at once.
 */
export function xtrGlobalCut(lists: readonly { scores: ArrayLike<number>; keys: ArrayLike<number>; rows: ArrayLike<number> }[], kPrime: number): { imputed: number; survivors: number[] } {
  const m = kWayMerge(lists.map((l) => ({ scores: l.scores, keys: l.keys, sub: l.rows })), kPrime);
  const survivors = new Array<number>(lists.length).fill(0);
  for (const l of m.list) survivors[l]++;
  const last = m.list.length - 1;
  return { imputed: last >= 0 ? lists[m.list[last]].scores[m.pos[last]] : 0, survivors };
}

/**
 * A shard's XTR top-n under the global cut: `withinShard` (xtrMerge of the shard's segment lists)
 * tells which segment each entry of the shard's surviving prefix (`survivors[i]` entries for query
 * token i) comes from; each segment then aggregates its own surviving entries with the global
 * imputation scores, and the segments' hits are merged (global keys).
 */
export function xtrShardHits(
  lists: readonly XtrSegmentLists[],
  withinShard: XtrMerged,
  imputed: ArrayLike<number>,
  survivors: ArrayLike<number>,
  opts: { topN: number; explain?: boolean; workspace?: XtrWorkspace },
): Hit[] {
  return runSteps(xtrShardHitsSteps(lists, withinShard, imputed, survivors, opts));
}

/** xtrShardHits in steps of one segment (steps.ts): the same hits. */
export function* xtrShardHitsSteps(
  lists: readonly XtrSegmentLists[],
  withinShard: XtrMerged,
  imputed: ArrayLike<number>,
  survivors: ArrayLike<number>,
  opts: { topN: number; explain?: boolean; workspace?: XtrWorkspace },
): Steps<Hit[]> {
  const n = withinShard.n;
  const counts = new Uint32Array(lists.length * n);
  for (let i = 0; i < n; i++) {
    const a = withinShard.offsets[i];
    const keep = survivors[i];
    if (keep > withinShard.offsets[i + 1] - a) throw new RangeError(`xtrShardHits: ${keep} survivors for query token ${i}, the shard's list has ${withinShard.offsets[i + 1] - a}`);
    for (let o = 0; o < keep; o++) counts[withinShard.segments[a + o] * n + i]++;
  }
  const merged: XtrMerged = { ...withinShard, imputed: Float64Array.from(imputed), survivors: counts };
  const workspace = opts.workspace ?? new XtrWorkspace();
  const perSegment: SegmentHits[] = [];
  for (let s = 0; s < lists.length; s++) {
    perSegment.push(xtrAggregateSegment(lists[s], merged, s, { topN: opts.topN, explain: opts.explain, workspace }));
    yield;
  }
  return mergeHits(perSegment, opts.topN);
}

/** The exact top-n of the shards' ranked lists, by (score descending, global key ascending). */
export function mergeShardHits<H extends { score: number; key: number }>(lists: readonly H[][], n: number): H[] {
  const { list, pos } = kWayMerge(lists.map((l) => ({ scores: l.map((h) => h.score), keys: l.map((h) => h.key) })), n);
  return Array.from(list, (l, o) => lists[l][pos[o]]);
}

