import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { INGEST_BACKLOG_MAX_AGE_MS, IngestBacklogRepository } from './ingest-backlog.repository';
import { startRealRedis } from './testing/real-redis';

/** Ingest back-pressure's batches in flight (issue 32) against a real redis-server: admission, removal, and the age after which a lost batch stops counting. */
describe('IngestBacklogRepository (real Redis)', () => {
  let redis: Redis;
  let stop: (() => Promise<void>) | undefined;
  beforeAll(async () => {
    ({ redis, stop } = await startRealRedis('lateral-backlog-'));
  }, 60_000);
  afterAll(async () => {
    await stop?.();
  });

  it('admits within committed + in flight <= limit, lets a request in alone when nothing is committed or in flight, and frees room as batches are done', async () => {
    const b = new IngestBacklogRepository(redis, 'bk1');
    const t0 = 1_000_000;
    // nothing committed, nothing in flight: a request larger than the limit is let in alone
    expect(await b.admit('t', 'c', ['a1', 'a2', 'a3', 'a4', 'a5'], 0, 3, t0)).toEqual({ admitted: true, inFlight: 0 });
    expect(await b.inFlight('t', 'c', t0)).toBe(5);
    // now in flight: the next one is refused, naming what is in flight
    expect(await b.admit('t', 'c', ['b1'], 0, 3, t0 + 1)).toEqual({ admitted: false, inFlight: 5 });
    // committed (a1, a2) and failed for good (a3, never committed): removed, room again for 1 beside 2 committed segments
    await b.done('t', 'c', 'a1', 'a2', 'a3');
    expect(await b.inFlight('t', 'c', t0 + 2)).toBe(2);
    expect(await b.admit('t', 'c', ['b1'], 1, 4, t0 + 3)).toEqual({ admitted: true, inFlight: 2 });
    expect(await b.admit('t', 'c', ['b2'], 1, 4, t0 + 4)).toEqual({ admitted: false, inFlight: 3 });
    // other collections are counted apart
    expect(await b.admit('t', 'other', ['x1'], 0, 1, t0)).toEqual({ admitted: true, inFlight: 0 });
    expect(await b.inFlight('t', 'c', t0 + 5)).toBe(3);
  });

  it('a batch never committed and never failed (a lost job) stops counting after the max age, and the key expires with it', async () => {
    const b = new IngestBacklogRepository(redis, 'bk2', 5_000);
    const t0 = 2_000_000;
    expect((await b.admit('t', 'c', ['lost1', 'lost2'], 0, 2, t0)).admitted).toBe(true);
    expect((await b.admit('t', 'c', ['n1'], 0, 2, t0 + 4_999)).admitted).toBe(false);
    expect(await b.inFlight('t', 'c', t0 + 4_999)).toBe(2);
    // past the age: the lost batches no longer count, and the admission drops them from the set
    expect(await b.inFlight('t', 'c', t0 + 5_001)).toBe(0);
    expect(await b.admit('t', 'c', ['n1', 'n2'], 0, 2, t0 + 5_001)).toEqual({ admitted: true, inFlight: 0 });
    expect(await redis.zrange('bk2:t:t:c:c:ingest-backlog', 0, -1)).toEqual(['n1', 'n2']);
    // the set itself expires after the max age without admissions (no key left behind by a deleted collection)
    const ttl = await redis.pttl('bk2:t:t:c:c:ingest-backlog');
    expect(ttl).toBeGreaterThan(0);
    expect(ttl).toBeLessThanOrEqual(5_000);
    expect(INGEST_BACKLOG_MAX_AGE_MS).toBe(30 * 60 * 1000);
  });
});
