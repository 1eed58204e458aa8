import Ajv from 'ajv';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import {
  CodecSettingsSchema,
  CreateApiKeySchema,
  CreateCollectionSchema,
  ReindexRequestSchema,
  DeleteDocumentsSchema,
  JudgmentsJsonSchema,
  RerankRequestSchema,
  SearchRequestSchema,
  TenantQuotaUpdateSchema,
  TrainRequestSchema,
  ValidationError,
} from '@lateral/shared';
import { CohereRerankSchema } from '../rerank/cohere.service';
import { validateDocuments } from '../documents/documents';
import { parseWaitSeconds } from '../common/json-body';
import { openApiDocument } from './document';

type Op = { tags?: string[]; parameters?: { name: string; in: string; schema?: { pattern?: string; maximum?: number; anyOf?: { maximum?: number }[] } }[]; responses?: Record<string, unknown> };

describe('the OpenAPI document states the rules the server applies', () => {
  const doc = openApiDocument('test', { maxWaitSeconds: 42 });
  const ops = Object.entries(doc.paths as Record<string, Record<string, Op>>).flatMap(([p, m]) => Object.entries(m).map(([method, op]) => ({ name: `${method.toUpperCase()} ${p}`, op })));

  it('every path parameter has a pattern (ids) or its own rule, and every operation with parameters documents its 400', () => {
    for (const { name, op } of ops) {
      for (const p of op.parameters ?? []) {
        if (p.in === 'path' && !['jobId', 'queue'].includes(p.name)) expect(p.schema?.pattern, `${name} ${p.name}`).toBeTruthy();
        // wait: a number up to the limit, or empty (the default)
        if (p.in === 'query' && p.name === 'wait') expect(p.schema?.anyOf?.[0]?.maximum, name).toBe(42);
      }
      if ((op.parameters ?? []).length > 0) expect(op.responses?.['400'], name).toBeDefined();
    }
  });

  it('groups every operation under one of the resource tags, each tag used', () => {
    const tags = (doc as { tags?: { name: string }[] }).tags!.map((t) => t.name);
    expect(tags).toEqual(['collections', 'documents', 'search', 'rerank', 'batches', 'training', 'cohere', 'service', 'admin']);
    const used = new Set<string>();
    for (const { name, op } of ops) {
      expect(op.tags, name).toHaveLength(1);
      expect(tags, name).toContain(op.tags![0]);
      used.add(op.tags![0]);
    }
    expect([...used].sort()).toEqual([...tags].sort());
    const tagOf = (n: string) => ops.find((o) => o.name === n)!.op.tags![0];
    expect(tagOf('POST /v1/collections/{id}/documents')).toBe('documents');
    expect(tagOf('PUT /v1/uploads/{name}')).toBe('batches');
    expect(tagOf('GET /v1/train/{trainId}')).toBe('training');
    expect(tagOf('GET /v1/models')).toBe('service');
  });

  it('a query the validator trims is documented as not only whitespace, as the validator decides it', () => {
    const cohere = (doc.paths as Record<string, Record<string, { requestBody: { content: Record<string, { schema: { properties: Record<string, { pattern?: string }> } }> } }>>)['/v1/compat/cohere/rerank'].post;
    const pattern = new RegExp(cohere.requestBody.content['application/json'].schema.properties.query.pattern!, 'u');
    for (const query of ['\f', ' \t\n', '\u00a0\u3000\ufeff', 'a', ' a ', '\u200bx']) {
      const accepted = CohereRerankSchema.safeParse({ model: 'm', query, documents: ['d'] }).success;
      expect(pattern.test(query), JSON.stringify(query)).toBe(accepted);
    }
  });

  it('wait accepts every JSON number form up to the limit, and nothing else', () => {
    for (const [raw, n] of [['5', 5], ['0.25', 0.25], ['1e-3', 0.001], ['5.121008747582394e+1', 51.21008747582394], ['.5', 0.5], ['60', 60]] as const) expect(parseWaitSeconds(raw, 60)).toBe(n);
    for (const raw of ['-1', '61', '0x10', 'NaN', 'Infinity', '1e999', '', ' 5', '5s', '1'.repeat(40)]) {
      if (raw === '') {
        expect(parseWaitSeconds(raw, 60)).toBe(0);
        continue;
      }
      expect(() => parseWaitSeconds(raw, 60), raw).toThrow(ValidationError);
    }
  });
});

describe('the examples of the OpenAPI document', () => {
  const doc = openApiDocument('test', { models: ['m1'], modelLimits: [{ id: 'm1', dims: 96, maxDocTokens: 300 }], defaultModel: 'm1' }) as unknown as {
    paths: Record<string, Record<string, { requestBody?: { content: Record<string, { schema: unknown; examples?: Record<string, { value: unknown }> }> } }>>;
    components: unknown;
  };
  const examples = Object.entries(doc.paths).flatMap(([p, ops]) =>
    Object.entries(ops).flatMap(([method, op]) =>
      Object.entries(op.requestBody?.content ?? {}).flatMap(([type, media]) => Object.entries(media.examples ?? {}).map(([name, e]) => ({ op: `${method.toUpperCase()} ${p}`, type, name, value: e.value, schema: media.schema }))),
    ),
  );
  /** The validator each operation's service runs on its body (the closed forms of request-forms.ts are checked against them by `npm run contract`). */
  const SERVICE: Record<string, (body: unknown) => unknown> = {
    'POST /v1/collections': (b) => CreateCollectionSchema.parse(b),
    'POST /v1/collections/{id}/recompress': (b) => z.object({ codec: CodecSettingsSchema }).strict().parse(b),
    'POST /v1/collections/{id}/reindex': (b) => ReindexRequestSchema.parse(b),
    'POST /v1/collections/{id}/documents': (b) => validateDocuments((Array.isArray(b) ? b : (b as { documents: unknown[] }).documents) as unknown[], { maxDocumentBytes: 1 << 20, maxBatchDocuments: 100 }),
    'POST /v1/collections/{id}/documents/delete': (b) => DeleteDocumentsSchema.parse(b),
    'POST /v1/search': (b) => SearchRequestSchema.parse(b),
    'POST /v1/rerank': (b) => RerankRequestSchema.parse(b),
    'POST /v1/collections/{id}/judgments': (b) => JudgmentsJsonSchema.parse(b),
    'POST /v1/collections/{id}/train': (b) => TrainRequestSchema.parse(b),
    'POST /v1/admin/keys': (b) => CreateApiKeySchema.parse(b),
    'PUT /v1/admin/quotas/{tenant}': (b) => TenantQuotaUpdateSchema.parse(b),
  };

  it('every main request form has examples', () => {
    const ops = new Set(examples.map((e) => e.op));
    for (const op of Object.keys(SERVICE)) expect(ops, op).toContain(op);
    expect(ops).toContain('POST /v1/batches');
  });

  it('each example is valid against its own schema in the document and accepted by the service validator', () => {
    const ajv = new Ajv({ allErrors: true, unknownFormats: 'ignore', schemaId: 'auto' });
    for (const e of examples) {
      const v = ajv.compile({ allOf: [e.schema], components: doc.components });
      expect(v(e.value), `${e.op} ${e.name}: ${ajv.errorsText(v.errors)}`).toBe(true);
      const service = SERVICE[e.op];
      if (service) expect(() => service(e.value), `${e.op} ${e.name}`).not.toThrow();
    }
  });
});
