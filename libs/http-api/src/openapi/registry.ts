/**
 * The registry every resource's operations are registered in (`registerX(api)` in this folder).
 * `@asteasolutions/zod-to-openapi` collects the operations, components and webhooks and generates
 * the OpenAPI 3.1 document (document.ts); path and query parameters are zod objects it converts.
 *
 * Bodies (requests and responses) are converted by zod's own `z.toJSONSchema`, then handed to the
 * registry: it is io-aware (a response object is closed, `additionalProperties: false`, so a field
 * the code gains without a schema line fails the live document test; a request states what the
 * validator accepts, defaults optional), and its `override` hook is where the live values of the
 * served document (the models built here, the operator artifacts, the callback hosts: LIVE in
 * @lateral/shared) and the string shorthands of scorers and modes are written. The library's own
 * converter has neither (it leaves response objects open and takes a preprocess's output side).
 */
import { OpenAPIRegistry, type ResponseConfig, type RouteConfig } from '@asteasolutions/zod-to-openapi';
import { z } from 'zod';
import { ID_PATTERN, SCORER_NAMES, SEARCH_MODES, ScorerSchema, SearchModeSchema } from '@lateral/shared';
import { dropLive, liveValues, type LiveLimits } from './live-values';

export type Json = Record<string, unknown>;
export type Responses = RouteConfig['responses'];
type Headers = Exclude<NonNullable<ResponseConfig['headers']>, z.ZodObject>;

/** Swagger's groups, one per resource, in this order. */
export const TAGS = {
  collections: 'create, describe, list and delete collections; re-compression and merges',
  documents: 'ingest documents, follow an ingestion, read and delete documents',
  search: 'search a whole collection (xtr, bm25, dense, mebert, exhaustive, hybrid)',
  rerank: 're-rank candidates (ids of a collection, or texts)',
  batches: 'batch files of re-rank rows, and the uploads they name',
  training: 'judgments and learned heads',
  cohere: 'the Cohere-compatible re-rank',
  service: "health, readiness, models, the caller's quota",
  admin: 'operators: API keys, quotas, the overview, job retries',
} as const;
export type Tag = keyof typeof TAGS;

/** `scorer: "maxsim"` and `mode: "bm25"`: the names whose parameters all have defaults, accepted as a string. */
const SHORTHAND = new Map<z.ZodType, string[]>([
  [ScorerSchema, SCORER_NAMES.filter((name) => ScorerSchema.safeParse({ name }).success)],
  [SearchModeSchema, SEARCH_MODES.filter((name) => SearchModeSchema.safeParse({ name }).success)],
]);
/** A `z.preprocess(string -> {name}, X)` field is documented as the string shorthand or X; a LIVE field as what this service has. */
function requestOverride(ctx: { zodSchema: unknown; jsonSchema: Json }, live: Required<LiveLimits>): void {
  liveValues(ctx.jsonSchema, live);
  const def = (ctx.zodSchema as { _zod: { def: { type: string; in?: { _zod: { def: { type: string } } }; out?: z.ZodType } } })._zod.def;
  const names = def.type === 'pipe' && def.in?._zod.def.type === 'transform' && def.out ? SHORTHAND.get(def.out) : undefined;
  if (!names) return;
  const full = { ...ctx.jsonSchema };
  for (const k of Object.keys(ctx.jsonSchema)) delete ctx.jsonSchema[k];
  Object.assign(ctx.jsonSchema, { anyOf: [{ type: 'string', enum: names, description: 'shorthand for {"name": "<this>"} with the defaults' }, full] });
}

const ERROR_REF = { $ref: '#/components/schemas/Error' };
const COMMON_ERRORS: Record<number, string> = {
  400: 'bad input (the message and details name the field and the limit)',
  404: 'unknown resource',
  413: 'body over MAX_REQUEST_BYTES',
  415: 'Content-Type not taken by this endpoint (the message names the accepted types), or a charset other than UTF-8',
  503: "Redis or S3 unreachable (error 'unavailable'), Redis or S3 not answering in time because of load (error 'overloaded'), a queue over MAX_QUEUE_BACKLOG, or too many large bodies at once (BODY_PARSE_CONCURRENCY); retry after the Retry-After header",
};
const RETRY_AFTER: Headers = { 'Retry-After': { description: 'seconds to wait before retrying', schema: { type: 'integer' } } };

/** One document being built: the library's registry, and the bodies' schemas converted by zod. */
export class ApiRegistry {
  readonly registry = new OpenAPIRegistry();
  /** Named schemas (`.meta({ id })`, e.g. the filter language) met while converting: components.schemas. */
  private readonly defs: Record<string, Json> = {};

  /** `live`: what the running service has (the built models, artifacts, limits: live.ts), or the defaults. */
  constructor(readonly live: Required<LiveLimits>) {}

  /** RERANK_MAX_WAIT_SECONDS: the largest `wait`. */
  get maxWaitSeconds(): number {
    return this.live.maxWaitSeconds;
  }

  /** `tag`'s operation at `method path`. */
  op(tag: Tag, method: RouteConfig['method'], path: string, route: Omit<RouteConfig, 'method' | 'path' | 'tags'>): void {
    this.registry.registerPath({ ...route, method, path, tags: [tag] });
  }

  /** A request body: what the zod schema accepts (shorthand forms and live values included). */
  input(s: z.ZodType): Json {
    return this.strip(z.toJSONSchema(s, { io: 'input', unrepresentable: 'any', override: (ctx) => requestOverride(ctx as { zodSchema: unknown; jsonSchema: Json }, this.live) }) as Json);
  }

  /** A response body: what the code produces (closed objects); live values do not bind it (a stored collection may name a model since removed). */
  output(s: z.ZodType): Json {
    return this.strip(z.toJSONSchema(s, { io: 'output', unrepresentable: 'any', override: (ctx) => dropLive(ctx.jsonSchema as Json) }) as Json);
  }

  /** components.schemas[name]: a raw JSON Schema, or a zod schema converted as a response (`io: 'input'`: as a request). */
  schema(name: string, s: z.ZodType | Json, io: 'input' | 'output' = 'output'): { $ref: string } {
    const json = s instanceof z.ZodType ? (io === 'input' ? this.input(s) : this.output(s)) : s;
    return this.registry.registerComponent('schemas', name, json).ref;
  }

  /** The named schemas met while converting, for components.schemas. */
  namedSchemas(): Record<string, Json> {
    return this.defs;
  }

  private strip(raw: Json): Json {
    // zod names them under $defs of each schema; the document keeps one copy in components.schemas.
    const j = JSON.parse(JSON.stringify(raw).replaceAll('"#/$defs/', '"#/components/schemas/')) as Json;
    delete j.$schema;
    if (j.$defs) Object.assign(this.defs, j.$defs);
    delete j.$defs;
    return j;
  }
}

/** A character JavaScript's String.prototype.trim keeps: a text with one is not empty once trimmed. */
export const NOT_ONLY_WHITESPACE = /[^\t\n\u000b\f\r \u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000\ufeff]/;
/**
 * A `z.string().trim().min(1)` field, which zod converts as `minLength: 1`: stated as "not only
 * whitespace" too (the validator trims before it counts), in place.
 */
export function trimmedNotEmpty(body: Json, field: string): void {
  const props = body.properties as Record<string, Json> | undefined;
  if (props?.[field]) props[field] = { ...props[field], pattern: NOT_ONLY_WHITESPACE.source, description: 'not only whitespace (it is trimmed first)' };
}

/** A JSON answer. */
export const json = (description: string, schema: Json | { $ref: string }) => ({ description, content: { 'application/json': { schema } } });
/** An error answer (the Error body). */
export const errorAnswer = (description: string, headers?: Headers) => ({ description, ...(headers ? { headers } : {}), content: { 'application/json': { schema: ERROR_REF } } });
/** Error answers: a code (its common meaning), or [code, what it means for this operation]. A 503 carries Retry-After. */
export function errors(...codes: (number | [number, string])[]): Responses {
  return Object.fromEntries(
    codes.map((entry) => {
      const [code, why] = typeof entry === 'number' ? [entry, undefined] : entry;
      return [String(code), errorAnswer(why ?? COMMON_ERRORS[code] ?? 'error', code === 503 ? RETRY_AFTER : undefined)];
    }),
  );
}
/** A `Location` response header. */
export const location = (what: string): Headers => ({ Location: { description: what, schema: { type: 'string' } } });

/** Path and query parameters, as zod (the library converts them). */
export const param = {
  /** A resource id (collection, judgment set, training run): the pipes in path-params.ts answer 400 naming it. */
  id: (description?: string) => {
    const s = z.string().regex(ID_PATTERN);
    return description ? s.describe(description) : s;
  },
  /** The document-id rule of the API (documentId in @lateral/shared): no control character; at most 512 UTF-8 bytes, so 128 characters of any script. */
  docId: () => z.string().min(1).max(128).regex(/^[^\u0000-\u001f\u007f]+$/).describe('document id, URL-encoded'),
  /** A job or batch id, or another name the service minted. */
  text: (description?: string) => (description ? z.string().describe(description) : z.string()),
  /** `wait` (query): block up to this many seconds for the result; empty is the default (json-body.ts parseWaitSeconds). */
  wait: (maxWaitSeconds: number) =>
    z
      .union([z.number().min(0).max(maxWaitSeconds), z.string().max(0)])
      .optional()
      .describe('block up to this many seconds (<= RERANK_MAX_WAIT_SECONDS) for the result'),
};
