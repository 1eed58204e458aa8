import { z } from 'zod';
import { CodecSettingsSchema, CreateCollectionSchema, RerankRequestSchema, SCORER_NAMES, SEARCH_MODES, SearchRequestSchema } from '@lateral/shared';
import { DEFAULT_DOCUMENT_LIST_LIMIT, ID_PATTERN, MAX_DOCUMENT_LIST_LIMIT, TRUNCATED_IDS_SHOWN } from '@lateral/shared';
import { DeleteDocumentsSchema, MAX_DELETE_IDS } from '@lateral/shared';
import { withApiKeySecurity } from './openapi-keys';
import { ADMIN_OPENAPI_PATHS, ADMIN_SECURITY_SCHEMES } from './openapi-admin';
import { BATCH_OPENAPI_PATHS, BATCH_OPENAPI_SCHEMAS } from './openapi-batches';
import { TRAINING_OPENAPI_PATHS } from './openapi-training';

const schema = (s: z.ZodType) => z.toJSONSchema(s, { io: 'input', unrepresentable: 'any' }) as Record<string, unknown>;

const error = { $ref: '#/components/schemas/Error' };
const errors = (...codes: number[]) =>
  Object.fromEntries(
    codes.map((c) => [
      String(c),
      {
        description: { 400: 'bad input (the message and details name the field and the limit)', 404: 'unknown resource', 409: 'already exists', 413: 'body over MAX_REQUEST_BYTES', 415: 'Content-Type not taken by this endpoint (the message names the accepted types), or a charset other than UTF-8', 503: 'Redis or S3 unreachable, a queue over MAX_QUEUE_BACKLOG, or too many large bodies at once (BODY_PARSE_CONCURRENCY); retry after the Retry-After header' }[c] ?? 'error',
        content: { 'application/json': { schema: error } },
      },
    ]),
  );
const ok = (description: string, s: Record<string, unknown> = { type: 'object' }) => ({ description, content: { 'application/json': { schema: s } } });
const serviceCheck = { type: 'object', required: ['ok', 'ms'], properties: { ok: { type: 'boolean' }, ms: { type: 'number' }, error: { type: 'string' } } };
/** GET /v1/health, 200 and 503 alike (libs/http-api/src/health.controller.ts). */
const HEALTH = {
  type: 'object',
  required: ['status', 'redis', 's3', 'models', 'queues'],
  properties: {
    status: { type: 'string', enum: ['ok', 'degraded'] },
    redis: serviceCheck,
    s3: serviceCheck,
    models: {
      type: 'object',
      required: ['ok', 'default', 'missing'],
      properties: {
        ok: { type: 'boolean' },
        default: { type: 'string', description: 'DEFAULT_MODEL' },
        missing: { type: 'array', items: { type: 'string' }, description: 'models whose manifest.json is not under MODELS_DIR' },
        hint: { type: 'string', description: 'what to do, when something is missing' },
      },
    },
    queues: { type: ['object', 'null'], additionalProperties: { type: 'object', additionalProperties: { type: 'number' } }, description: 'job counts per queue and state; null when Redis is down' },
  },
};
const idParam = { name: 'id', in: 'path', required: true, schema: { type: 'string', pattern: ID_PATTERN.source }, description: 'collection id (400 naming path.id when it does not match)' };
const waitParam = { name: 'wait', in: 'query', required: false, schema: { type: 'number', minimum: 0 }, description: 'block up to this many seconds (<= RERANK_MAX_WAIT_SECONDS) for the result' };

/**
 * The OpenAPI document, generated from the same zod schemas that validate requests, so the
 * documented shapes cannot drift from the code.
 */
export function openApiDocument(version: string) {
  return withApiKeySecurity(baseDocument(version));
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
      '/v1/health': {
        get: {
          summary: 'Readiness: Redis, S3, the default model, queue counts',
          description:
            "200 with status 'ok' when Redis and S3 answer and DEFAULT_MODEL's manifest.json is under MODELS_DIR. Otherwise 503 with status 'degraded' and the same body: " +
            "a backing service down sets its `ok` to false and adds `Retry-After`; a default model that is not built sets `models.ok` to false and lists it in `models.missing` with a `hint` (`npm run build-model`), without Retry-After: it needs an operator, not a retry.",
          responses: {
            '200': ok('ready', HEALTH),
            '503': ok('not ready: Redis or S3 unreachable (Retry-After set), or the default model missing (models.ok false)', HEALTH),
          },
        },
      },
      '/v1/collections': {
        get: { summary: 'List collections', responses: { '200': ok('collections') } },
        post: {
          summary: 'Create a collection',
          description: "400 names the failing field, e.g. `codec.sideInfo` when side information is asked for with a kind other than 'eden' or a model that declares no static input embeddings (manifest `staticEmbeddings`).",
          requestBody: { required: true, content: { 'application/json': { schema: schema(CreateCollectionSchema) } } },
          responses: { '201': ok('created'), ...errors(400, 409, 503) },
        },
      },
      '/v1/collections/{id}': {
        get: {
          summary: 'Describe a collection (generation, distinct live documents, tokens, bytes per token, stage counts)',
          description: 'Everything here is read from S3: the current generation is the highest manifest; `stages` sums every ingestion of the collection (see IngestionStatus).',
          parameters: [idParam],
          responses: { '200': ok('collection', { $ref: '#/components/schemas/CollectionDescription' }), ...errors(404, 503) },
        },
        delete: { summary: 'Delete a collection and everything it stores', parameters: [idParam], responses: { '204': { description: 'deleted' }, ...errors(404, 503) } },
      },
      '/v1/collections/{id}/documents': {
        get: {
          summary: 'Live document ids of the current generation, sorted, one page at a time',
          description: `An id ingested again counts once; passages are listed by their ids (\`docId#n\`). \`limit\`: 1..${MAX_DOCUMENT_LIST_LIMIT} (default ${DEFAULT_DOCUMENT_LIST_LIMIT}); \`cursor\`: the \`nextCursor\` of the previous page, unchanged (absent on the last page). 400 names \`limit\` or \`cursor\`.`,
          parameters: [
            idParam,
            { name: 'limit', in: 'query', required: false, schema: { type: 'integer', minimum: 1, maximum: MAX_DOCUMENT_LIST_LIMIT, default: DEFAULT_DOCUMENT_LIST_LIMIT } },
            { name: 'cursor', in: 'query', required: false, schema: { type: 'string' }, description: 'opaque: nextCursor of the previous page' },
          ],
          responses: { '200': ok('one page of ids', { $ref: '#/components/schemas/DocumentIdPage' }), ...errors(400, 404, 503) },
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
                    { type: 'array', items: { $ref: '#/components/schemas/Document' } },
                    { type: 'object', required: ['documents'], properties: { documents: { type: 'array', items: { $ref: '#/components/schemas/Document' } }, wait: { type: 'number', minimum: 0 } } },
                  ],
                },
              },
              'application/x-ndjson': { schema: { type: 'string', description: 'one Document JSON object per line' } },
            },
          },
          responses: {
            '200': ok('finished within wait: the final ingestion status', { allOf: [{ $ref: '#/components/schemas/Ingestion' }, { $ref: '#/components/schemas/IngestionStatus' }] }),
            '202': ok('accepted; poll the ingestion status', { $ref: '#/components/schemas/Ingestion' }),
            ...errors(400, 404, 413, 503),
          },
        },
      },
      '/v1/collections/{id}/documents/{docId}': {
        get: {
          summary: 'One live document, read back from S3: text, metadata, tokens, truncation, the generation and segment holding it',
          description:
            'A passage (`docId#n`, collections with `passages`) answers its own text with `parent`; the id of a document split into passages answers its whole text with `passages`. 404 names the id (a document of an ingestion still in progress is not live yet).',
          parameters: [idParam, { name: 'docId', in: 'path', required: true, schema: { type: 'string', maxLength: 512 }, description: 'document id, URL-encoded' }],
          responses: { '200': ok('the document', { $ref: '#/components/schemas/StoredDocument' }), ...errors(400, 404, 503) },
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
          requestBody: { required: true, content: { 'application/json': { schema: schema(DeleteDocumentsSchema) } } },
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
      '/v1/collections/{id}/recompress': {
        post: {
          summary: 'Re-compress a collection at new codec settings from its stored raw vectors (no re-encoding); the new generation is committed when every segment is written',
          description: "Same codec checks as creation (`codec.sideInfo` needs kind 'eden' and a model with static input embeddings).",
          parameters: [idParam],
          requestBody: { required: true, content: { 'application/json': { schema: { type: 'object', required: ['codec'], properties: { codec: { $ref: '#/components/schemas/CodecSettings' } } } } } },
          responses: { '202': ok('re-compression queued'), ...errors(400, 404, 409, 503) },
        },
      },
      '/v1/collections/{id}/ingestions/{ingestionId}': {
        get: {
          summary: 'Ingestion progress: documents per stage',
          description:
            'Derived from S3 per batch (raw vectors, segments, the current generation, failure records): a job delivered twice counts once, and the status survives a Redis that lost its data. `done` means every document is in the current generation.',
          parameters: [idParam, { name: 'ingestionId', in: 'path', required: true, schema: { type: 'string' } }],
          responses: { '200': ok('status', { $ref: '#/components/schemas/IngestionStatus' }), ...errors(404, 503) },
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
                schema: schema(SearchRequestSchema),
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
          responses: { '200': ok('finished within wait', { $ref: '#/components/schemas/SearchStatus' }), '202': ok('queued', { $ref: '#/components/schemas/SearchStatus' }), ...errors(400, 404, 413, 503) },
        },
      },
      '/v1/search/{id}': {
        get: {
          summary: 'Status and result of a search job',
          parameters: [{ name: 'id', in: 'path', required: true, schema: { type: 'string' } }, waitParam],
          responses: { '200': ok('status', { $ref: '#/components/schemas/SearchStatus' }), ...errors(400, 404, 503) },
        },
      },
      '/v1/rerank': {
        post: {
          summary: `Re-rank candidates of one or more queries (scorers: ${SCORER_NAMES.join(', ')}). Answers 202 with a job id, or 200 with the result when it finishes within \`wait\`.`,
          parameters: [waitParam],
          requestBody: { required: true, content: { 'application/json': { schema: schema(RerankRequestSchema) } } },
          responses: { '200': ok('finished within wait', { $ref: '#/components/schemas/RerankStatus' }), '202': ok('queued', { $ref: '#/components/schemas/RerankStatus' }), ...errors(400, 404, 413, 503) },
        },
      },
      '/v1/rerank/{id}': {
        get: {
          summary: 'Status and result of a re-rank job; missing candidate ids are listed per query',
          parameters: [{ name: 'id', in: 'path', required: true, schema: { type: 'string' } }, waitParam],
          responses: { '200': ok('status', { $ref: '#/components/schemas/RerankStatus' }), ...errors(400, 404, 503) },
        },
      },
      ...ADMIN_OPENAPI_PATHS,
      ...BATCH_OPENAPI_PATHS,
      ...TRAINING_OPENAPI_PATHS,
    },
    components: {
      securitySchemes: ADMIN_SECURITY_SCHEMES,
      schemas: {
        ...BATCH_OPENAPI_SCHEMAS,
        Error: { type: 'object', required: ['error', 'message'], properties: { error: { type: 'string' }, message: { type: 'string' }, details: { type: 'array', items: { type: 'object', properties: { field: { type: 'string' }, message: { type: 'string' } } } } } },
        Document: { type: 'object', required: ['id', 'text'], additionalProperties: false, properties: { id: { type: 'string', maxLength: 512 }, text: { type: 'string', minLength: 1 }, metadata: { type: 'object' } } },
        Ingestion: { type: 'object', properties: { ingestionId: { type: 'string' }, collection: { type: 'string' }, documents: { type: 'integer' }, batches: { type: 'integer' }, status: { type: 'string' } } },
        Stages: {
          type: 'object',
          description: 'documents per stage: accepted (in the ingestion record), encoded (raw vectors written), compressed (segment written), indexed (in the current generation), failed (batch failed for good)',
          properties: { accepted: { type: 'integer' }, encoded: { type: 'integer' }, compressed: { type: 'integer' }, indexed: { type: 'integer' }, failed: { type: 'integer' } },
        },
        IngestionStatus: {
          type: 'object',
          properties: {
            ingestionId: { type: 'string' },
            collection: { type: 'string' },
            state: { enum: ['processing', 'done', 'failed'] },
            stages: { $ref: '#/components/schemas/Stages' },
            batches: { type: 'integer' },
            createdAt: { type: 'string' },
            encodedBatches: { type: 'integer', description: 'batches whose encode job has written its document info (the long-document counts below are over these)' },
            truncated: {
              type: 'object',
              description: `documents cut to the collection's maxDocTokens: how many, and the first ${TRUNCATED_IDS_SHOWN} ids`,
              properties: { documents: { type: 'integer' }, ids: { type: 'array', items: { type: 'string' } } },
            },
            split: { type: 'object', description: 'collections with passages: documents split into passages, and how many passages', properties: { documents: { type: 'integer' }, passages: { type: 'integer' } } },
            failures: {
              type: 'array',
              description: 'present when a batch failed for good',
              items: { type: 'object', properties: { batchId: { type: 'string' }, stage: { type: 'string' }, documents: { type: 'integer' }, error: { type: 'string' } } },
            },
          },
        },
        CollectionDescription: {
          type: 'object',
          properties: {
            id: { type: 'string' },
            model: { type: 'string' },
            dims: { type: 'integer' },
            codec: { $ref: '#/components/schemas/CodecSettings' },
            codecVersion: { type: 'integer' },
            generation: { type: 'integer', description: 'current generation: the highest manifest in S3 (0: nothing committed yet)' },
            segments: { type: 'integer' },
            documents: { type: 'integer', description: 'distinct live document ids (an id ingested again counts once)' },
            tokens: { type: 'integer' },
            segmentBytes: { type: 'integer' },
            bytesPerToken: { type: ['number', 'null'] },
            codecVersions: { type: 'array', items: { type: 'integer' } },
            stages: { $ref: '#/components/schemas/Stages' },
          },
        },
        CodecSettings: schema(CodecSettingsSchema),
        DeleteResult: {
          type: 'object',
          required: ['deleteId', 'generation', 'committed', 'deleted', 'notFound', 'documents'],
          properties: {
            deleteId: { type: 'string' },
            generation: { type: 'integer', description: 'the generation holding the tombstones (the current one when nothing was deleted)' },
            committed: { type: 'boolean', description: 'false: nothing live matched, no generation written' },
            deleted: { type: 'integer' },
            notFound: { type: 'array', items: { type: 'string' }, description: 'requested ids that are not live documents' },
            documents: { type: 'integer', description: 'live documents after the delete' },
          },
        },
        DeletePending: { type: 'object', required: ['deleteId', 'status', 'statusUrl'], properties: { deleteId: { type: 'string' }, status: { enum: ['queued', 'running'] }, statusUrl: { type: 'string' } } },
        RerankHit: {
          type: 'object',
          required: ['id', 'score'],
          properties: {
            id: { type: 'string' },
            score: { type: ['number', 'null'] },
            text: { type: 'string', description: "with include: ['text'] (a passage's own text)" },
            metadata: { type: ['object', 'null'], description: "with include: ['metadata'] (a passage carries its parent's)" },
            parent: { type: 'string', description: 'a passage hit (collections with passages): its parent document' },
            passage: { type: 'string', description: "group: 'parent': the best-scoring passage, whose score the hit carries" },
          },
        },
        StoredDocument: {
          type: 'object',
          required: ['id', 'collection', 'text', 'metadata', 'tokens', 'truncated', 'generation', 'segment'],
          properties: {
            id: { type: 'string' },
            collection: { type: 'string' },
            text: { type: 'string' },
            metadata: { type: ['object', 'null'] },
            tokens: { type: ['integer', 'null'], description: 'token vectors stored (special tokens in, skiplist tokens out); a split document: the sum over its passages; null for documents encoded before this was recorded' },
            truncated: { type: ['boolean', 'null'], description: "content tokens were cut to the collection's maxDocTokens" },
            originalTokens: { type: 'integer', description: "the model's sequence length of the whole text: present when it was truncated or split" },
            parent: { type: 'string', description: 'a passage: its parent document' },
            passages: { type: 'array', items: { type: 'string' }, description: 'a document split into passages: their ids' },
            generation: { type: 'integer', description: 'the current generation it was read from' },
            segment: { type: 'object', properties: { batchId: { type: 'string' }, key: { type: 'string' }, codecVersion: { type: 'integer' } }, description: 'the segment holding it (a split document: its first passage)' },
          },
        },
        DocumentIdPage: {
          type: 'object',
          required: ['collection', 'generation', 'documents'],
          properties: { collection: { type: 'string' }, generation: { type: 'integer' }, documents: { type: 'array', items: { type: 'string' } }, nextCursor: { type: 'string', description: 'absent on the last page' } },
        },
        SearchStatus: {
          type: 'object',
          properties: {
            id: { type: 'string' },
            status: { enum: ['queued', 'running', 'completed', 'failed'] },
            progress: { type: 'number' },
            error: { type: 'string' },
            result: {
              type: 'object',
              properties: {
                generation: { type: 'integer', description: 'collection generation searched (0: nothing committed yet)' },
                mode: { type: 'object' },
                timings: { type: 'object', properties: { totalMs: { type: 'number' }, encodeQueriesMs: { type: 'number' }, searchMs: { type: 'number' }, loadMs: { type: 'number' } } },
                results: {
                  type: 'array',
                  items: {
                    type: 'object',
                    properties: {
                      queryId: { type: 'string' },
                      reason: { type: 'string', description: 'why there are no hits (e.g. only stop words), when that is known' },
                      hits: {
                        type: 'array',
                        items: {
                          type: 'object',
                          properties: {
                            id: { type: 'string' },
                            score: { type: 'number' },
                            scoredBy: { type: 'string', description: 'the mode, or rerank:<scorer> for a second stage' },
                            text: { type: 'string', description: "with include: ['text'] (a passage's own text)" },
                            metadata: { type: ['object', 'null'], description: "with include: ['metadata'] (a passage carries its parent's)" },
                            parent: { type: 'string', description: 'a passage hit (collections with passages): its parent document' },
                            passage: { type: 'string', description: "group: 'parent': the best-scoring passage, whose score the hit carries" },
                            explain: {
                              type: 'array',
                              items: { type: 'object', properties: { queryToken: { type: 'string' }, docToken: { type: 'string' }, similarity: { type: 'number' }, imputed: { type: 'boolean' } } },
                            },
                          },
                        },
                      },
                    },
                  },
                },
              },
            },
          },
        },
        RerankStatus: {
          type: 'object',
          properties: {
            id: { type: 'string' },
            status: { enum: ['queued', 'running', 'completed', 'failed'] },
            progress: { type: 'number' },
            error: { type: 'string' },
            result: {
              type: 'object',
              properties: {
                generation: { type: 'integer', description: 'collection generation the candidates were scored in' },
                model: { type: 'string', description: 'the model that encoded the queries and text candidates' },
                texts: {
                  type: 'object',
                  description: 'requests with text candidates: candidates given as text, and distinct texts the encoder pool encoded for this job or found already encoded',
                  properties: { candidates: { type: 'integer' }, encoded: { type: 'integer' }, reused: { type: 'integer' } },
                },
                vectors: {
                  enum: ['rotated-int8', 'fp32'],
                  description: 'how the generation was held: EDEN token-layout codes as their int8 rotated image (MaxSim by integer GEMMs), or decoded fp32 vectors (COMPRESSED_SCORING)',
                },
                timings: { type: 'object', properties: { totalMs: { type: 'number' }, encodeQueriesMs: { type: 'number' }, scoreMs: { type: 'number' }, loadMs: { type: 'number' } } },
                results: { type: 'array', items: { type: 'object', properties: { queryId: { type: 'string' }, hits: { type: 'array', items: { $ref: '#/components/schemas/RerankHit' } }, missing: { type: 'array', items: { type: 'string' } }, pending: { type: 'array', items: { type: 'string' }, description: 'the missing ids an ingestion still in progress accepted: not live yet, rather than unknown (absent when none)' } } } },
              },
            },
          },
        },
      },
    },
  };
}
