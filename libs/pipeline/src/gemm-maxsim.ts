import * as ort from 'onnxruntime-node';
import { IMAGE_ZERO_POINT } from '@lateral/codec';
import { GraphBuilder, encodeModel, makeModel, makeTensor, makeValueInfo } from '@lateral/model';

/** Query token columns per GEMM (queries are never split across blocks). */
const MAX_COLS = 1024;
/**
 * Candidate token rows per GEMM (S is at most MAX_ROWS x MAX_COLS floats, 128 MiB). 1,000 x 180
 * candidates vs a 32-token query, 2 threads: the former padded copies in chunks of 2,048 rows took
 * 56.7 ms; unpadded rows + Gather in chunks of 32,768 take 19.7 ms (ORT's single-tensor MaxSim 19.0).
 * 225 queries x 10 tokens vs 1,400 candidates of 20-180 tokens (d = 100, machine under load):
 * 2,048 rows 2.58 s, 4,096 2.18 s, 8,192 2.10 s, 32,768 1.75 s.
 */
const MAX_ROWS = 32768;

export interface QueryTokens {
  vectors: Float32Array; // n x d
  length: number;
}

/** One block of query columns: the tensor a graph takes and where each member query's columns start. */
export interface ColumnBlock {
  members: number[];
  N: number;
  colStart: number[];
  queryT: ort.Tensor;
}

/**
 * MaxSim graphs over unpadded candidate rows: S = rows x query^T once ([T, N]), then Gather with
 * `index` [c, L] (a candidate's padded slots repeat one of its own rows, which cannot change a
 * max) and ReduceMax over L, leaving [c, N] for JavaScript. Nothing is padded or copied when
 * the candidates are already contiguous (a whole generation in order).
 */
export async function createMaxsimSession(kind: 'fp32' | 'int8', threads = 0): Promise<ort.InferenceSession> {
  const g = new GraphBuilder();
  let s: string;
  const inputs = [makeValueInfo('index', 'INT32', ['C', 'L'])];
  if (kind === 'fp32') {
    s = g.op('MatMul', ['docs', 'query_t']);
    inputs.push(makeValueInfo('docs', 'FLOAT', ['T', 'd']), makeValueInfo('query_t', 'FLOAT', ['d', 'N']));
  } else {
    // uint8 image with zero point 128 (u8 x s8 is the integer GEMM MLAS accelerates), per-row scales.
    const zp = g.constant(makeTensor('image_zero_point', [], Uint8Array.of(IMAGE_ZERO_POINT)));
    s = g.op('Mul', [g.op('Cast', [g.op('MatMulInteger', ['image', 'query_t', zp])], { to: 1 }), 'scales']);
    inputs.push(makeValueInfo('image', 'UINT8', ['T', 'p']), makeValueInfo('query_t', 'INT8', ['p', 'N']), makeValueInfo('scales', 'FLOAT', ['T', 1]));
  }
  g.op('ReduceMax', [g.op('Gather', [s, 'index'], { axis: 0 })], { axes: [1], keepdims: 0 }, 'best');
  const model = makeModel(g.build(`maxsim_rows_${kind}`, inputs, [makeValueInfo('best', 'FLOAT', ['C', 'N'])]));
  return ort.InferenceSession.create(encodeModel(model), {
    executionProviders: ['cpu'],
    graphOptimizationLevel: 'all',
    ...(threads > 0 ? { intraOpNumThreads: threads } : {}),
  });
}

/**
 * Walks C candidates (offsets C + 1, rows contiguous in candidate order) in chunks of at most
 * MAX_ROWS rows, calling `run(first row, row count, index tensor, candidates)` for each; empty
 * candidates are reported with L = 0 and no call. Yields between chunks.
 */
export async function forEachRowChunk(
  offsets: Uint32Array,
  run: (row0: number, rows: number, index: ort.Tensor, docs: number[]) => Promise<void>,
  onEmpty: (doc: number) => void,
  yieldEvery?: () => Promise<void>,
): Promise<void> {
  const C = offsets.length - 1;
  let c = 0;
  while (c < C) {
    const docs: number[] = [];
    const row0 = offsets[c];
    let L = 0;
    while (c < C && (docs.length === 0 || offsets[c + 1] - row0 <= MAX_ROWS)) {
      const m = offsets[c + 1] - offsets[c];
      if (m === 0) onEmpty(c);
      else {
        docs.push(c);
        L = Math.max(L, m);
      }
      c++;
    }
    if (docs.length === 0) continue;
    const index = new Int32Array(docs.length * L);
    docs.forEach((doc, k) => {
      const a = offsets[doc] - row0;
      const m = offsets[doc + 1] - offsets[doc];
      for (let r = 0; r < L; r++) index[k * L + r] = a + (r < m ? r : 0);
    });
    await run(row0, offsets[c] - row0, new ort.Tensor('int32', index, [docs.length, L]), docs);
    if (yieldEvery) await yieldEvery();
  }
}

/** Adds each query's columns of `best` (one row per doc of `docs`, N columns) into its scores. */
export function sumColumns(best: Float32Array, b: ColumnBlock, queries: { length: number }[], docs: number[], out: Float32Array[], normalize?: boolean): void {
  b.members.forEach((qi, bi) => {
    const n = queries[qi].length;
    const s0 = b.colStart[bi];
    docs.forEach((doc, k) => {
      let s = 0;
      for (let j = s0; j < s0 + n; j++) s += best[k * b.N + j];
      out[qi][doc] = normalize && n > 0 ? s / n : s;
    });
  });
}

/** Splits whole queries into groups of at most MAX_COLS token columns. */
export function columnGroups(lengths: number[]): number[][] {
  const groups: number[][] = [];
  let cur: number[] = [];
  let cols = 0;
  lengths.forEach((n, i) => {
    if (cur.length > 0 && cols + n > MAX_COLS) {
      groups.push(cur);
      cur = [];
      cols = 0;
    }
    cur.push(i);
    cols += n;
  });
  if (cur.length) groups.push(cur);
  return groups;
}

/**
 * Exact MaxSim of many queries against one shared candidate set, in ONNX Runtime: the candidates'
 * fp32 rows (T x d, contiguous, offsets C + 1) times [d, N] query columns (many queries at once),
 * gathered per candidate and max-reduced (createMaxsimSession); JavaScript sums each query's
 * columns. Empty candidates score -Infinity, as in @lateral/scoring's reference.
 */
export class GemmMaxsim {
  private constructor(private readonly session: ort.InferenceSession) {}

  static async create(threads = 0): Promise<GemmMaxsim> {
    return new GemmMaxsim(await createMaxsimSession('fp32', threads));
  }

  /** queries: each n_q x d; docs: T x d rows of C candidates (offsets C + 1). Returns C scores per query. */
  async score(queries: QueryTokens[], docs: Float32Array, offsets: Uint32Array, d: number, opts: { normalize?: boolean; yieldEvery?: () => Promise<void> } = {}): Promise<Float32Array[]> {
    const C = offsets.length - 1;
    const out = queries.map(() => new Float32Array(C));
    const blocks = columnBlocks(queries, d);
    await forEachRowChunk(
      offsets,
      async (row0, rows, index, members) => {
        const tensor = new ort.Tensor('float32', docs.subarray(row0 * d, (row0 + rows) * d), [rows, d]);
        for (const b of blocks) {
          const res = await this.session.run({ docs: tensor, query_t: b.queryT, index });
          sumColumns(res.best.data as Float32Array, b, queries, members, out, opts.normalize);
        }
      },
      (doc) => out.forEach((q) => (q[doc] = -Infinity)),
      opts.yieldEvery,
    );
    return out;
  }

  async release(): Promise<void> {
    await this.session.release();
  }
}

/** Groups whole queries into blocks of at most MAX_COLS token columns, transposed to [d, N]. */
function columnBlocks(queries: QueryTokens[], d: number): ColumnBlock[] {
  return columnGroups(queries.map((q) => q.length)).map((members) => {
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
