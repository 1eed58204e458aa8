import { readFileSync } from 'node:fs';
import { artifactPath, type ScorerSpec } from '@lateral/shared';
import type { LiteFlatWeights } from '@lateral/scoring';
import { GemmMaxsim } from './gemm-maxsim';
import { OnnxIvfProbe } from './ivf-probe';
import { OnnxKnrm, OnnxLite } from './lite-onnx';
import { RotatedMaxsim } from './rotated-maxsim';

/** Scoring sessions and artifacts, loaded once per process and shared by every job. */
export class ScorerResources {
  private gemmSession: Promise<GemmMaxsim> | null = null;
  private rotatedSession: Promise<RotatedMaxsim> | null = null;
  private probeSession: Promise<OnnxIvfProbe> | null = null;
  private readonly sessions = new Map<string, Promise<OnnxLite | OnnxKnrm>>();
  private readonly flat = new Map<string, LiteFlatWeights>();

  /**
   * threads: ONNX Runtime intra-op threads of the MaxSim sessions (0 = its default).
   * resolveArtifact: where a tenant's LITE / K-NRM artifact is on this machine (the workers pass
   * infra's ScorerArtifactStore, which fetches trained heads from S3 on first use); without it,
   * or without a tenant, artifacts are files in `scorersDir`.
   */
  constructor(
    readonly scorersDir: string,
    private readonly threads = 0,
    private readonly resolveArtifact?: (tenantId: string, spec: ScorerSpec & { name: 'lite' | 'knrm' }) => Promise<string>,
  ) {}

  gemm(): Promise<GemmMaxsim> {
    this.gemmSession ??= GemmMaxsim.create(this.threads);
    return this.gemmSession;
  }

  rotated(): Promise<RotatedMaxsim> {
    this.rotatedSession ??= RotatedMaxsim.create(this.threads);
    return this.rotatedSession;
  }

  /** XTR's IVF probe (query tokens x centroids GEMM + TopK) for the search processor. */
  ivfProbe(): Promise<OnnxIvfProbe> {
    this.probeSession ??= OnnxIvfProbe.create(this.threads);
    return this.probeSession;
  }

  async onnx(spec: ScorerSpec & { name: 'lite' | 'knrm' }, tenantId?: string): Promise<OnnxLite | OnnxKnrm> {
    const file = tenantId !== undefined && this.resolveArtifact ? await this.resolveArtifact(tenantId, spec) : artifactPath(this.scorersDir, spec)!;
    let s = this.sessions.get(file);
    if (!s) {
      s = spec.name === 'lite' ? OnnxLite.create(file) : OnnxKnrm.create(file);
      s.catch(() => this.sessions.delete(file));
      this.sessions.set(file, s);
    }
    return s;
  }

  liteFlat(spec: ScorerSpec & { name: 'lite-flat' }): LiteFlatWeights {
    const file = artifactPath(this.scorersDir, spec)!;
    let w = this.flat.get(file);
    if (!w) {
      const raw = JSON.parse(readFileSync(file, 'utf8')) as { L1: number; L2: number; hidden: number; W: number[]; b: number[]; a: number[] };
      w = { L1: raw.L1, L2: raw.L2, hidden: raw.hidden, W: Float32Array.from(raw.W), b: Float32Array.from(raw.b), a: Float32Array.from(raw.a) };
      this.flat.set(file, w);
    }
    return w;
  }
}
