import { PermanentJobError } from '@lateral/shared';
import { ModelLoadError, ModelShapeError } from '@lateral/model';

/** A model that does not match its manifest can never succeed: fail without retry. */
export function permanentModelErrors(err: unknown): never {
  if (err instanceof ModelShapeError || err instanceof ModelLoadError) throw new PermanentJobError(err.message);
  throw err;
}
