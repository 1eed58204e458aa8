/** Per-tenant quotas (quotas.ts, docs/auth.md "Quotas"): the quota operations, and the 403 / 429 answers of the operations they refuse. */
import { z } from 'zod';
import { TenantQuotaStatusSchema, TenantQuotaUpdateSchema } from '@lateral/shared';
import { OPERATOR_SECURITY } from './admin';
import { errorAnswer, json, param, type ApiRegistry } from './registry';

const OPERATOR = {
  '401': errorAnswer('no operator credential (ADMIN_TOKEN as a Bearer token, the dashboard session cookie, or with AUTH=keys an admin key)'),
  '403': errorAnswer('operator endpoints disabled: ADMIN_TOKEN is not set and no admin key was presented'),
};

export function registerQuotas(api: ApiRegistry): void {
  const status = api.output(TenantQuotaStatusSchema);
  const params = z.object({ tenant: param.id('tenant id (400 naming path.tenant when it is not one)') });
  api.op('admin', 'get', '/v1/admin/quotas/{tenant}', {
    summary: "A tenant's quotas (in force, defaults, its overrides) and usage: documents, segment bytes, jobs in flight",
    security: OPERATOR_SECURITY,
    request: { params },
    responses: { '200': json('quotas and usage', status), '400': errorAnswer('bad tenant id'), ...OPERATOR },
  });
  api.op('admin', 'put', '/v1/admin/quotas/{tenant}', {
    summary: "Replace a tenant's quota overrides (each a number, 0 = unlimited; absent or null = the configured default)",
    description: 'Stored in S3 (`auth/quotas/{tenant}.json`); API processes re-read it within API_KEY_CACHE_SECONDS, this one at once. Lowering a quota below the usage refuses new work; nothing stored is removed.',
    security: OPERATOR_SECURITY,
    request: { params, body: { required: true, content: { 'application/json': { schema: api.input(TenantQuotaUpdateSchema), examples: { documents: { summary: 'at most a million documents, the other quotas as configured', value: { maxDocuments: 1000000 } } } } } } },
    responses: { '200': json('the quotas and usage after the change', status), '400': errorAnswer('a quota that is not a whole number >= 0 (details name it), or an unknown field'), ...OPERATOR },
  });
  api.op('service', 'get', '/v1/quota', {
    summary: "The caller's own tenant's quotas and usage",
    responses: { '200': json('quotas and usage', status), '503': errorAnswer('Redis or S3 unreachable, or not answering in time under load (error overloaded); Retry-After') },
  });
}

const QUOTA_403 = "a tenant quota of stored documents or bytes (maxDocuments, maxBytes: TENANT_MAX_DOCUMENTS / TENANT_MAX_BYTES or the tenant's own) is used up: `error: 'quota_exceeded'`, `details[0].field` names the quota, with its limit, usage and what was requested";
const QUOTA_429 = "the tenant's jobs in flight reached maxConcurrentJobs (TENANT_MAX_CONCURRENT_JOBS or the tenant's own): `error: 'quota_exceeded'`, Retry-After";
/** Operations a quota can refuse: ingestion (documents, bytes, jobs) and every job kind (jobs). */
const REFUSED: [string, string, boolean][] = [
  ['/v1/collections/{id}/documents', 'post', true],
  ['/v1/rerank', 'post', false],
  ['/v1/search', 'post', false],
  ['/v1/compat/cohere/rerank', 'post', false],
  ['/v1/compat/cohere/v1/rerank', 'post', false],
  ['/v1/compat/cohere/v2/rerank', 'post', false],
  ['/v1/batches', 'post', false],
  ['/v1/collections/{id}/train', 'post', false],
];

type Op = { responses?: Record<string, { description?: string } & Record<string, unknown>> };

/** Adds the quota answers to the operations quotas refuse (merged into the 403 / 429 they already describe). */
export function withQuotaAnswers<D extends { paths?: Record<string, Record<string, unknown>> }>(doc: D): D {
  const add = (op: Op, code: string, text: string) => {
    const cur = op.responses?.[code];
    op.responses = { ...op.responses, [code]: cur ? { ...cur, description: `${cur.description}; or ${text}` } : errorAnswer(text) };
  };
  for (const [path, method, storage] of REFUSED) {
    const op = doc.paths?.[path]?.[method] as Op | undefined;
    if (!op) continue;
    if (storage) add(op, '403', QUOTA_403);
    add(op, '429', QUOTA_429);
  }
  return doc;
}
