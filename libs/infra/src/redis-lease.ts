import { randomUUID } from 'node:crypto';
import type { Redis } from 'ioredis';

const RELEASE = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end";
const RENEW = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('pexpire', KEYS[1], ARGV[2]) else return 0 end";

export interface LeaseOptions {
  /** Expiry of the lease in Redis, renewed every third of it while `fn` runs: a dead holder's lease goes after this. */
  ttlMs?: number;
  /** Pause between tries while another holder has it. */
  pollMs?: number;
  /** Give up (LeaseBusyError) after waiting this long for another holder; default: wait as long as it takes. */
  maxWaitMs?: number;
}

/** The lease stayed held by another holder for the whole of `maxWaitMs`: `fn` did not run. */
export class LeaseBusyError extends Error {
  constructor(
    readonly key: string,
    readonly waitedMs: number,
  ) {
    super(`lease ${key} is held by another holder (waited ${waitedMs} ms)`);
    this.name = 'LeaseBusyError';
  }
}

/**
 * Runs `fn` while holding the Redis lease `key` (SET NX PX with a random token; renewed while `fn`
 * runs; released by compare-and-delete), waiting while another process holds it (at most
 * `maxWaitMs`, then LeaseBusyError without running `fn`). Mutual exclusion
 * for work that must not run twice at once (one merge per collection); a holder that dies frees
 * the lease after `ttlMs`. A Redis error while renewing is ignored (the lease may then expire
 * under a long `fn`: callers keep their own correctness, e.g. conditional commits).
 */
export async function withRedisLease<T>(redis: Pick<Redis, 'set' | 'eval'>, key: string, fn: () => Promise<T>, opts: LeaseOptions = {}): Promise<T> {
  const ttlMs = opts.ttlMs ?? 60_000;
  const pollMs = opts.pollMs ?? 250;
  const token = randomUUID();
  const t0 = Date.now();
  while ((await redis.set(key, token, 'PX', ttlMs, 'NX')) !== 'OK') {
    if (opts.maxWaitMs !== undefined && Date.now() - t0 >= opts.maxWaitMs) throw new LeaseBusyError(key, Date.now() - t0);
    await new Promise((r) => setTimeout(r, pollMs));
  }
  const renew = setInterval(() => void redis.eval(RENEW, 1, key, token, String(ttlMs)).catch(() => undefined), Math.max(10, Math.floor(ttlMs / 3)));
  renew.unref?.();
  try {
    return await fn();
  } finally {
    clearInterval(renew);
    await redis.eval(RELEASE, 1, key, token).catch(() => undefined);
  }
}
