import { GraphBuilder, int64Tensor, makeModel, makeValueInfo } from './onnx-graph';
import { createScorerSession, ort } from './session';

/** Rows per GEMM: S = rows x K floats stays bounded (64 MiB at K = 2,048). */
const CHUNK_FLOATS = 1 << 24;

/**
 * Nearest centroid by inner product, as ONNX Runtime GEMMs: for x [n, d] and centroids [K, d]
 * (unit rows), S = x C^T, then ArgMax and ReduceMax over K. The token IVF's assignment (every
 * token of every segment against up to 65,536 centroids) is GEMM-shaped work: in JavaScript it
 * takes minutes per segment at d = 384 and blocks the event loop; here it runs in ORT's pool.
 * Ties go to the lowest centroid index (ArgMax select_last_index = 0), as assignNearest in
 * @lateral/search.
 */
export class OnnxNearestCentroid {
  private constructor(private readonly session: ort.InferenceSession) {}

  static async create(threads = 0): Promise<OnnxNearestCentroid> {
    const g = new GraphBuilder();
    const s = g.op('MatMul', ['x', 'centroids_t']);
    g.op('ArgMax', [s], { axis: 1, keepdims: 0 }, 'nearest');
    g.op('ReduceMax', [s, g.constant(int64Tensor('k_axis', [1], [1]))], { keepdims: 0 }, 'similarity');
    const model = makeModel(
      g.build(
        'nearest_centroid',
        [makeValueInfo('x', 'FLOAT', ['n', 'd']), makeValueInfo('centroids_t', 'FLOAT', ['d', 'k'])],
        [makeValueInfo('nearest', 'INT64', ['n']), makeValueInfo('similarity', 'FLOAT', ['n'])],
      ),
      { opset: 18 },
    );
    return new OnnxNearestCentroid(await createScorerSession(model, { intraOpThreads: threads }));
  }

  /** x: n x d; centroids: k x d. Returns the nearest centroid of every row and its inner product. */
  async assign(x: Float32Array, n: number, centroids: Float32Array, k: number, d: number): Promise<{ nearest: Uint32Array; similarity: Float32Array }> {
    if (x.length !== n * d || centroids.length !== k * d) throw new RangeError(`OnnxNearestCentroid: x is ${x.length} (expected ${n} x ${d}), centroids ${centroids.length} (expected ${k} x ${d})`);
    const ct = new Float32Array(d * k);
    for (let c = 0; c < k; c++) for (let j = 0; j < d; j++) ct[j * k + c] = centroids[c * d + j];
    const cTensor = new ort.Tensor('float32', ct, [d, k]);
    const nearest = new Uint32Array(n);
    const similarity = new Float32Array(n);
    const rows = Math.max(1, Math.floor(CHUNK_FLOATS / Math.max(1, k)));
    for (let r0 = 0; r0 < n; r0 += rows) {
      const r1 = Math.min(n, r0 + rows);
      const out = await this.session.run({ x: new ort.Tensor('float32', x.subarray(r0 * d, r1 * d), [r1 - r0, d]), centroids_t: cTensor });
      const idx = out.nearest.data as BigInt64Array;
      for (let i = 0; i < r1 - r0; i++) nearest[r0 + i] = Number(idx[i]);
      similarity.set(out.similarity.data as Float32Array, r0);
    }
    return { nearest, similarity };
  }

  async release(): Promise<void> {
    await this.session.release();
  }
}

/**
 * Spherical k-means with the assignment step in ONNX Runtime (the centroid update, O(n d), in
 * JavaScript): x [n, d] (rows L2-normalised by the caller), k centroids initialised from k
 * distinct rows chosen by `pick`, `iterations` Lloyd steps; an empty cluster keeps its previous
 * centroid. Returns k x d unit rows. Deterministic for a given initialisation.
 */
export async function onnxSphericalKmeans(assigner: OnnxNearestCentroid, x: Float32Array, n: number, d: number, init: Uint32Array, iterations: number): Promise<Float32Array> {
  const k = init.length;
  const c = new Float32Array(k * d);
  init.forEach((row, i) => c.set(x.subarray(row * d, row * d + d), i * d));
  for (let it = 0; it < iterations; it++) {
    const { nearest } = await assigner.assign(x, n, c, k, d);
    const sums = new Float64Array(k * d);
    const counts = new Uint32Array(k);
    for (let i = 0; i < n; i++) {
      const j = nearest[i];
      counts[j]++;
      for (let t = 0; t < d; t++) sums[j * d + t] += x[i * d + t];
    }
    for (let j = 0; j < k; j++) {
      if (counts[j] === 0) continue;
      let norm = 0;
      for (let t = 0; t < d; t++) norm += sums[j * d + t] ** 2;
      const inv = norm > 0 ? 1 / Math.sqrt(norm) : 0;
      for (let t = 0; t < d; t++) c[j * d + t] = sums[j * d + t] * inv;
    }
  }
  return c;
}
