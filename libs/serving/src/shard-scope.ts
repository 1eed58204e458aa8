import { segmentShard, type CollectionManifest, type SearchMode } from '@lateral/shared';

/*
 * What a shard of a collection serves, as the fan-out over shard queues needs it on both sides
 * (the parent that merges, the child that searches its own segments).
 */

/** One shard of a collection split over `shards` (segmentShard assigns each segment to one). */
export interface ShardScope {
  shard: number;
  shards: number;
}

/**
 * The generation restricted to one shard's segments. Its committedAt is marked with the shard,
 * so the segment cache keeps the shard's id table apart from the whole generation's. An id's
 * live copy is decided within the shard: commits tombstone every superseded copy, so no other
 * shard holds a live copy of it.
 */
export function scopedManifest(manifest: CollectionManifest, scope: ShardScope): CollectionManifest {
  return { ...manifest, committedAt: `${manifest.committedAt}#shard-${scope.shard}-of-${scope.shards}`, segments: manifest.segments.filter((s) => segmentShard(s, scope.shards) === scope.shard) };
}

/** Whether a search mode ranks with BM25 (its statistics gathered over every shard first). */
export const needsBm25 = (m: SearchMode) => m.name === 'bm25' || m.name === 'hybrid';

/** Whether a search mode runs XTR (its top-k' lists merged over every shard first). */
export const needsXtr = (m: SearchMode) => m.name === 'xtr' || (m.name === 'hybrid' && m.base === 'xtr');

/** The XTR mode a search runs (itself, or a hybrid's XTR base), or null. */
export const xtrOf = (m: SearchMode): Extract<SearchMode, { name: 'xtr' }> | null =>
  m.name === 'xtr' ? m : m.name === 'hybrid' && m.base === 'xtr' ? { name: 'xtr', kPrime: m.kPrime, nprobe: m.nprobe, ...(m.tPrime !== undefined ? { tPrime: m.tPrime } : {}) } : null;
