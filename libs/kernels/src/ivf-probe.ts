import { GraphBuilder, makeModel, makeTensor, makeValueInfo } from './onnx-graph';
import { createScorerSession, ort } from './session';

/** What `xtrProbe` in @lateral/search returns: n x nprobe centroid indices, best first. */
export interface IvfProbe {
  n: number;
  nprobe: number;
  centroids: Uint32Array;
}

/**
 * Centroid sets (K x d floats) at least this large get a session of their own with the centroids as
 * a constant (PackedProbe): the per-query graph above re-reads the 12.6 MB of centroids as a plain
 * input on every run.
 */
const PACKED_MIN_FLOATS = 1 << 16;
/**
 * Centroid sets followed at once (the least recently used forgotten, its session released): each
 * packed session holds ~2-3x its centroids' bytes in ONNX Runtime (the constant and its packed
 * copy: ~25-40 MB at K = 8,192, d = 384).
 */
const PACKED_SESSIONS = 4;
/** Queries a centroid set serves through the shared graph before its packed session is built. */
const PACKED_AFTER_USES = 4;

/**
 * One centroid set's probe session: S = q C^T with C^T ([d, K]) a constant of the graph, so ONNX
 * Runtime packs it for its GEMM once, when the session is created, instead of streaming an input
 * per run; then TopK over K as the shared graph. The same ids and scores as the shared graph up to
 * float32 summation order.
 */
class PackedProbe {
  /** runs in flight (the session is released only when none is) */
  running = 0;
  retired = false;

  private constructor(readonly session: ort.InferenceSession) {}

  static async create(centroids: Float32Array, d: number, threads: number): Promise<PackedProbe> {
    const K = centroids.length / d;
    const ct = new Float32Array(d * K);
    for (let c = 0; c < K; c++) {
      const o = c * d;
      for (let j = 0; j < d; j++) ct[j * K + c] = centroids[o + j];
    }
    const g = new GraphBuilder();
    const w = g.constant(makeTensor('centroids_t', [d, K], ct));
    const s = g.op('MatMul', ['q', w]);
    g.opOutputs('TopK', [s, 'k'], ['top_scores', 'top_ids'], { axis: 1, largest: 1, sorted: 1 });
    const model = makeModel(
      g.build('ivf_probe_packed', [makeValueInfo('q', 'FLOAT', ['n', d]), makeValueInfo('k', 'INT64', [1])], [makeValueInfo('top_scores', 'FLOAT', ['n', 'p']), makeValueInfo('top_ids', 'INT64', ['n', 'p'])]),
      { opset: 18 },
    );
    return new PackedProbe(await createScorerSession(model, { intraOpThreads: threads }));
  }

  async run(q: Float32Array, n: number, d: number, k: number): Promise<ort.InferenceSession.ReturnType> {
    this.running++;
    try {
      return await this.session.run({ q: new ort.Tensor('float32', q.length === n * d ? q : q.subarray(0, n * d), [n, d]), k: new ort.Tensor('int64', BigInt64Array.of(BigInt(k)), [1]) });
    } finally {
      this.running--;
      if (this.retired && this.running === 0) void this.session.release().catch(() => undefined);
    }
  }

  retire(): void {
    this.retired = true;
    if (this.running === 0) void this.session.release().catch(() => undefined);
  }
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
 * the GEMM alone, n = 14, one thread, `npm run bench -- peers` notes in docs/benchmarks.md).
 * A centroid set that keeps serving queries (PACKED_AFTER_USES) gets its own session with its
 * transposed centroids as a constant (PackedProbe), which ONNX Runtime packs for its GEMM once.
 */
export class OnnxIvfProbe {
  /**
   * Per centroid set (the repositories keep one immutable Float32Array per collection, codec
   * version and epoch), its packed session once built (null while it builds or if it failed: the
   * shared graph serves meanwhile); most recently used last.
   */
  private readonly packed = new Map<Float32Array, { probe: PackedProbe | null; ready: Promise<void> | null; uses: number }>();

  private constructor(
    private readonly session: ort.InferenceSession,
    private readonly threads = 0,
  ) {}

  /**
   * The centroid set's packed session, or null: the set is too small to need one, or has served
   * fewer than PACKED_AFTER_USES queries (a scorer rotating over more collections than
   * PACKED_SESSIONS keeps building none), or its session is being built in the background now.
   */
  private packedFor(centroids: Float32Array, d: number, now = false): PackedProbe | null {
    if (centroids.length < PACKED_MIN_FLOATS) return null;
    let entry = this.packed.get(centroids);
    if (entry) this.packed.delete(centroids);
    else entry = { probe: null, ready: null, uses: 0 };
    this.packed.set(centroids, entry);
    while (this.packed.size > PACKED_SESSIONS) {
      const [oldest, e] = this.packed.entries().next().value!;
      this.packed.delete(oldest);
      e.probe?.retire();
    }
    entry.uses++;
    if (!entry.ready && (now || entry.uses >= PACKED_AFTER_USES)) {
      const e = entry;
      e.ready = PackedProbe.create(centroids, d, this.threads).then(
        (p) => {
          if (this.packed.get(centroids) === e) e.probe = p;
          else p.retire();
        },
        () => undefined, // the shared graph keeps serving this set
      );
    }
    return entry.probe;
  }

  /**
   * Builds the centroid set's packed session now (the first top() or probe() of a set starts it in
   * the background and is served by the shared graph until it is ready); resolves when it is ready
   * (or failed: the shared graph serves). Whether a packed session serves the set is returned.
   */
  async pack(centroids: Float32Array, d: number): Promise<boolean> {
    this.packedFor(centroids, d, true);
    await this.packed.get(centroids)?.ready;
    return !!this.packed.get(centroids)?.probe;
  }

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
    return new OnnxIvfProbe(await createScorerSession(model, { intraOpThreads: threads }), threads);
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
    const packed = this.packedFor(centroids, d);
    const r = packed ? await packed.run(q, n, d, k) : await this.session.run(this.feeds(q, n, centroids, d, k));
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
    const packed = this.packedFor(centroids, d);
    const r = packed ? await packed.run(q, n, d, nprobe) : await this.session.run(this.feeds(q, n, centroids, d, nprobe));
    const ids = r.top_ids.data as BigInt64Array;
    for (let i = 0; i < ids.length; i++) out[i] = Number(ids[i]);
    return { n, nprobe, centroids: out };
  }

  async release(): Promise<void> {
    for (const e of this.packed.values()) e.probe?.retire();
    this.packed.clear();
    await this.session.release();
  }
}
