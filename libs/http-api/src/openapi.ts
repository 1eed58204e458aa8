import { z } from 'zod';
import { CodecSettingsSchema, SCORER_NAMES, SEARCH_MODES } from '@lateral/shared';
import { currentLive, defaultLive, dropLive, liveValues, setLive, type LiveLimits } from './openapi-live-values';
export type { LiveLimits } from './openapi-live-values';
import { DEFAULT_DOCUMENT_LIST_LIMIT, ID_PATTERN, MAX_DOCUMENT_LIST_LIMIT } from '@lateral/shared';
import { MAX_DELETE_IDS, ScorerSchema, SearchModeSchema } from '@lateral/shared';
import {
  CollectionDescriptionSchema,
  CollectionListSchema,
  CollectionSchema,
  DeletePendingSchema,
  DeleteResultSchema,
  DocumentIdPageSchema,
  ErrorBodySchema,
  IngestionAcceptedSchema,
  IngestionFinishedSchema,
  IngestionStatusSchema,
  LivenessSchema,
  MergePendingSchema,
  MergeResultSchema,
  ModelListSchema,
  ReadinessSchema,
  RecompressAcceptedSchema,
  RerankHitSchema,
  RerankStatusSchema,
  SearchStatusSchema,
  StageCountsSchema,
  StoredDocumentSchema,
} from '@lateral/shared';
import { withApiKeySecurity } from './openapi-keys';
import { CreateCollectionForm, DeleteDocumentsForm, RecompressForm, RerankRequestForm, SearchRequestForm } from './request-forms';
import { CURSOR_PATTERN } from './documents/documents.service';
import { QUOTA_OPENAPI_PATHS, withQuotaAnswers } from './openapi-quotas';
import { ADMIN_OPENAPI_PATHS, ADMIN_SECURITY_SCHEMES } from './openapi-admin';
import { batchOpenApiPaths, BATCH_OPENAPI_SCHEMAS } from './openapi-batches';
import { trainingOpenApiPaths } from './openapi-training';
import { WEBHOOK_OPENAPI, WEBHOOK_OPENAPI_SCHEMAS } from './openapi-webhooks';

type Json = Record<string, unknown>;
/** `scorer: "maxsim"` and `mode: "bm25"`: the names whose parameters all have defaults, accepted as a string. */
const SHORTHAND = new Map<z.ZodType, string[]>([
  [ScorerSchema, SCORER_NAMES.filter((name) => ScorerSchema.safeParse({ name }).success)],
  [SearchModeSchema, SEARCH_MODES.filter((name) => SearchModeSchema.safeParse({ name }).success)],
]);
/** A `z.preprocess(string -> {name}, X)` field is documented as the string shorthand or X. */
function shorthand(ctx: { zodSchema: unknown; jsonSchema: Json }): void {
  liveValues(ctx.jsonSchema);
  const def = (ctx.zodSchema as { _zod: { def: { type: string; in?: { _zod: { def: { type: string } } }; out?: z.ZodType } } })._zod.def;
  const names = def.type === 'pipe' && def.in?._zod.def.type === 'transform' && def.out ? SHORTHAND.get(def.out) : undefined;
  if (!names) return;
  const full = { ...ctx.jsonSchema };
  for (const k of Object.keys(ctx.jsonSchema)) delete ctx.jsonSchema[k];
  Object.assign(ctx.jsonSchema, { anyOf: [{ type: 'string', enum: names, description: `shorthand for {"name": "<this>"} with the defaults` }, full] });
}
/** Named schemas (`.meta({ id })`, e.g. the filter language) met while converting: components.schemas. */
let defs: Record<string, Json> = {};
const strip = (raw: Json) => {
  // zod names them under $defs of each schema; the document keeps one copy in components.schemas.
  const j = JSON.parse(JSON.stringify(raw).replaceAll('"#/$defs/', '"#/components/schemas/')) as Json;
  delete j.$schema;
  if (j.$defs) Object.assign(defs, j.$defs);
  delete j.$defs;
  return j;
};
/** A request body: what the zod schema accepts (shorthand forms included). */
const schema = (s: z.ZodType) => strip(z.toJSONSchema(s, { io: 'input', unrepresentable: 'any', override: shorthand }) as Json);
/** A response body: what the code produces, from the schema in libs/shared/src/responses.ts (closed objects). */
const out = (s: z.ZodType) => strip(z.toJSONSchema(s, { io: 'output', unrepresentable: 'any', override: (ctx) => dropLive(ctx.jsonSchema as Json) }) as Json);

const error = { $ref: '#/components/schemas/Error' };
const retryAfter = { 'Retry-After': { description: 'seconds to wait before retrying', schema: { type: 'integer' } } };
const location = (what: string) => ({ Location: { description: what, schema: { type: 'string' } } });
/** Error answers: a code, or [code, what it means for this endpoint]. */
const errors = (...codes: (number | [number, string])[]) =>
  Object.fromEntries(
    codes.map((entry) => [entry, typeof entry === 'number' ? undefined : entry[1]] as const).map(([entry, why]) => [
      String(typeof entry === 'number' ? entry : entry[0]),
      {
        ...((typeof entry === 'number' ? entry : entry[0]) === 503 ? { headers: retryAfter } : {}),
        description: why ?? { 400: 'bad input (the message and details name the field and the limit)', 404: 'unknown resource', 413: 'body over MAX_REQUEST_BYTES', 415: 'Content-Type not taken by this endpoint (the message names the accepted types), or a charset other than UTF-8', 503: "Redis or S3 unreachable (error 'unavailable'), Redis or S3 not answering in time because of load (error 'overloaded'), a queue over MAX_QUEUE_BACKLOG, or too many large bodies at once (BODY_PARSE_CONCURRENCY); retry after the Retry-After header" }[typeof entry === 'number' ? entry : entry[0]] ?? 'error',
        content: { 'application/json': { schema: error } },
      },
    ]),
  );
const errorAnswer = (description: string) => ({ description, content: { 'application/json': { schema: error } } });
const ok = (description: string, s: Json) => ({ description, content: { 'application/json': { schema: s } } });
const READY_DESCRIPTION =
  "200 with status 'ok' when Redis and S3 answer within HEALTH_CHECK_TIMEOUT_MS and DEFAULT_MODEL's manifest.json is under MODELS_DIR. " +
  "200 with status 'overloaded' (+ Retry-After) when a check did not answer in time because of load: a connected Redis or an S3 endpoint that accepts connections that did not answer within HEALTH_CHECK_TIMEOUT_MS, or any check while this process's event loop was held up past EVENT_LOOP_OVERLOAD_MS; that check has `ok` false and `overloaded` true. A busy process is not taken out of the load balancer for being busy. " +
  "Otherwise 503 with status 'degraded' and the same body: a backing service down (refused, not connected, no answer while neither connected nor busy) sets its `ok` to false and adds `Retry-After`; a default model that is not built sets `models.ok` to false and lists it in `models.missing` with a `hint` (`npm run build-model`), without Retry-After: it needs an operator, not a retry. " +
  'Public (no API key). A Kubernetes readiness probe (infra/k8s/api.yaml).';
const READY_RESPONSES = {
  '200': ok("ready: status 'ok', or 'overloaded' (then with a Retry-After header)", out(ReadinessSchema)),
  '503': ok('not ready: Redis or S3 down (Retry-After set), or the default model missing (models.ok false)', out(ReadinessSchema)),
};
const idParam = { name: 'id', in: 'path', required: true, schema: { type: 'string', pattern: ID_PATTERN.source }, description: 'collection id (400 naming path.id when it does not match)' };
const waitParam = { name: 'wait', in: 'query', required: false, schema: { type: 'number', minimum: 0 }, description: 'block up to this many seconds (<= RERANK_MAX_WAIT_SECONDS) for the result' };

/**
 * The OpenAPI document, generated from the same zod schemas that validate requests, so the
 * documented shapes cannot drift from the code.
 */
export function openApiDocument(version: string, limits: LiveLimits = {}) {
  setLive({ ...defaultLive(), ...limits });
  defs = {};
  try {
    const doc = withServerRules(withQuotaAnswers(withApiKeySecurity(baseDocument(version))), limits);
    Object.assign(doc.components.schemas, defs);
    return doc;
  } finally {
    setLive(defaultLive());
    defs = {};
  }
}


/** The document-id rule of the API (documentId in @lateral/shared): no control character; at most 512 UTF-8 bytes, so 128 characters of any script. */
const DOC_ID_PATH = { type: 'string', minLength: 1, maxLength: 128, pattern: '^[^\\u0000-\\u001f\\u007f]+$' };
/** A character JavaScript's String.prototype.trim keeps: a text with one is not empty once trimmed. */
const NOT_ONLY_WHITESPACE = '[^\\t\\n\\u000b\\f\\r \\u00a0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000\\ufeff]';
/** Swagger's groups, one per resource, in this order. */
const TAGS: [string, string][] = [
  ['collections', 'create, describe, list and delete collections; re-compression and merges'],
  ['documents', 'ingest documents, follow an ingestion, read and delete documents'],
  ['search', 'search a whole collection (xtr, bm25, dense, mebert, exhaustive, hybrid)'],
  ['rerank', 're-rank candidates (ids of a collection, or texts)'],
  ['batches', 'batch files of re-rank rows, and the uploads they name'],
  ['training', 'judgments and learned heads'],
  ['cohere', 'the Cohere-compatible re-rank'],
  ['service', 'health, readiness, models, the caller\'s quota'],
  ['admin', 'operators: API keys, quotas, the overview, job retries'],
];

/** The tag of a path (the resource it belongs to). */
function tagOf(path: string): string {
  if (path.startsWith('/v1/admin')) return 'admin';
  if (path.startsWith('/v1/compat/cohere')) return 'cohere';
  if (/^\/v1\/(batches|uploads)/.test(path)) return 'batches';
  if (/^\/v1\/train\/|\/(judgments|train)(\/|$)/.test(path)) return 'training';
  if (/^\/v1\/collections\/\{id\}\/(documents|ingestions|deletes)/.test(path)) return 'documents';
  if (path.startsWith('/v1/collections')) return 'collections';
  if (path.startsWith('/v1/search')) return 'search';
  if (path.startsWith('/v1/rerank')) return 'rerank';
  return 'service';
}

/** Path parameters that are not resource ids (ID_PATTERN): their own rules, set where they are declared. */
const FREE_PATH_PARAMS = new Set(['docId', 'jobId', 'queue']);

/**
 * Rules the server applies that each operation would otherwise have to repeat (the document
 * states what the server does, schemathesis checks both directions): every id in a path is a
 * resource id (ID_PATTERN, the pipes in path-params.ts); a document id in a path follows the
 * document-id rule; `wait` is at most RERANK_MAX_WAIT_SECONDS.
 */
function withServerRules<D extends { paths: Record<string, Record<string, unknown>> }>(doc: D, limits: LiveLimits): D {
  const maxWait = limits.maxWaitSeconds ?? 60;
  (doc as { tags?: unknown }).tags = TAGS.map(([name, description]) => ({ name, description }));
  for (const [path, ops] of Object.entries(doc.paths)) {
    const tag = tagOf(path);
    for (const op of Object.values(ops)) {
      if (op && typeof op === 'object' && !Array.isArray(op)) (op as { tags?: string[] }).tags ??= [tag];
      const params = (op as { parameters?: { name: string; in: string; schema?: Json }[] }).parameters;
      if (!Array.isArray(params)) continue;
      const responses = (op as { responses?: Record<string, unknown> }).responses;
      // Any operation with a path or query parameter can be sent a malformed one: the pipes answer 400 naming it.
      if (responses && !responses['400'] && params.some((p) => p.in === 'path' || p.in === 'query')) {
        responses['400'] = { description: 'a malformed path or query parameter (the message names it)', content: { 'application/json': { schema: error } } };
      }
      (op as { parameters: unknown[] }).parameters = params.map((p) => {
        if (p.in === 'path' && p.name === 'docId') return { ...p, schema: DOC_ID_PATH };
        if (p.in === 'path' && !FREE_PATH_PARAMS.has(p.name) && !(p.schema as { pattern?: string } | undefined)?.pattern) return { ...p, schema: { type: 'string', pattern: ID_PATTERN.source } };
        // An empty value (`?wait=`) is taken as absent: the default (json-body.ts parseWaitSeconds).
        if (p.in === 'query' && p.name === 'wait') return { ...p, schema: { anyOf: [{ type: 'number', minimum: 0, maximum: maxWait }, { type: 'string', maxLength: 0 }] } };
        return p;
      });
    }
  }
  return doc;
}

function baseDocument(version: string) {
  return {
    openapi: '3.1.0',
    info: {
      title: 'lateral',
      version,
      description: 'Late-interaction retrieval and re-ranking: ingest documents, store them as token vectors in S3, re-rank candidates asynchronously with MaxSim and friends.',
    },
    paths: {
      '/v1/models': {
        get: {
          summary: 'The models this service encodes with (every model directory under MODELS_DIR with a valid manifest.json), which one is DEFAULT_MODEL and which one the Cohere-compatible route uses for Cohere model names (COHERE_MODEL)',
          responses: {
            '200': ok('models', out(ModelListSchema)),
          },
        },
      },
      '/v1/health': {
        get: {
          summary: 'Readiness (the same answer as /v1/health/ready, kept for existing clients)',
          description: READY_DESCRIPTION,
          responses: READY_RESPONSES,
        },
      },
      '/v1/health/ready': {
        get: { summary: 'Readiness: Redis, S3, the default model, queue counts', description: READY_DESCRIPTION, responses: READY_RESPONSES },
      },
      '/v1/health/live': {
        get: {
          summary: 'Liveness: the process answers',
          description:
            'Always 200 while the process can answer HTTP: it checks no dependency (Redis or S3 down or slow does not fail it) and does not fail because the process is busy (the lag is reported, not judged). ' +
            'Public (no API key). A Kubernetes liveness probe (infra/k8s/api.yaml): give it a timeout and failure threshold longer than the longest task that may hold the event loop.',
          responses: { '200': ok('alive', out(LivenessSchema)) },
        },
      },
      '/v1/collections': {
        get: { summary: 'List collections (each described as by GET /v1/collections/{id})', responses: { '200': ok('collections', out(CollectionListSchema)), ...errors(503) } },
        post: {
          summary: 'Create a collection',
          description: "400 names the failing field, e.g. `codec.sideInfo` when side information is asked for with a kind other than 'eden' or a model that declares no static input embeddings (manifest `staticEmbeddings`), `codec.poolFactor` outside 1..16, or `codec.poolFactor` above 1 together with `codec.sideInfo` (both fields named).",
          requestBody: { required: true, content: { 'application/json': { schema: schema(CreateCollectionForm) } } },
          responses: { '201': ok('created: the stored collection', out(CollectionSchema)), ...errors(400, 503), '409': errorAnswer('a collection with this id already exists') },
        },
      },
      '/v1/collections/{id}': {
        get: {
          summary: 'Describe a collection (generation, distinct live documents, tokens, bytes per token, stage counts)',
          description: 'Everything here is read from S3: the current generation is the highest manifest; `stages` sums every ingestion of the collection (see IngestionStatus).',
          parameters: [idParam],
          responses: { '200': ok('collection', { $ref: '#/components/schemas/CollectionDescription' }), ...errors([404, 'no collection with this id'], 503) },
        },
        delete: { summary: 'Delete a collection and everything it stores', parameters: [idParam], responses: { '204': { description: 'deleted' }, ...errors([404, 'no collection with this id'], 503) } },
      },
      '/v1/collections/{id}/documents': {
        get: {
          summary: 'Live document ids of the current generation, sorted, one page at a time',
          description: `An id ingested again counts once; passages are listed by their ids (\`docId#n\`). \`limit\`: 1..${MAX_DOCUMENT_LIST_LIMIT} (default ${DEFAULT_DOCUMENT_LIST_LIMIT}); \`cursor\`: the \`nextCursor\` of the previous page, unchanged (absent on the last page). 400 names \`limit\` or \`cursor\`.`,
          parameters: [
            idParam,
            { name: 'limit', in: 'query', required: false, schema: { anyOf: [{ type: 'integer', minimum: 1, maximum: MAX_DOCUMENT_LIST_LIMIT, default: DEFAULT_DOCUMENT_LIST_LIMIT }, { type: 'string', maxLength: 0, description: 'empty: the default' }] } },
            { name: 'cursor', in: 'query', required: false, schema: { type: 'string', pattern: CURSOR_PATTERN.source, maxLength: 4096 }, description: 'opaque: nextCursor of the previous page' },
          ],
          responses: { '200': ok('one page of ids', { $ref: '#/components/schemas/DocumentIdPage' }), ...errors(400, [404, 'no collection with this id'], 503) },
        },
        post: {
          summary: 'Ingest documents (JSON array, {documents: [...], wait?}, or NDJSON). Written to S3 before the answer.',
          description:
            '202 with the accepted ingestion (and `Location`: its status). With `wait` (query, or the body field of the object form; seconds, <= RERANK_MAX_WAIT_SECONDS) the answer waits for the ingestion: 200 with its final status (the 202 fields plus IngestionStatus) when it is done or failed in time, else 202 as without `wait`. In a collection with `passages`, `#` is reserved in document ids.',
          parameters: [idParam, waitParam],
          requestBody: {
            required: true,
            content: {
              'application/json': {
                schema: {
                  oneOf: [
                    { type: 'array', minItems: 1, items: { $ref: '#/components/schemas/Document' } },
                    { type: 'object', required: ['documents'], additionalProperties: false, properties: { documents: { type: 'array', minItems: 1, items: { $ref: '#/components/schemas/Document' } }, wait: { type: 'number', minimum: 0, maximum: currentLive().maxWaitSeconds } } },
                  ],
                },
              },
              'application/x-ndjson': { schema: { type: 'string', description: 'one Document JSON object per line' } },
            },
          },
          responses: {
            '200': ok('finished within wait: the accepted ingestion and its final status', out(IngestionFinishedSchema)),
            '202': { ...ok('accepted (or not done within wait); poll the ingestion status', { $ref: '#/components/schemas/Ingestion' }), headers: location('the ingestion status') },
            ...errors(400, [404, 'no collection with this id'], 413, 415, 503),
            '409': errorAnswer("an id holds '#', which a collection with passages reserves for passage ids (the message names them)"),
          },
        },
      },
      '/v1/collections/{id}/documents/{docId}': {
        get: {
          summary: 'One live document, read back from S3: text, metadata, tokens, truncation, the generation and segment holding it',
          description:
            'A passage (`docId#n`, collections with `passages`) answers its own text with `parent`; the id of a document split into passages answers its whole text with `passages`. 404 names the id (a document of an ingestion still in progress is not live yet).',
          parameters: [idParam, { name: 'docId', in: 'path', required: true, schema: { type: 'string', maxLength: 512 }, description: 'document id, URL-encoded' }],
          responses: { '200': ok('the document', { $ref: '#/components/schemas/StoredDocument' }), ...errors(400, [404, 'no such collection, or the id is not a live document (the message names the ingestion when one still in progress accepted it)'], 503) },
        },
        delete: {
          summary: 'Delete one document: commits a generation with its tombstone (through the commit queue); 200 once committed',
          description:
            'After the 200 the document is never returned by re-rank or search and `documents` no longer counts it. 404 names the id when it is not a live document. `wait` (default 30 s, <= RERANK_MAX_WAIT_SECONDS): longer than that, 202 with the status URL. A delete and an ingest of the same id: the one committed later wins (an ingestion is acknowledged when its state is `done`).',
          parameters: [idParam, { name: 'docId', in: 'path', required: true, schema: { type: 'string', maxLength: 512 }, description: 'document id, URL-encoded' }, waitParam],
          responses: { '200': ok('deleted', { $ref: '#/components/schemas/DeleteResult' }), '202': ok('still in the commit queue', { $ref: '#/components/schemas/DeletePending' }), ...errors(400, 404, 503) },
        },
      },
      '/v1/collections/{id}/documents/delete': {
        post: {
          summary: `Delete documents by ids (at most ${MAX_DELETE_IDS}) or by a search filter: one generation with their tombstones; 200 once committed`,
          description:
            'Exactly one of `ids` or `filter` (the search filter language). Ids that are not live documents are listed in `notFound` (not an error). Nothing live to delete: 200 with `committed: false`. `wait` as for the single delete.',
          parameters: [idParam, waitParam],
          requestBody: { required: true, content: { 'application/json': { schema: schema(DeleteDocumentsForm) } } },
          responses: { '200': ok('deleted', { $ref: '#/components/schemas/DeleteResult' }), '202': ok('still in the commit queue', { $ref: '#/components/schemas/DeletePending' }), ...errors(400, 404, 503) },
        },
      },
      '/v1/collections/{id}/deletes/{deleteId}': {
        get: {
          summary: 'A delete that answered 202: its result once committed',
          parameters: [idParam, { name: 'deleteId', in: 'path', required: true, schema: { type: 'string' } }],
          responses: { '200': ok('deleted', { $ref: '#/components/schemas/DeleteResult' }), '202': ok('still in the commit queue', { $ref: '#/components/schemas/DeletePending' }), ...errors(404, 503) },
        },
      },
      '/v1/collections/{id}/merge': {
        post: {
          summary: 'Merge small segments and drop deleted documents (tiered policy); 200 with what the merge did',
          description:
            'A merge job on the merge queue (one per collection at a time, beside commits and deletes; also enqueued after each committed generation with MERGE_AFTER_COMMIT). The tiered policy (MERGE_FACTOR, MERGE_DELETED_FRACTION, MERGE_FLOOR_DOCUMENTS, MERGE_MAX_DOCUMENTS, MERGE_MAX_BYTES) picks the segments on the current generation; their live documents\' coded rows, raw vectors and index postings are copied (never re-coded: scores do not change) into one segment with its search index, and only the reference swap is committed, as one generation (deletes and ingests committed meanwhile are carried over). `status`: `merged`, `nothing-to-merge`, `inputs-gone` (the inputs changed before the commit: nothing committed) or `recompressing`. Asking again on the same generation answers the same job. `wait` (default 30 s): longer than that, 202.',
          parameters: [idParam, waitParam],
          responses: {
            '200': ok('the merge finished', out(MergeResultSchema)),
            '202': ok('still in the merge queue; ask again (same generation: same job)', out(MergePendingSchema)),
            ...errors(400, 404, 503),
          },
        },
      },
      '/v1/collections/{id}/recompress': {
        post: {
          summary: 'Re-compress a collection at new codec settings from its stored raw vectors (no re-encoding); the new generation is committed when every segment is written',
          description:
            "Same codec forms as creation, plus `codec.trained` (a trained AESI codec of this collection: kind 'eden', sideInfo true). 404 when the collection, or the trained codec named, is not there; 409 when the settings do not fit the collection's model (`codec.dims` over its dims, side information without its static embedding table) or the trained codec (its code dims), or when a re-compression is running or nothing is committed.",
          parameters: [idParam],
          requestBody: { required: true, content: { 'application/json': { schema: schema(RecompressForm) } } },
          responses: {
            '202': ok('re-compression queued: poll the collection (status URL); its codecVersion and codec change when every segment is re-written', out(RecompressAcceptedSchema)),
            ...errors(400, 404, 503),
            '409': errorAnswer('not now: a re-compression of this collection is already running (the message names its codec version), or the collection has no committed segments to re-compress'),
          },
        },
      },
      '/v1/collections/{id}/ingestions/{ingestionId}': {
        get: {
          summary: 'Ingestion progress: documents per stage',
          description:
            'Derived from S3 per batch (raw vectors, segments, the current generation, failure records): a job delivered twice counts once, and the status survives a Redis that lost its data. `done` means every document is in the current generation.',
          parameters: [idParam, { name: 'ingestionId', in: 'path', required: true, schema: { type: 'string' } }],
          responses: { '200': ok('status', { $ref: '#/components/schemas/IngestionStatus' }), ...errors([404, 'no such collection, or no such ingestion in it'], 503) },
        },
      },
      '/v1/search': {
        post: {
          summary: `Search a whole collection (modes: ${SEARCH_MODES.join(', ')}). Answers 202 with a job id, or 200 with the result when it finishes within \`wait\`.`,
          description:
            'Every committed segment is searched with its own index and the per-segment lists are merged exactly (XTR: per query token top-k\' over the token IVF, missing similarities imputed by the global k\'-th score; BM25 with global statistics; dense and ME-BERT over pooled vectors; exhaustive MaxSim, the reference). `filter` (Qdrant-like `must` / `should` / `must_not` of `{ key, match: { value } | { any: [...] } | range: { gt, gte, lt, lte } | is_empty | exists }`, nestable) applies before ranking. `rerank` re-scores the top `depth` hits with any re-rank scorer. `explain` returns, per hit and query token, the matched document token and its similarity (xtr, exhaustive). 400 names a bad mode, parameter or filter path; a query of only stop words or punctuation gets empty hits with a `reason`; a collection with no committed generation answers empty hits with `generation: 0`.',
          parameters: [waitParam],
          requestBody: {
            required: true,
            content: {
              'application/json': {
                schema: schema(SearchRequestForm),
                examples: {
                  xtr: { value: { collection: 'papers', queries: [{ id: 'q1', text: 'supersonic wing flutter' }], mode: { name: 'xtr', kPrime: 1000, nprobe: 32 }, topK: 10 } },
                  filtered: {
                    value: {
                      collection: 'papers',
                      queries: [{ id: 'q1', text: 'heat transfer' }],
                      mode: 'bm25',
                      filter: { must: [{ key: 'year', range: { gte: 1960 } }], must_not: [{ key: 'kind', match: { any: ['draft', 'retracted'] } }] },
                    },
                  },
                  hybrid: { value: { collection: 'papers', queries: [{ id: 'q1', text: 'shock wave' }], mode: { name: 'hybrid', base: 'xtr', fusion: 'linear', lambda: 0.5, normalization: 'minmax' }, rerank: { scorer: 'maxsim', depth: 100 } } },
                },
              },
            },
          },
          responses: { '200': ok('finished within wait', { $ref: '#/components/schemas/SearchStatus' }), '202': { ...ok('queued', { $ref: '#/components/schemas/SearchStatus' }), headers: location('GET /v1/search/{id}') }, ...errors(400, [404, 'no collection with this id'], 413, 415, 503) },
        },
      },
      '/v1/search/{id}': {
        get: {
          summary: 'Status and result of a search job',
          parameters: [{ name: 'id', in: 'path', required: true, schema: { type: 'string' } }, waitParam],
          responses: { '200': ok('status (completed or failed, or still queued / running when `wait` ran out)', { $ref: '#/components/schemas/SearchStatus' }), ...errors(400, [404, 'unknown job id, or its result expired (kept 24 hours)'], 503) },
        },
      },
      '/v1/rerank': {
        post: {
          summary: `Re-rank candidates of one or more queries (scorers: ${SCORER_NAMES.join(', ')}). Answers 202 with a job id, or 200 with the result when it finishes within \`wait\`.`,
          parameters: [waitParam],
          requestBody: { required: true, content: { 'application/json': { schema: schema(RerankRequestForm) } } },
          responses: {
            '200': ok('finished within wait', { $ref: '#/components/schemas/RerankStatus' }),
            '202': { ...ok('queued', { $ref: '#/components/schemas/RerankStatus' }), headers: location('GET /v1/rerank/{id}') },
            ...errors(400, [404, 'no collection with this id, or no trained head of the artifact named'], 413, 415, 503),
            '409': errorAnswer("`model` is not the collection's model (leave it out, or name the collection's)"),
          },
        },
      },
      '/v1/rerank/{id}': {
        get: {
          summary: 'Status and result of a re-rank job; missing candidate ids are listed per query',
          parameters: [{ name: 'id', in: 'path', required: true, schema: { type: 'string' } }, waitParam],
          responses: { '200': ok('status (completed or failed, or still queued / running when `wait` ran out)', { $ref: '#/components/schemas/RerankStatus' }), ...errors(400, [404, 'unknown job id, or its result expired (kept 24 hours)'], 503) },
        },
      },
      ...ADMIN_OPENAPI_PATHS,
      ...batchOpenApiPaths(),
      ...trainingOpenApiPaths(),
      ...QUOTA_OPENAPI_PATHS,
    },
    /** What lateral POSTs to a re-rank or search request's `callback` (docs/webhooks.md). */
    webhooks: WEBHOOK_OPENAPI,
    components: {
      securitySchemes: ADMIN_SECURITY_SCHEMES,
      schemas: {
        ...BATCH_OPENAPI_SCHEMAS,
        ...WEBHOOK_OPENAPI_SCHEMAS,
        Error: out(ErrorBodySchema),
        // documents.ts validateDocuments: ids unique within one request, text not only whitespace, at most MAX_DOCUMENT_BYTES.
        Document: {
          type: 'object',
          required: ['id', 'text'],
          additionalProperties: false,
          properties: {
            id: { ...DOC_ID_PATH, description: 'unique within the request; at most 512 bytes of UTF-8, no control character' },
            text: { type: 'string', pattern: NOT_ONLY_WHITESPACE, description: 'not only whitespace; at most MAX_DOCUMENT_BYTES bytes (UTF-8)' },
            metadata: { type: 'object' },
          },
        },
        Ingestion: out(IngestionAcceptedSchema),
        Stages: out(StageCountsSchema),
        IngestionStatus: out(IngestionStatusSchema),
        CollectionDescription: out(CollectionDescriptionSchema),
        CodecSettings: schema(CodecSettingsSchema),
        DeleteResult: out(DeleteResultSchema),
        DeletePending: out(DeletePendingSchema),
        RerankHit: out(RerankHitSchema),
        StoredDocument: out(StoredDocumentSchema),
        DocumentIdPage: out(DocumentIdPageSchema),
        SearchStatus: out(SearchStatusSchema),
        RerankStatus: out(RerankStatusSchema),
      },
    },
  };
}
