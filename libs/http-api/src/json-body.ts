import { ValidationError } from '@lateral/shared';
import { describeJsonError } from './documents';

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

/** A service behind the asynchronous request contract (re-rank, search). */
export interface AsyncSubmitter<B> {
  parseWait(raw: unknown): number;
  submit(body: unknown, waitSeconds: number): Promise<{ status: number; body: B }>;
}

/**
 * POST of an asynchronous request: `wait` from the query string or the body, the service's status
 * code, and `Location: <base>/<id>` on 202.
 */
export async function submitAsync<B extends { id: string }>(
  svc: AsyncSubmitter<B>,
  body: unknown,
  queryWait: string | undefined,
  res: { status(code: number): unknown; setHeader(name: string, value: string): unknown },
  base: string,
): Promise<B> {
  const parsed = json(body) as Record<string, unknown>;
  const bodyWait = parsed && typeof parsed === 'object' && 'wait' in parsed ? parsed.wait : undefined;
  if (bodyWait !== undefined) delete parsed.wait;
  const out = await svc.submit(parsed, svc.parseWait(queryWait ?? bodyWait));
  res.status(out.status);
  if (out.status === 202) res.setHeader('Location', `${base}/${out.body.id}`);
  return out.body;
}
