import { z } from 'zod';
import { LateralError } from './errors';
import { resourceId } from './ids';

/**
 * Per-tenant quotas: live documents (over all of a tenant's collections), stored segment bytes
 * (the compressed segments of the current generations, as committed), and jobs in flight (ingestions,
 * re-rank and search jobs, batches, training runs accepted and not finished). 0 = unlimited.
 * Defaults come from configuration (TENANT_MAX_DOCUMENTS, TENANT_MAX_BYTES, TENANT_MAX_CONCURRENT_JOBS);
 * a tenant's quota record in S3 (`auth/quotas/{tenant}.json`, set by `PUT /v1/admin/quotas/{tenant}`)
 * overrides each one it names.
 */
export const QUOTA_NAMES = ['maxDocuments', 'maxBytes', 'maxConcurrentJobs'] as const;
export type QuotaName = (typeof QUOTA_NAMES)[number];

/** The configuration variable behind each quota's default. */
export const QUOTA_CONFIG: Record<QuotaName, 'TENANT_MAX_DOCUMENTS' | 'TENANT_MAX_BYTES' | 'TENANT_MAX_CONCURRENT_JOBS'> = {
  maxDocuments: 'TENANT_MAX_DOCUMENTS',
  maxBytes: 'TENANT_MAX_BYTES',
  maxConcurrentJobs: 'TENANT_MAX_CONCURRENT_JOBS',
};

export type TenantLimits = Record<QuotaName, number>;

const quotaValue = (name: string) =>
  z
    .number({ error: `${name}: a whole number >= 0 (0 = unlimited), or null for the configured default` })
    .int(`${name}: a whole number`)
    .min(0, `${name}: at least 0 (0 = unlimited)`)
    .max(Number.MAX_SAFE_INTEGER, `${name}: too large`)
    .nullable()
    .optional();

/** Body of `PUT /v1/admin/quotas/{tenant}`: each quota a number (0 = unlimited), null or absent = the configured default. */
export const TenantQuotaUpdateSchema = z.strictObject({
  maxDocuments: quotaValue('maxDocuments'),
  maxBytes: quotaValue('maxBytes'),
  maxConcurrentJobs: quotaValue('maxConcurrentJobs'),
});
export type TenantQuotaUpdate = z.infer<typeof TenantQuotaUpdateSchema>;

/** What S3 holds for a tenant's overrides. */
export const TenantQuotaRecordSchema = z.object({
  tenantId: resourceId('tenantId'),
  maxDocuments: z.number().int().min(0).optional(),
  maxBytes: z.number().int().min(0).optional(),
  maxConcurrentJobs: z.number().int().min(0).optional(),
  updatedAt: z.string(),
});
export type TenantQuotaRecord = z.infer<typeof TenantQuotaRecordSchema>;

export const quotaKeys = {
  /** Outside every tenant's prefix (like API keys): a tenant's own keys never reach it. */
  record: (tenantId: string) => `auth/quotas/${tenantId}.json`,
  /** Redis sorted set of a tenant's jobs in flight (member: the job, score: when it was accepted). */
  inFlight: (redisPrefix: string, tenantId: string) => `${redisPrefix}:t:${tenantId}:quota:inflight`,
};

/** A tenant's usage against its quotas. */
export interface TenantUsage {
  /** Live documents of the current generations of every collection, plus documents of ingestions still in progress. */
  documents: number;
  committedDocuments: number;
  pendingDocuments: number;
  /** Bytes of the segments the current generations name (compressed, as committed). */
  bytes: number;
  /** Jobs accepted and not finished. */
  concurrentJobs: number;
}

/**
 * A request refused by a tenant quota: 403 for stored documents and bytes (waiting does not help:
 * delete documents or raise the quota), 429 with Retry-After for jobs in flight.
 */
export class QuotaExceededError extends LateralError {
  constructor(
    message: string,
    readonly quota: QuotaName,
    readonly limit: number,
    readonly used: number,
    readonly requested: number,
    readonly status: 403 | 429,
    readonly retryAfterSeconds?: number,
  ) {
    super(message);
  }
}

const limitsSchema = z.object({
  maxDocuments: z.number().int().min(0),
  maxBytes: z.number().int().min(0),
  maxConcurrentJobs: z.number().int().min(0),
});

/** GET / PUT /v1/admin/quotas/{tenant} and GET /v1/quota (the caller's own tenant). */
export const TenantQuotaStatusSchema = z.object({
  tenant: z.string(),
  limits: limitsSchema.describe('the quotas in force (0 = unlimited): the tenant override where set, else the configured default'),
  defaults: limitsSchema.describe('TENANT_MAX_DOCUMENTS, TENANT_MAX_BYTES, TENANT_MAX_CONCURRENT_JOBS'),
  overrides: z
    .object({ maxDocuments: z.number().int().optional(), maxBytes: z.number().int().optional(), maxConcurrentJobs: z.number().int().optional(), updatedAt: z.string().optional() })
    .describe("the tenant's own quota record (empty: defaults only)"),
  usage: z.object({
    documents: z.number().int().describe('committedDocuments + pendingDocuments: what maxDocuments is checked against'),
    committedDocuments: z.number().int().describe("live documents of the current generations of the tenant's collections (an id counts once per collection)"),
    pendingDocuments: z.number().int().describe('documents of ingestions accepted and not yet committed'),
    bytes: z.number().int().describe('bytes of the compressed segments the current generations name: what maxBytes is checked against'),
    concurrentJobs: z.number().int().describe('ingestions, re-rank and search jobs, batches and training runs accepted and not finished (tracked while a quota needs them)'),
  }),
});
export type TenantQuotaStatus = z.infer<typeof TenantQuotaStatusSchema>;
