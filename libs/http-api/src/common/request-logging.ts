import { randomUUID } from 'node:crypto';
import type { NextFunction, Request, Response } from 'express';
import { recordHttp, withLogContext, type Logger } from '@lateral/infra';

/** The request id header: accepted from the caller when valid, generated otherwise, returned on every response. */
export const REQUEST_ID_HEADER = 'x-request-id';
export const REQUEST_ID_MAX_LENGTH = 128;
const VALID_REQUEST_ID = /^[A-Za-z0-9._:-]+$/;

/** Scraped or polled often (Prometheus, probes, the dashboard every 2 s): logged at debug level, not info (still measured). */
const QUIET_ROUTES = new Set(['/metrics', '/v1/health', '/v1/health/live', '/v1/health/ready', '/v1/admin/overview']);

type WithRequestId = Request & { requestId?: string };

/** The request's id (set by `requestLogging`). */
export function requestIdOf(req: Request): string | undefined {
  return (req as WithRequestId).requestId;
}

/**
 * The first middleware of the API: gives each request an id (the caller's `x-request-id` when it
 * is 1-128 characters of letters, digits and `. _ : -`; a malformed one answers 400 naming the
 * header and the limit; none: a random UUID), returns it in the `x-request-id` response header,
 * and when the response is finished writes one line (method, route pattern, status, duration,
 * request id) and records the duration in lateral_http_request_duration_seconds.
 */
export function requestLogging(logger: Logger) {
  const log = logger.child('http');
  return (req: Request, res: Response, next: NextFunction): void => {
    const t0 = performance.now();
    const given = req.headers[REQUEST_ID_HEADER];
    const raw = Array.isArray(given) ? given[0] : given;
    const valid = raw !== undefined && raw.length >= 1 && raw.length <= REQUEST_ID_MAX_LENGTH && VALID_REQUEST_ID.test(raw);
    const id = valid ? raw : randomUUID();
    (req as WithRequestId).requestId = id;
    res.setHeader(REQUEST_ID_HEADER, id);
    let done = false;
    const finish = () => {
      if (done) return;
      done = true;
      const ms = performance.now() - t0;
      const route = routeOf(req, res.statusCode);
      const status = res.writableFinished ? res.statusCode : 499; // 499: the client went away first
      recordHttp(req.method, route, status, ms / 1000);
      const fields = { method: req.method, route, status, ms: Math.round(ms * 10) / 10, requestId: id };
      const line = `${req.method} ${route} ${status} ${fields.ms} ms`;
      if (QUIET_ROUTES.has(route) && status < 400) log.debug(line, fields);
      else log.info(line, fields);
    };
    res.once('finish', finish);
    res.once('close', finish);
    if (raw !== undefined && !valid) {
      res.status(400).json({
        error: 'bad_request',
        message: `header ${REQUEST_ID_HEADER}: 1 to ${REQUEST_ID_MAX_LENGTH} characters of letters, digits and . _ : - (got ${
          raw.length > REQUEST_ID_MAX_LENGTH ? `${raw.length} characters` : raw.length === 0 ? 'an empty value' : 'other characters'
        })`,
        details: { header: REQUEST_ID_HEADER, maxLength: REQUEST_ID_MAX_LENGTH, pattern: VALID_REQUEST_ID.source },
      });
      return;
    }
    next();
  };
}

/**
 * Runs the rest of the request inside a log context holding its id, so the jobs it enqueues carry
 * it (JobQueues adds it to their payloads) and every line logged on its behalf says it. Registered
 * after the body reader: the reader's stream callbacks would run outside the context.
 */
export function requestLogContext(req: Request, _res: Response, next: NextFunction): void {
  const requestId = requestIdOf(req);
  if (requestId === undefined) return next();
  withLogContext({ requestId }, next);
}

/** The route pattern (`/v1/collections/:id`), not the path, so metrics have few label values. */
function routeOf(req: Request, status: number): string {
  const pattern = (req.route as { path?: unknown } | undefined)?.path;
  if (typeof pattern === 'string') return `${req.baseUrl ?? ''}${pattern}` || '/';
  if (req.baseUrl) return req.baseUrl;
  return status === 404 ? 'unmatched' : 'other';
}
