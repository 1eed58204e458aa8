import { createHash, randomBytes, randomInt, timingSafeEqual } from 'node:crypto';
import {
  ApiKeyRecordSchema,
  API_KEY_ID_PATTERN,
  NotFoundError,
  ValidationError,
  formatApiKey,
  parseApiKey,
  apiKeyKeys,
  type ApiKeyInfo,
  type ApiKeyRecord,
  type CreateApiKey,
  type RateLimit,
  type Role,
} from '@lateral/shared';
import type { ObjectStore } from './object-store';

/** Who a request is: the key's id, tenant and role (and its own rate limit, when it has one). */
export interface VerifiedKey {
  keyId: string;
  tenantId: string;
  role: Role;
  rateLimit?: RateLimit;
}

const ID_ALPHABET = 'abcdefghijklmnopqrstuvwxyz0123456789';
/** Most records an API process keeps in memory (unknown ids included), oldest dropped first. */
const CACHE_ENTRIES = 10_000;

export function sha256Hex(s: string): string {
  return createHash('sha256').update(s, 'utf8').digest('hex');
}

function newKeyId(): string {
  let id = '';
  for (let i = 0; i < 12; i++) id += ID_ALPHABET[randomInt(ID_ALPHABET.length)];
  return id;
}

/** 256 random bits, base64url: 43 characters. */
function newSecret(): string {
  return randomBytes(32).toString('base64url');
}

function info(r: ApiKeyRecord): ApiKeyInfo {
  const { secretSha256: _hash, ...rest } = r;
  return rest;
}

/**
 * API keys in S3 (`auth/keys/{id}.json`), the source of truth: the secret is never stored, only
 * its SHA-256 (a 256-bit random secret needs no slow hash: there is nothing to brute-force). A
 * process keeps what it read for `cacheTtlMs`, so a key revoked or rotated by another process (the
 * CLI, another API replica) stops working there within that delay; in the process that revoked
 * or rotated it, at once.
 */
export class ApiKeyRepository {
  private readonly cache = new Map<string, { record: ApiKeyRecord | null; at: number }>();

  constructor(
    private readonly store: ObjectStore,
    private readonly opts: { cacheTtlMs: number; now?: () => number } = { cacheTtlMs: 0 },
  ) {}

  private now(): number {
    return this.opts.now ? this.opts.now() : Date.now();
  }

  /** Creates a key; the returned `key` is the only time the secret exists outside the caller. */
  async create(input: CreateApiKey): Promise<{ key: string; info: ApiKeyInfo }> {
    for (;;) {
      const id = newKeyId();
      const secret = newSecret();
      const record: ApiKeyRecord = {
        id,
        tenantId: input.tenant,
        role: input.role,
        ...(input.name !== undefined ? { name: input.name } : {}),
        secretSha256: sha256Hex(secret),
        ...(input.rateLimit ? { rateLimit: input.rateLimit } : {}),
        createdAt: new Date(this.now()).toISOString(),
      };
      // Conditional: a (1 in 36^12) id collision draws again instead of overwriting a key.
      if (await this.store.putJsonIfAbsent(apiKeyKeys.record(id), record)) {
        this.cache.delete(id);
        return { key: formatApiKey(id, secret), info: info(record) };
      }
    }
  }

  /** Every key (revoked ones too, with `revokedAt`), optionally of one tenant, oldest first. */
  async list(tenantId?: string): Promise<ApiKeyInfo[]> {
    const objects = await this.store.list(apiKeyKeys.prefix);
    const records = await Promise.all(objects.map((o) => this.read(o.key.slice(apiKeyKeys.prefix.length).replace(/\.json$/, ''))));
    return records
      .filter((r): r is ApiKeyRecord => r !== null && (tenantId === undefined || r.tenantId === tenantId))
      .sort((a, b) => a.createdAt.localeCompare(b.createdAt) || a.id.localeCompare(b.id))
      .map(info);
  }

  /** Whether any key record exists (revoked ones included). */
  async any(): Promise<boolean> {
    return (await this.store.latestKey(apiKeyKeys.prefix)) !== null;
  }

  async get(id: string): Promise<ApiKeyInfo | null> {
    const r = await this.read(id);
    return r ? info(r) : null;
  }

  /** A new secret for the same key id (tenant, role and rate limit unchanged); the old secret stops working. */
  async rotate(id: string): Promise<{ key: string; info: ApiKeyInfo }> {
    const r = await this.read(id);
    if (!r) throw new NotFoundError(`API key '${id}' not found`);
    if (r.revokedAt) throw new ValidationError(`API key '${id}' was revoked at ${r.revokedAt}; create a new one`, [{ field: 'id', message: 'revoked' }]);
    const secret = newSecret();
    const next: ApiKeyRecord = { ...r, secretSha256: sha256Hex(secret), rotatedAt: new Date(this.now()).toISOString() };
    await this.store.putJson(apiKeyKeys.record(id), next);
    this.cache.set(id, { record: next, at: this.now() });
    return { key: formatApiKey(id, secret), info: info(next) };
  }

  /** Marks the key revoked (the record stays, for the listing); revoking twice keeps the first time. */
  async revoke(id: string): Promise<ApiKeyInfo> {
    const r = await this.read(id);
    if (!r) throw new NotFoundError(`API key '${id}' not found`);
    if (r.revokedAt) return info(r);
    const next: ApiKeyRecord = { ...r, revokedAt: new Date(this.now()).toISOString() };
    await this.store.putJson(apiKeyKeys.record(id), next);
    this.cache.set(id, { record: next, at: this.now() });
    return info(next);
  }

  /**
   * The key's tenant and role, or null for anything that is not a live key: malformed, unknown id,
   * wrong secret, revoked. Reads S3 at most once per id per `cacheTtlMs`.
   */
  async verify(presented: string): Promise<VerifiedKey | null> {
    const parsed = parseApiKey(presented);
    if (!parsed) return null;
    const record = await this.cached(parsed.id);
    if (!record || record.revokedAt) return null;
    const given = Buffer.from(sha256Hex(parsed.secret), 'hex');
    const stored = Buffer.from(record.secretSha256, 'hex');
    if (given.length !== stored.length || !timingSafeEqual(given, stored)) return null;
    return { keyId: record.id, tenantId: record.tenantId, role: record.role, ...(record.rateLimit ? { rateLimit: record.rateLimit } : {}) };
  }

  private async cached(id: string): Promise<ApiKeyRecord | null> {
    const hit = this.cache.get(id);
    const now = this.now();
    if (hit && now - hit.at < this.opts.cacheTtlMs) return hit.record;
    const record = await this.read(id);
    if (this.opts.cacheTtlMs > 0) {
      this.cache.delete(id);
      this.cache.set(id, { record, at: now });
      if (this.cache.size > CACHE_ENTRIES) this.cache.delete(this.cache.keys().next().value!);
    }
    return record;
  }

  private async read(id: string): Promise<ApiKeyRecord | null> {
    if (!API_KEY_ID_PATTERN.test(id)) return null;
    const raw = await this.store.getJson<unknown>(apiKeyKeys.record(id));
    if (raw === null) return null;
    const parsed = ApiKeyRecordSchema.safeParse(raw);
    if (!parsed.success) throw new Error(`API key record ${apiKeyKeys.record(id)} is invalid: ${parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ')}`);
    return parsed.data;
  }
}
