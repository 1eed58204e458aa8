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
