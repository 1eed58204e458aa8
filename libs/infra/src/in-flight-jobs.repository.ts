import type { Redis } from 'ioredis';
import { quotaKeys } from '@lateral/shared';

// KEYS[1] the tenant's in-flight set; ARGV: limit (0 = none), score, member. Adds the member unless
// the set already holds `limit` members (returns their number), else -1. Atomic across API processes.
const RESERVE = `
local n = redis.call('ZCARD', KEYS[1])
local limit = tonumber(ARGV[1])
if limit > 0 and n >= limit then return n end
redis.call('ZADD', KEYS[1], ARGV[2], ARGV[3])
redis.call('EXPIRE', KEYS[1], 172800)
return -1
`;

/**
 * Each tenant's jobs in flight (maxConcurrentJobs, docs/auth.md "Quotas"): a Redis sorted set of
 * idempotent members (the job, as JSON) scored by when they were reserved. Shared by every API process.
 */
export class InFlightJobRepository {
  constructor(
    private readonly redis: Redis,
    private readonly prefix: string,
  ) {}

  /** Adds `member` unless the tenant already has `limit` members (0: no limit): -1 when added, else how many it has. */
  async reserve(tenantId: string, member: string, limit: number, at = Date.now()): Promise<number> {
    return Number(await this.redis.eval(RESERVE, 1, quotaKeys.inFlight(this.prefix, tenantId), String(limit), String(at), member));
  }

  /** The tenant's members and when each was reserved (ms). */
  async members(tenantId: string): Promise<{ member: string; at: number }[]> {
    const raw = await this.redis.zrange(quotaKeys.inFlight(this.prefix, tenantId), 0, -1, 'WITHSCORES');
    const out: { member: string; at: number }[] = [];
    for (let i = 0; i < raw.length; i += 2) out.push({ member: raw[i]!, at: Number(raw[i + 1]) });
    return out;
  }

  async remove(tenantId: string, ...members: string[]): Promise<void> {
    if (members.length) await this.redis.zrem(quotaKeys.inFlight(this.prefix, tenantId), ...members);
  }
}
