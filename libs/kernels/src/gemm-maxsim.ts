import { IMAGE_ZERO_POINT, QUERY_ZERO_POINT } from '@lateral/codec';
import { GraphBuilder, makeModel, makeTensor, makeValueInfo } from './onnx-graph';
import { createScorerSession, ort } from './session';

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
export interface ColumnBlock extends ColumnLayout {
  queryT: ort.Tensor;
}

/**
 * MaxSim graphs. Unpadded (few query columns): S = rows x query^T once ([T, N]), then Gather with
 * `index` [c, L] (a candidate's padded slots repeat one of its own rows, which cannot change a
 * max) and ReduceMax over L; nothing is copied when the candidates are already contiguous.
 * Padded (many query columns): rows copied into blocks of length-sorted candidates, one GEMM and
 * ReduceMax, with no Gather pass over the large S. Both leave best [c, N] for JavaScript, except
 * the padded int8 graph, which leaves best [N, c]: it multiplies query [N, p] (uint8, zero point
 * 128) by the block transposed, imageT [p, c L] (int8), with com.microsoft MatMulIntegerToFloat,
 * whose per-column scale is the per-token scale, so S is written once, as floats (one chunk of
 * 15 x 136 tokens vs 1,024 columns: 2.6 ms, against 6.1 ms for MatMulInteger + Cast + Mul and
 * 4.0 ms for the fp32 GEMM at d = 100). threads: intra-op threads (0 = ONNX Runtime's default).
 */
export async function createMaxsimSession(kind: 'fp32' | 'int8', padded: boolean, threads = 0): Promise<ort.InferenceSession> {
  const g = new GraphBuilder();
  const inputs: ReturnType<typeof makeValueInfo>[] = [];
  let s: string;
  let output = 'best';
  if (kind === 'fp32') {
    s = g.op('MatMul', ['docs', 'query_t']);
    inputs.push(makeValueInfo('docs', 'FLOAT', padded ? ['C', 'L', 'd'] : ['T', 'd']), makeValueInfo('query_t', 'FLOAT', ['d', 'N']));
  } else if (!padded) {
    // uint8 image with zero point 128 (u8 x s8 is the integer GEMM MLAS accelerates), per-row scales.
    const zp = g.constant(makeTensor('image_zero_point', [], Uint8Array.of(IMAGE_ZERO_POINT)));
    s = g.op('Mul', [g.op('Cast', [g.op('MatMulInteger', ['image', 'query_t', zp])], { to: 1 }), 'scales']);
    inputs.push(makeValueInfo('image', 'UINT8', ['T', 'p']), makeValueInfo('query_t', 'INT8', ['p', 'N']), makeValueInfo('scales', 'FLOAT', ['T', 1]));
  } else {
    const one = g.constant(makeTensor('query_scale', [], Float32Array.of(1)));
    // The query is the u8 operand here (raw q8 + 64 in 1..127, see rotated-image.ts "Operand ranges").
    const zp = g.constant(makeTensor('query_zero_point', [], Uint8Array.of(QUERY_ZERO_POINT)));
    const y = g.op('MatMulIntegerToFloat', ['query_u8', 'image_t', one, 'scales', zp], {}, undefined, 'com.microsoft');
    s = g.op('Reshape', [y, 'shape']); // [N, C, L]
    inputs.push(makeValueInfo('query_u8', 'UINT8', ['N', 'p']), makeValueInfo('image_t', 'INT8', ['p', 'R']), makeValueInfo('scales', 'FLOAT', ['R']), makeValueInfo('shape', 'INT64', [3]));
    output = 'best_t';
  }
  if (!padded) {
    inputs.push(makeValueInfo('index', 'INT32', ['C', 'L']));
    s = g.op('Gather', [s, 'index'], { axis: 0 });
  }
  const transposed = output === 'best_t';
  g.op('ReduceMax', [s], { axes: [transposed ? 2 : 1], keepdims: 0 }, output);
  const model = makeModel(g.build(`maxsim_${padded ? 'padded' : 'rows'}_${kind}`, inputs, [makeValueInfo(output, 'FLOAT', transposed ? ['N', 'C'] : ['C', 'N'])]), {
    ...(transposed ? { extraOpsets: [{ domain: 'com.microsoft', version: 1 }] } : {}),
  });
  return createScorerSession(model, { intraOpThreads: threads });
}

/** Rows `index[k]` of `src` (width w) copied one after another: the padded block [count, L, w]. */
export function padByIndex<T extends Float32Array | Uint8Array>(src: T, index: Int32Array, w: number, make: (n: number) => T): T {
  const out = make(index.length * w);
  for (let k = 0; k < index.length; k++) out.set(src.subarray(index[k] * w, (index[k] + 1) * w), k * w);
  return out;
}

/** Floats of S = rows x columns per GEMM when many query columns share it (8 MiB: stays in cache). */
const S_BUDGET = 1 << 21;
/** Above this many query columns, candidates are copied in length order first (less Gather padding). */
const SORT_COLUMNS = 64;

/**
 * How to walk candidates for `columns` query columns: a few queries go unpadded in chunks of
 * MAX_ROWS rows (order null); many go padded, length-sorted, with fewer rows per chunk so that S
 * stays in cache. 225 queries x 12 tokens vs 1,400 candidates of 20-260 tokens (d = 100):
 * unpadded + Gather 2.31-2.75 s in candidate order, 1.57-1.91 s length-sorted; padded 1.42-1.54 s.
 */
export function rowPlan(offsets: Uint32Array, columns: number): { maxRows: number; order: number[] | null } {
  const maxRows = Math.max(2048, Math.min(MAX_ROWS, Math.floor(S_BUDGET / Math.max(1, columns))));
  if (columns <= SORT_COLUMNS) return { maxRows, order: null };
  const C = offsets.length - 1;
  const len = (c: number) => offsets[c + 1] - offsets[c];
  return { maxRows, order: Array.from({ length: C }, (_, i) => i).sort((a, b) => len(a) - len(b) || a - b) };
}

/** Rows of candidates `order` (width w, offsets C + 1) copied contiguously in that order. */
export function permuteRows<T extends Float32Array | Uint8Array>(src: T, offsets: Uint32Array, order: number[], w: number, make: (n: number) => T): { data: T; offsets: Uint32Array } {
  const out = new Uint32Array(order.length + 1);
  order.forEach((c, i) => (out[i + 1] = out[i] + (offsets[c + 1] - offsets[c])));
  const data = make(out[order.length] * w);
  order.forEach((c, i) => data.set(src.subarray(offsets[c] * w, offsets[c + 1] * w), out[i] * w));
  return { data, offsets: out };
}

/**
 * Walks C candidates (offsets C + 1 into one row array) in chunks: in candidate order, each chunk
 * a contiguous row range of at most `maxRows` rows (unpadded); or, given `order` (length-sorted),
 * chunks of at most `maxRows` padded rows (count x L). Calls `run(index, L, docs, row0, row1)` with
 * `index` [count, L] of row numbers, relative to row0 (unpadded) or absolute (ordered), padded
 * slots repeating the candidate's first row. Empty candidates go to `onEmpty`. Yields between chunks.
 */
export async function forEachRowChunk(
  offsets: Uint32Array,
  run: (index: Int32Array, L: number, docs: number[], row0: number, row1: number) => Promise<void>,
  onEmpty: (doc: number) => void,
  opts: { yieldEvery?: () => Promise<void>; maxRows?: number; order?: number[] | null } = {},
): Promise<void> {
  const C = offsets.length - 1;
  const maxRows = opts.maxRows ?? MAX_ROWS;
  const order = opts.order ?? null;
  const at = (k: number) => (order ? order[k] : k);
  const len = (c: number) => offsets[c + 1] - offsets[c];
  let k = 0;
  while (k < C) {
    const docs: number[] = [];
    const row0 = offsets[at(k)];
    let L = 0;
    while (k < C) {
      const c = at(k);
      const m = len(c);
      if (m === 0) {
        onEmpty(c);
        k++;
        continue;
      }
      const fits = order ? (docs.length + 1) * Math.max(L, m) <= maxRows : offsets[c + 1] - row0 <= maxRows;
      if (docs.length > 0 && !fits) break;
      docs.push(c);
      L = Math.max(L, m);
      k++;
    }
    if (docs.length === 0) continue;
    const base = order ? 0 : row0;
    const index = new Int32Array(docs.length * L);
    docs.forEach((doc, j) => {
      const a = offsets[doc] - base;
      const m = len(doc);
      for (let r = 0; r < L; r++) index[j * L + r] = a + (r < m ? r : 0);
    });
    await run(index, L, docs, row0, order ? row0 : offsets[docs[docs.length - 1] + 1]);
    if (opts.yieldEvery) await opts.yieldEvery();
  }
}

/** Adds each query's columns of `best` (one row per doc of `docs`, N columns) into its scores. */
export function sumColumns(best: Float32Array, b: ColumnLayout, queries: { length: number }[], docs: number[], out: Float32Array[], normalize?: boolean): void {
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

/** Where each query's token columns go: groups of whole queries of at most MAX_COLS columns. */
export interface ColumnLayout {
  members: number[];
  /** Columns of the group (at least 1). */
  N: number;
  /** First column of each member. */
  colStart: number[];
}

/** Splits whole queries (token counts `lengths`) into column groups of at most MAX_COLS columns. */
export function columnLayout(lengths: number[]): ColumnLayout[] {
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
  return groups.map((members) => {
    const colStart: number[] = [];
    let c0 = 0;
    for (const i of members) {
      colStart.push(c0);
      c0 += lengths[i];
    }
    return { members, N: Math.max(1, c0), colStart };
  });
}

/**
 * Exact MaxSim of many queries against one shared candidate set, in ONNX Runtime: the candidates'
 * fp32 rows (T x d, contiguous, offsets C + 1) times [d, N] query columns (many queries at once),
 * gathered per candidate and max-reduced (createMaxsimSession); JavaScript sums each query's
 * columns. Empty candidates score -Infinity, as in @lateral/scoring's reference.
 */
/** scoreBlocks keeps its chunk scratch for the next call up to this size (100 candidates of ~140 rows at d = 100: 5.6 MB). */
const KEPT_SCRATCH_BYTES = 16 << 20;

export class GemmMaxsim {
  /** Chunk scratch of finished scoreBlocks calls, taken by the next one (each call holds its own while it runs). */
  private spare: Float32Array[] = [];

  private constructor(
    private readonly unpadded: ort.InferenceSession,
    private readonly padded: ort.InferenceSession,
  ) {}

  static async create(threads = 0): Promise<GemmMaxsim> {
    return new GemmMaxsim(await createMaxsimSession('fp32', false, threads), await createMaxsimSession('fp32', true, threads));
  }

  /** queries: each n_q x d; docs: T x d rows of C candidates (offsets C + 1). Returns C scores per query. */
  async score(queries: QueryTokens[], docs: Float32Array, offsets: Uint32Array, d: number, opts: { normalize?: boolean; yieldEvery?: () => Promise<void> } = {}): Promise<Float32Array[]> {
    return this.scoreChunks(queries, offsets, d, opts, (padded, index, L, members, row0, row1): Record<string, ort.Tensor> =>
      padded
        ? { docs: new ort.Tensor('float32', padByIndex(docs, index, d, (n) => new Float32Array(n)), [members.length, L, d]) }
        : { docs: new ort.Tensor('float32', docs.subarray(row0 * d, row1 * d), [row1 - row0, d]), index: new ort.Tensor('int32', index, [members.length, L]) },
    );
  }

  /**
   * The row chunks of the candidates (`offsets`, chunked by rowPlan and forEachRowChunk), each fed
   * as `feedsOf` builds it (padded: [count, L, d]; else the rows with their index), run against
   * every column block of the queries and summed into C scores per query (-Infinity for a
   * candidate without rows). score() and scoreBlocks() differ only in how they build the feeds.
   */
  private async scoreChunks(
    queries: QueryTokens[],
    offsets: Uint32Array,
    d: number,
    opts: { normalize?: boolean; yieldEvery?: () => Promise<void> },
    feedsOf: (padded: boolean, index: Int32Array, L: number, members: number[], row0: number, row1: number) => Record<string, ort.Tensor>,
  ): Promise<Float32Array[]> {
    const C = offsets.length - 1;
    const out = queries.map(() => new Float32Array(C));
    const blocks = columnBlocks(queries, d);
    const plan = rowPlan(offsets, Math.max(...blocks.map((b) => b.N)));
    await forEachRowChunk(
      offsets,
      async (index, L, members, row0, row1) => {
        const feeds = feedsOf(!!plan.order, index, L, members, row0, row1);
        for (const b of blocks) {
          const res = await (plan.order ? this.padded : this.unpadded).run({ ...feeds, query_t: b.queryT });
          sumColumns(res.best.data as Float32Array, b, queries, members, out, opts.normalize);
        }
      },
      (c) => out.forEach((q) => (q[c] = -Infinity)),
      { yieldEvery: opts.yieldEvery, maxRows: plan.maxRows, order: plan.order },
    );
    return out;
  }

  /**
   * score() over candidates held as one block each (blocks[c]: its m_c x d rows, e.g. the text
   * cache's entries) instead of one contiguous copy of them all: each row chunk is assembled in a
   * scratch buffer of at most one chunk's rows, reused across chunks, so a batch chunk's
   * candidates are never copied whole (about 110 MB per batch chunk at d = 100). The same chunks,
   * the same feeds and so the same scores as score() over their concatenation.
   */
  async scoreBlocks(queries: QueryTokens[], blocks: Float32Array[], d: number, opts: { normalize?: boolean; yieldEvery?: () => Promise<void> } = {}): Promise<Float32Array[]> {
    const C = blocks.length;
    const offsets = new Uint32Array(C + 1);
    for (let c = 0; c < C; c++) offsets[c + 1] = offsets[c] + blocks[c].length / d;
    // A re-rank's scratch is reused by the next call (no fresh chunk-sized buffer to allocate, zero
    // and collect per request); every cell a chunk reads is written first, so what it held is never seen.
    let scratch = this.spare.pop() ?? new Float32Array(0);
    const room = (floats: number) => (scratch.length >= floats ? scratch : (scratch = new Float32Array(floats)));
    try {
      return await this.scoreChunks(queries, offsets, d, opts, (padded, index, L, members, row0, row1): Record<string, ort.Tensor> => {
        if (padded) {
          // [count, L, d]: each member's rows, its slots past its length repeating its first row (padByIndex's layout).
          const buf = room(members.length * L * d).subarray(0, members.length * L * d);
          members.forEach((c, j) => {
            const b = blocks[c];
            const m = b.length / d;
            buf.set(b, j * L * d);
            for (let r = m; r < L; r++) buf.copyWithin((j * L + r) * d, j * L * d, j * L * d + d);
          });
          return { docs: new ort.Tensor('float32', buf, [members.length, L, d]) };
        }
        // Rows row0..row1: the members' blocks one after another (they are consecutive candidates),
        // taken as they lie when they already are (texts read together share a buffer: TextCacheReader), else copied.
        const lying = contiguous(members.map((c) => blocks[c]));
        if (lying) return { docs: new ort.Tensor('float32', lying, [row1 - row0, d]), index: new ort.Tensor('int32', index, [members.length, L]) };
        const buf = room((row1 - row0) * d).subarray(0, (row1 - row0) * d);
        for (const c of members) buf.set(blocks[c], (offsets[c] - row0) * d);
        return { docs: new ort.Tensor('float32', buf, [row1 - row0, d]), index: new ort.Tensor('int32', index, [members.length, L]) };
      });
    } finally {
      if (scratch.byteLength <= KEPT_SCRATCH_BYTES && this.spare.length < 2) this.spare.push(scratch);
    }
  }

  async release(): Promise<void> {
    await this.unpadded.release();
    await this.padded.release();
  }
}

/** The blocks as one view when each starts where the one before it ends, in one buffer; else null. */
export function contiguous(blocks: Float32Array[]): Float32Array | null {
  if (blocks.length === 0) return null;
  const first = blocks[0];
  let end = first.byteOffset + first.byteLength;
  for (let k = 1; k < blocks.length; k++) {
    const b = blocks[k];
    if (b.buffer !== first.buffer || b.byteOffset !== end) return null;
    end += b.byteLength;
  }
  return new Float32Array(first.buffer, first.byteOffset, (end - first.byteOffset) / 4);
}

/** Groups whole queries into blocks of at most MAX_COLS token columns, transposed to [d, N]. */
function columnBlocks(queries: QueryTokens[], d: number): ColumnBlock[] {
  return columnLayout(queries.map((q) => q.length)).map((layout) => {
    const { members, N, colStart } = layout;
    const qT = new Float32Array(d * N);
    members.forEach((i, bi) => {
      const q = queries[i];
      const c0 = colStart[bi];
      for (let r = 0; r < q.length; r++) for (let x = 0; x < d; x++) qT[x * N + c0 + r] = q.vectors[r * d + x];
    });
    return { ...layout, queryT: new ort.Tensor('float32', qT, [d, N]) };
  });
}
