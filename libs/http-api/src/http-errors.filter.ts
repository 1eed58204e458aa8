import { ArgumentsHost, Catch, HttpException, type ExceptionFilter } from '@nestjs/common';
import type { Response } from 'express';
import { ConflictError, NotFoundError, QuotaExceededError, UnavailableError, ValidationError, type Config } from '@lateral/shared';
import { isRedisDown, type Logger } from '@lateral/infra';
import { redact, redactContext, type RedactContext } from './redact';
import { validationMessage } from './zod-issues';

/** Seconds a caller should wait before retrying when Redis or S3 is unreachable. */
export const SERVICE_RETRY_AFTER_SECONDS = 5;

/**
 * Maps every error to a JSON body `{ error, message, details? }` with the right status:
 * bad input -> 400/413/415, unknown resource -> 404, Redis/S3 down -> 503 + Retry-After with a
 * message that says which service is unreachable and what to do. Unexpected errors are logged and
 * answered 500 without internals. No message leaves without `redact` (no stack frame, absolute
 * path, bucket, key, endpoint or client-library internals).
 */
@Catch()
export class HttpErrorsFilter implements ExceptionFilter {
  private readonly ctx: RedactContext;

  constructor(
    private readonly logger: Logger,
    config?: Pick<Config, 'MODELS_DIR' | 'SCORERS_DIR' | 'DATA_DIR' | 'S3_BUCKET' | 'S3_ENDPOINT' | 'REDIS_URL'>,
  ) {
    this.ctx = redactContext({ MODELS_DIR: '.cache/models', SCORERS_DIR: '.cache/scorers', DATA_DIR: '.data', ...config });
  }

  catch(err: unknown, host: ArgumentsHost): void {
    const res = host.switchToHttp().getResponse<Response>();
    const send = (status: number, error: string, message: string, details?: unknown) => {
      if (res.headersSent) return;
      const clean = Array.isArray(details)
        ? details.map((d: { field?: unknown; message?: unknown }) => ({ ...d, ...(typeof d?.message === 'string' ? { message: redact(d.message, this.ctx) } : {}) }))
        : details;
      res.status(status).json({ error, message: redact(message, this.ctx), ...(clean ? { details: clean } : {}) });
    };
    if (err instanceof ValidationError) return send(400, 'bad_request', validationMessage(err.message, err.issues), err.issues.length ? err.issues : undefined);
    if (err instanceof NotFoundError) return send(404, 'not_found', err.message);
    if (err instanceof ConflictError) return send(409, 'conflict', err.message);
    if (err instanceof QuotaExceededError) {
      // 403 for stored documents and bytes, 429 + Retry-After for jobs in flight (quotas.ts)
      if (err.retryAfterSeconds !== undefined) res.setHeader('Retry-After', String(err.retryAfterSeconds));
      return send(err.status, 'quota_exceeded', err.message, [{ field: `quota.${err.quota}`, message: `limit ${err.limit}, used ${err.used}, requested ${err.requested}` }]);
    }
    const down = unreachable(err);
    if (err instanceof UnavailableError || down) {
      const retry = err instanceof UnavailableError ? err.retryAfterSeconds : SERVICE_RETRY_AFTER_SECONDS;
      res.setHeader('Retry-After', String(retry));
      if (down) this.logger.warn(`${down.service} unreachable: ${(err as Error).message}`);
      return send(503, 'unavailable', down ? down.message(retry) : (err as Error).message);
    }
    const e = err as { type?: string; status?: number; statusCode?: number; limit?: number; length?: number; message?: string };
    if (e?.type === 'entity.too.large') {
      return send(413, 'payload_too_large', `request body is ${e.length ?? 'over'} bytes, over MAX_REQUEST_BYTES (${e.limit} bytes)`);
    }
    if (e?.type === 'encoding.unsupported' || e?.type === 'charset.unsupported') return send(415, 'unsupported_media_type', e.message ?? 'unsupported encoding');
    if (err instanceof HttpException) {
      const status = err.getStatus();
      return send(status, status === 404 ? 'not_found' : 'http_error', err.message);
    }
    // Express / body errors that carry a 4xx (a path that does not decode, an aborted upload).
    const status = e?.status ?? e?.statusCode;
    if (typeof status === 'number' && status >= 400 && status < 500) {
      return send(status, 'bad_request', err instanceof URIError ? 'the URL is not valid percent-encoded UTF-8' : (e.message ?? 'bad request'));
    }
    if (err instanceof URIError) return send(400, 'bad_request', 'the URL is not valid percent-encoded UTF-8');
    this.logger.error(`unhandled error: ${(err as Error)?.stack ?? String(err)}`);
    send(500, 'internal', 'internal error (logged by the server)');
  }
}

interface Unreachable {
  service: 'Redis' | 'S3';
  message(retryAfter: number): string;
}

const REDIS_DOWN: Unreachable = {
  service: 'Redis',
  message: (s) =>
    `Redis (the job queues) is unreachable, so this request was not carried out; retry after ${s} s. ` +
    'If it persists, the operator should check that Redis is running and reachable at REDIS_URL (with npm start: the embedded redis-server).',
};

const S3_DOWN: Unreachable = {
  service: 'S3',
  message: (s) =>
    `the object store (S3) is unreachable or failing, so this request was not carried out; retry after ${s} s. ` +
    'If it persists, the operator should check the S3 server at S3_ENDPOINT and its credentials and bucket (S3_BUCKET).',
};

const NETWORK = /ECONNREFUSED|ECONNRESET|ETIMEDOUT|EHOSTUNREACH|ENETUNREACH|ENOTFOUND|EAI_AGAIN|EPIPE|socket hang up|timed? ?out/i;

/** What a caller is told when Redis or S3 does not answer: which service, and what to do. */
export function serviceDownMessage(service: 'Redis' | 'S3', retryAfterSeconds = SERVICE_RETRY_AFTER_SECONDS): string {
  return (service === 'Redis' ? REDIS_DOWN : S3_DOWN).message(retryAfterSeconds);
}

/** Redis or S3 not answering (or failing on its side); null for anything else. */
export function unreachable(err: unknown): Unreachable | null {
  if (!(err instanceof Error)) return null;
  // ObjectStore wraps every S3 failure as "<verb> s3://bucket/key: <cause>" (wrapError).
  if (/^(reading|writing|listing|checking|deleting|creating bucket)\b.*(s3:\/\/|bucket)/.test(err.message)) {
    const cause = (err as Error & { cause?: unknown }).cause as { name?: string; $metadata?: { httpStatusCode?: number }; code?: string; message?: string } | undefined;
    const status = cause?.$metadata?.httpStatusCode;
    if (NETWORK.test(err.message) || (status !== undefined && status >= 500) || ['SlowDown', 'ServiceUnavailable', 'InternalError', 'RequestTimeout', 'TimeoutError'].includes(cause?.name ?? '')) return S3_DOWN;
    if (cause?.name === 'AccessDenied' || cause?.name === 'NoSuchBucket' || cause?.name === 'InvalidAccessKeyId' || cause?.name === 'SignatureDoesNotMatch' || status === 403) return S3_DOWN;
  }
  // An AWS SDK error that was not wrapped (it carries $metadata) and never reached the server.
  if ('$metadata' in err && NETWORK.test(`${err.name} ${err.message} ${(err as { code?: string }).code ?? ''}`)) return S3_DOWN;
  // After S3: isRedisDown also matches the network errors that an S3 failure carries.
  if (isRedisDown(err) || err.name === 'MaxRetriesPerRequestError' || /max retries per request|Connection is closed|Stream isn't writeable/i.test(err.message)) return REDIS_DOWN;
  return null;
}
