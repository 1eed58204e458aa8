import { encodeHalf } from '@lateral/codec';
import { DataType, GraphBuilder, floatAttr, floatTensor, int64Tensor, makeModel, makeTensor, makeValueInfo, type ModelProto } from '@lateral/kernels';
import { BERT_INT8_WEIGHT_MAX, quantizeColumns, type BertBuildOptions, type BertWeights } from '../bert-graph';

/**
 * The encoder graph as MINILM_BUILD_VERSION 4 built it (617 nodes for all-MiniLM-L6-v2 int8, 503
 * after ONNX Runtime's optimiser): separate Q, K and V projections, reshape / transpose chains
 * around a hand-written attention, a per-token quantise chain of eight nodes in front of every
 * dense layer, GELU and residual adds as elementwise nodes. Frozen here as the reference the
 * fused graph (`buildBertModel`) is compared with: same weights, same vectors within float
 * tolerance (`bert-graph-fused.spec.ts`).
 */
export function buildBertModelUnfused(weights: BertWeights, name: string, opts: BertBuildOptions = {}): ModelProto {
  const int8 = opts.quantize === 'int8';
  const fp16 = opts.precision === 'fp16';
  if (int8 && fp16) throw new RangeError("buildBertModel: quantize 'int8' and precision 'fp16' do not combine");
  const c = weights.bertConfig;
  const H = c.hiddenSize;
  const nh = c.numHeads;
  const dh = H / nh;
  const g = new GraphBuilder();
  const cst = (n: string, dims: number[], data: Float32Array) => g.constant(fp16 ? makeTensor(n, dims, encodeHalf(data)) : floatTensor(n, dims, data));
  const floatScalar = (n: string, v: number) => cst(n, [], Float32Array.of(v));
  const layerNorm = (x: string, prefix: string) =>
    g.op('LayerNormalization', [x, cst(`${prefix}_gamma`, [H], weights.get(`${prefix}.weight`, [H])), cst(`${prefix}_beta`, [H], weights.get(`${prefix}.bias`, [H]))], {
      axis: -1,
      epsilon: floatAttr(c.layerNormEps),
    });
  const denseFp32 = (x: string, prefix: string, inDim: number, outDim: number) =>
    g.op('Add', [g.op('MatMul', [x, cst(`${prefix}_w`, [inDim, outDim], weights.linear(prefix, inDim, outDim))]), cst(`${prefix}_b`, [outDim], weights.get(`${prefix}.bias`, [outDim]))]);
  // int8: each token's activations quantised on their own (symmetric, 127 levels, the scale from
  // the token's largest |x|), stored as u8 around a zero point of 128 so that the product runs on
  // MatMulInteger's u8 x s8 kernels (the fast path on AVX2 and VNNI alike). One scale per token,
  // not per batch tensor: a text's vectors do not depend on what else is in its batch or how far
  // the batch is padded. Tokens are rows of [B*S, in] so that QuantizeLinear and DequantizeLinear
  // take the scales per axis (each one fused pass: scale, round half to even, saturate, cast).
  const i8 = int8
    ? {
        max: floatScalar('i8_max', 127),
        tiny: floatScalar('i8_tiny', 1e-12),
        one: floatScalar('i8_one', 1),
        axis1: g.constant(int64Tensor('i8_axis1', [1], [1])),
        zero: g.constant(makeTensor('i8_zero_point', [], Uint8Array.of(128))),
        batchSeq: g.op('Shape', ['input_ids']), // [B, S]
        outShapes: new Map<number, string>(),
      }
    : null;
  const denseInt8 = (x: string, prefix: string, inDim: number, outDim: number) => {
    const q8 = i8!;
    const w = weights.linear(prefix, inDim, outDim); // [in, out]
    const { codes, scales } = quantizeColumns(w, inDim, outDim, BERT_INT8_WEIGHT_MAX);
    const rows = g.op('Reshape', [x, g.constant(int64Tensor(`${prefix}_rows`, [2], [-1, inDim]))]); // [B*S, in]
    const scale = g.op('Max', [g.op('Div', [g.op('ReduceMax', [g.op('Abs', [rows])], { axes: [1], keepdims: 1 }), q8.max]), q8.tiny]); // [B*S, 1]
    const perRow = g.op('Squeeze', [scale, q8.axis1]); // [B*S]
    const q = g.op('QuantizeLinear', [rows, perRow, g.op('Expand', [q8.zero, g.op('Shape', [perRow])])], { axis: 0 });
    // codes x per-column weight scales in the GEMM's own output pass, then the per-token scale
    const acc = g.op('MatMulIntegerToFloat', [q, g.constant(makeTensor(`${prefix}_wq`, [inDim, outDim], codes)), q8.one, cst(`${prefix}_ws`, [outDim], scales), q8.zero], {}, undefined, 'com.microsoft');
    const y = g.op('Add', [g.op('Mul', [acc, scale]), cst(`${prefix}_b`, [outDim], weights.get(`${prefix}.bias`, [outDim]))]);
    let shape = q8.outShapes.get(outDim);
    if (!shape) {
      shape = g.op('Concat', [q8.batchSeq, g.constant(int64Tensor(`i8_out_${outDim}`, [1], [outDim]))], { axis: 0 });
      q8.outShapes.set(outDim, shape);
    }
    return g.op('Reshape', [y, shape]);
  };
  const dense = int8 ? denseInt8 : denseFp32;

  // embeddings
  const word = g.op('Gather', [cst('word_embeddings', [c.vocabSize, H], weights.get('embeddings.word_embeddings.weight', [c.vocabSize, H])), 'input_ids'], { axis: 0 });
  const seq = g.op('Gather', [g.op('Shape', ['input_ids']), g.constant(int64Tensor('seq_axis', [], [1]))], { axis: 0 });
  const positions = g.op('Range', [g.constant(int64Tensor('zero', [], [0])), seq, g.constant(int64Tensor('one', [], [1]))]);
  const pos = g.op('Gather', [cst('position_embeddings', [c.maxPositions, H], weights.get('embeddings.position_embeddings.weight', [c.maxPositions, H])), positions], { axis: 0 });
  const types = g.op('Gather', [cst('token_type_embeddings', [c.typeVocabSize, H], weights.get('embeddings.token_type_embeddings.weight', [c.typeVocabSize, H])), 'token_type_ids'], {
    axis: 0,
  });
  let x = layerNorm(g.op('Add', [g.op('Add', [word, pos]), types]), 'embeddings.LayerNorm');

  // [B,1,1,S] additive mask: 0 for real tokens, -1e9 for padding
  const maskf = g.op('Cast', ['attention_mask'], { to: fp16 ? DataType.FLOAT16 : DataType.FLOAT });
  const bias = g.op('Mul', [g.op('Sub', [maskf, floatScalar('one_f', 1)]), floatScalar('big', fp16 ? 1e4 : 1e9)]);
  const bias4 = g.op('Unsqueeze', [bias, g.constant(int64Tensor('mask_axes', [2], [1, 2]))]);
  const heads = g.constant(int64Tensor('heads_shape', [4], [0, 0, nh, dh]));
  const merged = g.constant(int64Tensor('merged_shape', [3], [0, 0, H]));
  const scale = floatScalar('inv_sqrt_dh', 1 / Math.sqrt(dh));
  const sqrtHalf = floatScalar('inv_sqrt2', Math.SQRT1_2);
  const half = floatScalar('half', 0.5);
  const oneF = floatScalar('one_gelu', 1);

  for (let l = 0; l < c.numLayers; l++) {
    const p = `encoder.layer.${l}`;
    const split = (t: string, perm: number[]) => g.op('Transpose', [g.op('Reshape', [t, heads])], { perm });
    const q = split(dense(x, `${p}.attention.self.query`, H, H), [0, 2, 1, 3]); // [B,nh,S,dh]
    const k = split(dense(x, `${p}.attention.self.key`, H, H), [0, 2, 3, 1]); // [B,nh,dh,S]
    const v = split(dense(x, `${p}.attention.self.value`, H, H), [0, 2, 1, 3]); // [B,nh,S,dh]
    const scores = g.op('Add', [g.op('Mul', [g.op('MatMul', [q, k]), scale]), bias4]);
    const ctx = g.op('MatMul', [g.op('Softmax', [scores], { axis: -1 }), v]); // [B,nh,S,dh]
    const ctxMerged = g.op('Reshape', [g.op('Transpose', [ctx], { perm: [0, 2, 1, 3] }), merged]);
    const a = layerNorm(g.op('Add', [x, dense(ctxMerged, `${p}.attention.output.dense`, H, H)]), `${p}.attention.output.LayerNorm`);
    const h = dense(a, `${p}.intermediate.dense`, H, c.intermediateSize);
    const gelu = g.op('Mul', [g.op('Mul', [h, half]), g.op('Add', [g.op('Erf', [g.op('Mul', [h, sqrtHalf])]), oneF])]);
    x = layerNorm(g.op('Add', [a, dense(gelu, `${p}.output.dense`, c.intermediateSize, H)]), `${p}.output.LayerNorm`);
  }
  if (fp16) g.op('Cast', [x], { to: DataType.FLOAT }, 'last_hidden_state');
  else g.op('Identity', [x], {}, 'last_hidden_state');
  const ids = ['input_ids', 'attention_mask', 'token_type_ids'].map((n) => makeValueInfo(n, 'INT64', ['batch', 'seq']));
  const graph = g.build('bert', ids, [makeValueInfo('last_hidden_state', 'FLOAT', ['batch', 'seq', H])]);
  return makeModel(graph, {
    ...(int8 ? { extraOpsets: [{ domain: 'com.microsoft', version: 1 }] } : {}),
    metadata: { name, architecture: `bert L${c.numLayers} H${H} A${nh}`, quantize: int8 ? 'int8 (dynamic, 7-bit weights per column)' : 'none', precision: fp16 ? 'fp16' : 'fp32' },
  });
}
