import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LeaseBusyError, withRedisLease } from './redis-lease';
import { startRealRedis } from './testing/real-redis';

/** The merge lease (one merge per collection at a time) against a real redis-server. */
describe('withRedisLease (real Redis)', () => {
  let redis: Redis;
  let stop: (() => Promise<void>) | undefined;
  beforeAll(async () => {
    ({ redis, stop } = await startRealRedis('lateral-lease-'));
  }, 60_000);
  afterAll(async () => {
    await stop?.();
  });

  it('runs holders of one key one at a time (the second waits), other keys at once, and renews a lease held past its ttl', async () => {
    const events: string[] = [];
    const hold = (key: string, name: string, ms: number) =>
      withRedisLease(
        redis,
        key,
        async () => {
          events.push(`${name}+`);
          await new Promise((r) => setTimeout(r, ms));
          events.push(`${name}-`);
          return name;
        },
        { ttlMs: 600, pollMs: 10 },
      );
    // a holds 1,500 ms, well past the 600 ms ttl: renewed, so b (same key) must not enter before a leaves; c (other key) runs meanwhile.
    const a = hold('lease:x', 'a', 1500);
    await new Promise((r) => setTimeout(r, 20));
    const [ra, rb, rc] = await Promise.all([a, hold('lease:x', 'b', 10), hold('lease:y', 'c', 10)]);
    expect([ra, rb, rc]).toEqual(['a', 'b', 'c']);
    expect(events.indexOf('b+')).toBeGreaterThan(events.indexOf('a-'));
    expect(events.indexOf('c-')).toBeLessThan(events.indexOf('a-'));
    expect(await redis.exists('lease:x', 'lease:y')).toBe(0); // released
  });

  it('a dead holder (a lease nobody renews) frees the key after its ttl; a failing fn releases it', async () => {
    await redis.set('lease:z', 'dead-worker', 'PX', 200);
    const t0 = Date.now();
    expect(await withRedisLease(redis, 'lease:z', async () => Date.now() - t0, { pollMs: 10 })).toBeGreaterThanOrEqual(150);
    await expect(withRedisLease(redis, 'lease:z', async () => Promise.reject(new Error('merge failed')))).rejects.toThrow('merge failed');
    expect(await redis.exists('lease:z')).toBe(0);
  });

  it('gives up after maxWaitMs with LeaseBusyError, fn not run, the holder undisturbed; within the wait it gets the lease', async () => {
    let ran = false;
    let release!: () => void;
    const holder = withRedisLease(redis, 'lease:w', () => new Promise<string>((r) => (release = () => r('holder'))), { ttlMs: 500, pollMs: 10 });
    await new Promise((r) => setTimeout(r, 30));
    const t0 = Date.now();
    const err = await withRedisLease(redis, 'lease:w', async () => (ran = true), { pollMs: 10, maxWaitMs: 150 }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(LeaseBusyError);
    expect((err as LeaseBusyError).key).toBe('lease:w');
    expect(Date.now() - t0).toBeGreaterThanOrEqual(150);
    expect(ran).toBe(false);
    expect(await redis.exists('lease:w')).toBe(1); // still the holder's
    // a waiter with room in its wait enters once the holder leaves
    const waiter = withRedisLease(redis, 'lease:w', async () => 'waiter', { pollMs: 10, maxWaitMs: 5_000 });
    await new Promise((r) => setTimeout(r, 50));
    release();
    expect(await Promise.all([holder, waiter])).toEqual(['holder', 'waiter']);
  });
});
