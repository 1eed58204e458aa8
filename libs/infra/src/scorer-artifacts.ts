/**
 * Trained scorer artifacts for every process: S3 is where a train job leaves a head
 * (`tenants/{t}/collections/{c}/heads/{name}.onnx` beside `{name}.training.json`, whose `sha256`
 * is the artifact's checksum); a scorer that is asked for one it does not hold downloads it into
 * `SCORERS_DIR/tenants/{t}/` (a cache), verifies the checksum and hands the file to ONNX Runtime.
 * Operator artifacts (`SCORERS_DIR/{name}.onnx`) stay what they were: files on the machine.
 */
import { createHash, randomUUID } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import {
  NotFoundError,
  PermanentJobError,
  artifactPath,
  trainedArtifactCachePath,
  trainedArtifactOf,
  trainingKeys,
  type ScorerSpec,
  type TrainReport,
} from '@lateral/shared';
import type { ObjectStore } from './object-store';

/** The S3 keys of a trained artifact, or null when the name cannot be a key (then it does not exist). */
function keysOf(tenantId: string, collection: string, artifact: string): { onnx: string; report: string } | null {
  try {
    return { onnx: trainingKeys.headArtifact(tenantId, collection, artifact), report: trainingKeys.headReport(tenantId, collection, artifact) };
  } catch {
    return null;
  }
}

function artifactSha256(bytes: Uint8Array): string {
  return createHash('sha256').update(bytes).digest('hex');
}

/** 404 naming the artifact and where it was looked for. */
export function scorerArtifactNotFound(tenantId: string, spec: ScorerSpec & { artifact: string }): NotFoundError {
  const t = trainedArtifactOf(spec);
  const where = t ? `no ${spec.artifact}.onnx among the trained heads of collection '${t.collection}' (S3) nor in SCORERS_DIR` : `no file ${spec.artifact}.onnx in SCORERS_DIR`;
  return new NotFoundError(`scorer '${spec.name}' artifact '${spec.artifact}' does not exist for tenant '${tenantId}': ${where}`);
}

export class ScorerArtifactStore {
  private readonly inflight = new Map<string, Promise<string>>();
  /** cached files whose checksum this process has verified */
  private readonly verified = new Set<string>();

  constructor(
    private readonly store: Pick<ObjectStore, 'get' | 'getJson' | 'exists'>,
    readonly scorersDir: string,
  ) {}

  /**
   * The API's check before queueing: an operator file in SCORERS_DIR, a cached copy, or the S3
   * object of a trained head; otherwise a 404 naming the artifact. Specs without an artifact pass.
   */
  async check(tenantId: string, spec: ScorerSpec): Promise<void> {
    if (spec.name !== 'lite' && spec.name !== 'knrm') return;
    const t = trainedArtifactOf(spec);
    if (t) {
      if (existsSync(trainedArtifactCachePath(this.scorersDir, tenantId, spec.artifact))) return;
      const keys = keysOf(tenantId, t.collection, spec.artifact);
      if (keys && (await this.store.exists(keys.onnx))) return;
    }
    if (existsSync(artifactPath(this.scorersDir, spec)!)) return;
    throw scorerArtifactNotFound(tenantId, spec);
  }

  /**
   * The local file of a LITE / K-NRM artifact for `tenantId`: a trained head from the tenant's
   * cache, else downloaded from S3 (checksum verified against its training report, written to the
   * cache by rename, so a reader never sees half a file); an operator file otherwise. A trained
   * head that is nowhere is a PermanentJobError naming it (the job cannot succeed on a retry).
   */
  resolve(tenantId: string, spec: ScorerSpec & { name: 'lite' | 'knrm' }): Promise<string> {
    const t = trainedArtifactOf(spec);
    if (!t) return Promise.resolve(artifactPath(this.scorersDir, spec)!);
    const file = trainedArtifactCachePath(this.scorersDir, tenantId, spec.artifact);
    if (this.verified.has(file) && existsSync(file)) return Promise.resolve(file);
    if (existsSync(file) && this.verifyCached(file)) {
      this.verified.add(file);
      return Promise.resolve(file);
    }
    let p = this.inflight.get(file);
    if (!p) {
      p = this.download(tenantId, spec, t.collection, file).finally(() => this.inflight.delete(file));
      this.inflight.set(file, p);
    }
    return p;
  }

  private async download(tenantId: string, spec: ScorerSpec & { name: 'lite' | 'knrm' }, collection: string, file: string): Promise<string> {
    const keys = keysOf(tenantId, collection, spec.artifact);
    const bytes = keys ? await this.store.get(keys.onnx) : null;
    if (!bytes) {
      // Not trained in S3: an operator may still have put a file of that name in SCORERS_DIR.
      const operator = artifactPath(this.scorersDir, spec)!;
      if (existsSync(operator)) return operator;
      throw new PermanentJobError(scorerArtifactNotFound(tenantId, spec).message);
    }
    const report = await this.store.getJson<TrainReport>(keys!.report);
    const actual = artifactSha256(bytes);
    if (report?.sha256 && report.sha256 !== actual) {
      throw new Error(`scorer artifact '${spec.artifact}': S3 object ${keys!.onnx} has sha256 ${actual}, its training report records ${report.sha256} (corrupt or replaced; not loaded)`);
    }
    mkdirSync(path.dirname(file), { recursive: true });
    const tmp = `${file}.${randomUUID()}.part`;
    try {
      writeFileSync(tmp, bytes);
      renameSync(tmp, file);
    } finally {
      rmSync(tmp, { force: true });
    }
    if (report) writeFileSync(file.replace(/\.onnx$/, '.training.json'), JSON.stringify(report, null, 2));
    this.verified.add(file);
    return file;
  }

  /** Drops a cached copy whose bytes fail the recorded checksum (the next resolve downloads again). */
  verifyCached(file: string): boolean {
    const reportFile = file.replace(/\.onnx$/, '.training.json');
    if (!existsSync(reportFile) || !existsSync(file)) return true;
    const report = JSON.parse(readFileSync(reportFile, 'utf8')) as Partial<TrainReport>;
    if (!report.sha256 || report.sha256 === artifactSha256(readFileSync(file))) return true;
    rmSync(file, { force: true });
    return false;
  }
}

/** The API's check of a request's scorer before queueing (a 404 naming a trained artifact that exists nowhere). */
export function checkScorerArtifactExists(rt: { store: Pick<ObjectStore, 'get' | 'getJson' | 'exists'>; config: { SCORERS_DIR: string } }, tenantId: string, spec: ScorerSpec): Promise<void> {
  return new ScorerArtifactStore(rt.store, path.resolve(rt.config.SCORERS_DIR)).check(tenantId, spec);
}
