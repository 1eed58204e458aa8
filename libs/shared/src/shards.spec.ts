import { describe, expect, it } from 'vitest';
import { assignShard, scorerShards, segmentShard, shardQueueName, shardWorkKey, shardWorkPrefix } from './shards';
import { CreateCollectionSchema, type SegmentRef } from './collection';

const ref = (batchId: string, documents: number, extra: Partial<SegmentRef> = {}) => ({ batchId, documents, ...extra });

describe('segmentShard', () => {
  it('is the recorded shard, shard 0 of one, or a stable hash of the batch id', () => {
    expect(segmentShard(ref('b', 1, { shard: 1 }), 2)).toBe(1);
    expect(segmentShard(ref('b', 1, { shard: 3 }), 1)).toBe(0);
    const h = segmentShard(ref('ing-1-00007', 1), 4);
    expect(h).toBeGreaterThanOrEqual(0);
    expect(h).toBeLessThan(4);
    expect(segmentShard(ref('ing-1-00007', 1), 4)).toBe(h);
    // A recorded shard outside the count (never written) falls back to the hash.
    expect(segmentShard(ref('ing-1-00007', 1, { shard: 9 }), 4)).toBe(h);
    // The hash spreads batch ids over the shards.
    const counts = [0, 0, 0, 0];
    for (let i = 0; i < 400; i++) counts[segmentShard(ref(`ing-x-${String(i).padStart(5, '0')}`, 1), 4)]++;
    for (const c of counts) expect(c).toBeGreaterThan(60);
  });
});

describe('assignShard', () => {
  it('puts a new segment in the shard holding the fewest live documents, the lowest on a tie', () => {
    expect(assignShard([], 3)).toBe(0);
    expect(assignShard([ref('a', 10, { shard: 0 })], 3)).toBe(1);
    expect(assignShard([ref('a', 10, { shard: 0 }), ref('b', 10, { shard: 1 })], 3)).toBe(2);
    expect(assignShard([ref('a', 10, { shard: 0 }), ref('b', 10, { shard: 1 }), ref('c', 4, { shard: 2 })], 3)).toBe(2);
    // Tombstoned documents do not count.
    expect(assignShard([ref('a', 10, { shard: 0, tombstones: [0, 1, 2, 3, 4, 5, 6] }), ref('b', 5, { shard: 1 })], 2)).toBe(0);
    expect(assignShard([ref('a', 10, { shard: 0 })], 1)).toBe(0);
  });

  it('balances a stream of equal batches round-robin', () => {
    const segs: ReturnType<typeof ref>[] = [];
    for (let i = 0; i < 9; i++) segs.push(ref(`b${i}`, 20, { shard: assignShard(segs, 3) }));
    expect(segs.map((s) => s.shard)).toEqual([0, 1, 2, 0, 1, 2, 0, 1, 2]);
  });
});

describe('scorerShards (SCORER_SHARDS, SCORER_SHARD_FROM_HOSTNAME)', () => {
  it('reads all, none, lists and ranges', () => {
    expect(scorerShards('all', 4, false)).toEqual([0, 1, 2, 3]);
    expect(scorerShards('none', 4, false)).toEqual([]);
    expect(scorerShards('', 4, false)).toEqual([]);
    expect(scorerShards('1, 0,1', 4, false)).toEqual([0, 1]);
    expect(scorerShards('0-2', 8, false)).toEqual([0, 1, 2]);
  });

  it('names the setting and the limit on a bad value', () => {
    expect(() => scorerShards('4', 4, false)).toThrow(/SCORER_SHARDS: '4' is outside 0..3 \(COLLECTION_MAX_SHARDS = 4\)/);
    expect(() => scorerShards('a', 4, false)).toThrow(/SCORER_SHARDS: 'a' is not a shard number/);
    expect(() => scorerShards('3-1', 4, false)).toThrow(/SCORER_SHARDS/);
  });

  it('takes the StatefulSet ordinal from the host name', () => {
    expect(scorerShards('all', 4, true, 'lateral-scorer-2')).toEqual([2]);
    expect(scorerShards('all', 4, true, 'lateral-scorer-6')).toEqual([2]);
    expect(() => scorerShards('all', 4, true, 'scorer')).toThrow(/SCORER_SHARD_FROM_HOSTNAME/);
  });
});

describe('shard names and the collection field', () => {
  it('names queues and work objects', () => {
    expect(shardQueueName(3)).toBe('shard-3');
    expect(shardWorkKey('search', 't1', 'sr-1', 'r2-s0.json')).toBe('tenants/t1/search/sr-1/shards/r2-s0.json');
    expect(() => shardWorkKey('search', 't1', 'sr-1', '../x')).toThrow();
    // every working object of a job is under one prefix, removed once the parent merged them
    expect(shardWorkPrefix('search', 't1', 'sr-1')).toBe('tenants/t1/search/sr-1/shards/');
    expect(shardWorkKey('rerank', 't1', 'rr-1', 'input-r2.json').startsWith(shardWorkPrefix('rerank', 't1', 'rr-1'))).toBe(true);
    expect(() => shardWorkPrefix('search', 't1', '../x')).toThrow();
  });

  it('validates shards at creation: an integer from 1 to 64', () => {
    expect(CreateCollectionSchema.parse({ id: 'c', shards: 4 }).shards).toBe(4);
    expect(CreateCollectionSchema.parse({ id: 'c' }).shards).toBeUndefined();
    for (const bad of [0, 65, 1.5, '2']) {
      const r = CreateCollectionSchema.safeParse({ id: 'c', shards: bad });
      expect(r.success).toBe(false);
      expect(r.error!.issues[0].path).toEqual(['shards']);
    }
  });
});
