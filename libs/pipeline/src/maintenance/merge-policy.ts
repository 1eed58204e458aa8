import { MAX_SHARDS, segmentShard, segmentsByShard, type SegmentRef } from '@lateral/shared';

/** Settings of the tiered merge policy (MERGE_FACTOR, MERGE_DELETED_FRACTION, MERGE_FLOOR_DOCUMENTS, MERGE_MAX_DOCUMENTS, MERGE_MAX_BYTES). */
export interface MergePolicySettings {
  /** Segments of one tier merged at once, and the tier's growth factor (Lucene's mergeFactor / segmentsPerTier). */
  factor: number;
  /** A segment whose tombstoned fraction of documents reaches this is rewritten (with its tier's neighbours when they are below the factor). */
  deletedFraction: number;
  /** Segments smaller than this (documents) all share the lowest tier. */
  floorDocuments: number;
  /** Segments at or above this size (live documents) are never merged with others (only rewritten for deletes). */
  maxDocuments: number;
  /**
   * Cap on a merge's output in bytes of coded segment (Lucene's maximum merged segment size): a
   * merge takes only as many of its tier's segments as fit (their live share of `bytes`), and a
   * segment that alone reaches it is never merged with others (only rewritten for deletes).
   */
  maxBytes: number;
  /**
   * Bound on the segments a search visits per shard (0 or absent: none). A WARP search issues about
   * one ranged read per probed list per segment, so its reads per query grow with the segment count,
   * and a byte cap alone makes that count grow linearly with the collection. When the tiered rules
   * have nothing to do and a shard holds more than this many segments, its smallest merge together,
   * as many as bring the count back to the bound (two at least), past `maxBytes` and
   * `maxDocuments` up to `searchMaxBytes`: segments grow with the collection instead of their
   * count. Set for collections with a WARP search layout (MERGE_WARP_MAX_SEGMENTS).
   */
  maxSegments?: number;
  /** Cap on the output of a merge made for `maxSegments` (coded segment bytes; a segment's offsets are u32). Default maxBytes x 4. */
  searchMaxBytes?: number;
}

export const DEFAULT_MERGE_POLICY: MergePolicySettings = { factor: 10, deletedFraction: 0.3, floorDocuments: 256, maxDocuments: 1_000_000, maxBytes: 256 * 2 ** 20 };

/** The segment bound given to collections with a WARP search layout by default (MERGE_WARP_MAX_SEGMENTS). */
export const DEFAULT_WARP_MAX_SEGMENTS = 12;
/** Default cap of a merge made for that bound (MERGE_WARP_MAX_BYTES): 512 MiB of coded segment (~6.7M tokens at 80 B). */
export const DEFAULT_WARP_MAX_BYTES = 512 * 2 ** 20;

/** One merge: the segments it rewrites (positions in the generation, ascending) and why. */
export interface MergeSpec {
  /** Positions in the generation's segment list, ascending. */
  segments: number[];
  reason: 'tier' | 'deletes' | 'segments';
  /** The tier's number (0 = below floorDocuments). */
  tier: number;
}

const live = (s: SegmentRef) => s.documents - (s.tombstones?.length ?? 0);
/** The coded bytes of a segment's live documents (its bytes in proportion): what a merge writes of it. */
const liveBytes = (s: SegmentRef) => (s.documents > 0 ? (s.bytes * live(s)) / s.documents : 0);

/** Tier of a segment by its live size: 0 below the floor, then one tier per factor. */
export function segmentTier(liveDocuments: number, p: MergePolicySettings): number {
  if (liveDocuments < p.floorDocuments) return 0;
  return 1 + Math.floor(Math.log(liveDocuments / p.floorDocuments) / Math.log(p.factor));
}

/**
 * The tiered merge policy, in the spirit of Lucene's: segments of `codecVersion` (others are left
 * for their re-compression) are grouped by size tier; a tier holding at least `factor` segments is
 * merged, its `factor` smallest at once; a segment whose deleted fraction reaches `deletedFraction`
 * is rewritten, together with the other segments of its tier (fewer than `factor` of them). Whole
 * dead segments are merged too (they vanish). A merge's output is capped at `maxBytes` (live
 * bytes of its inputs): a tier merge takes the longest run of its smallest that fits (two at
 * least), a deletes rewrite its deleted segments first. One merge at most, the lowest tier first (the
 * cheapest, and the one ingests fill up); null when nothing needs merging. Pure: same input,
 * same answer, so a merge job can recompute it on the generation it commits on. In a collection of
 * several `shards`, tiers are per shard: the segments of one merge all belong to one shard.
 */
export function chooseMerge(segments: readonly SegmentRef[], codecVersion: number, p: MergePolicySettings = DEFAULT_MERGE_POLICY, shards = 1): MergeSpec | null {
  if (!(p.factor >= 2)) throw new RangeError(`merge factor must be at least 2, got ${p.factor}`);
  // Tiers per shard: a merge never mixes segments of two shards (its output stays in theirs).
  const tiers = new Map<number, number[]>();
  segments.forEach((s, i) => {
    if (s.codecVersion !== codecVersion) return;
    const n = live(s);
    if ((n >= p.maxDocuments || liveBytes(s) >= p.maxBytes) && !deleted(s, p)) return;
    const t = segmentTier(n, p) * MAX_SHARDS + segmentShard(s, shards);
    (tiers.get(t) ?? tiers.set(t, []).get(t)!).push(i);
  });
  const bySize = (a: number, b: number) => live(segments[a]) - live(segments[b]) || a - b;
  for (const key of [...tiers.keys()].sort((a, b) => a - b)) {
    const t = Math.floor(key / MAX_SHARDS);
    const members = tiers.get(key)!;
    if (members.length >= p.factor) {
      // The factor smallest (by live documents, then position: deterministic), as many as fit in maxBytes.
      const chosen = fitting(segments, [...members].sort((a, b) => live(segments[a]) - live(segments[b]) || a - b).slice(0, p.factor), p.maxBytes);
      if (chosen.length >= 2) return { segments: chosen.sort((a, b) => a - b), reason: 'tier', tier: t };
    }
    if (members.some((i) => deleted(segments[i], p))) {
      // The deleted ones first (a deleted segment is rewritten even alone), then the rest while they fit.
      const order = [...members].sort((a, b) => Number(deleted(segments[b], p)) - Number(deleted(segments[a], p)) || live(segments[a]) - live(segments[b]) || a - b);
      return { segments: fitting(segments, order, p.maxBytes, 1).sort((a, b) => a - b), reason: 'deletes', tier: t };
    }
  }
  if (p.maxSegments && p.maxSegments >= 1) {
    // The segment bound, per shard: over it, the lowest tier holding two segments or more merges
    // before it is full (its smallest, up to `factor` of them, within searchMaxBytes). Each document
    // is still rewritten about once per tier; only the tiers' fill is capped.
    const cap = p.searchMaxBytes ?? p.maxBytes * 4;
    const perShard = segmentsByShard(segments, codecVersion, shards);
    for (const sh of [...perShard.keys()].sort((a, b) => a - b)) {
      const members = perShard.get(sh)!;
      if (members.length <= p.maxSegments) continue;
      const byTier = new Map<number, number[]>();
      for (const i of members) {
        const t = segmentTier(live(segments[i]), p);
        (byTier.get(t) ?? byTier.set(t, []).get(t)!).push(i);
      }
      for (const t of [...byTier.keys()].sort((a, b) => a - b)) {
        const chosen = fitting(segments, byTier.get(t)!.sort(bySize).slice(0, p.factor), cap);
        if (chosen.length >= 2) return { segments: chosen.sort((a, b) => a - b), reason: 'segments', tier: t };
      }
    }
  }
  return null;
}

/** The longest prefix of `order` whose live bytes add up to at most `maxBytes` (at least `min` of them). */
function fitting(segments: readonly SegmentRef[], order: number[], maxBytes: number, min = 0): number[] {
  let sum = 0;
  let k = 0;
  while (k < order.length && (k < min || sum + liveBytes(segments[order[k]]) <= maxBytes)) sum += liveBytes(segments[order[k++]]);
  return order.slice(0, k);
}

function deleted(s: SegmentRef, p: MergePolicySettings): boolean {
  return s.documents > 0 && (s.tombstones?.length ?? 0) / s.documents >= p.deletedFraction;
}
