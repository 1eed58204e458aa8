import { PermanentJobError, ValidationError } from '@lateral/shared';
import { compileFilter, type DocPredicate } from '@lateral/search';

/**
 * A stored request's metadata filter as a predicate (undefined: no filter). The API validated it
 * when the request came in, so a filter that does not compile now can never succeed: the job
 * fails without retry, with the compiler's message.
 */
export function storedFilterPredicate(filter: unknown): DocPredicate | undefined {
  try {
    return filter === undefined ? undefined : compileFilter(filter);
  } catch (err) {
    if (err instanceof ValidationError) throw new PermanentJobError(err.message);
    throw err;
  }
}
