import { z } from 'zod';
import { ValidationError } from './errors';

/** Tenants, collections and documents share one id alphabet so they are safe in S3 keys, Redis keys and job ids. */
export const ID_PATTERN = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$/;
export const DEFAULT_TENANT = 'default';

export const resourceId = (what: string) =>
  z
    .string({ error: `${what} must be a string` })
    .regex(ID_PATTERN, `${what} must match ${ID_PATTERN.source} (letters, digits, '_', '.', '-'; at most 128 characters)`);

/**
 * Values only the running service knows, marked on the schemas that take them: the served
 * OpenAPI document (/openapi.json) states them as enums or bounds (libs/http-api/src/openapi/live-values.ts),
 * so a request the document calls valid is one the service accepts.
 * - `models`: the model directories under MODELS_DIR with a manifest.json (GET /v1/models);
 * - `knrm-artifacts`, `lite-artifacts`, `lite-flat-artifacts`: operator artifacts in SCORERS_DIR,
 *   besides trained-head names (checked in S3: 404 when absent);
 * - `max-shards`: COLLECTION_MAX_SHARDS;
 * - `collection-models`: per built model, the bounds of a collection of it (maxDocTokens, codec.dims);
 * - `callback-hosts`: WEBHOOK_ALLOWED_HOSTS (no callback at all while webhooks are off).
 */
export const LIVE = 'x-lateral-live';
export type LiveValue = 'models' | 'knrm-artifacts' | 'lite-artifacts' | 'lite-flat-artifacts' | 'max-shards' | 'callback-hosts' | 'collection-models';

/**
 * A model id: the name of a model directory under MODELS_DIR. The resource-id alphabet, so never
 * `.` or `..` (which would resolve to MODELS_DIR itself or the folder above it) and never a slash.
 */
export const modelId = (what = 'model') =>
  z
    .string({ error: `${what} must be a string` })
    .regex(ID_PATTERN, `${what} must be a model directory name under MODELS_DIR (${ID_PATTERN.source}: letters, digits, '_', '.', '-', starting with a letter or digit; never '.' or '..')`)
    .meta({ [LIVE]: 'models' });


/** Throws a 400 naming `field` unless `model` is a model id (modelId): checked before a model directory is opened. */
export function assertModelId(model: string, field = 'model'): string {
  if (typeof model !== 'string' || !ID_PATTERN.test(model)) {
    throw new InvalidKeyPartError(`${field} must be a model directory name under MODELS_DIR (${ID_PATTERN.source}; never '.' or '..')`, [{ field, message: `must match ${ID_PATTERN.source}` }]);
  }
  return model;
}

/** Document ids are free-form text (up to 512 bytes); they are never used raw inside keys. */
export const MAX_DOC_ID_LENGTH = 512;

/**
 * A document id, in a body or in a URL path: 1 to MAX_DOC_ID_LENGTH bytes of UTF-8 text without
 * control characters (they cannot be typed, logged or shown faithfully). Never used raw in a key.
 */
export const documentId = (what = 'document id') =>
  z
    .string({ error: `${what} must be a string` })
    .min(1, `${what} must not be empty`)
    .regex(/^[^\u0000-\u001f\u007f]*$/, `${what} must not contain control characters`)
    .refine((s) => s.length <= MAX_DOC_ID_LENGTH && new TextEncoder().encode(s).length <= MAX_DOC_ID_LENGTH, `${what} is longer than ${MAX_DOC_ID_LENGTH} bytes (UTF-8)`);

/** Throws unless `value` is a resource id (ID_PATTERN): S3 keys, Redis keys and job ids are built only from these. */
export function assertResourceId(what: string, value: string): string {
  if (typeof value !== 'string' || !ID_PATTERN.test(value)) {
    throw new InvalidKeyPartError(`${what} is not a valid id (${ID_PATTERN.source}); refusing to build a storage key from it`, [{ field: what, message: `must match ${ID_PATTERN.source}` }]);
  }
  return value;
}

/** A storage key was asked for with an id that never passed validation (unvalidated input): a 400, never a key. */
export class InvalidKeyPartError extends ValidationError {}
