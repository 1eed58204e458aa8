import { QUOTA_NAMES, TenantQuotaRecordSchema, quotaKeys, type TenantQuotaRecord, type TenantQuotaUpdate } from '@lateral/shared';
import type { ObjectStore } from './object-store';

/**
 * Per-tenant quota overrides in S3 (`auth/quotas/{tenant}.json`), the source of truth, beside the
 * API keys and outside every tenant's prefix. A process keeps what it read for `cacheTtlMs` (an
 * override set by another API process takes effect within that delay; on this one at once).
 */
export class TenantQuotaRepository {
  private readonly cache = new Map<string, { record: TenantQuotaRecord | null; at: number }>();

  constructor(
    private readonly store: ObjectStore,
    private readonly opts: { cacheTtlMs: number } = { cacheTtlMs: 0 },
  ) {}

  async get(tenantId: string): Promise<TenantQuotaRecord | null> {
    const hit = this.cache.get(tenantId);
    if (hit && Date.now() - hit.at < this.opts.cacheTtlMs) return hit.record;
    const raw = await this.store.getJson<unknown>(quotaKeys.record(tenantId));
    let record: TenantQuotaRecord | null = null;
    if (raw !== null) {
      const parsed = TenantQuotaRecordSchema.safeParse(raw);
      if (!parsed.success) throw new Error(`tenant quota record ${quotaKeys.record(tenantId)} is invalid: ${parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ')}`);
      record = parsed.data;
    }
    if (this.cache.size > 10_000) this.cache.delete(this.cache.keys().next().value!);
    this.cache.set(tenantId, { record, at: Date.now() });
    return record;
  }

  /** Replaces the tenant's overrides: each quota the update gives a number; absent or null = the configured default. */
  async put(tenantId: string, update: TenantQuotaUpdate): Promise<TenantQuotaRecord> {
    const next: TenantQuotaRecord = { tenantId, updatedAt: new Date().toISOString() };
    for (const name of QUOTA_NAMES) {
      const v = update[name];
      if (v !== null && v !== undefined) next[name] = v;
    }
    await this.store.putJson(quotaKeys.record(tenantId), next);
    this.cache.set(tenantId, { record: next, at: Date.now() });
    return next;
  }
}
