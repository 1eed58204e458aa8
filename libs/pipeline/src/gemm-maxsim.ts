import * as ort from 'onnxruntime-node';
import { GraphBuilder, encodeModel, makeModel, makeValueInfo } from '@lateral/model';

/** Query token columns per GEMM (queries are never split across blocks). */
const MAX_COLS = 1024;
/** Padded document token rows per GEMM: small enough that S stays in cache. */
const MAX_ROWS = 2048;

export interface QueryTokens {
  vectors: Float32Array; // n x d
  length: number;
}

/**
 * Exact MaxSim of many queries against one shared candidate set, in ONNX Runtime:
 * candidates are sorted by length and cut into chunks of similar length, each chunk padded to
 * [c, L, d] by repeating one of the document's own tokens (a duplicate row cannot change a max,
 * so no mask is needed); then MatMul with [d, N] query columns (many queries at once) and
 * ReduceMax over L leave only [c, N] for JavaScript, which sums each query's columns.
 * Empty candidates score -Infinity, as in @lateral/scoring's reference.
 */
export class GemmMaxsim {
  private constructor(private readonly session: ort.InferenceSession) {}

  static async create(threads = 0): Promise<GemmMaxsim> {
    const g = new GraphBuilder();
    const s = g.op('MatMul', ['docs', 'query_t']);
    g.op('ReduceMax', [s], { axes: [1], keepdims: 0 }, 'best');
    const model = makeModel(g.build('padded_maxsim', [makeValueInfo('docs', 'FLOAT', ['C', 'L', 'd']), makeValueInfo('query_t', 'FLOAT', ['d', 'N'])], [makeValueInfo('best', 'FLOAT', ['C', 'N'])]));
    const session = await ort.InferenceSession.create(encodeModel(model), {
      executionProviders: ['cpu'],
      graphOptimizationLevel: 'all',
      ...(threads > 0 ? { intraOpNumThreads: threads } : {}),
    });
    return new GemmMaxsim(session);
  }

  /**
   * queries: each n_q x d; docs: T x d rows of C candidates (offsets C + 1).
   * Returns one Float32Array of C scores per query.
   */
  async score(queries: QueryTokens[], docs: Float32Array, offsets: Uint32Array, d: number, opts: { normalize?: boolean; yieldEvery?: () => Promise<void> } = {}): Promise<Float32Array[]> {
    const C = offsets.length - 1;
    const out = queries.map(() => new Float32Array(C));
    const blocks = columnBlocks(queries, d);
    const len = (c: number) => offsets[c + 1] - offsets[c];
    const order = Array.from({ length: C }, (_, i) => i).sort((a, b) => len(a) - len(b) || a - b);
    let k = 0;
    while (k < C && len(order[k]) === 0) {
      for (const q of out) q[order[k]] = -Infinity;
      k++;
    }
    while (k < C) {
      // Sorted by length, so the chunk's last document is its longest.
      let end = k + 1;
      while (end < C && (end + 1 - k) * len(order[end]) <= MAX_ROWS) end++;
      const count = end - k;
      const L = len(order[end - 1]);
      const block = new Float32Array(count * L * d);
      for (let c = 0; c < count; c++) {
        const doc = order[k + c];
        const a = offsets[doc] * d;
        const m = len(doc);
        block.set(docs.subarray(a, a + m * d), c * L * d);
        for (let r = m; r < L; r++) block.copyWithin((c * L + r) * d, c * L * d, c * L * d + d);
      }
      const tensor = new ort.Tensor('float32', block, [count, L, d]);
      for (const b of blocks) {
        const res = await this.session.run({ docs: tensor, query_t: b.queryT });
        const best = res.best.data as Float32Array; // count x N
        b.members.forEach((qi, bi) => {
          const n = queries[qi].length;
          const s0 = b.colStart[bi];
          for (let c = 0; c < count; c++) {
            let s = 0;
            for (let j = s0; j < s0 + n; j++) s += best[c * b.N + j];
            out[qi][order[k + c]] = opts.normalize && n > 0 ? s / n : s;
          }
        });
      }
      k = end;
      if (opts.yieldEvery) await opts.yieldEvery();
    }
    return out;
  }

  async release(): Promise<void> {
    await this.session.release();
  }
}

/** Groups whole queries into blocks of at most MAX_COLS token columns, transposed to [d, N]. */
function columnBlocks(queries: QueryTokens[], d: number) {
  const groups: number[][] = [];
  let cur: number[] = [];
  let cols = 0;
  queries.forEach((q, i) => {
    if (cur.length > 0 && cols + q.length > MAX_COLS) {
      groups.push(cur);
      cur = [];
      cols = 0;
    }
    cur.push(i);
    cols += q.length;
  });
  if (cur.length) groups.push(cur);
  return groups.map((members) => {
    const N = Math.max(1, members.reduce((s, i) => s + queries[i].length, 0));
    const qT = new Float32Array(d * N);
    const colStart: number[] = [];
    let c0 = 0;
    for (const i of members) {
      colStart.push(c0);
      const q = queries[i];
      for (let r = 0; r < q.length; r++) for (let x = 0; x < d; x++) qT[x * N + c0 + r] = q.vectors[r * d + x];
      c0 += q.length;
    }
    return { members, N, colStart, queryT: new ort.Tensor('float32', qT, [d, N]) };
  });
}
