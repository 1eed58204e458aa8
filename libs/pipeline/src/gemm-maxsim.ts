import * as ort from 'onnxruntime-node';
import { GraphBuilder, encodeModel, makeModel, makeValueInfo } from '@lateral/model';

/** Query token columns per GEMM (queries are never split across blocks). */
const MAX_COLS = 1024;
/**
 * Padded document token rows per GEMM. 1,000 x 180 candidates vs a 32-token query, 2 threads:
 * 2,048 rows 56.7 ms, 8,192 47.2 ms, 32,768 49.5 ms, all at once 100.5 ms.
 */
const MAX_ROWS = 8192;

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
    for await (const chunk of lengthChunks(offsets, opts.yieldEvery)) {
      const { docs: members, L } = chunk;
      const count = members.length;
      if (L === 0) {
        for (const q of out) for (const doc of members) q[doc] = -Infinity;
        continue;
      }
      const block = new Float32Array(count * L * d);
      members.forEach((doc, c) => padRows(docs, offsets[doc], offsets[doc + 1] - offsets[doc], L, d, block, c * L * d));
      const tensor = new ort.Tensor('float32', block, [count, L, d]);
      for (const b of blocks) {
        const res = await this.session.run({ docs: tensor, query_t: b.queryT });
        sumColumns(res.best.data as Float32Array, b, queries, members, out, opts.normalize);
      }
    }
    return out;
  }

  async release(): Promise<void> {
    await this.session.release();
  }
}

/**
 * Candidates sorted by length (ties by index) and cut into chunks of at most MAX_ROWS padded
 * rows; empty candidates come first as one chunk with L = 0. Yields between chunks.
 */
export async function* lengthChunks(offsets: Uint32Array, yieldEvery?: () => Promise<void>): AsyncGenerator<{ docs: number[]; L: number }> {
  const C = offsets.length - 1;
  const len = (c: number) => offsets[c + 1] - offsets[c];
  const order = Array.from({ length: C }, (_, i) => i).sort((a, b) => len(a) - len(b) || a - b);
  let k = 0;
  while (k < C && len(order[k]) === 0) k++;
  if (k > 0) yield { docs: order.slice(0, k), L: 0 };
  while (k < C) {
    // Sorted by length, so the chunk's last document is its longest.
    let end = k + 1;
    while (end < C && (end + 1 - k) * len(order[end]) <= MAX_ROWS) end++;
    yield { docs: order.slice(k, end), L: len(order[end - 1]) };
    k = end;
    if (yieldEvery) await yieldEvery();
  }
}

/** Copies rows [start, start + m) of a row-major `src` (width w) to `dst` at `at`, repeating the first row up to L rows. */
export function padRows<T extends Float32Array | Uint8Array>(src: T, start: number, m: number, L: number, w: number, dst: T, at: number): void {
  dst.set(src.subarray(start * w, (start + m) * w), at);
  for (let r = m; r < L; r++) dst.copyWithin(at + r * w, at, at + w);
}

/** Adds each query's columns of `best` (count x N, one row per member doc) into its scores. */
export function sumColumns(
  best: Float32Array,
  b: { members: number[]; N: number; colStart: number[] },
  queries: { length: number }[],
  docs: number[],
  out: Float32Array[],
  normalize?: boolean,
): void {
  b.members.forEach((qi, bi) => {
    const n = queries[qi].length;
    const s0 = b.colStart[bi];
    docs.forEach((doc, c) => {
      let s = 0;
      for (let j = s0; j < s0 + n; j++) s += best[c * b.N + j];
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

/** Groups whole queries into blocks of at most MAX_COLS token columns, transposed to [d, N]. */
function columnBlocks(queries: QueryTokens[], d: number) {
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
