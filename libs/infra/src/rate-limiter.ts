import { createHash } from 'node:crypto';
import type { Redis } from 'ioredis';
import { apiKeyKeys, type RateLimit } from '@lateral/shared';

/**
 * Token bucket in one Lua script (atomic, so every API process shares a key's bucket), on Redis's
 * clock (TIME), so processes with skewed clocks agree. The bucket holds `burst` tokens, refills at
 * `rate` per second and expires once it would be full again.
 * Returns {allowed (0/1), milliseconds until one token is back (0 when allowed), tokens left}.
 */
const SCRIPT = `
local rate = tonumber(ARGV[1])
local burst = tonumber(ARGV[2])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local state = redis.call('HMGET', KEYS[1], 'tokens', 'ts')
local tokens = tonumber(state[1])
local ts = tonumber(state[2])
if tokens == nil or ts == nil then
  tokens = burst
  ts = now
end
if now > ts then
  tokens = math.min(burst, tokens + (now - ts) * rate / 1000)
end
local allowed = 0
local wait = 0
if tokens >= 1 then
  tokens = tokens - 1
  allowed = 1
else
  wait = math.ceil((1 - tokens) * 1000 / rate)
end
redis.call('HSET', KEYS[1], 'tokens', tostring(tokens), 'ts', tostring(now))
redis.call('PEXPIRE', KEYS[1], math.ceil((burst - tokens) * 1000 / rate) + 1000)
return {allowed, wait, math.floor(tokens)}
`;
const SHA = createHash('sha1').update(SCRIPT).digest('hex');

export interface RateDecision {
  allowed: boolean;
  /** Whole seconds a refused caller should wait (>= 1); 0 when allowed. */
  retryAfterSeconds: number;
  /** Tokens left after this request. */
  remaining: number;
}

/** Per-key rate limits shared by every API process through Redis. */
export class RateLimiter {
  constructor(
    private readonly redis: Redis,
    private readonly prefix: string,
  ) {}

  async take(keyId: string, limit: RateLimit): Promise<RateDecision> {
    const key = apiKeyKeys.rateLimit(this.prefix, keyId);
    const args = [1, key, String(limit.perSecond), String(limit.burst)] as const;
    let out: unknown;
    try {
      out = await this.redis.evalsha(SHA, ...args);
    } catch (err) {
      if (!/NOSCRIPT/.test((err as Error).message)) throw err;
      out = await this.redis.eval(SCRIPT, ...args);
    }
    const [allowed, waitMs, remaining] = out as [number, number, number];
    return { allowed: allowed === 1, retryAfterSeconds: allowed === 1 ? 0 : Math.max(1, Math.ceil(waitMs / 1000)), remaining };
  }
}
