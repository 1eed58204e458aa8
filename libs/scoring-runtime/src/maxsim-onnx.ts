import { buildMaxsimModel, MASK_BIAS } from './graphs';
import { checkCsr, padCandidates } from './padding';
import { createScorerSession, ort, type ScorerSessionOptions } from './session';

/**
 * MaxSim in ONNX Runtime: the fast path for many candidates (one GEMM per chunk).
 * Same conventions as `maxsim` / `maxsimBatch` in @lateral/scoring: padding masked (bias -1e9),
 * empty document -> -Infinity, empty query -> 0, `normalize` divides by n.
 */
export class OnnxMaxsim {
  private constructor(
    private readonly masked: ort.InferenceSession,
    private readonly uniform: ort.InferenceSession,
    /** Upper bound on C x L x d floats per session.run (bounds the padded copy). */
    private readonly chunkFloats: number,
  ) {}

  static async create(opts: ScorerSessionOptions & { chunkFloats?: number } = {}): Promise<OnnxMaxsim> {
    const [masked, uniform] = await Promise.all([createScorerSession(buildMaxsimModel('masked'), opts), createScorerSession(buildMaxsimModel('uniform'), opts)]);
    return new OnnxMaxsim(masked, uniform, opts.chunkFloats ?? 32 * 1024 * 1024);
  }

  /** q: n x d; docs: T x d (CSR, offsets C + 1). Returns C scores. */
  async score(q: Float32Array, n: number, docs: Float32Array, offsets: Uint32Array, d: number, opts: { normalize?: boolean } = {}): Promise<Float32Array> {
    checkCsr('OnnxMaxsim.score', q, n, docs, offsets, d);
    const C = offsets.length - 1;
    const out = new Float32Array(C);
    if (C === 0 || n === 0) return out;
    const qT = new Float32Array(d * n);
    for (let i = 0; i < n; i++) for (let k = 0; k < d; k++) qT[k * n + i] = q[i * d + k];
    const queryT = new ort.Tensor('float32', qT, [d, n]);
    let c0 = 0;
    while (c0 < C) {
      // grow the chunk while the padded block fits the budget
      let L = 0, c1 = c0;
      while (c1 < C) {
        const len = offsets[c1 + 1] - offsets[c1];
        const nextL = Math.max(L, len, 1);
        if (c1 > c0 && (c1 + 1 - c0) * nextL * d > this.chunkFloats) break;
        L = nextL;
        c1++;
      }
      const sub = offsets.subarray(c0, c1 + 1);
      const base = sub[0];
      const rel = base === 0 ? sub : sub.map((o) => o - base);
      const block = padCandidates(docs.subarray(base * d, sub[sub.length - 1] * d), rel, d, L);
      const count = c1 - c0;
      let uniform = true;
      for (let c = 0; c < count; c++) if (rel[c + 1] - rel[c] !== L) uniform = false;
      const feeds: Record<string, ort.Tensor> = { docs: new ort.Tensor('float32', block, [count, L, d]), query_t: queryT };
      let res: ort.InferenceSession.ReturnType;
      if (uniform) {
        res = await this.uniform.run(feeds);
      } else {
        const bias = new Float32Array(count * L);
        for (let c = 0; c < count; c++) bias.fill(MASK_BIAS, c * L + (rel[c + 1] - rel[c]), (c + 1) * L);
        feeds.bias = new ort.Tensor('float32', bias, [count, L, 1]);
        res = await this.masked.run(feeds);
      }
      const scores = res.scores.data as Float32Array;
      for (let c = 0; c < count; c++) {
        out[c0 + c] = rel[c + 1] === rel[c] ? -Infinity : opts.normalize ? scores[c] / n : scores[c];
      }
      c0 = c1;
    }
    return out;
  }

  async release(): Promise<void> {
    await Promise.all([this.masked.release(), this.uniform.release()]);
  }
}
