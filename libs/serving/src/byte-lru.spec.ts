import { describe, expect, it } from 'vitest';
import { ByteLru } from './byte-lru';

describe('ByteLru', () => {
  const load = (bytes: number, value = bytes) => async () => ({ value, bytes });

  it('keeps at most maxBytes, evicting the least recently used, and counts hits, misses and evictions', async () => {
    const lru = new ByteLru<number>(100);
    await lru.get('a', load(40));
    await lru.get('b', load(40));
    await lru.get('a', load(40)); // a is now the most recently used
    await lru.get('c', load(40)); // 120 > 100: b goes, not a
    expect(lru.keys()).toEqual(['a', 'c']);
    expect(lru.stats()).toEqual({ hits: 1, misses: 3, hitRatio: 0.25, bytes: 80, maxBytes: 100, entries: 2, evictions: 1 });
    await lru.get('d', load(90)); // a and c both go
    expect(lru.keys()).toEqual(['d']);
    expect(lru.stats().bytes).toBe(90);
    expect(lru.stats().evictions).toBe(3);
  });

  it('a value larger than the bound is returned but not kept; concurrent gets share one load; a failed load is not kept', async () => {
    const lru = new ByteLru<number>(10);
    await expect(lru.get('big', load(11, 7))).resolves.toBe(7);
    expect(lru.keys()).toEqual([]);
    expect(lru.stats().bytes).toBe(0);
    let loads = 0;
    const slow = async () => {
      loads++;
      await new Promise((r) => setTimeout(r, 5));
      return { value: 1, bytes: 1 };
    };
    await Promise.all([lru.get('x', slow), lru.get('x', slow), lru.get('x', slow)]);
    expect(loads).toBe(1);
    await expect(lru.get('bad', () => Promise.reject(new Error('boom')))).rejects.toThrow('boom');
    expect(lru.has('bad')).toBe(false);
    await expect(lru.get('bad', load(2, 5))).resolves.toBe(5);
  });

  it('touch: the value, moved to the recent end only when placed at least half the entries ago (so never among the evicted first); no lookup counted; undefined for a missing or loading key', async () => {
    const lru = new ByteLru<number>(100);
    for (const k of ['a', 'b', 'c', 'd']) lru.keep(k, k.charCodeAt(0), 10);
    // a: 3 placements after its own (b, c, d), >= 4 / 2: moved to the end
    expect(lru.touch('a')).toBe(97);
    expect(lru.keys()).toEqual(['b', 'c', 'd', 'a']);
    // d: 1 placement after its own (a): stays where it is, in the recent half
    expect(lru.touch('d')).toBe(100);
    expect(lru.keys()).toEqual(['b', 'c', 'd', 'a']);
    // c: 2 placements after its own (d, a): moved
    expect(lru.touch('c')).toBe(99);
    expect(lru.keys()).toEqual(['b', 'd', 'a', 'c']);
    expect(lru.touch('zz')).toBeUndefined();
    let release: () => void = () => {};
    const loading = lru.get('e', () => new Promise((r) => (release = () => r({ value: 5, bytes: 10 }))));
    expect(lru.touch('e')).toBeUndefined();
    release();
    await loading;
    expect(lru.stats()).toMatchObject({ hits: 0, misses: 1, entries: 5 });
    // eviction takes the front of the order first: b (d, touched in the recent half, was not moved but is not first)
    lru.keep('f', 6, 60);
    expect(lru.keys()).toEqual(['d', 'a', 'c', 'e', 'f']);
    // the touched keys moved behind d (each had >= 2 placements after its own): d goes next
    for (const k of ['a', 'c', 'e', 'f']) expect(lru.touch(k)).toBeDefined();
    lru.keep('g', 7, 10);
    expect(lru.keys()).toEqual(['a', 'c', 'e', 'f', 'g']);
  });
});
