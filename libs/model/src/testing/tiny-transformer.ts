/**
 * A tiny, seeded, transformer-shaped ONNX model for tests: embedding + learned positions, one
 * single-head self-attention layer whose keys are masked by `attention_mask` (additive -1e9 bias),
 * a residual connection and LayerNorm. Inputs `input_ids` / `attention_mask` [batch, seq] int64,
 * outputs `last_hidden_state` [batch, seq, dims] and, optionally, `token_weights` [batch, seq].
 *
 * Because padding keys get zero attention, a text encoded alone or right-padded inside a batch
 * gives the same vectors: the property real ColBERT exports have and the encoder relies on.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { ModelManifestSchema, type ModelManifest } from '@lateral/shared';
import {
  GraphBuilder,
  floatScalar,
  floatTensor,
  int64Tensor,
  makeModel,
  makeValueInfo,
  writeModel,
} from '@lateral/kernels';
import { isPunctuation, makeWordLevelTokenizerJson } from '../tokenizer-json';
import { mulberry32 } from '@lateral/shared';

export const TINY_TRANSFORMER_VERSION = 1;

export const TINY_SPECIAL_TOKENS = ['[PAD]', '[UNK]', '[CLS]', '[SEP]', '[MASK]', '[Q]', '[D]'] as const;

/** A small fixed English vocabulary (plus punctuation) so tests need no other download or build. */
export const TINY_WORDS = (
  'the of and to a in is was for on that with as by it at from be this are an or which were has have ' +
  'not but had its their been also more one two three first new other than can may will into only ' +
  'after some over such when these there all time would about between most both them they we he she ' +
  'flow air wing body boundary layer pressure heat transfer shock wave speed mach number high low ' +
  'supersonic subsonic hypersonic surface plate cylinder cone velocity temperature theory experimental ' +
  'results method solution equations effect effects data model test measured obtained found given ' +
  'stream laminar turbulent viscous inviscid compressible incompressible jet nozzle drag lift load ' +
  'stress buckling shell panel structure vibration frequency thermal stability free edge leading trailing ' +
  'cat dog sat mat bank river money deposit bat ball game night fly animal cave red green blue quick brown fox jumps lazy ' +
  'river bank water fish boat road car house tree light dark small large'
)
  .split(' ')
  .filter((w, i, all) => all.indexOf(w) === i);
export const TINY_PUNCTUATION = ['.', ',', ';', ':', '!', '?', '(', ')', '-', "'", '"', '/'];

export interface TinyTransformerOptions {
  seed?: number;
  dims?: number;
  name?: string;
  /** Also emit a `token_weights` [batch, seq] output (tanh of a linear projection). */
  tokenWeights?: boolean;
  /** Manifest fields to override (e.g. to test validation or a lying `dims`). */
  manifest?: Partial<ModelManifest>;
  maxPositions?: number;
  /** Element type of input_ids / attention_mask (default int64). */
  inputDtype?: 'int64' | 'int32';
}

const rng = mulberry32;

function randomMatrix(next: () => number, rows: number, cols: number, scale: number): Float32Array {
  const out = new Float32Array(rows * cols);
  for (let i = 0; i < out.length; i++) out[i] = (next() * 2 - 1) * scale;
  return out;
}

export function tinyVocabulary(): string[] {
  return [...TINY_SPECIAL_TOKENS, ...TINY_WORDS, ...TINY_PUNCTUATION];
}

/** Writes model.onnx, tokenizer.json and manifest.json into `dir`; returns the manifest. */
export function writeTinyTransformer(dir: string, opts: TinyTransformerOptions = {}): ModelManifest {
  const seed = opts.seed ?? 1234;
  const d = opts.dims ?? 32;
  const maxPos = opts.maxPositions ?? 512;
  const vocab = tinyVocabulary();
  const next = rng(seed);
  const g = new GraphBuilder();

  const E = g.constant(floatTensor('tok_emb', [vocab.length, d], randomMatrix(next, vocab.length, d, 1)));
  const P = g.constant(floatTensor('pos_emb', [maxPos, d], randomMatrix(next, maxPos, d, 0.3)));
  const x0 = g.op('Gather', [E, 'input_ids'], { axis: 0 }); // [B,S,d]
  const shape = g.op('Shape', ['input_ids']);
  const seq = g.op('Gather', [shape, g.constant(int64Tensor('one_idx', [], [1]))], { axis: 0 }); // scalar S
  const positions = g.op('Range', [g.constant(int64Tensor('zero_i', [], [0])), seq, g.constant(int64Tensor('one_i', [], [1]))]);
  const pos = g.op('Gather', [P, positions], { axis: 0 }); // [S,d]
  const x = g.op('Add', [x0, pos]);

  const w = (name: string) => g.constant(floatTensor(name, [d, d], randomMatrix(next, d, d, 1 / Math.sqrt(d))));
  const q = g.op('MatMul', [x, w('wq')]);
  const k = g.op('MatMul', [x, w('wk')]);
  const v = g.op('MatMul', [x, w('wv')]);
  const kt = g.op('Transpose', [k], { perm: [0, 2, 1] }); // [B,d,S]
  const scores = g.op('Mul', [g.op('MatMul', [q, kt]), g.constant(floatScalar('inv_sqrt_d', 1 / Math.sqrt(d)))]); // [B,S,S]
  // Keys where attention_mask = 0 get -1e9: exp underflows to exactly 0, so padding never leaks in.
  const maskf = g.op('Cast', ['attention_mask'], { to: 1 });
  const bias = g.op('Mul', [g.op('Sub', [maskf, g.constant(floatScalar('one_f', 1))]), g.constant(floatScalar('big', 1e9))]);
  const bias3 = g.op('Unsqueeze', [bias, g.constant(int64Tensor('axis1', [1], [1]))]); // [B,1,S]
  const attn = g.op('Softmax', [g.op('Add', [scores, bias3])], { axis: -1 });
  const ctx = g.op('MatMul', [attn, v]);
  const h = g.op('Add', [x, g.op('MatMul', [ctx, w('wo')])]);
  const gamma = g.constant(floatTensor('ln_gamma', [d], new Float32Array(d).fill(1)));
  const beta = g.constant(floatTensor('ln_beta', [d], new Float32Array(d)));
  g.op('LayerNormalization', [h, gamma, beta], { axis: -1 }, 'last_hidden_state');

  const outputs = [makeValueInfo('last_hidden_state', 'FLOAT', ['batch', 'seq', d])];
  if (opts.tokenWeights) {
    const wt = g.constant(floatTensor('w_weight', [d, 1], randomMatrix(next, d, 1, 1 / Math.sqrt(d))));
    const proj = g.op('MatMul', [h, wt]); // [B,S,1]
    const sq = g.op('Squeeze', [proj, g.constant(int64Tensor('axis_2', [1], [2]))]);
    g.op('Tanh', [sq], {}, 'token_weights');
    outputs.push(makeValueInfo('token_weights', 'FLOAT', ['batch', 'seq']));
  }
  const inputType = opts.inputDtype === 'int32' ? 'INT32' : 'INT64';
  const graph = g.build(
    'tiny_transformer',
    [makeValueInfo('input_ids', inputType, ['batch', 'seq']), makeValueInfo('attention_mask', inputType, ['batch', 'seq'])],
    outputs,
  );
  const name = opts.name ?? 'test-transformer';
  mkdirSync(dir, { recursive: true });
  writeModel(join(dir, 'model.onnx'), makeModel(graph, { metadata: { name, seed: String(seed) } }));
  const tokenizer = makeWordLevelTokenizerJson({ vocab, specialTokens: TINY_SPECIAL_TOKENS, unkToken: '[UNK]' });
  writeFileSync(join(dir, 'tokenizer.json'), JSON.stringify(tokenizer));
  const manifest = ModelManifestSchema.parse({
    name,
    format: 1,
    dims: d,
    maxQueryTokens: 32,
    maxDocTokens: 64,
    queryMarker: '[Q]',
    docMarker: '[D]',
    clsToken: '[CLS]',
    sepToken: '[SEP]',
    queryPadding: 'mask',
    skiplist: vocab.filter(isPunctuation),
    normalize: true,
    pooling: 'mean',
    inputs: { dtype: opts.inputDtype ?? 'int64' },
    outputs: { tokenWeights: opts.tokenWeights ? 'token_weights' : null },
    description: `Tiny seeded transformer for tests (seed ${seed}, dims ${d}, ${vocab.length} tokens): random weights, not a real model.`,
    ...opts.manifest,
  });
  writeFileSync(join(dir, 'manifest.json'), JSON.stringify(manifest, null, 2) + '\n');
  return manifest;
}
