import { GraphBuilder, makeModel, makeValueInfo } from './onnx-graph';
import { createScorerSession, ort } from './session';

/** What `xtrProbe` in @lateral/search returns: n x nprobe centroid indices, best first. */
export interface IvfProbe {
  n: number;
  nprobe: number;
  centroids: Uint32Array;
}

/**
 * XTR's first step as one ONNX Runtime graph: the nprobe centroids nearest each query token,
 * S^T = C q^T ([K, n]), transposed, then TopK over K (largest, sorted; ONNX's TopK puts the lower
 * index first among equal values, the tie rule of `xtrProbe`). In JavaScript this is n x K x d
 * multiply-adds per query (16 x 8,192 x 384 = 50 M at Vaswani's K with MiniLM), the largest part
 * of an XTR search's time; here it is one GEMM in ORT's thread pool. Scores are float32 GEMM sums,
 * so a near-tie between two centroids may order differently from `xtrProbe`'s float64 sums (which
 * set of lists is probed can differ only at such ties); with nprobe = K both probe every list.
 *
 * The centroids are the GEMM's left operand as they are stored (K x d, row-major) and the query
 * the small right one: the GEMM streams the 12.6 MB of centroids (K = 8,192, d = 384) once,
 * where q C^T repacked them as its right operand on every query (3.1-3.8 ms against 1.5 ms for
 * the GEMM alone, n = 14, one thread, `npm run bench -- peers` notes in docs/benchmarks.md); no
 * transposed copy of the centroids is kept.
 */
export class OnnxIvfProbe {
  private constructor(private readonly session: ort.InferenceSession) {}

  static async create(threads = 0): Promise<OnnxIvfProbe> {
    const g = new GraphBuilder();
    const st = g.op('MatMul', ['centroids', 'q_t']);
    const s = g.op('Transpose', [st], { perm: [1, 0] });
    g.opOutputs('TopK', [s, 'k'], ['top_scores', 'top_ids'], { axis: 1, largest: 1, sorted: 1 });
    const model = makeModel(
      g.build(
        'ivf_probe',
        [makeValueInfo('centroids', 'FLOAT', ['K', 'd']), makeValueInfo('q_t', 'FLOAT', ['d', 'n']), makeValueInfo('k', 'INT64', [1])],
        [makeValueInfo('top_scores', 'FLOAT', ['n', 'p']), makeValueInfo('top_ids', 'INT64', ['n', 'p'])],
      ),
      { opset: 18 },
    );
    return new OnnxIvfProbe(await createScorerSession(model, { intraOpThreads: threads }));
  }

  /** The graph's feeds: the centroids as stored, the query transposed (d x n), k. */
  private feeds(q: Float32Array, n: number, centroids: Float32Array, d: number, k: number): Record<string, ort.Tensor> {
    const qt = new Float32Array(d * n);
    for (let i = 0; i < n; i++) for (let j = 0; j < d; j++) qt[j * n + i] = q[i * d + j];
    return {
      centroids: new ort.Tensor('float32', centroids, [centroids.length / d, d]),
      q_t: new ort.Tensor('float32', qt, [d, n]),
      k: new ort.Tensor('int64', BigInt64Array.of(BigInt(k)), [1]),
    };
  }

  /**
   * The k best centroids of each query token with their scores, best first (ties: lower index),
   * from one GEMM and TopK: what WARP's warpQuery needs (its probes and the imputation's walk
   * over the top `bound` centroids) without the n x K score matrix in JavaScript.
   * Shape: -> ids, scores n x k.
   */
  async top(q: Float32Array, n: number, centroids: Float32Array, d: number, k: number): Promise<{ ids: Uint32Array; scores: Float32Array }> {
    this.checked(q, n, centroids, d, k);
    const ids = new Uint32Array(n * k);
    if (n === 0) return { ids, scores: new Float32Array(0) };
    const r = await this.session.run(this.feeds(q, n, centroids, d, k));
    const got = r.top_ids.data as BigInt64Array;
    for (let i = 0; i < got.length; i++) ids[i] = Number(got[i]);
    return { ids, scores: Float32Array.from(r.top_scores.data as Float32Array) };
  }

  private checked(q: Float32Array, n: number, centroids: Float32Array, d: number, nprobe: number): void {
    if (!Number.isInteger(d) || d < 1 || centroids.length % d !== 0) throw new RangeError(`OnnxIvfProbe: centroids has length ${centroids.length}, expected K x d with d = ${d}`);
    const K = centroids.length / d;
    if (q.length !== n * d) throw new RangeError(`OnnxIvfProbe: q has length ${q.length}, expected ${n} x ${d}`);
    if (!Number.isInteger(nprobe) || nprobe < 1 || nprobe > K) throw new RangeError(`OnnxIvfProbe: nprobe must be an integer in [1, K = ${K}], got ${nprobe}`);
  }

  /** q: n x d; centroids: K x d. */
  async probe(q: Float32Array, n: number, centroids: Float32Array, d: number, nprobe: number): Promise<IvfProbe> {
    this.checked(q, n, centroids, d, nprobe);
    const out = new Uint32Array(n * nprobe);
    if (n === 0) return { n, nprobe, centroids: out };
    const r = await this.session.run(this.feeds(q, n, centroids, d, nprobe));
    const ids = r.top_ids.data as BigInt64Array;
    for (let i = 0; i < ids.length; i++) out[i] = Number(ids[i]);
    return { n, nprobe, centroids: out };
  }

  async release(): Promise<void> {
    await this.session.release();
  }
}
