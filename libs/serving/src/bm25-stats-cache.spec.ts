import { describe, expect, it } from 'vitest';
import { s3Keys } from '@lateral/shared';
import { serializeBm25Stats } from '@lateral/search';
import { BM25_STATS_RETRY_MS, Bm25StatsCache } from './bm25-stats-cache';

const stats = (documents: number) => ({ documents, totalLength: 3 * documents, terms: Int32Array.from([-4, 9]), df: Uint32Array.from([1, documents]) });

describe('Bm25StatsCache', () => {
  it("keeps the newest generation's statistics, asks again for a missing one only after a while, and names a corrupt or misplaced object", async () => {
    const objects = new Map<string, Uint8Array>();
    const gets: string[] = [];
    let now = 0;
    const corrupt: string[] = [];
    const cache = new Bm25StatsCache({ get: async (k) => (gets.push(k), objects.get(k) ?? null) }, (key, err) => corrupt.push(`${key}: ${err.message}`), () => now);
    objects.set(s3Keys.bm25Stats('t', 'c', 2), serializeBm25Stats(stats(5), 2));
    expect((await cache.get('t', 'c', 2))?.documents).toBe(5);
    expect((await cache.get('t', 'c', 2))?.documents).toBe(5);
    expect(gets).toHaveLength(1);
    // generation 3 has none yet: null, not asked again at once, then found
    expect(await cache.get('t', 'c', 3)).toBeNull();
    objects.set(s3Keys.bm25Stats('t', 'c', 3), serializeBm25Stats(stats(6), 3));
    expect(await cache.get('t', 'c', 3)).toBeNull();
    now += BM25_STATS_RETRY_MS;
    expect((await cache.get('t', 'c', 3))?.documents).toBe(6);
    // an older generation is read, the newest kept
    expect((await cache.get('t', 'c', 2))?.documents).toBe(5);
    const before = gets.length;
    await cache.get('t', 'c', 3);
    expect(gets.length).toBe(before);
    // corrupt, or another generation's object under this key: null, and said
    const bad = serializeBm25Stats(stats(7), 4);
    bad[20] ^= 1;
    objects.set(s3Keys.bm25Stats('t', 'c', 4), bad);
    expect(await cache.get('t', 'c', 4)).toBeNull();
    objects.set(s3Keys.bm25Stats('t', 'c', 5), serializeBm25Stats(stats(7), 9));
    expect(await cache.get('t', 'c', 5)).toBeNull();
    expect(corrupt).toEqual([expect.stringMatching(/g0000000004\.lb25: .*checksum/), expect.stringMatching(/g0000000005\.lb25: holds generation 9/)]);
  });
});
