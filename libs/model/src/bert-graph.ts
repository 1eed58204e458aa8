/**
 * A BERT encoder (Hugging Face `BertModel` layout) as an ONNX graph, built from its weights with
 * the project's own graph builder: no PyTorch, no exporter. Inputs `input_ids`, `attention_mask`,
 * `token_type_ids` [batch, seq] int64; output `last_hidden_state` [batch, seq, hidden].
 *
 *   x = LayerNorm(word[ids] + position[0..seq) + token_type[types])
 *   per layer: a = LayerNorm(x + Wo MHA(x)),  x = LayerNorm(a + W2 gelu(W1 a))
 *
 * Padding keys get an additive -1e9 before the softmax (exactly zero attention), so a text
 * encoded alone or right-padded inside a batch gives the same vectors. gelu is the exact erf form.
 */
import { ModelLoadError } from './errors';
import { encodeHalf } from '@lateral/codec';
import { DataType, GraphBuilder, floatAttr, floatTensor, int64Tensor, makeModel, makeTensor, makeValueInfo, type ModelProto } from '@lateral/kernels';
import type { NamedTensor } from './safetensors';

export interface BertConfig {
  hiddenSize: number;
  numLayers: number;
  numHeads: number;
  intermediateSize: number;
  vocabSize: number;
  maxPositions: number;
  typeVocabSize: number;
  layerNormEps: number;
}

/** The fields of a Hugging Face config.json this builder needs; refuses what it does not implement. */
export function bertConfigFromJson(json: Record<string, unknown>, source = 'config.json'): BertConfig {
  const num = (k: string): number => {
    const v = json[k];
    if (typeof v !== 'number' || !Number.isFinite(v)) throw new ModelLoadError(`${source}: '${k}' must be a number (got ${JSON.stringify(v)})`);
    return v;
  };
  if (json.model_type !== undefined && json.model_type !== 'bert') throw new ModelLoadError(`${source}: model_type '${String(json.model_type)}' is not 'bert'`);
  const act = json.hidden_act ?? 'gelu';
  if (act !== 'gelu') throw new ModelLoadError(`${source}: hidden_act '${String(act)}' is not supported (only the exact erf 'gelu')`);
  const pos = json.position_embedding_type ?? 'absolute';
  if (pos !== 'absolute') throw new ModelLoadError(`${source}: position_embedding_type '${String(pos)}' is not supported (only 'absolute')`);
  const c: BertConfig = {
    hiddenSize: num('hidden_size'),
    numLayers: num('num_hidden_layers'),
    numHeads: num('num_attention_heads'),
    intermediateSize: num('intermediate_size'),
    vocabSize: num('vocab_size'),
    maxPositions: num('max_position_embeddings'),
    typeVocabSize: num('type_vocab_size'),
    layerNormEps: typeof json.layer_norm_eps === 'number' ? json.layer_norm_eps : 1e-12,
  };
  if (c.hiddenSize % c.numHeads !== 0) throw new ModelLoadError(`${source}: hidden_size ${c.hiddenSize} is not a multiple of num_attention_heads ${c.numHeads}`);
  return c;
}

/** Weights by Hugging Face name, with or without a `bert.` prefix; checks every shape. */
export class BertWeights {
  constructor(
    private readonly tensors: Map<string, NamedTensor>,
    private readonly config: BertConfig,
  ) {}

  get(name: string, shape: number[]): Float32Array {
    const t = this.tensors.get(name) ?? this.tensors.get(`bert.${name}`);
    if (!t) throw new ModelLoadError(`weights: tensor '${name}' is missing`);
    if (t.shape.length !== shape.length || t.shape.some((d, i) => d !== shape[i])) {
      throw new ModelLoadError(`weights: tensor '${name}' has shape [${t.shape}], expected [${shape}] from config.json`);
    }
    return t.data;
  }

  /** A Linear layer's weight [out, in] transposed to the [in, out] MatMul takes. */
  linear(name: string, inDim: number, outDim: number): Float32Array {
    const w = this.get(`${name}.weight`, [outDim, inDim]);
    const t = new Float32Array(inDim * outDim);
    for (let o = 0; o < outDim; o++) for (let i = 0; i < inDim; i++) t[i * outDim + o] = w[o * inDim + i];
    return t;
  }

  get bertConfig(): BertConfig {
    return this.config;
  }
}

/**
 * Largest |weight code| of the int8 variant: 7 bits, so that u8 activations (0..255) times the
 * codes can never leave a 16-bit pair sum on CPUs without VNNI (2 x 255 x 63 = 32,130; see
 * @lateral/codec rotated-image.ts, "Operand ranges").
 */
export const BERT_INT8_WEIGHT_MAX = 63;

export interface BertBuildOptions {
  /**
   * 'int8': every dense layer of the encoder (attention projections and the feed-forward) as a
   * dynamically quantised MatMulInteger: activations 8-bit per token at run time (so a text's
   * vectors do not depend on its batch), weights int8 per output column (7 bits). Embeddings,
   * LayerNorm, softmax stay fp32.
   */
  quantize?: 'none' | 'int8';
  /**
   * 'fp16': weights, activations and the attention in half precision (for CUDA: tensor cores, half
   * the memory traffic); the mask bias is -1e4 (a half cannot hold -1e9; exp(-1e4) is 0 either way)
   * and the output is cast back to float32, so the model directory's contract is unchanged. Not with
   * quantize 'int8'.
   */
  precision?: 'fp32' | 'fp16';
}

/**
 * Default-domain opset of the built graph: 21 for QuantizeLinear's blocked form (one scale per
 * token of a [B, S, H] tensor without reshaping it to rows) and ReduceMax's axes as an input.
 */
export const BERT_OPSET = 21;

/**
 * Builds the encoder graph. `name` goes into the model's metadata.
 *
 * Few nodes, because on short inputs (a query of ~14 tokens) much of ONNX Runtime's cost is per
 * node, not per multiply: per layer one Q/K/V projection ([H, 3H], split in three), ONNX Runtime's
 * MultiHeadAttention (heads, scaling, key padding mask and softmax in one kernel, the Q/K/V biases
 * added there), Sum + LayerNormalization for each residual + bias + LayerNorm, BiasGelu for the
 * feed-forward's bias + exact-erf GELU; activations stay [B, S, H] throughout (no reshape or
 * transpose). The vectors equal those of the graph it replaced (testing/bert-graph-unfused.ts):
 * to the bit in fp32 and int8 on this repository's AVX-512 machine, within float tolerance in any case
 * (`bert-graph-fused.spec.ts`); docs/models.md, "The graph's nodes".
 */
export function buildBertModel(weights: BertWeights, name: string, opts: BertBuildOptions = {}): ModelProto {
  const int8 = opts.quantize === 'int8';
  const fp16 = opts.precision === 'fp16';
  if (int8 && fp16) throw new RangeError("buildBertModel: quantize 'int8' and precision 'fp16' do not combine");
  const c = weights.bertConfig;
  const H = c.hiddenSize;
  const nh = c.numHeads;
  const g = new GraphBuilder();
  const ms = 'com.microsoft';
  const cst = (n: string, dims: number[], data: Float32Array) => g.constant(fp16 ? makeTensor(n, dims, encodeHalf(data)) : floatTensor(n, dims, data));
  const f32Scalar = (n: string, v: number) => g.constant(floatTensor(n, [], [v]));
  const vec = (n: string, w: number) => weights.get(n, [w]);
  const eps = floatAttr(c.layerNormEps);
  /**
   * LayerNorm(skip + (x + bias)): Sum adds its inputs left to right, the two Adds of the unfused
   * graph in one node, bit for bit. Not SkipLayerNormalization: its own mean / variance pass rounds
   * differently (2e-6 in fp32), and in the int8 graph such a difference moves some activations
   * across a rounding boundary of the next layer's per-token quantisation, so the codes and then
   * the vectors drift (0.995 cosine to the unfused graph after 6 layers, against 1.0 this way).
   */
  const addLayerNorm = (x: string, bias: string, skip: string, prefix: string, output?: string) =>
    g.op('LayerNormalization', [g.op('Sum', [x, bias, skip]), cst(`${prefix}_gamma`, [H], vec(`${prefix}.weight`, H)), cst(`${prefix}_beta`, [H], vec(`${prefix}.bias`, H))], { axis: -1, epsilon: eps }, output);

  // int8: each token's activations quantised on their own (symmetric, 127 levels, the scale from
  // the token's largest |x|), stored as u8 around a zero point of 128 so that the product runs on
  // MatMulIntegerToFloat's u8 x s8 kernels (the fast path on AVX2 and VNNI alike). One scale per
  // token, not per batch tensor: a text's vectors do not depend on what else is in its batch or
  // how far the batch is padded. The scales are [B, S, 1]: QuantizeLinear's blocked form (one
  // block = one token's H values) takes them as they are, and MatMulIntegerToFloat takes them as
  // its A scale, applied to each output row after the per-column weight scales (the same two
  // multiplications, in the same order, as a separate Mul). The zero point tensor is built once.
  const i8 = int8
    ? {
        max: f32Scalar('i8_max', 127),
        lastAxis: g.constant(int64Tensor('i8_last_axis', [1], [-1])),
        zero: g.constant(makeTensor('i8_zero_point', [], Uint8Array.of(128))),
        zeros: g.op('Expand', [
          g.constant(makeTensor('i8_zero_point_111', [1, 1, 1], Uint8Array.of(128))),
          g.op('Concat', [g.op('Shape', ['input_ids']), g.constant(int64Tensor('i8_one_axis', [1], [1]))], { axis: 0 }),
        ]), // [B, S, 1]
      }
    : null;
  /** x [B, S, in] times the Linear layer `prefix`'s weight (no bias): [B, S, out]. */
  const project = (x: string, prefix: string, w: Float32Array, inDim: number, outDim: number) => {
    if (!i8) return g.op('MatMul', [x, cst(`${prefix}_w`, [inDim, outDim], w)]);
    const { codes, scales } = quantizeColumns(w, inDim, outDim, BERT_INT8_WEIGHT_MAX);
    // No floor under the scale (the unfused graph's Max(scale, 1e-12)): a token whose activations
    // are all zero gets scale 0, its codes are whatever QuantizeLinear makes of 0/0, and its output
    // row is those codes' products times 0, the exact 0 that x = 0 gives; any other token's scale
    // is at least 1/127 of its largest |x|, and the floor never applied (the vectors are the same).
    const scale = g.op('Div', [g.op('ReduceMax', [g.op('Abs', [x]), i8.lastAxis], { keepdims: 1 }), i8.max]); // [B, S, 1]
    const q = g.op('QuantizeLinear', [x, scale, i8.zeros], { axis: 2, block_size: inDim });
    return g.op('MatMulIntegerToFloat', [q, g.constant(makeTensor(`${prefix}_wq`, [inDim, outDim], codes)), scale, g.constant(floatTensor(`${prefix}_ws`, [outDim], scales)), i8.zero], {}, undefined, ms);
  };
  const linear = (x: string, prefix: string, inDim: number, outDim: number) => project(x, prefix, weights.linear(prefix, inDim, outDim), inDim, outDim);

  // embeddings
  const word = g.op('Gather', [cst('word_embeddings', [c.vocabSize, H], weights.get('embeddings.word_embeddings.weight', [c.vocabSize, H])), 'input_ids'], { axis: 0 });
  const seq = g.op('Gather', [g.op('Shape', ['input_ids']), g.constant(int64Tensor('seq_axis', [], [1]))], { axis: 0 });
  const positions = g.op('Range', [g.constant(int64Tensor('zero', [], [0])), seq, g.constant(int64Tensor('one', [], [1]))]);
  const pos = g.op('Gather', [cst('position_embeddings', [c.maxPositions, H], weights.get('embeddings.position_embeddings.weight', [c.maxPositions, H])), positions], { axis: 0 });
  const types = g.op('Gather', [cst('token_type_embeddings', [c.typeVocabSize, H], weights.get('embeddings.token_type_embeddings.weight', [c.typeVocabSize, H])), 'token_type_ids'], {
    axis: 0,
  });
  let x = addLayerNorm(word, pos, types, 'embeddings.LayerNorm');

  // key padding mask [B, S] int32: MultiHeadAttention gives the keys whose mask is 0
  // mask_filter_value before the softmax (exactly zero attention, as the unfused graph's -1e9 bias)
  const keyMask = g.op('Cast', ['attention_mask'], { to: DataType.INT32 });
  const last = c.numLayers - 1;
  for (let l = 0; l <= last; l++) {
    const p = `encoder.layer.${l}`;
    const att = `${p}.attention.self`;
    const wq = weights.linear(`${att}.query`, H, H);
    const wk = weights.linear(`${att}.key`, H, H);
    const wv = weights.linear(`${att}.value`, H, H);
    const wqkv = new Float32Array(H * 3 * H); // [H, 3H]: the three weights side by side
    for (let i = 0; i < H; i++) {
      wqkv.set(wq.subarray(i * H, (i + 1) * H), i * 3 * H);
      wqkv.set(wk.subarray(i * H, (i + 1) * H), i * 3 * H + H);
      wqkv.set(wv.subarray(i * H, (i + 1) * H), i * 3 * H + 2 * H);
    }
    const bqkv = new Float32Array(3 * H);
    bqkv.set(vec(`${att}.query.bias`, H), 0);
    bqkv.set(vec(`${att}.key.bias`, H), H);
    bqkv.set(vec(`${att}.value.bias`, H), 2 * H);
    const qkv = project(x, `${att}.qkv`, wqkv, H, 3 * H);
    const [q, k, v] = g.opOutputs('Split', [qkv], [g.fresh('q'), g.fresh('k'), g.fresh('v')], { axis: 2, num_outputs: 3 });
    // heads, scores scaled by 1/sqrt(head size) (the op's default), key padding mask, softmax, context: one kernel
    const ctx = g.op('MultiHeadAttention', [q!, k!, v!, cst(`${att}.qkv_b`, [3 * H], bqkv), keyMask], { num_heads: nh, mask_filter_value: floatAttr(fp16 ? -1e4 : -1e9) }, undefined, ms);
    const ao = `${p}.attention.output`;
    const a = addLayerNorm(linear(ctx, `${ao}.dense`, H, H), cst(`${ao}.dense_b`, [H], vec(`${ao}.dense.bias`, H)), x, `${ao}.LayerNorm`);
    const inter = `${p}.intermediate.dense`;
    const h = g.op('BiasGelu', [linear(a, inter, H, c.intermediateSize), cst(`${inter}_b`, [c.intermediateSize], vec(`${inter}.bias`, c.intermediateSize))], {}, undefined, ms);
    const out = `${p}.output`;
    x = addLayerNorm(linear(h, `${out}.dense`, c.intermediateSize, H), cst(`${out}.dense_b`, [H], vec(`${out}.dense.bias`, H)), a, `${out}.LayerNorm`, l === last && !fp16 ? 'last_hidden_state' : undefined);
  }
  if (c.numLayers === 0 && !fp16) g.op('Identity', [x], {}, 'last_hidden_state');
  if (fp16) g.op('Cast', [x], { to: DataType.FLOAT }, 'last_hidden_state');
  const ids = ['input_ids', 'attention_mask', 'token_type_ids'].map((n) => makeValueInfo(n, 'INT64', ['batch', 'seq']));
  const graph = g.build('bert', ids, [makeValueInfo('last_hidden_state', 'FLOAT', ['batch', 'seq', H])]);
  return makeModel(graph, {
    opset: BERT_OPSET,
    extraOpsets: [{ domain: ms, version: 1 }],
    metadata: { name, architecture: `bert L${c.numLayers} H${H} A${nh}`, quantize: int8 ? 'int8 (dynamic per token, 7-bit weights per column)' : 'none', precision: fp16 ? 'fp16' : 'fp32' },
  });
}

/** Symmetric per-column quantisation of w [rows, cols] to codes in [-max, max] and one scale per column. */
export function quantizeColumns(w: Float32Array, rows: number, cols: number, max: number): { codes: Int8Array; scales: Float32Array } {
  const scales = new Float32Array(cols);
  for (let j = 0; j < cols; j++) {
    let m = 0;
    for (let i = 0; i < rows; i++) m = Math.max(m, Math.abs(w[i * cols + j]));
    scales[j] = m > 0 ? m / max : 1;
  }
  const codes = new Int8Array(rows * cols);
  for (let i = 0; i < rows; i++) for (let j = 0; j < cols; j++) codes[i * cols + j] = Math.max(-max, Math.min(max, Math.round(w[i * cols + j] / scales[j])));
  return { codes, scales };
}

/**
 * The context-free input embedding of every token id: LayerNorm(word + token_type[0] + the mean
 * position embedding over positions 1..positions-1), the embedding layer's output for a token
 * whose position is not known. Rows: vocabSize x hidden. For codecs with side information.
 */
export function bertStaticEmbeddings(weights: BertWeights, positions: number): Float32Array {
  const c = weights.bertConfig;
  const H = c.hiddenSize;
  const word = weights.get('embeddings.word_embeddings.weight', [c.vocabSize, H]);
  const pos = weights.get('embeddings.position_embeddings.weight', [c.maxPositions, H]);
  const type0 = weights.get('embeddings.token_type_embeddings.weight', [c.typeVocabSize, H]).subarray(0, H);
  const gamma = weights.get('embeddings.LayerNorm.weight', [H]);
  const beta = weights.get('embeddings.LayerNorm.bias', [H]);
  const last = Math.min(positions, c.maxPositions);
  const base = new Float64Array(H);
  for (let p = 1; p < last; p++) for (let k = 0; k < H; k++) base[k] += pos[p * H + k] / (last - 1);
  for (let k = 0; k < H; k++) base[k] += type0[k];
  const out = new Float32Array(c.vocabSize * H);
  const row = new Float64Array(H);
  for (let t = 0; t < c.vocabSize; t++) {
    let mean = 0;
    for (let k = 0; k < H; k++) mean += row[k] = word[t * H + k] + base[k];
    mean /= H;
    let v = 0;
    for (let k = 0; k < H; k++) v += (row[k] - mean) ** 2;
    const inv = 1 / Math.sqrt(v / H + c.layerNormEps);
    for (let k = 0; k < H; k++) out[t * H + k] = (row[k] - mean) * inv * gamma[k] + beta[k];
  }
  return out;
}
