import { ArgumentsHost, Catch, HttpException, type ExceptionFilter } from '@nestjs/common';
import type { Response } from 'express';
import { ConflictError, NotFoundError, QuotaExceededError, UnavailableError, ValidationError, type Config } from '@lateral/shared';
import { classifyDependencyError, eventLoopMonitor, type Logger } from '@lateral/infra';
import { redact, redactContext, type RedactContext } from './redact';
import { validationMessage } from './zod-issues';

/** Seconds a caller should wait before retrying when Redis or S3 is unreachable. */
export const SERVICE_RETRY_AFTER_SECONDS = 5;
/** Seconds a caller should wait before retrying when Redis or S3 did not answer in time because of load. */
export const OVERLOAD_RETRY_AFTER_SECONDS = 2;

/**
 * Maps every error to a JSON body `{ error, message, details? }` with the right status:
 * bad input -> 400/413/415, unknown resource -> 404, Redis/S3 down -> 503 `unavailable` +
 * Retry-After with a message that says which service is unreachable and what to do; Redis/S3 that
 * did not answer in time because of load (overload.ts) -> 503 `overloaded` + Retry-After. Unexpected errors are logged and
 * answered 500 without internals. No message leaves without `redact` (no stack frame, absolute
 * path, bucket, key, endpoint or client-library internals).
 */
@Catch()
export class HttpErrorsFilter implements ExceptionFilter {
  private readonly ctx: RedactContext;

  constructor(
    private readonly logger: Logger,
    config?: Pick<Config, 'MODELS_DIR' | 'SCORERS_DIR' | 'DATA_DIR' | 'S3_BUCKET' | 'S3_ENDPOINT' | 'REDIS_URL'>,
    private readonly probe: LoadProbe = defaultLoadProbe(),
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
    const fault = err instanceof UnavailableError ? null : serviceFault(err, this.probe);
    if (fault?.kind === 'overloaded') {
      res.setHeader('Retry-After', String(OVERLOAD_RETRY_AFTER_SECONDS));
      this.logger.warn(`overloaded: ${fault.service} did not answer in time: ${(err as Error).message}`);
      return send(503, 'overloaded', fault.message(OVERLOAD_RETRY_AFTER_SECONDS));
    }
    if (err instanceof UnavailableError || fault) {
      const retry = err instanceof UnavailableError ? err.retryAfterSeconds : SERVICE_RETRY_AFTER_SECONDS;
      res.setHeader('Retry-After', String(retry));
      if (fault) this.logger.warn(`${fault.service} unreachable: ${(err as Error).message}`);
      return send(503, err instanceof UnavailableError ? err.code : 'unavailable', fault ? fault.message(retry) : (err as Error).message);
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

/** What to tell a caller about a Redis or S3 failure that overload.ts sorted as down or overloaded. */
export interface ServiceFault {
  service: 'Redis' | 'S3';
  kind: 'down' | 'overloaded';
  message(retryAfter: number): string;
}

const REDIS_DOWN: ServiceFault = {
  service: 'Redis',
  kind: 'down',
  message: (s) =>
    `Redis (the job queues) is unreachable, so this request was not carried out; retry after ${s} s. ` +
    'If it persists, the operator should check that Redis is running and reachable at REDIS_URL (with npm start: the embedded redis-server).',
};

const S3_DOWN: ServiceFault = {
  service: 'S3',
  kind: 'down',
  message: (s) =>
    `the object store (S3) is unreachable or failing, so this request was not carried out; retry after ${s} s. ` +
    'If it persists, the operator should check the S3 server at S3_ENDPOINT and its credentials and bucket (S3_BUCKET).',
};

const SERVICE_NAME = { Redis: 'Redis (the job queues)', S3: 'the object store (S3)' } as const;
const TIMEOUT_NAME = { Redis: 'REDIS_COMMAND_TIMEOUT_MS', S3: 'S3_SOCKET_TIMEOUT_MS' } as const;

/** Overload: the dependency is there, the answer did not come in time. Names overload, the service, the cause and what to do. */
function overloaded(service: 'Redis' | 'S3', busy: boolean, lagMs: number): ServiceFault {
  return {
    service,
    kind: 'overloaded',
    message: (s) =>
      `the service is overloaded: ${SERVICE_NAME[service]} did not answer in time (${TIMEOUT_NAME[service]})` +
      (busy ? ` while this process was busy (its event loop was held up to ${lagMs} ms)` : ', although it is connected') +
      `, so this request may not have been carried out; retry after ${s} s. This is load, not an outage` +
      (busy ? '.' : `; if it persists, the operator should check ${service === 'Redis' ? "Redis's load (slow commands, memory, CPU)" : "the object store's load"}.`),
  };
}

/** What a caller is told when Redis or S3 does not answer: which service, and what to do. */
export function serviceDownMessage(service: 'Redis' | 'S3', retryAfterSeconds = SERVICE_RETRY_AFTER_SECONDS): string {
  return (service === 'Redis' ? REDIS_DOWN : S3_DOWN).message(retryAfterSeconds);
}

/** What a caller is told when Redis or S3 did not answer in time because of load. */
export function serviceOverloadedMessage(service: 'Redis' | 'S3', busy: boolean, lagMs: number, retryAfterSeconds = OVERLOAD_RETRY_AFTER_SECONDS): string {
  return overloaded(service, busy, lagMs).message(retryAfterSeconds);
}

/** The state of the process a failure is judged in (app.ts passes the runtime's; tests their own). */
export interface LoadProbe {
  /** ioredis `status` of the API's Redis connection. */
  redisStatus(): string | undefined;
  /** Largest event loop lag and mean utilization over the last `windowMs`. */
  load(windowMs: number): { lagMs: number; utilization: number };
  /** EVENT_LOOP_OVERLOAD_MS. */
  overloadLagMs: number;
  /** How far back a failure's call may have started: the longest of the timeouts (ms). */
  windowMs: number;
}

/** The process-wide event loop monitor and no Redis connection known (the default of the filter). */
export function defaultLoadProbe(overloadLagMs = 500, windowMs = 10_000, redisStatus: () => string | undefined = () => undefined): LoadProbe {
  const monitor = eventLoopMonitor();
  return { redisStatus, overloadLagMs, windowMs, load: (w) => ({ lagMs: monitor.maxLagMs(w), utilization: monitor.utilization(w) }) };
}

/**
 * The runtime's probe: its Redis connection, EVENT_LOOP_OVERLOAD_MS, and a window as long as the
 * Redis command timeout or the S3 connect timeout (the calls whose failure depends on load), plus
 * a second.
 */
export function loadProbe(deps: { queues: { connectionStatus: string }; config: Pick<Config, 'EVENT_LOOP_OVERLOAD_MS' | 'REDIS_COMMAND_TIMEOUT_MS' | 'S3_CONNECT_TIMEOUT_MS'> }): LoadProbe {
  const c = deps.config;
  return defaultLoadProbe(c.EVENT_LOOP_OVERLOAD_MS, Math.max(c.REDIS_COMMAND_TIMEOUT_MS, c.S3_CONNECT_TIMEOUT_MS) + 1000, () => deps.queues.connectionStatus);
}

/** Redis or S3 not answering (down) or not answering in time (overloaded); null for anything else. */
export function serviceFault(err: unknown, probe: LoadProbe = defaultLoadProbe()): ServiceFault | null {
  const load = probe.load(probe.windowMs);
  const fault = classifyDependencyError(err, { ...load, overloadLagMs: probe.overloadLagMs, redisStatus: probe.redisStatus() });
  if (!fault) return null;
  if (fault.kind === 'overloaded') return overloaded(fault.service, fault.busy, load.lagMs);
  return fault.service === 'Redis' ? REDIS_DOWN : S3_DOWN;
}
