import * as ort from 'onnxruntime-node';
import { IMAGE_ZERO_POINT, quantizeRotatedQuery, type EdenCodec } from '@lateral/codec';
import { GraphBuilder, encodeModel, makeModel, makeTensor, makeValueInfo } from '@lateral/model';
import { columnGroups, lengthChunks, padRows, sumColumns, type QueryTokens } from './gemm-maxsim';

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
 * MaxSim of many queries against candidates of a RotatedImageSet, in ONNX Runtime:
 * queries are rotated once (H Dg P q) and quantised to int8 per token; candidates are chunked by
 * length and padded like GemmMaxsim (repeating a real token), then
 * MatMulInteger(image [c, L, p] with zero point 128, query [p, N]) -> Cast -> x token scales ->
 * ReduceMax over L. JavaScript multiplies each column by its query scale and adds the query
 * token's mean offset. The rounding error is bounded in @lateral/codec's tests and measured by
 * `npm run bench -- score`.
 */
export class RotatedMaxsim {
  private constructor(private readonly session: ort.InferenceSession) {}

  static async create(threads = 0): Promise<RotatedMaxsim> {
    const g = new GraphBuilder();
    const zp = g.constant(makeTensor('image_zero_point', [], Uint8Array.of(IMAGE_ZERO_POINT)));
    const dots = g.op('Cast', [g.op('MatMulInteger', ['image', 'query_t', zp])], { to: 1 });
    g.op('ReduceMax', [g.op('Mul', [dots, 'scales'])], { axes: [1], keepdims: 0 }, 'best');
    const model = makeModel(
      g.build(
        'rotated_image_maxsim',
        [makeValueInfo('image', 'UINT8', ['C', 'L', 'p']), makeValueInfo('query_t', 'INT8', ['p', 'N']), makeValueInfo('scales', 'FLOAT', ['C', 'L', 1])],
        [makeValueInfo('best', 'FLOAT', ['C', 'N'])],
      ),
    );
    const session = await ort.InferenceSession.create(encodeModel(model), {
      executionProviders: ['cpu'],
      graphOptimizationLevel: 'all',
      ...(threads > 0 ? { intraOpNumThreads: threads } : {}),
    });
    return new RotatedMaxsim(session);
  }

  /** queries: each n_q x dims (original space); rows: candidate rows of `set`. Returns C scores per query. */
  async score(queries: QueryTokens[], set: RotatedImageSet, rows: number[], opts: { normalize?: boolean; yieldEvery?: () => Promise<void> } = {}): Promise<Float32Array[]> {
    const { p } = set;
    const C = rows.length;
    const out = queries.map(() => new Float32Array(C));
    const offsets = new Uint32Array(C + 1);
    rows.forEach((r, c) => (offsets[c + 1] = offsets[c] + (set.offsets[r + 1] - set.offsets[r])));
    const blocks = queryBlocks(queries, set);
    for await (const { docs: members, L } of lengthChunks(offsets, opts.yieldEvery)) {
      const count = members.length;
      if (L === 0) {
        for (const q of out) for (const c of members) q[c] = -Infinity;
        continue;
      }
      const image = new Uint8Array(count * L * p);
      const scales = new Float32Array(count * L);
      members.forEach((c, k) => {
        const start = set.offsets[rows[c]];
        const m = offsets[c + 1] - offsets[c];
        padRows(set.image, start, m, L, p, image, k * L * p);
        padRows(set.scales, start, m, L, 1, scales, k * L);
      });
      const imageT = new ort.Tensor('uint8', image, [count, L, p]);
      const scalesT = new ort.Tensor('float32', scales, [count, L, 1]);
      for (const b of blocks) {
        const res = await this.session.run({ image: imageT, query_t: b.queryT, scales: scalesT });
        const best = res.best.data as Float32Array;
        for (let k = 0; k < count; k++) for (let j = 0; j < b.N; j++) best[k * b.N + j] = best[k * b.N + j] * b.qscale[j] + b.offset[j];
        sumColumns(best, b, queries, members, out, opts.normalize);
      }
    }
    return out;
  }

  async release(): Promise<void> {
    await this.session.release();
  }
}

/** Rotated, int8-quantised query columns [p, N] in blocks of whole queries, with per-column scale and offset. */
function queryBlocks(queries: QueryTokens[], set: RotatedImageSet) {
  const { p, dims } = set;
  return columnGroups(queries.map((q) => q.length)).map((members) => {
    const N = Math.max(1, members.reduce((s, i) => s + queries[i].length, 0));
    const qT = new Int8Array(p * N);
    const qscale = new Float32Array(N);
    const offset = new Float32Array(N);
    const colStart: number[] = [];
    let c0 = 0;
    for (const i of members) {
      colStart.push(c0);
      const q = queries[i];
      const qq = quantizeRotatedQuery(set.codec.rotateQuery(q.vectors.subarray(0, q.length * dims), dims, set.seed), p);
      for (let r = 0; r < q.length; r++) {
        for (let k = 0; k < p; k++) qT[k * N + c0 + r] = qq.q8[r * p + k];
        qscale[c0 + r] = qq.qscale[r];
        offset[c0 + r] = qq.offsets[r];
      }
      c0 += q.length;
    }
    return { members, N, colStart, qscale, offset, queryT: new ort.Tensor('int8', qT, [p, N]) };
  });
}
