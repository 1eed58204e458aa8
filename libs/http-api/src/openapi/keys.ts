import { z } from 'zod';
import { ApiKeyInfoSchema, ApiKeyListSchema, ApiKeyWithSecretSchema, CreateApiKeySchema } from '@lateral/shared';
import { routeAccess } from '../auth/api-keys.guard';
import { errorAnswer as err, json, param, type ApiRegistry } from './registry';

/**
 * The OpenAPI part of API keys (docs/auth.md, "API keys and tenants"): the security schemes, the
 * key-management operations (tag `admin`), and on every operation the role it needs and the
 * 401 / 403 / 429 answers (withApiKeySecurity, a pass over the generated document).
 */
const AUTH_ERRORS = {
  '401': err('AUTH=keys: no API key, or an unknown, revoked or rotated-away one (WWW-Authenticate: Bearer)'),
  '403': err("AUTH=keys: the key's role is below the one this operation needs (the message names both)"),
  '429': err("the key's rate limit (RATE_LIMIT_PER_SECOND / RATE_LIMIT_BURST, or its own) is used up", {
    'Retry-After': { description: 'whole seconds until a request is allowed again', schema: { type: 'integer' } },
  }),
};
/** Key management answers 403 with AUTH=none (keys are minted with `npm run keys` there), besides a key below admin. */
const KEYS_MODE = { '403': err("AUTH=none: key management over HTTP needs AUTH=keys (use `npm run keys`); AUTH=keys: the key's role is below admin") };

export function registerKeys(api: ApiRegistry): void {
  api.registry.registerComponent('securitySchemes', 'bearerApiKey', { type: 'http', scheme: 'bearer', description: 'AUTH=keys: `Authorization: Bearer lat_<id>_<secret>` (docs/auth.md, "API keys and tenants")' });
  api.registry.registerComponent('securitySchemes', 'headerApiKey', { type: 'apiKey', in: 'header', name: 'x-api-key', description: 'the same key in `x-api-key`' });
  const key = api.schema('ApiKey', ApiKeyInfoSchema);
  const withSecret = api.output(ApiKeyWithSecretSchema);
  const keyId = z.object({ id: param.id('key id') });
  const notFound = err('no key with this id');

  api.op('admin', 'get', '/v1/admin/keys', {
    summary: 'List API keys (every tenant, or one): ids, tenants, roles, dates, never secrets',
    request: { query: z.object({ tenant: z.string().optional() }) },
    responses: { '200': json('keys, oldest first (revoked ones too, with revokedAt)', api.output(ApiKeyListSchema)), ...KEYS_MODE, '400': err('bad tenant (`query.tenant`)') },
  });
  api.op('admin', 'post', '/v1/admin/keys', {
    summary: 'Create an API key for a tenant; the answer holds the secret, once',
    request: { body: { required: true, content: { 'application/json': { schema: api.input(CreateApiKeySchema), examples: { reader: { summary: 'a read-only key', value: { tenant: 'acme', role: 'read', name: 'dashboards' } } } } } } },
    responses: { '201': json('created', withSecret), '400': err('bad tenant, role, name or rateLimit (details name the field)'), ...KEYS_MODE },
  });
  api.op('admin', 'get', '/v1/admin/keys/{id}', { summary: 'One API key', request: { params: keyId }, responses: { '200': json('the key', key), '404': notFound, ...KEYS_MODE } });
  api.op('admin', 'delete', '/v1/admin/keys/{id}', {
    summary: 'Revoke an API key (the record stays, with revokedAt): it stops working within API_KEY_CACHE_SECONDS on every API process, at once on this one',
    request: { params: keyId },
    responses: { '200': json('revoked', key), '404': notFound, ...KEYS_MODE },
  });
  api.op('admin', 'post', '/v1/admin/keys/{id}/rotate', {
    summary: 'A new secret for the key (same id, tenant, role, rate limit); the old secret stops working like a revoked key',
    request: { params: keyId },
    responses: { '200': json('rotated', withSecret), '400': err('the key is revoked'), '404': notFound, ...KEYS_MODE },
  });
}

type Operation = { description?: string; responses?: Record<string, unknown>; security?: unknown };
type Doc = { paths?: Record<string, Record<string, Operation>> } & Record<string, unknown>;

/** Per operation: the role needed and the auth errors; an operator operation (its own security) also takes an admin key. */
export function withApiKeySecurity<D extends Doc>(doc: D): D {
  for (const [path, ops] of Object.entries(doc.paths ?? {})) {
    for (const [method, op] of Object.entries(ops)) {
      // An operation that declares its own security (the operator endpoints: ADMIN_TOKEN) also takes an admin key.
      if (Array.isArray(op.security)) {
        const note = 'With AUTH=keys, an API key of role `admin` is an operator credential too.';
        ops[method] = { ...op, description: op.description ? `${op.description}\n\n${note}` : note, security: [...op.security, { bearerApiKey: [] }, { headerApiKey: [] }] };
        continue;
      }
      const access = routeAccess(method.toUpperCase(), path.replace(/\{[^}]+\}/g, 'x'));
      if (access === 'public') {
        ops[method] = { ...op, security: [] };
        continue;
      }
      const role = `With AUTH=keys: needs a key with role \`${access}\` or above.`;
      ops[method] = {
        ...op,
        description: op.description ? `${op.description}\n\n${role}` : role,
        responses: { ...op.responses, ...Object.fromEntries(Object.entries(AUTH_ERRORS).filter(([code]) => !op.responses?.[code])) },
      };
    }
  }
  // Either header; the empty requirement is AUTH=none (the default): no credential.
  return { ...doc, security: [{ bearerApiKey: [] }, { headerApiKey: [] }, {}] };
}
