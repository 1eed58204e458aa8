/**
 * Where a trained scorer's artifact lives, and the check the API runs before queueing a request
 * that names one. Only node:path and node:fs: the kernels load the file, this module never does.
 */
import { existsSync } from 'node:fs';
import path from 'node:path';
import { ValidationError } from './errors';
import type { ScorerSpec } from './rerank';

/** Where a scorer's artifact lives: `<SCORERS_DIR>/<artifact>.onnx` (`.json` for lite-flat); null for scorers without one. */
export function artifactPath(scorersDir: string, spec: ScorerSpec): string | null {
  if (spec.name === 'lite' || spec.name === 'knrm') return path.resolve(scorersDir, `${spec.artifact}.onnx`);
  if (spec.name === 'lite-flat') return path.resolve(scorersDir, `${spec.artifact}.json`);
  return null;
}

/** A request naming an artifact that does not exist is a 400, checked before anything is queued. */
export function checkScorerArtifact(scorersDir: string, spec: ScorerSpec): void {
  const file = artifactPath(scorersDir, spec);
  if (file && !existsSync(file)) {
    throw new ValidationError(`scorer '${spec.name}' needs artifact '${path.basename(file)}', which is not in SCORERS_DIR`, [
      { field: 'scorer.artifact', message: `no file ${path.basename(file)} in SCORERS_DIR` },
    ]);
  }
}
