import { z } from 'zod';
import { resourceId } from './ids';

/**
 * API keys: `lat_<id>_<secret>`. The id (12 lowercase letters and digits) names the key in
 * listings, logs and rate limits; the secret (43 base64url characters, 256 random bits) is shown
 * once, at creation or rotation, and stored only as its SHA-256 hash.
 */
export const API_KEY_PATTERN = /^lat_([a-z0-9]{12})_([A-Za-z0-9_-]{43})$/;
export const API_KEY_ID_PATTERN = /^[a-z0-9]{12}$/;

/** Roles, each including the ones before it: read < write < admin. */
export const ROLES = ['read', 'write', 'admin'] as const;
export type Role = (typeof ROLES)[number];

export function roleAllows(have: Role, need: Role): boolean {
  return ROLES.indexOf(have) >= ROLES.indexOf(need);
}

/** A rate limit of one key: a token bucket of `burst` requests refilled at `perSecond`. */
export const RateLimitSchema = z.strictObject({
  perSecond: z.number().positive().max(1_000_000),
  burst: z.number().int().min(1).max(1_000_000),
});
export type RateLimit = z.infer<typeof RateLimitSchema>;

/** What S3 holds for a key (`auth/keys/{id}.json`): never the secret, only its hash. */
export const ApiKeyRecordSchema = z.object({
  id: z.string().regex(API_KEY_ID_PATTERN),
  tenantId: resourceId('tenantId'),
  role: z.enum(ROLES),
  name: z.string().max(200).optional(),
  /** hex SHA-256 of the secret part. */
  secretSha256: z.string().regex(/^[0-9a-f]{64}$/),
  /** Per-key override of RATE_LIMIT_PER_SECOND / RATE_LIMIT_BURST. */
  rateLimit: RateLimitSchema.optional(),
  createdAt: z.string(),
  rotatedAt: z.string().optional(),
  revokedAt: z.string().optional(),
});
export type ApiKeyRecord = z.infer<typeof ApiKeyRecordSchema>;

/** A key as listed (no hash). */
export type ApiKeyInfo = Omit<ApiKeyRecord, 'secretSha256'>;

/** The body of `POST /v1/admin/keys` (and the CLI's `create` options). */
export const CreateApiKeySchema = z.strictObject({
  tenant: resourceId('tenant'),
  role: z.enum(ROLES, { error: `role must be one of ${ROLES.join(', ')}` }),
  name: z.string().max(200, 'name: at most 200 characters').optional(),
  rateLimit: RateLimitSchema.optional(),
});
export type CreateApiKey = z.infer<typeof CreateApiKeySchema>;

export function parseApiKey(key: string): { id: string; secret: string } | null {
  const m = API_KEY_PATTERN.exec(key);
  return m ? { id: m[1]!, secret: m[2]! } : null;
}

export function formatApiKey(id: string, secret: string): string {
  return `lat_${id}_${secret}`;
}

/** Where keys live: S3 records outside every tenant's prefix (the source of truth), Redis buckets. */
export const apiKeyKeys = {
  record: (id: string) => {
    if (!API_KEY_ID_PATTERN.test(id)) throw new Error(`API key id must match ${API_KEY_ID_PATTERN.source}`);
    return `auth/keys/${id}.json`;
  },
  prefix: 'auth/keys/',
  /** Token bucket of one key (tokens, last refill); expires once full again. */
  rateLimit: (redisPrefix: string, keyId: string) => `${redisPrefix}:ratelimit:${keyId}`,
};
