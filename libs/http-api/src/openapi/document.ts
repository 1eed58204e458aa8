/**
 * The OpenAPI document: every resource registers its operations (this folder, one file per
 * resource) in one registry, `@asteasolutions/zod-to-openapi` generates the document, and two
 * passes add what spans operations: the API-key roles and answers (keys.ts) and the quota answers
 * (quotas.ts). The bodies are the zod schemas that validate requests and type the services'
 * answers (libs/shared), so the documented shapes cannot drift from the code.
 */
import { OpenApiGeneratorV31 } from '@asteasolutions/zod-to-openapi';
import { ErrorBodySchema } from '@lateral/shared';
import { registerAdmin } from './admin';
import { registerBatches } from './batches';
import { registerCollections } from './collections';
import { registerDocuments } from './documents';
import { registerKeys, withApiKeySecurity } from './keys';
import { defaultLive, type LiveLimits } from './live-values';
import { registerQuotas, withQuotaAnswers } from './quotas';
import { ApiRegistry, errorAnswer, TAGS, type Json } from './registry';
import { registerSearch } from './search';
import { registerService } from './service';
import { registerTraining } from './training';
import { registerWebhooks } from './webhooks';
export type { LiveLimits } from './live-values';

type Operation = { parameters?: { in: string }[]; responses?: Record<string, unknown> };

/** The OpenAPI document of this version; `limits`: what the running service has (live.ts), else the defaults. */
export function openApiDocument(version: string, limits: LiveLimits = {}) {
  const api = new ApiRegistry({ ...defaultLive(), ...limits });
  api.schema('Error', ErrorBodySchema);
  for (const register of [registerService, registerCollections, registerDocuments, registerSearch, registerBatches, registerTraining, registerAdmin, registerKeys, registerQuotas, registerWebhooks]) register(api);
  for (const [name, schema] of Object.entries(api.namedSchemas())) api.schema(name, schema);
  const doc = new OpenApiGeneratorV31(api.registry.definitions).generateDocument({
    openapi: '3.1.0',
    info: {
      title: 'lateral',
      version,
      description: 'Late-interaction retrieval and re-ranking: ingest documents, store them as token vectors in S3, re-rank candidates asynchronously with MaxSim and friends.',
    },
    tags: Object.entries(TAGS).map(([name, description]) => ({ name, description })),
  });
  // Any operation with a path or query parameter can be sent a malformed one: the pipes answer 400 naming it.
  for (const op of Object.values(doc.paths ?? {}).flatMap((ops) => Object.values(ops as Record<string, Operation>))) {
    if (op.responses && !op.responses['400'] && (op.parameters ?? []).some((p) => p.in === 'path' || p.in === 'query')) op.responses['400'] = errorAnswer('a malformed path or query parameter (the message names it)');
  }
  return withoutEmptyComponents(withQuotaAnswers(withApiKeySecurity(doc as unknown as { paths: Record<string, Record<string, Json>> } & Json)));
}

/** The components the library adds empty (no parameter component is registered) are left out. */
function withoutEmptyComponents<D extends Json>(doc: D): D {
  const components = doc.components as { parameters?: Json } | undefined;
  if (components?.parameters && Object.keys(components.parameters).length === 0) delete components.parameters;
  return doc;
}
