import { IMAGE_ZERO_POINT, QUERY_ZERO_POINT, quantizeRotatedQuery, type EdenCodec } from '@lateral/codec';
import { columnLayout, createMaxsimSession, type ColumnLayout, forEachRowChunk, padByIndex, permuteRows, rowPlan, sumColumns, type QueryTokens } from './gemm-maxsim';
import { ort } from './session';

/**
 * A generation held as EDEN codes (token layout) for scoring in the rotated domain: each token's
 * codes expanded to the uint8 centroid image of @lateral/codec's rotated-image.ts (p bytes) plus
 * one fp32 scale. 4x smaller than fp32 vectors at p = d, and scored by integer GEMMs.
 */
export interface RotatedImageSet {
  codec: EdenCodec;
  /** The collection seed the codes' rotation was derived from. */
  seed: bigint;
  /** Input dims d and coded, padded dims p. */
  dims: number;
  p: number;
  /** T x p, uint8 (centroid grid value + 128). */
  image: Uint8Array;
  /** T per-token scales. */
  scales: Float32Array;
  /** docs + 1 token offsets into image / scales. */
  offsets: Uint32Array;
}

/**
 * MaxSim of many queries against candidates of a RotatedImageSet, in ONNX Runtime: queries are
 * rotated once (H Dg P q) and quantised to 7 bits per token. A few query columns: the candidates'
 * image rows (copied to be contiguous unless they are the whole set in order) times the query,
 * MatMulInteger (u8 with zero point 128 x s8 in [-63, 63]) -> Cast -> x token scales -> Gather per candidate ->
 * ReduceMax. Many columns: length-sorted candidates in padded blocks, transposed to int8, and
 * MatMulIntegerToFloat with the token scales as its per-column scale (createMaxsimSession).
 * JavaScript multiplies each column by its query scale and adds the query token's mean offset.
 * The rounding error is bounded in @lateral/codec's tests and measured by `npm run bench -- score`.
 * 1,400 candidates of 20-260 tokens, d = 100 (p = 128): one 12-token query 28-30 ms vs 23-24 ms
 * for GemmMaxsim on fp32; 225 queries 1.48-1.92 s vs 1.34-1.52 s.
 */
export class RotatedMaxsim {
  private constructor(
    private readonly unpadded: ort.InferenceSession,
    private readonly padded: ort.InferenceSession,
  ) {}

  static async create(threads = 0): Promise<RotatedMaxsim> {
    return new RotatedMaxsim(await createMaxsimSession('int8', false, threads), await createMaxsimSession('int8', true, threads));
  }

  /** queries: each n_q x dims (original space); rows: candidate rows of `set`. Returns C scores per query. */
  async score(queries: QueryTokens[], set: RotatedImageSet, rows: number[], opts: { normalize?: boolean; yieldEvery?: () => Promise<void> } = {}): Promise<Float32Array[]> {
    const { p } = set;
    const C = rows.length;
    const out = queries.map(() => new Float32Array(C));
    const candOffsets = new Uint32Array(C + 1);
    rows.forEach((r, c) => (candOffsets[c + 1] = candOffsets[c] + (set.offsets[r + 1] - set.offsets[r])));
    const layout = columnLayout(queries.map((q) => q.length));
    const plan = rowPlan(candOffsets, Math.max(...layout.map((l) => l.N)));
    const blocks = queryBlocks(queries, set, layout, plan.order !== null);
    // Unpadded chunks read a contiguous row range: the set itself when the candidates are all of it
    // in order, else a copy in candidate order (1 byte per dim). Padded chunks copy from the set.
    let image = set.image;
    let scales = set.scales;
    const identity = C === set.offsets.length - 1 && rows.every((r, i) => r === i);
    if (!plan.order && !identity) {
      image = permuteRows(set.image, set.offsets, rows, p, (n) => new Uint8Array(n)).data;
      scales = permuteRows(set.scales, set.offsets, rows, 1, (n) => new Float32Array(n)).data;
    }
    await forEachRowChunk(
      candOffsets,
      async (index, L, members, row0, row1) => {
        const count = members.length;
        let feeds: Record<string, ort.Tensor>;
        if (plan.order) {
          // candidate rows -> the set's rows
          members.forEach((c, j) => {
            const shift = set.offsets[rows[c]] - candOffsets[c];
            for (let r = 0; r < L; r++) index[j * L + r] += shift;
          });
          feeds = {
            image_t: new ort.Tensor('int8', transposedBlock(set.image, index, p), [p, index.length]),
            scales: new ort.Tensor('float32', padByIndex(set.scales, index, 1, (k) => new Float32Array(k)), [index.length]),
            shape: new ort.Tensor('int64', BigInt64Array.of(-1n, BigInt(count), BigInt(L)), [3]),
          };
        } else {
          feeds = {
            image: new ort.Tensor('uint8', image.subarray(row0 * p, row1 * p), [row1 - row0, p]),
            scales: new ort.Tensor('float32', scales.subarray(row0, row1), [row1 - row0, 1]),
            index: new ort.Tensor('int32', index, [count, L]),
          };
        }
        for (const b of blocks) {
          const best = new Float32Array(count * b.N);
          if (plan.order) {
            const t = (await this.padded.run({ ...feeds, query_u8: b.query })).best_t.data as Float32Array; // [N, count]
            for (let k = 0; k < count; k++) for (let j = 0; j < b.N; j++) best[k * b.N + j] = t[j * count + k] * b.qscale[j] + b.offset[j];
          } else {
            const r = (await this.unpadded.run({ ...feeds, query_t: b.query })).best.data as Float32Array; // [count, N]
            for (let k = 0; k < count; k++) for (let j = 0; j < b.N; j++) best[k * b.N + j] = r[k * b.N + j] * b.qscale[j] + b.offset[j];
          }
          sumColumns(best, b, queries, members, out, opts.normalize);
        }
      },
      (c) => out.forEach((q) => (q[c] = -Infinity)),
      { yieldEvery: opts.yieldEvery, maxRows: plan.maxRows, order: plan.order },
    );
    return out;
  }

  async release(): Promise<void> {
    await this.unpadded.release();
    await this.padded.release();
  }
}

/** Image rows `index[j]` (uint8, offset 128) as the int8 block [p, R] the padded graph multiplies. */
function transposedBlock(image: Uint8Array, index: Int32Array, p: number): Int8Array {
  const R = index.length;
  const out = new Int8Array(p * R);
  const zp = IMAGE_ZERO_POINT; // a local: an imported binding is a getter call per access
  for (let j = 0; j < R; j++) {
    const base = index[j] * p;
    let o = j;
    for (let k = 0; k < p; k++, o += R) out[o] = image[base + k] - zp;
  }
  return out;
}

/**
 * Rotated, 7-bit quantised query columns in the layout's blocks of whole queries, with per-column
 * scale and offset: [p, N] int8 for the unpadded graph, or [N, p] uint8 (+64) for the padded one
 * (ranges that no 16-bit pair sum can overflow: rotated-image.ts, "Operand ranges").
 */
export function queryBlocks(queries: QueryTokens[], set: RotatedImageSet, layout: ColumnLayout[], padded: boolean) {
  const { p, dims } = set;
  const zp = QUERY_ZERO_POINT;
  return layout.map((l) => {
    const { members, N, colStart } = l;
    const q8 = padded ? new Uint8Array(N * p) : new Int8Array(p * N);
    const qscale = new Float32Array(N);
    const offset = new Float32Array(N);
    members.forEach((i, bi) => {
      const q = queries[i];
      const c0 = colStart[bi];
      const qq = quantizeRotatedQuery(set.codec.rotateQuery(q.vectors.subarray(0, q.length * dims), dims, set.seed), p);
      for (let r = 0; r < q.length; r++) {
        if (padded) for (let k = 0; k < p; k++) q8[(c0 + r) * p + k] = qq.q8[r * p + k] + zp;
        else for (let k = 0; k < p; k++) q8[k * N + c0 + r] = qq.q8[r * p + k];
        qscale[c0 + r] = qq.qscale[r];
        offset[c0 + r] = qq.offsets[r];
      }
    });
    const query = padded ? new ort.Tensor('uint8', q8 as Uint8Array, [N, p]) : new ort.Tensor('int8', q8 as Int8Array, [p, N]);
    return { ...l, qscale, offset, query };
  });
}
