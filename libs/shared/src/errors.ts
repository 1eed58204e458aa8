/**
 * Error types shared by the API and the workers. One rule per kind of error:
 * - `ValidationError`: bad input from a caller -> HTTP 400 naming the field and the limit.
 * - `NotFoundError`: unknown tenant / collection / job -> HTTP 404.
 * - `UnavailableError`: a dependency (Redis, S3) is down -> HTTP 503 with Retry-After.
 * - `PermanentJobError`: a job that can never succeed (bad payload, model shape mismatch) -> no retry.
 * Anything else thrown inside a job is treated as transient and retried with backoff.
 */
export class LateralError extends Error {
  constructor(message: string, readonly details?: unknown) {
    super(message);
    this.name = new.target.name;
  }
}

export interface FieldIssue {
  /** JSON path or document id the problem belongs to, e.g. `documents[3].text` or `line 17`. */
  field: string;
  message: string;
}

export class ValidationError extends LateralError {
  constructor(message: string, readonly issues: FieldIssue[] = []) {
    super(message, issues);
  }
}

export class NotFoundError extends LateralError {}

export class ConflictError extends LateralError {}

export class UnavailableError extends LateralError {
  /**
   * `code`: the error field of the 503: 'unavailable' (a dependency is down) or 'overloaded' (the
   * service is up and refuses more work for now, e.g. ingest back-pressure), so that a client can
   * tell an outage from load.
   */
  constructor(
    message: string,
    readonly retryAfterSeconds = 5,
    readonly code: 'unavailable' | 'overloaded' = 'unavailable',
  ) {
    super(message);
  }
}

export class PermanentJobError extends LateralError {}

/**
 * Wraps a low-level failure with what was being done and where. A ValidationError passes through
 * as it is: it is the caller's fault (e.g. an unsafe object key refused before any request was
 * sent), and wrapping it would turn a 400 into a dependency failure.
 */
export function wrapError(what: string, cause: unknown): Error {
  if (cause instanceof ValidationError) return cause;
  const inner = cause instanceof Error ? cause.message : String(cause);
  const err = new Error(`${what}: ${inner}`);
  (err as Error & { cause?: unknown }).cause = cause;
  return err;
}
