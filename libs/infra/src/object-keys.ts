import { ID_PATTERN, InvalidKeyPartError, ValidationError, batchKeys } from '@lateral/shared';

/**
 * The one place object keys are checked (issue 27 item 1). Every key the ObjectStore and the
 * streaming helpers send to S3 passes `checkObjectKey`, whatever the store behind it (the embedded
 * server, MinIO, AWS), and every key a caller names in a request passes `callerUploadKey`.
 *
 * Why both: an S3-compatible server on a file system (the embedded s3rver among them) resolves
 * `..` and `./` segments of a key as a path, so `tenants/a/../b/x` reads tenant b's object, and
 * `tenants/a/../../../../etc/x` a file outside the data folder. AWS keeps such keys literally, but
 * then two spellings name different objects and prefix checks lie. So a key is refused, never
 * "cleaned": one object, one spelling.
 */

/** S3's own limit on a key (UTF-8 bytes). */
export const MAX_OBJECT_KEY_BYTES = 1024;

/**
 * Why `key` is not a safe object key, or null when it is. A safe key is 1 to 1,024 bytes of UTF-8
 * with no control character (NUL among them) and no backslash, does not start with `/`, and has
 * no empty, `.` or `..` segment between slashes. A listing prefix (`prefix: true`) may be empty and
 * may end with `/`.
 */
export function objectKeyProblem(key: unknown, opts: { prefix?: boolean } = {}): string | null {
  if (typeof key !== 'string') return 'must be a string';
  if (key.length === 0) return opts.prefix ? null : 'must not be empty';
  if (Buffer.byteLength(key, 'utf8') > MAX_OBJECT_KEY_BYTES) return `must be at most ${MAX_OBJECT_KEY_BYTES} bytes (UTF-8)`;
  if (/[\u0000-\u001f\u007f]/.test(key)) return 'must not contain control characters (NUL among them)';
  if (key.includes('\\')) return 'must not contain a backslash';
  if (/[\ud800-\udfff]/.test(key.replace(/[\ud800-\udbff][\udc00-\udfff]/g, ''))) return 'must be valid UTF-16 (a lone surrogate)';
  if (key.startsWith('/')) return "must not start with '/'";
  const segments = key.split('/');
  if (opts.prefix && segments.length > 1 && segments[segments.length - 1] === '') segments.pop();
  for (const s of segments) {
    if (s === '') return "must not contain an empty segment ('//', or a trailing '/')";
    if (s === '.' || s === '..') return `must not contain a '${s}' segment`;
  }
  return null;
}

/**
 * Returns `key` when it is a safe object key; throws a ValidationError (a 400 where it reaches a
 * request) naming `field` otherwise. The value itself is not echoed: it may be kilobytes of
 * control characters.
 */
export function checkObjectKey(key: string, opts: { prefix?: boolean; field?: string } = {}): string {
  const problem = objectKeyProblem(key, opts);
  if (problem === null) return key;
  const field = opts.field ?? (opts.prefix ? 'prefix' : 'key');
  throw new InvalidKeyPartError(`${field}: an object ${opts.prefix ? 'key prefix' : 'key'} ${problem}`, [{ field, message: problem }]);
}

/**
 * The object key of an upload a caller names as a batch's input: the name given to
 * `PUT /v1/uploads/{name}` (`rows.jsonl`), always under the caller's own prefix
 * (`tenants/<tenant>/uploads/<name>`). Anything else (a key, another tenant's key, a traversal, a
 * NUL) gets the same 400 whether or not an object exists there, so the answer says nothing about
 * objects the caller may not read, and shows no key.
 */
export function callerUploadKey(tenantId: string, named: unknown, field = 'input'): string {
  if (typeof named !== 'string' || !ID_PATTERN.test(named)) {
    throw new ValidationError(`${field} must be the name of one of your uploads (PUT /v1/uploads/{name}, e.g. 'rows.jsonl'), not an object key`, [
      { field, message: `an upload name (${ID_PATTERN.source})` },
    ]);
  }
  return batchKeys.upload(tenantId, named);
}
