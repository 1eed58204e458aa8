import { createHash, timingSafeEqual } from 'node:crypto';
import type { OnApplicationBootstrap } from '@nestjs/common';
import type { ApiKeyRepository, ApiRepositories, RateDecision, RateLimiter, VerifiedKey } from '@lateral/infra';
import type { RateLimit } from '@lateral/shared';
import { loadProbe, type LoadProbe } from '../common/http-errors.filter';

/** Key id under which the bootstrap admin credential (ADMIN_API_KEY) is rate-limited and logged. */
export const BOOTSTRAP_KEY_ID = 'bootstrap';

const sha256 = (s: string) => createHash('sha256').update(s, 'utf8').digest();

/**
 * API keys for the HTTP API: verification (stored keys from S3 through the repository's short
 * cache, plus the bootstrap admin credential ADMIN_API_KEY), per-key rate limits in Redis, and the
 * key management behind /v1/admin/keys. Says at start-up which mode the API runs in.
 */
/** The repositories this service is given (app.ts passes only these: pickRepositories). */
export const API_KEYS_REPOSITORIES = ['config', 'logger', 'apiKeys', 'rateLimiter', 'queues'] as const satisfies readonly (keyof ApiRepositories)[];
/** What key checks use: the stored keys, the rate limiter, the logger, and the Redis connection's state (the load probe). */
export type ApiKeysDeps = Pick<ApiRepositories, (typeof API_KEYS_REPOSITORIES)[number]>;

export class ApiKeysService implements OnApplicationBootstrap {
  readonly repository: ApiKeyRepository;
  private readonly limiter: RateLimiter;
  private readonly bootstrapHash: Buffer | null;

  constructor(private readonly deps: ApiKeysDeps) {
    this.repository = deps.apiKeys;
    this.limiter = deps.rateLimiter;
    this.bootstrapHash = deps.config.ADMIN_API_KEY ? sha256(deps.config.ADMIN_API_KEY) : null;
  }

  /** How a failed key check is judged (down or overloaded): the runtime's Redis connection and event loop. */
  get loadProbe(): LoadProbe {
    return (this.probe ??= loadProbe(this.deps));
  }
  private probe?: LoadProbe;

  get enabled(): boolean {
    return this.deps.config.AUTH === 'keys';
  }

  /** The caller behind a presented key, or null when it is no live key. */
  async verify(presented: string): Promise<VerifiedKey | null> {
    if (this.bootstrapHash && timingSafeEqual(sha256(presented), this.bootstrapHash)) {
      return { keyId: BOOTSTRAP_KEY_ID, tenantId: this.deps.config.DEFAULT_TENANT, role: 'admin' };
    }
    return this.repository.verify(presented);
  }

  /** Takes one request from the key's bucket (its own limit, else RATE_LIMIT_PER_SECOND / RATE_LIMIT_BURST). */
  async take(key: VerifiedKey): Promise<RateDecision & { limit: RateLimit | null }> {
    const limit = key.rateLimit ?? (this.deps.config.RATE_LIMIT_PER_SECOND > 0 ? { perSecond: this.deps.config.RATE_LIMIT_PER_SECOND, burst: this.deps.config.RATE_LIMIT_BURST } : null);
    if (!limit) return { allowed: true, retryAfterSeconds: 0, remaining: Infinity, limit: null };
    return { ...(await this.limiter.take(key.keyId, limit)), limit };
  }

  /** One line saying how requests are authenticated. */
  startupLine(): string {
    const c = this.deps.config;
    if (!this.enabled) {
      return `auth: AUTH=none, single tenant '${c.DEFAULT_TENANT}': requests need no API key and reach every collection (set AUTH=keys to require keys)`;
    }
    const limit = c.RATE_LIMIT_PER_SECOND > 0 ? `${c.RATE_LIMIT_PER_SECOND}/s, burst ${c.RATE_LIMIT_BURST}` : 'none';
    return (
      `auth: AUTH=keys: every /v1 request but /v1/health needs an API key (tenant and role from the key; ` +
      `revocation effective within ${c.API_KEY_CACHE_SECONDS} s; per-key rate limit ${limit}; bootstrap admin key ADMIN_API_KEY ${this.bootstrapHash ? 'set' : 'unset'})`
    );
  }

  async onApplicationBootstrap(): Promise<void> {
    this.deps.logger.info(this.startupLine());
    if (this.enabled && !this.bootstrapHash && !(await this.repository.any().catch(() => true))) {
      this.deps.logger.warn('auth: AUTH=keys but no API key exists and ADMIN_API_KEY is unset: every /v1 request will answer 401; create one with `npm run keys -- create --tenant <t> --role admin`');
    }
  }
}
