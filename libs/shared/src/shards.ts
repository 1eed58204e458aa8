import { z } from 'zod';
import { assertResourceId, resourceId } from './ids';

/**
 * Shards (issue 10 item 4): a collection is split into `shards` groups of segments, fixed at
 * creation. Each segment belongs to one shard, recorded in its SegmentRef when it is committed;
 * shard i of every collection is served through the BullMQ queue `shard-<i>` by the scorer
 * processes configured to hold it (SCORER_SHARDS, or a StatefulSet ordinal). A re-rank or search
 * of a collection with more than one shard fans out as a flow: one child job per shard, the
 * parent (on the rerank or search queue) merges. With one shard nothing fans out.
 */

/**
 * The fields of a SegmentRef (collection.ts) that shard assignment reads. Spelled out here rather
 * than imported: collection.ts takes MAX_SHARDS from this file, and the two would import each other.
 */
export interface ShardedSegment {
  batchId: string;
  shard?: number;
  documents: number;
  tombstones?: number[];
}

/** Highest `shards` a collection may be created with (also bounded by COLLECTION_MAX_SHARDS). */
export const MAX_SHARDS = 64;

/** The BullMQ queue of shard `i` (of every collection). */
export const shardQueueName = (i: number): string => `shard-${i}`;

/** A collection's shard count (records written before shards existed have one). */
export const collectionShards = (c: { shards?: number }): number => c.shards ?? 1;

/** FNV-1a of a string, for the fallback assignment of segments without a recorded shard. */
function fnv1a(s: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < s.length; i++) {
    h ^= s.charCodeAt(i);
    h = Math.imul(h, 0x01000193) >>> 0;
  }
  return h >>> 0;
}

/**
 * The shard of a segment in a collection of `shards` shards: the one recorded at commit, or (a
 * segment committed before the collection had a recorded shard) a hash of its batch id. A pure
 * function of the SegmentRef, so every process agrees on it without talking to the others.
 */
export function segmentShard(ref: Pick<ShardedSegment, 'batchId' | 'shard'>, shards: number): number {
  if (shards <= 1) return 0;
  if (ref.shard !== undefined && ref.shard < shards) return ref.shard;
  return fnv1a(ref.batchId) % shards;
}

/**
 * The positions in `segments` of those at `codecVersion`, grouped by shard (segmentShard): the
 * merge policy's segment bound and the ingest back-pressure count the same groups.
 */
export function segmentsByShard(segments: readonly (Pick<ShardedSegment, 'batchId' | 'shard'> & { codecVersion: number })[], codecVersion: number, shards: number): Map<number, number[]> {
  const out = new Map<number, number[]>();
  segments.forEach((s, i) => {
    if (s.codecVersion !== codecVersion) return;
    const sh = segmentShard(s, shards);
    (out.get(sh) ?? out.set(sh, []).get(sh)!).push(i);
  });
  return out;
}

/**
 * The shard a newly committed segment goes to: the one holding the fewest live documents in
 * `segments` (the generation it joins), the lowest index on a tie. Deterministic: a replayed
 * commit on the same generation picks the same shard.
 */
export function assignShard(segments: readonly ShardedSegment[], shards: number): number {
  if (shards <= 1) return 0;
  const load = new Array<number>(shards).fill(0);
  for (const s of segments) load[segmentShard(s, shards)] += s.documents - (s.tombstones?.length ?? 0);
  let best = 0;
  for (let i = 1; i < shards; i++) if (load[i] < load[best]) best = i;
  return best;
}

/**
 * The shards a scorer process holds, from SCORER_SHARDS ('all', '' / 'none', or a comma list such
 * as '0,1' with ranges '0-3') and, with SCORER_SHARD_FROM_HOSTNAME, the ordinal at the end of the
 * host name (a StatefulSet pod `lateral-scorer-2` holds shard 2, modulo `max`). Throws a message
 * naming the setting on a bad value.
 */
export function scorerShards(setting: string, max: number, fromHostname: boolean, hostname = ''): number[] {
  if (fromHostname) {
    const m = /-(\d+)$/.exec(hostname);
    if (!m) throw new RangeError(`SCORER_SHARD_FROM_HOSTNAME: host name '${hostname}' does not end in -<ordinal> (a StatefulSet pod name)`);
    return [Number(m[1]) % max];
  }
  const s = setting.trim().toLowerCase();
  if (s === 'all') return Array.from({ length: max }, (_, i) => i);
  if (s === '' || s === 'none') return [];
  const out = new Set<number>();
  for (const part of s.split(',').map((x) => x.trim()).filter(Boolean)) {
    const m = /^(\d+)(?:-(\d+))?$/.exec(part);
    if (!m) throw new RangeError(`SCORER_SHARDS: '${part}' is not a shard number or range (e.g. 0,1 or 0-3)`);
    const a = Number(m[1]);
    const b = m[2] === undefined ? a : Number(m[2]);
    if (b < a || b >= max) throw new RangeError(`SCORER_SHARDS: '${part}' is outside 0..${max - 1} (COLLECTION_MAX_SHARDS = ${max})`);
    for (let i = a; i <= b; i++) out.add(i);
  }
  return [...out].sort((x, y) => x - y);
}

const tenantId = resourceId('tenantId');
const collectionId = resourceId('collectionId');

/**
 * A child job of a sharded re-rank or search, on queue `shard-<shard>`: which parent request
 * (its stored request and the generation the parent pinned), which round, and where its input
 * and its partial result live in S3.
 */
export const ShardJobPayloadSchema = z.object({
  kind: z.enum(['rerank', 'search']),
  tenantId,
  collectionId,
  /** The parent's id (rerankId or searchId). */
  parentId: z.string().min(1).max(256),
  /** 1: statistics (BM25 df, XTR top-k' lists); 2: scores / hits; 3: a search's second stage (re-rank of the first stage's hits). */
  round: z.number().int().min(1).max(3),
  shard: z.number().int().min(0).max(MAX_SHARDS - 1),
  shards: z.number().int().min(2).max(MAX_SHARDS),
  generation: z.number().int().nonnegative(),
  /** The request as the parent expanded it, or the round's input (JSON in S3). */
  inputKey: z.string().min(1).max(1024),
  /** Where the child writes its partial result (JSON in S3). */
  outputKey: z.string().min(1).max(1024),
});
export type ShardJobPayload = z.infer<typeof ShardJobPayloadSchema>;

/** What a shard child returns (BullMQ return value; the partial itself is in S3). */
export interface ShardJobResult {
  round: number;
  shard: number;
  outputKey: string;
}

/** S3 key of a sharded job's working object (`name`: e.g. `input-r2.json`, `r2-s0.json`), beside the request and its result. */
export function shardWorkKey(kind: 'rerank' | 'search', tenantId: string, parentId: string, name: string): string {
  if (!/^[A-Za-z0-9_.-]+$/.test(name)) throw new RangeError(`shard work object name '${name}'`);
  return `${shardWorkPrefix(kind, tenantId, parentId)}${name}`;
}

/** The S3 prefix of every working object of one sharded job (round inputs, the shards' partial results): removed once the parent merged them. */
export function shardWorkPrefix(kind: 'rerank' | 'search', tenantId: string, parentId: string): string {
  return `tenants/${assertResourceId('tenant id', tenantId)}/${kind}/${assertResourceId('job id', parentId)}/shards/`;
}
