import { z } from 'zod';
import { dropLive } from './openapi-live-values';
import { ApiKeyInfoSchema, ApiKeyListSchema, ApiKeyWithSecretSchema, CreateApiKeySchema } from '@lateral/shared';
import { routeAccess } from './auth/api-keys.guard';

/**
 * The OpenAPI part of API keys (docs/auth.md, "API keys and tenants"): the security schemes, the
 * key-management paths, and on every operation the role it needs and the 401 / 403 / 429 answers.
 */
const errorRef = { $ref: '#/components/schemas/Error' };
const err = (description: string, headers?: Record<string, unknown>) => ({ description, ...(headers ? { headers } : {}), content: { 'application/json': { schema: errorRef } } });
const AUTH_ERRORS = {
  '401': err('AUTH=keys: no API key, or an unknown, revoked or rotated-away one (WWW-Authenticate: Bearer)'),
  '403': err("AUTH=keys: the key's role is below the one this operation needs (the message names both)"),
  '429': err("the key's rate limit (RATE_LIMIT_PER_SECOND / RATE_LIMIT_BURST, or its own) is used up", {
    'Retry-After': { description: 'whole seconds until a request is allowed again', schema: { type: 'integer' } },
  }),
};

const strip = (j: Record<string, unknown>) => {
  delete j.$schema;
  return j;
};
const out = (s: z.ZodType) => strip(z.toJSONSchema(s, { io: 'output', unrepresentable: 'any', override: (ctx) => dropLive(ctx.jsonSchema as Record<string, unknown>) }) as Record<string, unknown>);
/** Key management answers 403 with AUTH=none (keys are minted with `npm run keys` there), besides a key below admin. */
const KEYS_MODE = { '403': err("AUTH=none: key management over HTTP needs AUTH=keys (use `npm run keys`); AUTH=keys: the key's role is below admin") };
const KEY_WITH_SECRET = out(ApiKeyWithSecretSchema);
const json = (description: string, schema: Record<string, unknown>) => ({ description, content: { 'application/json': { schema } } });
const keyId = { name: 'id', in: 'path', required: true, schema: { type: 'string' }, description: 'key id' };
const notFound = err('no key with this id');

const PATHS = {
  '/v1/admin/keys': {
    get: {
      summary: 'List API keys (every tenant, or one): ids, tenants, roles, dates, never secrets',
      parameters: [{ name: 'tenant', in: 'query', required: false, schema: { type: 'string' } }],
      responses: { '200': json('keys, oldest first (revoked ones too, with revokedAt)', out(ApiKeyListSchema)), ...KEYS_MODE, '400': err('bad tenant (`query.tenant`)') },
    },
    post: {
      summary: 'Create an API key for a tenant; the answer holds the secret, once',
      requestBody: { required: true, content: { 'application/json': { schema: strip(z.toJSONSchema(CreateApiKeySchema, { io: 'input' }) as Record<string, unknown>) } } },
      responses: { '201': json('created', KEY_WITH_SECRET), '400': err('bad tenant, role, name or rateLimit (details name the field)'), ...KEYS_MODE },
    },
  },
  '/v1/admin/keys/{id}': {
    get: { summary: 'One API key', parameters: [keyId], responses: { '200': json('the key', { $ref: '#/components/schemas/ApiKey' }), '404': notFound, ...KEYS_MODE } },
    delete: {
      summary: 'Revoke an API key (the record stays, with revokedAt): it stops working within API_KEY_CACHE_SECONDS on every API process, at once on this one',
      parameters: [keyId],
      responses: { '200': json('revoked', { $ref: '#/components/schemas/ApiKey' }), '404': notFound, ...KEYS_MODE },
    },
  },
  '/v1/admin/keys/{id}/rotate': {
    post: {
      summary: 'A new secret for the key (same id, tenant, role, rate limit); the old secret stops working like a revoked key',
      parameters: [keyId],
      responses: { '200': json('rotated', KEY_WITH_SECRET), '400': err('the key is revoked'), '404': notFound, ...KEYS_MODE },
    },
  },
};

type Operation = { description?: string; responses?: Record<string, unknown>; security?: unknown };
type Doc = { paths: Record<string, Record<string, Operation>>; components?: Record<string, Record<string, unknown>> } & Record<string, unknown>;

/** Adds the key-management paths, the security schemes and, per operation, the role needed and the auth errors. */
export function withApiKeySecurity<D extends Doc>(doc: D): D {
  const paths: Record<string, Record<string, Operation>> = { ...doc.paths, ...(PATHS as unknown as Record<string, Record<string, Operation>>) };
  for (const [path, ops] of Object.entries(paths)) {
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
  return {
    ...doc,
    // Either header; the empty requirement is AUTH=none (the default): no credential.
    security: [{ bearerApiKey: [] }, { headerApiKey: [] }, {}],
    paths,
    components: {
      ...doc.components,
      securitySchemes: {
        ...doc.components?.securitySchemes,
        bearerApiKey: { type: 'http', scheme: 'bearer', description: 'AUTH=keys: `Authorization: Bearer lat_<id>_<secret>` (docs/auth.md, "API keys and tenants")' },
        headerApiKey: { type: 'apiKey', in: 'header', name: 'x-api-key', description: 'the same key in `x-api-key`' },
      },
      schemas: { ...doc.components?.schemas, ApiKey: out(ApiKeyInfoSchema) },
    },
  };
}
