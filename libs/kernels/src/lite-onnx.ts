import { type LiteWeights, type KnrmWeights } from '@lateral/scoring';
import { buildKnrmModel, buildLiteModel } from './graphs';
import { checkCsr, padCandidates, padRows } from './padding';
import { createScorerSession, ort, type ScorerSessionOptions } from './session';

/** Intra-op threads of a LITE / K-NRM session unless the caller says otherwise: the scorer worker's core budget. */
const DEFAULT_THREADS = 2;

/**
 * Separable LITE from an ONNX artifact, batched over all candidates of one query.
 * Inputs are truncated/zero-padded to L1 query and L2 document tokens (`liteReference`'s convention).
 */
export class OnnxLite {
  private constructor(
    private readonly session: ort.InferenceSession,
    readonly L1: number,
    readonly L2: number,
    /** Candidates per session.run: bounds the B x L1 x m2 activations (default 32: in alternating runs 100 candidates took 0-15% less time in chunks of 20-34 than in one run of 100). */
    private readonly batch: number,
    /**
     * A LITE residual on MaxSim (the graph has a `base` input): `score` needs each candidate's
     * MaxSim, and returns maxsim_weight x MaxSim + LITE.
     */
    readonly residual: boolean,
  ) {}

  /** model: an artifact path, its bytes, or weights (built in memory). L1/L2 are read from the graph's input shapes. */
  static async create(model: string | Uint8Array | LiteWeights, opts: ScorerSessionOptions & { batch?: number } = {}): Promise<OnnxLite> {
    const source = typeof model === 'string' || model instanceof Uint8Array ? model : buildLiteModel(model);
    const session = await createScorerSession(source, { intraOpThreads: opts.intraOpThreads ?? DEFAULT_THREADS });
    const dims = (name: string) => {
      const meta = session.inputMetadata.find((m) => m.name === name);
      return meta && meta.isTensor ? meta.shape : [];
    };
    const [L1] = dims('query');
    const [, L2] = dims('docs');
    if (typeof L1 !== 'number' || typeof L2 !== 'number') {
      throw new Error(`OnnxLite: the artifact's inputs must be query [L1, d] and docs [B, L2, d] with fixed L1, L2; got query ${JSON.stringify(dims('query'))}, docs ${JSON.stringify(dims('docs'))}`);
    }
    return new OnnxLite(session, L1, L2, opts.batch ?? 32, session.inputNames.includes('base'));
  }

  /**
   * q: n x d; docs: T x d (CSR, offsets C + 1). Returns C scores. A residual artifact needs `base`,
   * each candidate's unnormalised MaxSim over all its tokens (C values); plain LITE ignores it.
   */
  async score(q: Float32Array, n: number, docs: Float32Array, offsets: Uint32Array, d: number, base?: ArrayLike<number>): Promise<Float32Array> {
    checkCsr('OnnxLite.score', q, n, docs, offsets, d);
    const C = offsets.length - 1;
    if (this.residual && (!base || base.length !== C)) {
      throw new RangeError(`OnnxLite.score: this LITE artifact is a residual on MaxSim and needs base (each candidate's MaxSim): ${C} values, got ${base ? base.length : 'none'}`);
    }
    const maxsims = base;
    const out = new Float32Array(C);
    const query = new ort.Tensor('float32', padRows(q, n, d, this.L1), [this.L1, d]);
    for (let c0 = 0; c0 < C; c0 += this.batch) {
      const c1 = Math.min(C, c0 + this.batch);
      const sub = offsets.subarray(c0, c1 + 1);
      const base = sub[0];
      const block = padCandidates(docs.subarray(base * d, sub[sub.length - 1] * d), sub.map((o) => o - base), d, this.L2);
      const feeds: Record<string, InstanceType<typeof ort.Tensor>> = { query, docs: new ort.Tensor('float32', block, [c1 - c0, this.L2, d]) };
      if (this.residual) feeds.base = new ort.Tensor('float32', Float32Array.from({ length: c1 - c0 }, (_, k) => maxsims![c0 + k]), [c1 - c0]);
      const res = await this.session.run(feeds);
      out.set(res.scores.data as Float32Array, c0);
    }
    return out;
  }

  async release(): Promise<void> {
    await this.session.release();
  }
}

/** K-NRM from an ONNX artifact (or weights), batched; padding masked. */
export class OnnxKnrm {
  private constructor(private readonly session: ort.InferenceSession) {}

  static async create(model: string | Uint8Array | KnrmWeights, opts: ScorerSessionOptions = {}): Promise<OnnxKnrm> {
    const source = typeof model === 'string' || model instanceof Uint8Array ? model : buildKnrmModel(model);
    return new OnnxKnrm(await createScorerSession(source, { intraOpThreads: opts.intraOpThreads ?? DEFAULT_THREADS }));
  }

  /** q: n x d; docs: T x d (CSR, offsets C + 1). Returns C scores. */
  async score(q: Float32Array, n: number, docs: Float32Array, offsets: Uint32Array, d: number): Promise<Float32Array> {
    checkCsr('OnnxKnrm.score', q, n, docs, offsets, d);
    const C = offsets.length - 1;
    if (C === 0) return new Float32Array(0);
    let L = 1;
    for (let c = 0; c < C; c++) L = Math.max(L, offsets[c + 1] - offsets[c]);
    const mask = new Float32Array(C * L);
    for (let c = 0; c < C; c++) mask.fill(1, c * L, c * L + offsets[c + 1] - offsets[c]);
    const res = await this.session.run({
      query: new ort.Tensor('float32', q, [n, d]),
      docs: new ort.Tensor('float32', padCandidates(docs, offsets, d, L), [C, L, d]),
      mask: new ort.Tensor('float32', mask, [C, L, 1, 1]),
    });
    return Float32Array.from(res.scores.data as Float32Array);
  }

  async release(): Promise<void> {
    await this.session.release();
  }
}
