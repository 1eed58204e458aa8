/**
 * ONNX graphs of the trained scorers (LITE, K-NRM). Plain data in, protobuf objects out (no I/O);
 * the weights are baked in as initializers so one file is one artifact. The MaxSim graphs the
 * pipeline runs are built in gemm-maxsim.ts.
 */
import { assertLiteWeights, KNRM_MU, KNRM_SIGMA, KNRM_MIN_K, LITE_LN_EPS, type KnrmWeights, type LiteWeights } from '@lateral/scoring';
import { floatScalar, floatTensor, GraphBuilder, int64Tensor, makeModel, makeTensor, makeValueInfo, type ModelProto } from './onnx-graph';

/** W (out x inp, row-major) -> W^T (inp x out), the layout MatMul(x, W^T) wants. */
function transpose(W: Float32Array, out: number, inp: number): Float32Array {
  const t = new Float32Array(W.length);
  for (let o = 0; o < out; o++) for (let k = 0; k < inp; k++) t[k * out + o] = W[o * inp + k];
  return t;
}

/** y = LayerNorm(ReLU(x W^T + b)) over the last axis. */
function denseLayer(g: GraphBuilder, x: string, W: Float32Array, b: Float32Array, gain: Float32Array, beta: Float32Array, out: number, inp: number, name: string): string {
  const wT = g.constant(makeTensor(`${name}_wT`, [inp, out], transpose(W, out, inp)));
  const h = g.op('Add', [g.op('MatMul', [x, wT]), g.constant(makeTensor(`${name}_b`, [out], b))]);
  const r = g.op('Relu', [h]);
  return g.op('LayerNormalization', [r, g.constant(makeTensor(`${name}_g`, [out], gain)), g.constant(makeTensor(`${name}_beta`, [out], beta))], {
    axis: -1,
    epsilon: { kind: 'float', value: LITE_LN_EPS },
  });
}

/** y = LayerNorm(ReLU(x W^T + b)) on a 2-D [rows, inp] input: Gemm (bias fused, ORT fuses the Relu too). */
function gemmLayer(g: GraphBuilder, x: string, W: Float32Array, b: Float32Array, gain: Float32Array, beta: Float32Array, out: number, inp: number, name: string): string {
  const wT = g.constant(makeTensor(`${name}_wT`, [inp, out], transpose(W, out, inp)));
  const r = g.op('Relu', [g.op('Gemm', [x, wT, g.constant(makeTensor(`${name}_b`, [out], b))])]);
  return g.op('LayerNormalization', [r, g.constant(makeTensor(`${name}_g`, [out], gain)), g.constant(makeTensor(`${name}_beta`, [out], beta))], {
    axis: -1,
    epsilon: { kind: 'float', value: LITE_LN_EPS },
  });
}

export type LiteFormulation = 'gemm2d' | 'matmul3d';

/**
 * Separable LITE, batched over the candidates of one query. Inputs: `query` [L1, d] and
 * `docs` [B, L2, d], both zero-padded (a zero vector gives similarity 0: exactly the
 * "truncate, then pad S with 0" convention of `liteReference`). Output `scores` [B].
 * S = docs x query^T is computed in the graph, so the caller never materialises S.
 * 'matmul3d' (default) keeps [B, rows, features] MatMul + Add + Relu; 'gemm2d' flattens the batch
 * so every layer is one Gemm with a fused bias and ReLU (FusedGemm). On the 2-core dev machine
 * ORT's FusedGemm ran 1.2-1.5x slower than MatMul + Add + Relu at these shapes (op profile), so
 * 'gemm2d' is kept only for comparison.
 */
export function buildLiteModel(w: LiteWeights, formulation: LiteFormulation = 'matmul3d'): ModelProto {
  assertLiteWeights('buildLiteModel', w);
  const { L1, L2, m1, m2 } = w;
  const g = new GraphBuilder();
  const qT = g.op('Transpose', ['query'], { perm: [1, 0] }); // [d, L1]
  const sT = g.op('MatMul', ['docs', qT]); // [B, L2, L1]
  const s = g.op('Transpose', [sT], { perm: [0, 2, 1] }); // [B, L1, L2]
  let c2: string;
  if (formulation === 'matmul3d') {
    const h = denseLayer(g, s, w.W1, w.b1, w.g1, w.be1, m2, L2, 'row1'); // [B, L1, m2]
    const r = denseLayer(g, h, w.W2, w.b2, w.g2, w.be2, L2, m2, 'row2'); // [B, L1, L2]
    const rT = g.op('Transpose', [r], { perm: [0, 2, 1] }); // [B, L2, L1]
    const c1 = denseLayer(g, rT, w.W3, w.b3, w.g3, w.be3, m1, L1, 'col1'); // [B, L2, m1]
    c2 = denseLayer(g, c1, w.W4, w.b4, w.g4, w.be4, L1, m1, 'col2'); // [B, L2, L1]
  } else {
    const rows = g.op('Reshape', [s, g.constant(int64Tensor('rows_shape', [2], [-1, L2]))]); // [B*L1, L2]
    const h = gemmLayer(g, rows, w.W1, w.b1, w.g1, w.be1, m2, L2, 'row1'); // [B*L1, m2]
    const r = gemmLayer(g, h, w.W2, w.b2, w.g2, w.be2, L2, m2, 'row2'); // [B*L1, L2]
    const r3 = g.op('Reshape', [r, g.constant(int64Tensor('r3_shape', [3], [-1, L1, L2]))]);
    const rT = g.op('Transpose', [r3], { perm: [0, 2, 1] }); // [B, L2, L1]
    const cols = g.op('Reshape', [rT, g.constant(int64Tensor('cols_shape', [2], [-1, L1]))]); // [B*L2, L1]
    const c1 = gemmLayer(g, cols, w.W3, w.b3, w.g3, w.be3, m1, L1, 'col1'); // [B*L2, m1]
    const c = gemmLayer(g, c1, w.W4, w.b4, w.g4, w.be4, L1, m1, 'col2'); // [B*L2, L1]
    c2 = g.op('Reshape', [c, g.constant(int64Tensor('c2_shape', [3], [-1, L2, L1]))]); // [B, L2, L1]
  }
  // final linear: w is indexed i * L2 + j; c2 is [B, j, i]
  const wT = g.constant(makeTensor('final_wT', [L2, L1], transpose(w.w, L1, L2)));
  const prod = g.op('Mul', [c2, wT]);
  const residual = w.maxsimWeight !== undefined;
  const lite = g.op('ReduceSum', [prod, g.constant(int64Tensor('axes12', [2], [1, 2]))], { keepdims: 0 }, residual ? undefined : 'scores');
  const inputs = [makeValueInfo('query', 'FLOAT', [L1, 'd']), makeValueInfo('docs', 'FLOAT', ['B', L2, 'd'])];
  if (residual) {
    // LITE residual on MaxSim: scores = maxsim_weight * base + LITE, `base` [B] being each
    // candidate's MaxSim over all its real tokens, computed by the caller (the re-rank MaxSim scorer).
    g.op('Add', [g.op('Mul', ['base', g.constant(floatScalar('maxsim_weight', w.maxsimWeight!))]), lite], {}, 'scores');
    inputs.push(makeValueInfo('base', 'FLOAT', ['B']));
  }
  return makeModel(
    g.build('lite_separable', inputs, [makeValueInfo('scores', 'FLOAT', ['B'])]),
    {
      docString: `Separable LITE (affine -> ReLU -> LayerNorm on every layer); inputs truncated/zero-padded to L1 query and L2 doc tokens${residual ? '; residual on MaxSim: scores = maxsim_weight * base + LITE, base = MaxSim over all real tokens' : ''}`,
      metadata: { scorer: 'lite', L1: String(L1), L2: String(L2), m1: String(m1), m2: String(m2), padding: 'truncate-then-zero-similarity', formulation, ...(residual ? { residual: 'maxsim' } : {}) },
    },
  );
}

/**
 * K-NRM, batched. Inputs: `query` [n, d], `docs` [B, L, d], `mask` [B, L, 1, 1] (1 real, 0 pad).
 * Output `scores` [B] = tanh(w . phi + b), phi as in `knrmFeatures` (log clamped at 1e-10).
 */
export function buildKnrmModel(w: KnrmWeights): ModelProto {
  if (w.w.length !== KNRM_MU.length) throw new RangeError(`buildKnrmModel: w has length ${w.w.length}, expected 11`);
  const g = new GraphBuilder();
  const qT = g.op('Transpose', ['query'], { perm: [1, 0] });
  const s = g.op('Unsqueeze', [g.op('MatMul', ['docs', qT]), g.constant(int64Tensor('ax3', [1], [3]))]); // [B, L, n, 1]
  const diff = g.op('Sub', [s, g.constant(floatTensor('mu', [KNRM_MU.length], KNRM_MU))]);
  const coef = g.constant(floatTensor('neg_inv_2s2', [KNRM_MU.length], KNRM_SIGMA.map((x) => -1 / (2 * x * x))));
  const k = g.op('Mul', [g.op('Exp', [g.op('Mul', [g.op('Mul', [diff, diff]), coef])]), 'mask']); // [B, L, n, 11]
  const kSum = g.op('ReduceSum', [k, g.constant(int64Tensor('ax1', [1], [1]))], { keepdims: 0 }); // [B, n, 11]
  const logK = g.op('Log', [g.op('Max', [kSum, g.constant(floatScalar('min_k', KNRM_MIN_K))])]);
  const phi = g.op('ReduceSum', [logK, g.constant(int64Tensor('ax1b', [1], [1]))], { keepdims: 0 }); // [B, 11]
  const z = g.op('Add', [g.op('MatMul', [phi, g.constant(floatTensor('w', [KNRM_MU.length, 1], Array.from(w.w)))]), g.constant(floatScalar('b', w.b))]);
  g.op('Reshape', [g.op('Tanh', [z]), g.constant(int64Tensor('flat', [1], [-1]))], {}, 'scores');
  return makeModel(
    g.build('knrm', [makeValueInfo('query', 'FLOAT', ['n', 'd']), makeValueInfo('docs', 'FLOAT', ['B', 'L', 'd']), makeValueInfo('mask', 'FLOAT', ['B', 'L', 1, 1])], [makeValueInfo('scores', 'FLOAT', ['B'])]),
    { docString: 'K-NRM: 11 RBF kernels (mu = 1.0 sigma 1e-3, mu = 0.9..-0.9 sigma 0.1), tanh(w . phi + b)', metadata: { scorer: 'knrm' } },
  );
}
