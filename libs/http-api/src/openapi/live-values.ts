import { LIVE as LIVE_MARK, type LiveValue } from '@lateral/shared';

type Json = Record<string, unknown>;

/** What the running service's configuration adds to its document (the live /openapi.json). */
export interface LiveLimits {
  /** RERANK_MAX_WAIT_SECONDS: the largest `wait` (default 60). */
  maxWaitSeconds?: number;
  /** The models built under MODELS_DIR (listModels): the values of every `model` field. */
  models?: string[];
  /** Operator artifacts in SCORERS_DIR, by extension (`.onnx`: lite, knrm; `.json`: lite-flat), without it. */
  artifacts?: { onnx: string[]; json: string[] };
  /** Per built model: its dims and maxDocTokens, the bounds of a collection of that model. */
  modelLimits?: { id: string; dims: number; maxDocTokens: number }[];
  /** DEFAULT_MODEL: a collection created without `model`. */
  defaultModel?: string;
  /** COLLECTION_MAX_SHARDS. */
  maxShards?: number;
  /** The hosts a callback may name (WEBHOOK_ALLOWED_HOSTS; none while webhooks are off). */
  callbackHosts?: string[];
}

/** What a document states without a running service (the defaults of the configuration, nothing built). */
export function defaultLive(): Required<LiveLimits> {
  return { maxWaitSeconds: 60, models: [], modelLimits: [], defaultModel: '', artifacts: { onnx: [], json: [] }, maxShards: 8, callbackHosts: [] };
}
/** Trained-head names (`{collection}.{head}.v{N}`): looked up in S3 when named (404 when absent). */
const TRAINED_HEAD = { lite: '^[A-Za-z0-9][A-Za-z0-9_.-]*\\.(lite|lite-small|lite-residual|lite-small-residual)\\.v[1-9][0-9]{0,8}$', knrm: '^[A-Za-z0-9][A-Za-z0-9_.-]*\\.knrm\\.v[1-9][0-9]{0,8}$' };
/** A schema marked with LIVE (@lateral/shared ids.ts) states what the running service has (`live`). */
export function liveValues(jsonSchema: Json, live: Required<LiveLimits>): void {
  const what = jsonSchema[LIVE_MARK] as LiveValue | undefined;
  if (!what) return;
  delete jsonSchema[LIVE_MARK];
  const replace = (v: Json) => {
    for (const k of Object.keys(jsonSchema)) delete jsonSchema[k];
    Object.assign(jsonSchema, v);
  };
  // An empty list is `not: {}` (nothing is valid): JSON Schema wants an enum of one value at least.
  const named = (names: string[], description: string): Json => (names.length > 0 ? { type: 'string', enum: names, description } : { not: {}, description: `${description}: none here` });
  if (what === 'models') replace(named(live.models, 'a model built under MODELS_DIR (GET /v1/models)'));
  else if (what === 'lite-flat-artifacts') replace(named(live.artifacts.json, 'an artifact <name>.json in SCORERS_DIR'));
  else if (what === 'knrm-artifacts' || what === 'lite-artifacts') {
    const head = what === 'knrm-artifacts' ? 'knrm' : 'lite';
    replace({ anyOf: [named(live.artifacts.onnx, 'an operator artifact <name>.onnx in SCORERS_DIR'), { type: 'string', pattern: TRAINED_HEAD[head], maxLength: 128, description: 'a trained head of your tenant (POST /v1/collections/{id}/train): 404 naming it when there is none of that name' }] });
  } else if (what === 'callback-hosts') {
    const hosts = live.callbackHosts.map((h) => h.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'));
    replace(
      hosts.length === 0
        ? { not: {}, description: 'webhooks are off here (WEBHOOK_ALLOWED_HOSTS or WEBHOOK_SECRET empty): a callback is refused (400 naming callback)' }
        : { type: 'string', maxLength: 2048, pattern: `^https?://(${hosts.join('|')})(:[1-9][0-9]{0,3})?(/[A-Za-z0-9._~!$&'()*+,;=:@/-]*)?$`, description: 'a URL on a host of WEBHOOK_ALLOWED_HOSTS: POSTed a signed WebhookEvent when the job completes or fails for good' },
    );
  } else if (what === 'collection-models') {
    // A collection's maxDocTokens and codec.dims are bounded by its model's (the default model's when none is named).
    const bounds = (m: { dims: number; maxDocTokens: number }) => ({
      maxDocTokens: { maximum: m.maxDocTokens },
      codec: { properties: { dims: { maximum: m.dims } } },
      passages: { properties: { overlap: { maximum: Math.floor(m.maxDocTokens / 2) } } },
    });
    const def = live.modelLimits.find((m) => m.id === live.defaultModel);
    const forms: Json[] = live.modelLimits.map((m) => ({ required: ['model'], properties: { model: { const: m.id }, ...bounds(m) } }));
    if (def) forms.push({ not: { required: ['model'] }, properties: bounds(def) });
    replace({ allOf: [{ ...jsonSchema }, { anyOf: forms }] });
  } else if (what === 'max-shards') jsonSchema.maximum = Math.min(Number(jsonSchema.maximum ?? Infinity), live.maxShards);
}

/** In a response the live values do not bind (a stored collection may name a model since removed): the mark is dropped. */
export function dropLive(jsonSchema: Json): void {
  delete jsonSchema[LIVE_MARK];
}
