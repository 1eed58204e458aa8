import { ValidationError } from '@lateral/shared';
import { describeJsonError } from '../documents/documents';
import { requestTiming, type RequestTiming } from './server-timing';

/** Bodies arrive as text (one parser for JSON and NDJSON, with line numbers in errors). */
export function json(body: unknown): unknown {
  if (typeof body !== 'string' || body.length === 0) {
    if (body && typeof body === 'object') return body;
    throw new ValidationError('request body is empty: expected JSON', [{ field: 'body', message: 'required' }]);
  }
  try {
    return JSON.parse(body);
  } catch (err) {
    throw new ValidationError(`malformed JSON: ${describeJsonError(body, err)}`, [{ field: 'body', message: (err as Error).message }]);
  }
}

/**
 * `wait`, from the query string (decimal text) or a body (a JSON number): seconds, 0..max. Strict:
 * `0x10`, `1e1`, ` 5`, `true`, `[]` and `"wait": true` are 400s naming the field, not 16 s or 1 s.
 */
export function parseWaitSeconds(raw: unknown, max: number, limitName = 'RERANK_MAX_WAIT_SECONDS'): number {
  if (raw === undefined || raw === '') return 0;
  const bad = (why: string) =>
    new ValidationError(`wait must be a number of seconds between 0 and ${max} (${limitName}): ${why}`, [{ field: 'wait', message: `0..${max} seconds` }]);
  let n: number;
  if (typeof raw === 'number') n = raw;
  // Any JSON number as text (`5`, `0.25`, `1e-3`, `5.1e+1`), as OpenAPI's `number` allows.
  else if (typeof raw === 'string' && raw.length <= 32 && /^(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?$/.test(raw)) n = Number(raw);
  else throw bad(typeof raw === 'string' ? `'${raw.slice(0, 20)}' is not a number` : `got ${Array.isArray(raw) ? 'an array' : raw === null ? 'null' : `a ${typeof raw}`}`);
  if (!Number.isFinite(n) || n < 0 || n > max) throw bad(`got ${n}`);
  return n;
}

/**
 * The wait a request asks for: the query string's `?wait=` when it has a value, else the body's
 * `wait` field. An empty `?wait=` does not hide the body's field (which may be invalid: a 400).
 */
export function requestedWait(queryWait: string | undefined, bodyWait: unknown): unknown {
  return queryWait !== undefined && queryWait !== '' ? queryWait : bodyWait;
}

/** A service behind the asynchronous request contract (re-rank, search). */
export interface AsyncSubmitter<B> {
  parseWait(raw: unknown): number;
  submit(body: unknown, waitSeconds: number, timing?: RequestTiming): Promise<{ status: number; body: B }>;
}

/**
 * POST of an asynchronous request: `wait` from the query string or the body, the service's status
 * code, `Location: <base>/<id>` on 202, and `Server-Timing` (the request path's parts, server-timing.ts).
 */
export async function submitAsync<B extends { id: string }>(
  svc: AsyncSubmitter<B>,
  body: unknown,
  queryWait: string | undefined,
  res: { status(code: number): unknown; setHeader(name: string, value: string): unknown; locals?: Record<string, unknown> },
  base: string,
): Promise<B> {
  const timing = requestTiming(res);
  timing?.lap('route'); // Nest's routing, guards and pipes
  const parsed = json(body) as Record<string, unknown>;
  timing?.lap('json');
  const bodyWait = parsed && typeof parsed === 'object' && 'wait' in parsed ? parsed.wait : undefined;
  if (bodyWait !== undefined) delete parsed.wait;
  const out = await svc.submit(parsed, svc.parseWait(requestedWait(queryWait, bodyWait)), timing);
  res.status(out.status);
  if (out.status === 202) res.setHeader('Location', `${base}/${out.body.id}`);
  if (timing) res.setHeader('Server-Timing', timing.header());
  return out.body;
}
