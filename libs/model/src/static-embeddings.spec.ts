import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { encodeHalf } from '@lateral/codec';
import { ModelManifestSchema } from '@lateral/shared';
import { ModelLoadError, loadStaticEmbeddings, makeWordLevelTokenizerJson, staticEmbeddingsFromTable } from './index';

const root = mkdtempSync(join(tmpdir(), 'lateral-static-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

const VOCAB = ['[PAD]', '[UNK]', 'alpha', 'beta', 'gamma'];
const DIMS = 3;
const TABLE = Float32Array.from({ length: VOCAB.length * DIMS }, (_, i) => (i % 7) * 0.25 - 0.5);
const bytesOf = (a: Float32Array | Uint16Array) => new Uint8Array(a.buffer, a.byteOffset, a.byteLength);

function writeDir(name: string, file: Uint8Array | null, dtype: 'fp16' | 'fp32' = 'fp32', tokenizer = true) {
  const dir = mkdtempSync(join(root, `${name}-`));
  if (tokenizer) writeFileSync(join(dir, 'tokenizer.json'), JSON.stringify(makeWordLevelTokenizerJson({ vocab: VOCAB, specialTokens: ['[PAD]', '[UNK]'], unkToken: '[UNK]' })));
  if (file) writeFileSync(join(dir, 'static.bin'), file);
  const manifest = ModelManifestSchema.parse({ name, format: 1, dims: 8, maxQueryTokens: 8, maxDocTokens: 8, staticEmbeddings: { file: 'static.bin', dims: DIMS, dtype } });
  return { dir, manifest };
}

describe('loadStaticEmbeddings', () => {
  it('reads an fp32 table and looks rows up by token id, in order', () => {
    const { dir, manifest } = writeDir('fp32', bytesOf(TABLE));
    const se = loadStaticEmbeddings(dir, manifest);
    expect(se.dims).toBe(DIMS);
    expect(se.rows).toBe(VOCAB.length);
    const got = se.lookup(Int32Array.from([4, 0, 2, 4]));
    expect(Array.from(got)).toEqual([...TABLE.subarray(12, 15), ...TABLE.subarray(0, 3), ...TABLE.subarray(6, 9), ...TABLE.subarray(12, 15)]);
    expect(se.lookup(new Int32Array(0))).toHaveLength(0);
    expect(() => se.lookup(Int32Array.from([5]))).toThrow(/token id 5 is outside the static embedding table \(5 rows\)/);
    expect(() => se.lookup(Int32Array.from([-1]))).toThrow(RangeError);
  });

  it('widens an fp16 table to float32', () => {
    const { dir, manifest } = writeDir('fp16', bytesOf(encodeHalf(TABLE)), 'fp16');
    const se = loadStaticEmbeddings(dir, manifest);
    // TABLE's values are multiples of 0.25: exact in fp16.
    expect(Array.from(se.lookup(Int32Array.from([1, 3])))).toEqual([...TABLE.subarray(3, 6), ...TABLE.subarray(9, 12)]);
  });

  it('names expected and actual bytes when the file does not match the vocabulary', () => {
    const short = writeDir('short', bytesOf(TABLE.subarray(0, 4 * DIMS)));
    expect(() => loadStaticEmbeddings(short.dir, short.manifest)).toThrow(ModelLoadError);
    expect(() => loadStaticEmbeddings(short.dir, short.manifest)).toThrow(/has 48 bytes, expected 60 \(5 token ids of tokenizer\.json x 3 fp32 values x 4 bytes\)/);
    // The right size for fp32 is the wrong size for fp16.
    const wrongType = writeDir('wrong-dtype', bytesOf(TABLE), 'fp16');
    expect(() => loadStaticEmbeddings(wrongType.dir, wrongType.manifest)).toThrow(/has 60 bytes, expected 30 /);
    // Without a tokenizer.json only whole rows are checked.
    const ragged = writeDir('ragged', new Uint8Array(13), 'fp32', false);
    expect(() => loadStaticEmbeddings(ragged.dir, ragged.manifest)).toThrow(/has 13 bytes, expected a whole number of rows of 3 fp32 values \(12 bytes each\), e\.g\. 12 or 24/);
  });

  it('throws ModelLoadError for a missing file or a manifest without a table', () => {
    const missing = writeDir('missing', null);
    expect(() => loadStaticEmbeddings(missing.dir, missing.manifest)).toThrow(/static\.bin: static embedding table \(manifest staticEmbeddings\.file\) not found/);
    expect(() => loadStaticEmbeddings(missing.dir, { ...missing.manifest, staticEmbeddings: null })).toThrow(/declares no staticEmbeddings/);
  });

  it('manifest: staticEmbeddings defaults to null and must name a plain file in the model directory', () => {
    const base = { name: 'm', format: 1, dims: 8, maxQueryTokens: 8, maxDocTokens: 8 };
    expect(ModelManifestSchema.parse(base).staticEmbeddings).toBeNull();
    expect(ModelManifestSchema.safeParse({ ...base, staticEmbeddings: { file: '../x.bin', dims: 3, dtype: 'fp32' } }).success).toBe(false);
    expect(ModelManifestSchema.safeParse({ ...base, staticEmbeddings: { file: 'x.bin', dims: 3, dtype: 'int8' } }).success).toBe(false);
  });

  it('staticEmbeddingsFromTable rejects a ragged table', () => {
    expect(() => staticEmbeddingsFromTable(new Float32Array(7), 3)).toThrow(/7 values is not rows x 3/);
  });

  it('the built GloVe models declare a table that matches their vocabulary', () => {
    const dir = join('.cache/models/glove-ctx-100d');
    const manifest = ModelManifestSchema.parse(JSON.parse(readFileSync(join(dir, 'manifest.json'), 'utf8')));
    const se = loadStaticEmbeddings(dir, manifest);
    expect(se.dims).toBe(100);
    // special tokens are zero rows, words are unit vectors
    const rows = se.lookup(Int32Array.from([0, 7, 100]));
    expect(rows.subarray(0, 100).every((v) => v === 0)).toBe(true);
    for (const r of [1, 2]) expect(Math.hypot(...rows.subarray(r * 100, (r + 1) * 100))).toBeCloseTo(1, 5);
  });
});
