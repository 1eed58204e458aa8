/**
 * The single-tensor MaxSim graph (one GEMM [C*L, d] x [d, n], ReduceMax, ReduceSum, with three ways
 * of masking ragged candidates) and its runner OnnxMaxsim. The pipeline scores with GemmMaxsim /
 * RotatedMaxsim from @lateral/kernels instead; this graph is kept as the benchmark's reference
 * point (`npm run bench -- score`: equal lengths, no Gather) and for the masking comparisons.
 */
import * as ort from 'onnxruntime-node';
import { checkCsr, createScorerSession, GraphBuilder, int64Tensor, makeModel, makeValueInfo, padCandidates, type ModelProto, type ScorerSessionOptions } from '@lateral/kernels';

/** Large negative bias for padded token slots: exp-free, so any value far below a cosine works. */
export const MASK_BIAS = -1e9;

export type MaxsimGraphKind = 'masked' | 'uniform' | 'gather';

/**
 * Batched MaxSim. Inputs: `docs` [C, L, d] (candidates padded to L tokens), `query_t` [d, n]
 * (the query transposed, so the MatMul needs no Transpose node), and for 'masked' a `bias`
 * [C, L, 1] (0 on real tokens, MASK_BIAS on padding). Output `scores` [C] = sum_i max_j S.
 * One MatMul [C*L, d] x [d, n] (ORT flattens a 3-D x 2-D MatMul into a single GEMM), then
 * ReduceMax over tokens and ReduceSum over query tokens. 'uniform' (every candidate has exactly
 * L tokens) drops the bias Add, which is a full extra pass over the C x L x n similarities.
 * 'gather' takes the candidates unpadded (`docs` [T, d], CSR rows as they are, no copy), computes
 * S = docs x query^T once ([T, n], 4x smaller than padded docs when n = 32 and d = 128), and
 * gathers it into [C, L, n] with `index` [C, L] (int32): a candidate's padded slots repeat one
 * of its own rows, which leaves the max unchanged (exact, no bias needed). Empty candidates
 * must be fixed up by the caller.
 */
export function buildMaxsimModel(kind: MaxsimGraphKind = 'masked'): ModelProto {
  const g = new GraphBuilder();
  let s = g.op('MatMul', ['docs', 'query_t']);
  if (kind === 'masked') s = g.op('Add', [s, 'bias']);
  if (kind === 'gather') s = g.op('Gather', [s, 'index'], { axis: 0 });
  const mx = g.op('ReduceMax', [s], { axes: [1], keepdims: 0 });
  g.op('ReduceSum', [mx, g.constant(int64Tensor('axis1', [1], [1]))], { keepdims: 0 }, 'scores');
  const inputs = kind === 'gather'
    ? [makeValueInfo('docs', 'FLOAT', ['T', 'd']), makeValueInfo('query_t', 'FLOAT', ['d', 'n']), makeValueInfo('index', 'INT32', ['C', 'L'])]
    : [makeValueInfo('docs', 'FLOAT', ['C', 'L', 'd']), makeValueInfo('query_t', 'FLOAT', ['d', 'n'])];
  if (kind === 'masked') inputs.push(makeValueInfo('bias', 'FLOAT', ['C', 'L', 1]));
  return makeModel(g.build(`maxsim_${kind}`, inputs, [makeValueInfo('scores', 'FLOAT', ['C'])]), {
    docString: 'Batched MaxSim: scores[c] = sum_i max_j <q_i, d_cj>; padded slots carry a -1e9 bias',
    metadata: { scorer: 'maxsim', kind },
  });
}

/**
 * How padded slots of ragged candidates are masked:
 * - 'bias-add': the 'masked' graph, an Add of a [C, L, 1] bias (0 / -1e9) after the GEMM;
 * - 'bias-column': the bias folded into the GEMM as an extra input column (docs [C, L, d + 1] with
 *   0 / -1e9 in the last column, query^T [d + 1, n] with a row of ones) run by the 'uniform' graph:
 *   no extra pass over the C x L x n similarities. Real tokens get + 0 * 1, so scores are identical.
 * - 'gather' (default): no padded copy of the documents at all; S = docs x query^T on the unpadded
 *   rows, gathered to [C, L, n] where padded slots repeat a row of the same candidate (exact).
 *   Padding the 4x smaller S instead of the documents is what makes ragged batches cheap: the
 *   padded copy of 1,000 x 180 x 128 documents alone cost more than the GEMM (bench: ~100 ms vs ~5-25 ms).
 * Candidates that all have exactly L tokens use the 'uniform' graph with no mask at all.
 */
export type MaskMode = 'bias-add' | 'bias-column' | 'gather';

/**
 * MaxSim in ONNX Runtime: the fast path for many candidates (one GEMM per chunk).
 * Same conventions as `maxsim` / `maxsimBatch` in @lateral/scoring: padding masked (bias -1e9),
 * empty document -> -Infinity, empty query -> 0, `normalize` divides by n.
 */
/** query^T [d, n] -> [d + 1, n] with a last row of ones (pairs with the docs' bias column). */
function augmentQueryT(qT: Float32Array, d: number, n: number): Float32Array {
  const out = new Float32Array((d + 1) * n);
  out.set(qT);
  out.fill(1, d * n);
  return out;
}

export class OnnxMaxsim {
  private constructor(
    private readonly masked: ort.InferenceSession,
    private readonly uniform: ort.InferenceSession,
    private readonly gather: ort.InferenceSession,
    /** Upper bound on C x L x d floats per session.run (bounds the padded copy). */
    private readonly chunkFloats: number,
    readonly maskMode: MaskMode,
  ) {}

  static async create(opts: ScorerSessionOptions & { chunkFloats?: number; maskMode?: MaskMode } = {}): Promise<OnnxMaxsim> {
    const [masked, uniform, gather] = await Promise.all(
      (['masked', 'uniform', 'gather'] as const).map((kind) => createScorerSession(buildMaxsimModel(kind), opts)),
    );
    return new OnnxMaxsim(masked, uniform, gather, opts.chunkFloats ?? 32 * 1024 * 1024, opts.maskMode ?? 'gather');
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
    let queryAug: ort.Tensor | undefined;
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
      const count = c1 - c0;
      let uniform = true;
      for (let c = 0; c < count; c++) if (rel[c + 1] - rel[c] !== L) uniform = false;
      let res: ort.InferenceSession.ReturnType;
      if (uniform) {
        const block = padCandidates(docs.subarray(base * d, sub[sub.length - 1] * d), rel, d, L);
        res = await this.uniform.run({ docs: new ort.Tensor('float32', block, [count, L, d]), query_t: queryT });
      } else if (this.maskMode === 'gather') {
        const rows = docs.subarray(base * d, sub[sub.length - 1] * d);
        if (rows.length === 0) {
          out.fill(-Infinity, c0, c1); // every candidate of the chunk is empty
          c0 = c1;
          continue;
        }
        const index = new Int32Array(count * L);
        for (let c = 0; c < count; c++) {
          const len = Math.min(L, rel[c + 1] - rel[c]);
          // an empty candidate points at row 0 (any valid row); its score is replaced by -Infinity below
          const first = len > 0 ? rel[c] : 0;
          for (let j = 0; j < L; j++) index[c * L + j] = first + (j < len ? j : 0);
        }
        res = await this.gather.run({
          docs: new ort.Tensor('float32', rows, [rows.length / d, d]),
          query_t: queryT,
          index: new ort.Tensor('int32', index, [count, L]),
        });
      } else if (this.maskMode === 'bias-column') {
        const e = d + 1;
        const block = new Float32Array(count * L * e);
        for (let c = 0; c < count; c++) {
          const len = Math.min(L, rel[c + 1] - rel[c]);
          for (let j = 0; j < L; j++) {
            const dst = (c * L + j) * e;
            if (j < len) {
              const src = (base + rel[c] + j) * d;
              block.set(docs.subarray(src, src + d), dst);
            } else block[dst + d] = MASK_BIAS;
          }
        }
        queryAug ??= new ort.Tensor('float32', augmentQueryT(qT, d, n), [e, n]);
        res = await this.uniform.run({ docs: new ort.Tensor('float32', block, [count, L, e]), query_t: queryAug });
      } else {
        const block = padCandidates(docs.subarray(base * d, sub[sub.length - 1] * d), rel, d, L);
        const bias = new Float32Array(count * L);
        for (let c = 0; c < count; c++) bias.fill(MASK_BIAS, c * L + (rel[c + 1] - rel[c]), (c + 1) * L);
        res = await this.masked.run({ docs: new ort.Tensor('float32', block, [count, L, d]), query_t: queryT, bias: new ort.Tensor('float32', bias, [count, L, 1]) });
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
    await Promise.all([this.masked.release(), this.uniform.release(), this.gather.release()]);
  }
}
