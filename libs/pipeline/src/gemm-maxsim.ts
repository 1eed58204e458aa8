import * as ort from 'onnxruntime-node';
import { GraphBuilder, encodeModel, makeModel, makeValueInfo } from '../../../scripts/lib/onnx-graph';

/** Query token columns per GEMM (queries are never split across blocks). */
const MAX_COLS = 1024;
/** Document token rows per GEMM (chunks end on document boundaries). */
const MAX_ROWS = 4096;

export interface QueryTokens {
  vectors: Float32Array; // n x d
  length: number;
}

/**
 * Exact MaxSim of many queries against one shared candidate set, without padding:
 * S = D Q^T is computed by ONNX Runtime's GEMM (MLAS on CPU) over chunks of candidate token
 * rows x blocks of query token columns, and the per-document max over its own rows plus the
 * per-query sum are done in tight typed-array loops. The ragged layout (no padding to the
 * longest document) is what makes this cheaper than a padded [C, L, d] batch.
 */
export class GemmMaxsim {
  private constructor(private readonly session: ort.InferenceSession) {}

  static async create(threads = 0): Promise<GemmMaxsim> {
    const g = new GraphBuilder();
    g.op('MatMul', ['docs', 'query_t'], {}, 'sims');
    const model = makeModel(g.build('ragged_maxsim', [makeValueInfo('docs', 'FLOAT', ['R', 'd']), makeValueInfo('query_t', 'FLOAT', ['d', 'N'])], [makeValueInfo('sims', 'FLOAT', ['R', 'N'])]));
    const session = await ort.InferenceSession.create(encodeModel(model), {
      executionProviders: ['cpu'],
      graphOptimizationLevel: 'all',
      ...(threads > 0 ? { intraOpNumThreads: threads } : {}),
    });
    return new GemmMaxsim(session);
  }

  /**
   * queries: each n_q x d; docs: T x d rows of C candidates (offsets C + 1).
   * Returns one Float32Array of C scores per query; a candidate with no tokens scores -Infinity.
   */
  async score(queries: QueryTokens[], docs: Float32Array, offsets: Uint32Array, d: number, opts: { normalize?: boolean; yieldEvery?: () => Promise<void> } = {}): Promise<Float32Array[]> {
    const C = offsets.length - 1;
    const out = queries.map(() => new Float32Array(C));
    // Column blocks of whole queries.
    const blocks: number[][] = [];
    let cur: number[] = [];
    let cols = 0;
    queries.forEach((q, i) => {
      if (cur.length > 0 && cols + q.length > MAX_COLS) {
        blocks.push(cur);
        cur = [];
        cols = 0;
      }
      cur.push(i);
      cols += q.length;
    });
    if (cur.length) blocks.push(cur);

    for (const block of blocks) {
      const N = block.reduce((s, i) => s + queries[i].length, 0);
      if (N === 0) continue;
      const qT = new Float32Array(d * N);
      const colStart: number[] = [];
      let c0 = 0;
      for (const i of block) {
        colStart.push(c0);
        const q = queries[i];
        for (let r = 0; r < q.length; r++) for (let k = 0; k < d; k++) qT[k * N + c0 + r] = q.vectors[r * d + k];
        c0 += q.length;
      }
      const queryT = new ort.Tensor('float32', qT, [d, N]);
      const best = new Float32Array(N);
      let doc = 0;
      while (doc < C) {
        // Grow a chunk of whole documents up to MAX_ROWS rows (a longer document gets its own chunk).
        let end = doc + 1;
        while (end < C && offsets[end + 1] - offsets[doc] <= MAX_ROWS) end++;
        const r0 = offsets[doc];
        const rows = offsets[end] - r0;
        let sims: Float32Array | null = null;
        if (rows > 0) {
          const res = await this.session.run({ docs: new ort.Tensor('float32', docs.subarray(r0 * d, offsets[end] * d), [rows, d]), query_t: queryT });
          sims = res.sims.data as Float32Array;
        }
        for (let c = doc; c < end; c++) {
          const a = offsets[c] - r0;
          const b = offsets[c + 1] - r0;
          if (a === b || !sims) {
            for (const i of block) out[i][c] = -Infinity;
            continue;
          }
          best.set(sims.subarray(a * N, a * N + N));
          for (let r = a + 1; r < b; r++) {
            const row = r * N;
            for (let j = 0; j < N; j++) {
              const v = sims[row + j];
              if (v > best[j]) best[j] = v;
            }
          }
          block.forEach((qi, bi) => {
            const n = queries[qi].length;
            let s = 0;
            for (let j = colStart[bi]; j < colStart[bi] + n; j++) s += best[j];
            out[qi][c] = opts.normalize && n > 0 ? s / n : s;
          });
        }
        doc = end;
        if (opts.yieldEvery) await opts.yieldEvery();
      }
    }
    return out;
  }

  async release(): Promise<void> {
    await this.session.release();
  }
}
