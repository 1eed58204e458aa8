import { PermanentJobError } from '@lateral/shared';

/**
 * The model's output does not have the shape manifest.json declares. A configuration error:
 * retrying cannot help, so it is a PermanentJobError (BullMQ callers turn it into UnrecoverableError).
 */
export class ModelShapeError extends PermanentJobError {}

/** A model directory cannot be loaded: a missing file, invalid JSON, or a manifest field that fails validation. */
export class ModelLoadError extends PermanentJobError {}
