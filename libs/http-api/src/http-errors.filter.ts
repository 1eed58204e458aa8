import { ArgumentsHost, Catch, HttpException, type ExceptionFilter } from '@nestjs/common';
import type { Response } from 'express';
import { ConflictError, NotFoundError, UnavailableError, ValidationError } from '@lateral/shared';
import { isRedisDown, type Logger } from '@lateral/infra';

/**
 * Maps every error to a JSON body `{ error, message, details? }` with the right status:
 * bad input -> 400/413, unknown resource -> 404, Redis/S3 down -> 503 + Retry-After.
 * Unexpected errors are logged and answered 500 without internals.
 */
@Catch()
export class HttpErrorsFilter implements ExceptionFilter {
  constructor(private readonly logger: Logger) {}

  catch(err: unknown, host: ArgumentsHost): void {
    const res = host.switchToHttp().getResponse<Response>();
    const send = (status: number, error: string, message: string, details?: unknown) => {
      if (!res.headersSent) res.status(status).json({ error, message, ...(details ? { details } : {}) });
    };
    if (err instanceof ValidationError) return send(400, 'bad_request', err.message, err.issues.length ? err.issues : undefined);
    if (err instanceof NotFoundError) return send(404, 'not_found', err.message);
    if (err instanceof ConflictError) return send(409, 'conflict', err.message);
    if (err instanceof UnavailableError || isRedisDown(err) || isS3Down(err)) {
      res.setHeader('Retry-After', String(err instanceof UnavailableError ? err.retryAfterSeconds : 5));
      return send(503, 'unavailable', err instanceof UnavailableError ? err.message : `a backing service is unavailable: ${(err as Error).message}`);
    }
    const e = err as { type?: string; status?: number; limit?: number; length?: number; message?: string };
    if (e?.type === 'entity.too.large') {
      return send(413, 'payload_too_large', `request body is ${e.length ?? 'over'} bytes, over MAX_REQUEST_BYTES (${e.limit} bytes)`);
    }
    if (e?.type === 'encoding.unsupported' || e?.type === 'charset.unsupported') return send(415, 'unsupported_media_type', e.message ?? 'unsupported encoding');
    if (err instanceof HttpException) {
      const status = err.getStatus();
      return send(status, status === 404 ? 'not_found' : 'http_error', err.message);
    }
    this.logger.error(`unhandled error: ${(err as Error)?.stack ?? String(err)}`);
    send(500, 'internal', 'internal error');
  }
}

function isS3Down(err: unknown): boolean {
  const m = err instanceof Error ? err.message : '';
  return /^(reading|writing) s3:\/\/.*(ECONNREFUSED|ECONNRESET|ETIMEDOUT|socket hang up|EHOSTUNREACH)/.test(m);
}
