/**
 * Where a scorer's artifact lives, and the checks the API runs before queueing a request that
 * names one. Only node:path and node:fs: the kernels load the file, this module never does.
 *
 * Two kinds of artifact:
 * - operator artifacts: files an operator put under SCORERS_DIR (`<name>.onnx`, `.json` for
 *   lite-flat), shared by every tenant;
 * - trained heads: `{collection}.{lite|lite-small|lite-residual|lite-small-residual|knrm}.v{N}`, written by a train job to S3
 *   (`tenants/{t}/collections/{c}/heads/{name}.onnx`, the source of truth). A scorer on any
 *   machine fetches one on first use into `SCORERS_DIR/tenants/{t}/` (a cache; the checksum
 *   recorded in its training report is verified) and loads it from there. A trained head is only
 *   visible to its own tenant.
 */
import { existsSync } from 'node:fs';
import path from 'node:path';
import { ValidationError } from './errors';
import type { ScorerSpec } from './rerank';

/** Where an operator artifact lives: `<SCORERS_DIR>/<artifact>.onnx` (`.json` for lite-flat); null for scorers without one. */
export function artifactPath(scorersDir: string, spec: ScorerSpec): string | null {
  if (spec.name === 'lite' || spec.name === 'knrm') return path.resolve(scorersDir, `${spec.artifact}.onnx`);
  if (spec.name === 'lite-flat') return path.resolve(scorersDir, `${spec.artifact}.json`);
  return null;
}

/** The parts of a trained head's artifact name (`headArtifactName`'s inverse), or null for any other name. */
export function parseHeadArtifactName(name: string): { collection: string; head: 'lite' | 'knrm'; size: 'default' | 'small'; residual: boolean; version: number } | null {
  const m = /^(.+)\.(lite|lite-small|lite-residual|lite-small-residual|knrm)\.v([1-9][0-9]{0,8})$/.exec(name);
  if (!m) return null;
  return { collection: m[1], head: m[2] === 'knrm' ? 'knrm' : 'lite', size: m[2].startsWith('lite-small') ? 'small' : 'default', residual: m[2].endsWith('-residual'), version: Number(m[3]) };
}

/** A tenant's local copy of a trained head: `<SCORERS_DIR>/tenants/<tenant>/<artifact>.onnx` (a cache of the S3 object). */
export function trainedArtifactCachePath(scorersDir: string, tenantId: string, artifact: string): string {
  return path.resolve(scorersDir, 'tenants', tenantId, `${artifact}.onnx`);
}

/** The artifact a spec names when it may be a trained head (lite / knrm with a head artifact name), else null. */
export function trainedArtifactOf(spec: ScorerSpec): { artifact: string; collection: string; head: 'lite' | 'knrm' } | null {
  if (spec.name !== 'lite' && spec.name !== 'knrm') return null;
  const parsed = parseHeadArtifactName(spec.artifact);
  if (!parsed) return null;
  // A LITE request naming a K-NRM artifact (or the reverse) is not that head.
  if (parsed.head !== spec.name) return null;
  return { artifact: spec.artifact, collection: parsed.collection, head: parsed.head };
}

/**
 * A request naming an operator artifact that is not in SCORERS_DIR is a 400, checked before
 * anything is queued. Trained-head names are checked against S3 by the caller (infra's
 * `ScorerArtifactStore.check`, a 404 naming the artifact); this check lets them through.
 */
export function checkScorerArtifact(scorersDir: string, spec: ScorerSpec): void {
  const file = artifactPath(scorersDir, spec);
  if (file && !existsSync(file) && !trainedArtifactOf(spec)) {
    throw new ValidationError(`scorer '${spec.name}' needs artifact '${path.basename(file)}', which is not in SCORERS_DIR`, [
      { field: 'scorer.artifact', message: `no file ${path.basename(file)} in SCORERS_DIR` },
    ]);
  }
}
