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
});
