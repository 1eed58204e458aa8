/**
 * The encoder on BERT-shaped exports: a `token_type_ids` input, `pooling: 'cls'`, a WordPiece
 * tokenizer.json saved with fixed padding / truncation, and the load-time agreement checks.
 * Each model here is a tiny graph written with GraphBuilder and run by ONNX Runtime.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { meanPool } from '@lateral/scoring';
import { ModelLoadError, TokenEncoder, poolEncoded, type EncodedText } from './index';
import { GraphBuilder, floatTensor, int64Tensor, makeModel, makeValueInfo, writeModel } from '@lateral/kernels';
import { wordPieceTokenizerJson } from './testing/wordpiece-json';

const cpu = { executionProvider: 'cpu' as const, intraOpThreads: 1 };
const D = 4;
const VOCAB = [
  '[PAD]', '[UNK]', '[CLS]', '[SEP]', '[MASK]',
  'the', 'a', 'of', 'cafe', 'resume', 'un', 'play', 'flow', 'air', 'shock', 'wave', 'wing',
  '##aff', '##able', '##ing', '##s', '.', ',', '!',
];
const ID = Object.fromEntries(VOCAB.map((t, i) => [t, i])) as Record<string, number>;

/** Token embedding row i: distinct, non-zero, exact in float32. */
const embRow = (i: number) => Array.from({ length: D }, (_, k) => ((i * 5 + k * 3) % 11) / 8 - 0.5 + (k === 0 ? 1 : 0));
/** Token type rows: type 0 is a small offset, type 1 a huge one (feeding anything but zeros shows). */
const TYPE0 = [0.25, -0.125, 0.5, 0.0625];
const TYPE1 = [100, 100, 100, 100];

function tokenizerJson(): Record<string, unknown> {
  // saved by a pipeline that padded / truncated to 128: must not affect the encoder
  return wordPieceTokenizerJson(VOCAB, {
    padding: { strategy: { Fixed: 128 }, direction: 'Right', pad_to_multiple_of: null, pad_id: 0, pad_type_id: 0, pad_token: '[PAD]' },
    truncation: { direction: 'Right', max_length: 128, strategy: 'LongestFirst', stride: 0 },
  });
}

interface GraphOptions {
  /** Graph takes token_type_ids (default true). */
  tokenTypes?: boolean;
  /** A further required input the encoder knows nothing about. */
  extraInput?: string;
  dtype?: 'int64' | 'int32';
  /** Rows of the token embedding table (default: the vocabulary). */
  rows?: number;
  /** Look the ids up in a computed table (Mul by 1), so its size cannot be read from the file. */
  computedTable?: boolean;
}

/**
 * out[b, t] = (E[input_ids] + T[token_type_ids]) * attention_mask: contextless, so every expected
 * vector is known exactly; T row 1 is huge, so token types other than zero would show.
 */
function writeBertDir(dir: string, graph: GraphOptions = {}, manifest: Record<string, unknown> = {}): string {
  const rows = graph.rows ?? VOCAB.length;
  const g = new GraphBuilder();
  let E = g.constant(floatTensor('word_embeddings', [rows, D], Array.from({ length: rows }, (_, i) => embRow(i)).flat()));
  if (graph.computedTable) E = g.op('Mul', [E, g.constant(floatTensor('one', [], [1]))]);
  let x = g.op('Gather', [E, 'input_ids'], { axis: 0 });
  if (graph.tokenTypes ?? true) x = g.op('Add', [x, g.op('Gather', [g.constant(floatTensor('token_type_embeddings', [2, D], [...TYPE0, ...TYPE1])), 'token_type_ids'], { axis: 0 })]);
  if (graph.extraInput) x = g.op('Add', [x, g.op('Mul', [g.op('Cast', [graph.extraInput], { to: 1 }), g.constant(floatTensor('zero', [], [0]))])]);
  const mask = g.op('Unsqueeze', [g.op('Cast', ['attention_mask'], { to: 1 }), g.constant(int64Tensor('axis2', [1], [2]))]);
  g.op('Mul', [x, mask], {}, 'last_hidden_state');
  const t = graph.dtype === 'int32' ? 'INT32' : 'INT64';
  const inputs = ['input_ids', 'attention_mask', ...(graph.tokenTypes ?? true ? ['token_type_ids'] : []), ...(graph.extraInput ? [graph.extraInput] : [])];
  mkdirSync(dir, { recursive: true });
  writeModel(
    join(dir, 'model.onnx'),
    makeModel(g.build('bert_like', inputs.map((n) => makeValueInfo(n, t, ['batch', 'seq'])), [makeValueInfo('last_hidden_state', 'FLOAT', ['batch', 'seq', D])])),
  );
  writeFileSync(join(dir, 'tokenizer.json'), JSON.stringify(tokenizerJson()));
  const m = {
    name: 'bert-like',
    format: 1,
    dims: D,
    maxQueryTokens: 8,
    maxDocTokens: 200,
    clsToken: '[CLS]',
    sepToken: '[SEP]',
    inputs: { tokenTypeIds: 'token_type_ids', dtype: graph.dtype ?? 'int64' },
    skiplist: ['.', ',', '!'],
    normalize: false,
    ...manifest,
  };
  writeFileSync(join(dir, 'manifest.json'), JSON.stringify(m));
  return dir;
}

/** What the graph outputs for `tokens` with token type 0, row-major. */
const expected = (tokens: string[]) => Float32Array.from(tokens.flatMap((tok) => embRow(ID[tok]!).map((v, k) => v + TYPE0[k]!)));

function maxAbsDiff(a: Float32Array, b: Float32Array): number {
  expect(a.length).toBe(b.length);
  let m = 0;
  for (let i = 0; i < a.length; i++) m = Math.max(m, Math.abs(a[i]! - b[i]!));
  return m;
}

function l2(v: Float32Array): Float32Array {
  const n = Math.sqrt(v.reduce((s, x) => s + x * x, 0));
  return Float32Array.from(v, (x) => x / n);
}

let root: string;
let n = 0;
const newDir = (graph?: GraphOptions, manifest?: Record<string, unknown>) => writeBertDir(join(root, `m${n++}`), graph, manifest);
const loadError = (dir: string) => TokenEncoder.load(dir, cpu).then(
  async (e) => {
    await e.release();
    throw new Error('expected a ModelLoadError');
  },
  (err: unknown) => err as Error,
);

beforeAll(() => (root = mkdtempSync(join(tmpdir(), 'lateral-bert-'))));
afterAll(() => rmSync(root, { recursive: true, force: true }));

describe('inputs.tokenTypeIds', () => {
  it.each(['int64', 'int32'] as const)('feeds zeros of the ids dtype (%s) and shape under the named input', async (dtype) => {
    const e = await TokenEncoder.load(newDir({ dtype }), cpu);
    try {
      const [a, b] = await e.encodeDocuments(['Unaffable cafe!', 'wave']); // batched: padding rows too
      expect(Array.from(a!.tokenIds)).toEqual(['[CLS]', 'un', '##aff', '##able', 'cafe', '[SEP]'].map((t) => ID[t]));
      expect(maxAbsDiff(a!.vectors, expected(['[CLS]', 'un', '##aff', '##able', 'cafe', '[SEP]']))).toBeLessThan(1e-6);
      expect(maxAbsDiff(b!.vectors, expected(['[CLS]', 'wave', '[SEP]']))).toBeLessThan(1e-6);
      const [q] = await e.encodeQueries(['shock wave']);
      expect(maxAbsDiff(q!.vectors, expected(['[CLS]', 'shock', 'wave', '[SEP]']))).toBeLessThan(1e-6);
    } finally {
      await e.release();
    }
  });

  it('fails to load when the graph takes token_type_ids but the manifest does not name it', async () => {
    const err = await loadError(newDir({}, { inputs: {} }));
    expect(err).toBeInstanceOf(ModelLoadError);
    expect(err.message).toContain('model.onnx takes inputs [input_ids, attention_mask, token_type_ids]');
    expect(err.message).toContain('the manifest feeds only [input_ids (inputs.inputIds), attention_mask (inputs.attentionMask)]');
    expect(err.message).toMatch(/'token_type_ids' is not accounted for: set inputs\.tokenTypeIds to "token_type_ids"/);
  });

  it('fails to load when the manifest names a token type input the graph lacks', async () => {
    const err = await loadError(newDir({ tokenTypes: false }));
    expect(err).toBeInstanceOf(ModelLoadError);
    expect(err.message).toMatch(/field 'inputs\.tokenTypeIds' names input 'token_type_ids', but model\.onnx has inputs \[input_ids, attention_mask\]/);
    const other = await loadError(newDir({}, { inputs: { tokenTypeIds: 'segment_ids' } }));
    expect(other.message).toMatch(/field 'inputs\.tokenTypeIds' names input 'segment_ids', but model\.onnx has inputs \[input_ids, attention_mask, token_type_ids\]/);
  });

  it('fails to load on any other required input, and on an attention mask the manifest turned off', async () => {
    const pos = await loadError(newDir({ extraInput: 'position_ids' }));
    expect(pos).toBeInstanceOf(ModelLoadError);
    expect(pos.message).toMatch(/takes inputs \[input_ids, attention_mask, token_type_ids, position_ids\].*'position_ids' is not accounted for: .*export the graph without it/);
    const mask = await loadError(newDir({}, { inputs: { tokenTypeIds: 'token_type_ids', attentionMask: null } }));
    expect(mask.message).toMatch(/'attention_mask' is not accounted for: set inputs\.attentionMask to "attention_mask"/);
  });
});

describe('tokenizer / graph agreement', () => {
  it('fails to load when the tokenizer has more ids than the embedding table has rows, naming both', async () => {
    const err = await loadError(newDir({ rows: VOCAB.length - 3 }));
    expect(err).toBeInstanceOf(ModelLoadError);
    expect(err.message).toContain(`tokenizer.json has ${VOCAB.length} token ids (0..${VOCAB.length - 1})`);
    expect(err.message).toContain(`token embedding 'word_embeddings' has ${VOCAB.length - 3} rows`);
  });

  it('accepts a larger table, and skips the check when the table size cannot be read', async () => {
    const bigger = await TokenEncoder.load(newDir({ rows: VOCAB.length + 8 }), cpu);
    await bigger.release();
    const computed = await TokenEncoder.load(newDir({ rows: VOCAB.length - 3, computedTable: true }), cpu);
    expect((await computed.encodeDocuments(['air']))[0]!.length).toBe(3);
    await computed.release();
  });

  it("ignores the tokenizer.json's fixed padding and truncation of 128: natural lengths, cut at maxTokens", async () => {
    const e = await TokenEncoder.load(newDir(), cpu);
    try {
      const long = Array.from({ length: 300 }, (_, i) => (i % 2 ? 'flow' : 'air')).join(' ');
      const [short, cut, capped] = await e.encodeDocuments(['shock wave', long, long], { maxTokens: 150 });
      expect(short!.length).toBe(4);
      expect(cut!.length).toBe(150);
      expect(cut!.truncated).toBe(true);
      expect(e.countTokens(long, 'doc')).toBe(302);
      expect((await e.encodeDocuments([long]))[0]!.length).toBe(200); // manifest maxDocTokens, not 128
      expect(capped!.tokenIds[149]).toBe(ID['[SEP]']);
    } finally {
      await e.release();
    }
  });
});

describe('pooling', () => {
  const doc = 'The cafe, the wave.';
  const kept = ['[CLS]', 'the', 'cafe', 'the', 'wave', '[SEP]']; // skiplist drops ',' and '.'

  it("'mean' is the normalised mean of the kept token vectors, as meanPool", async () => {
    const e = await TokenEncoder.load(newDir(), cpu);
    try {
      const [d] = await e.encodeDocuments([doc]);
      expect(Array.from(d!.tokenIds)).toEqual(kept.map((t) => ID[t]));
      expect(e.pool(d!)).toEqual(meanPool(d!.vectors, d!.length, D, true));
      const [q] = await e.encodeQueries(['shock wave']);
      expect(e.pool(q!)).toEqual(meanPool(q!.vectors, q!.length, D, true));
    } finally {
      await e.release();
    }
  });

  it("'cls' is the normalised vector of the [CLS] position, kept aside even when the skiplist drops [CLS]", async () => {
    const e = await TokenEncoder.load(newDir({}, { pooling: 'cls', skiplist: ['[CLS]', '.', ','] }), cpu);
    try {
      const [d] = await e.encodeDocuments([doc]);
      expect(Array.from(d!.tokenIds)).toEqual(kept.slice(1).map((t) => ID[t])); // no [CLS] vector among the tokens
      expect(maxAbsDiff(d!.cls!, expected(['[CLS]']))).toBeLessThan(1e-6);
      expect(maxAbsDiff(e.pool(d!), l2(expected(['[CLS]'])))).toBeLessThan(1e-6);
      const [q] = await e.encodeQueries(['shock wave']); // queries keep [CLS]: the same vector either way
      expect(q!.tokenIds[0]).toBe(ID['[CLS]']);
      expect(maxAbsDiff(e.pool(q!), l2(q!.vectors.slice(0, D)))).toBeLessThan(1e-6);
    } finally {
      await e.release();
    }
  });

  it('normalises cls like the token vectors when manifest.normalize is true', async () => {
    const e = await TokenEncoder.load(newDir({}, { pooling: 'cls', normalize: true }), cpu);
    try {
      const [d] = await e.encodeDocuments([doc]);
      expect(maxAbsDiff(d!.cls!, d!.vectors.slice(0, D))).toBe(0);
      expect(maxAbsDiff(d!.cls!, l2(expected(['[CLS]'])))).toBeLessThan(1e-6);
    } finally {
      await e.release();
    }
  });

  it("rejects 'cls' without a clsToken at load, and a text encoded without one in poolEncoded", async () => {
    const err = await loadError(newDir({}, { pooling: 'cls', clsToken: null }));
    expect(err).toBeInstanceOf(ModelLoadError);
    expect(err.message).toMatch(/manifest\.json: invalid manifest: field 'pooling'/);
    const hand: EncodedText = { tokenIds: Int32Array.from([5, 6]), vectors: Float32Array.from([3, 0, 0, 0, 0, 4, 0, 0]), weights: null, length: 2, truncated: false };
    expect(() => poolEncoded(hand, D, 'cls')).toThrow(/EncodedText\.cls/);
    expect(Array.from(poolEncoded(hand, D, 'mean'))).toEqual(Array.from(meanPool(hand.vectors, 2, D)));
    expect(Array.from(poolEncoded({ ...hand, cls: Float32Array.from([0, 0, 3, 4]) }, D, 'cls'))).toEqual([0, 0, 0.6000000238418579, 0.800000011920929]);
    expect(Array.from(poolEncoded({ ...hand, cls: new Float32Array(D) }, D, 'cls'))).toEqual([0, 0, 0, 0]);
  });
});
