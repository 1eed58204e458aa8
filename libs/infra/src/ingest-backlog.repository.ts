import type { Redis } from 'ioredis';
import { redisKeys } from '@lateral/shared';

/**
 * How long an accepted batch is counted at most: one whose commit never came and that never failed
 * for good (a lost job, a dead process the reconciler has not put back yet) stops holding
 * back-pressure's room after this long.
 */
export const INGEST_BACKLOG_MAX_AGE_MS = 30 * 60 * 1000;

// KEYS[1] the collection's set of batches in flight. ARGV: now (ms), max age (ms), committed (the
// segments of the fullest shard), limit, then the batch ids to admit. Drops members older than the
// max age, then admits the batches unless the committed segments plus the batches in flight plus
// these pass the limit (a request is admitted alone when nothing is committed or in flight, so one
// larger than the limit is never refused for ever). Returns {admitted 1|0, batches in flight before}.
// Atomic: two API processes cannot both take the last room.
const ADMIT = `
local now = tonumber(ARGV[1])
local age = tonumber(ARGV[2])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', '(' .. (now - age))
local n = redis.call('ZCARD', KEYS[1])
local committed = tonumber(ARGV[3])
local limit = tonumber(ARGV[4])
local adding = #ARGV - 4
if committed + n > 0 and committed + n + adding > limit then return {0, n} end
for i = 5, #ARGV do redis.call('ZADD', KEYS[1], now, ARGV[i]) end
redis.call('PEXPIRE', KEYS[1], age)
return {1, n}
`;

export type BacklogAdmission = { admitted: true; inFlight: number } | { admitted: false; inFlight: number };

/**
 * Ingest batches accepted and not yet committed, per collection (issue 32: ingest back-pressure
 * counted only committed segments, so the batches accepted before a 503 still landed and a
 * 100,000-document run peaked at 63 segments against a bound of 24). A Redis sorted set of batch
 * ids scored by when they were accepted: the API admits a request's batches atomically against
 * committed + in flight (`admit`), a commit job removes its batch (`done`) once the commit is made
 * (or found made), and a batch that fails for good is removed by the worker's final-failure hook.
 */
export class IngestBacklogRepository {
  constructor(
    private readonly redis: Redis,
    private readonly prefix: string,
    private readonly maxAgeMs = INGEST_BACKLOG_MAX_AGE_MS,
  ) {}

  private key(tenantId: string, collectionId: string): string {
    return redisKeys.ingestBacklog(this.prefix, tenantId, collectionId);
  }

  /** Admits `batchIds` unless `committed` + the batches in flight + these pass `limit` (see ADMIT). */
  async admit(tenantId: string, collectionId: string, batchIds: readonly string[], committed: number, limit: number, now = Date.now()): Promise<BacklogAdmission> {
    const [ok, n] = (await this.redis.eval(ADMIT, 1, this.key(tenantId, collectionId), String(now), String(this.maxAgeMs), String(committed), String(limit), ...batchIds)) as [number, number];
    return { admitted: Number(ok) === 1, inFlight: Number(n) } as BacklogAdmission;
  }

  /** Batches in flight now (those older than the max age left out). */
  async inFlight(tenantId: string, collectionId: string, now = Date.now()): Promise<number> {
    return this.redis.zcount(this.key(tenantId, collectionId), `(${now - this.maxAgeMs}`, '+inf');
  }

  /** The batches are committed, failed for good, or were never queued: no longer in flight. */
  async done(tenantId: string, collectionId: string, ...batchIds: string[]): Promise<void> {
    if (batchIds.length) await this.redis.zrem(this.key(tenantId, collectionId), ...batchIds);
  }
}
