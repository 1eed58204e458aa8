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
 * S = q C^T ([n, K]) then TopK over K (largest, sorted; ONNX's TopK puts the lower index first
 * among equal values, the tie rule of `xtrProbe`). In JavaScript this is n x K x d multiply-adds
 * per query (16 x 8,192 x 384 = 50 M at Vaswani's K with MiniLM), the largest part of an XTR
 * search's time; here it is one GEMM in ORT's thread pool. Scores are float32 GEMM sums, so a
 * near-tie between two centroids may order differently from `xtrProbe`'s float64 sums (which set
 * of lists is probed can differ only at such ties); with nprobe = K both probe every list.
 *
 * The transposed centroid matrix is built once per centroid array (a collection's centroids are
 * immutable per codec version) and kept while that array is alive.
 */
export class OnnxIvfProbe {
  private readonly transposed = new WeakMap<Float32Array, ort.Tensor>();

  private constructor(private readonly session: ort.InferenceSession) {}

  static async create(threads = 0): Promise<OnnxIvfProbe> {
    const g = new GraphBuilder();
    const s = g.op('MatMul', ['q', 'centroids_t']);
    g.opOutputs('TopK', [s, 'k'], ['top_scores', 'top_ids'], { axis: 1, largest: 1, sorted: 1 });
    const model = makeModel(
      g.build(
        'ivf_probe',
        [makeValueInfo('q', 'FLOAT', ['n', 'd']), makeValueInfo('centroids_t', 'FLOAT', ['d', 'K']), makeValueInfo('k', 'INT64', [1])],
        [makeValueInfo('top_scores', 'FLOAT', ['n', 'p']), makeValueInfo('top_ids', 'INT64', ['n', 'p'])],
      ),
      { opset: 18 },
    );
    return new OnnxIvfProbe(await createScorerSession(model, { intraOpThreads: threads }));
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
    const r = await this.session.run({ q: new ort.Tensor('float32', q, [n, d]), centroids_t: this.transpose(centroids, d), k: new ort.Tensor('int64', BigInt64Array.of(BigInt(k)), [1]) });
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

  private transpose(centroids: Float32Array, d: number): ort.Tensor {
    let ct = this.transposed.get(centroids);
    if (!ct) {
      const K = centroids.length / d;
      const t = new Float32Array(d * K);
      for (let c = 0; c < K; c++) for (let j = 0; j < d; j++) t[j * K + c] = centroids[c * d + j];
      ct = new ort.Tensor('float32', t, [d, K]);
      this.transposed.set(centroids, ct);
    }
    return ct;
  }

  /** q: n x d; centroids: K x d. */
  async probe(q: Float32Array, n: number, centroids: Float32Array, d: number, nprobe: number): Promise<IvfProbe> {
    this.checked(q, n, centroids, d, nprobe);
    const out = new Uint32Array(n * nprobe);
    if (n === 0) return { n, nprobe, centroids: out };
    const r = await this.session.run({ q: new ort.Tensor('float32', q, [n, d]), centroids_t: this.transpose(centroids, d), k: new ort.Tensor('int64', BigInt64Array.of(BigInt(nprobe)), [1]) });
    const ids = r.top_ids.data as BigInt64Array;
    for (let i = 0; i < ids.length; i++) out[i] = Number(ids[i]);
    return { n, nprobe, centroids: out };
  }

  async release(): Promise<void> {
    await this.session.release();
  }
}
