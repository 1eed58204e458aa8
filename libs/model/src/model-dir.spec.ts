import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ModelLoadError } from './errors';
import { parseManifest, readEmbeddingTable } from './model-dir';
import { GraphBuilder, floatTensor, makeModel, makeNode, makeValueInfo, writeModel } from '@lateral/kernels';

const base = { name: 'm', format: 1, dims: 8, maxQueryTokens: 16, maxDocTokens: 64 };

describe('parseManifest: inputs.tokenTypeIds and pooling', () => {
  it('defaults tokenTypeIds to null (the graph takes none) and accepts a name', () => {
    expect(parseManifest(base).inputs).toEqual({ inputIds: 'input_ids', attentionMask: 'attention_mask', tokenTypeIds: null, dtype: 'int64' });
    expect(parseManifest({ ...base, inputs: { tokenTypeIds: 'token_type_ids' } }).inputs.tokenTypeIds).toBe('token_type_ids');
  });

  it('rejects two input fields naming the same graph input', () => {
    expect(() => parseManifest({ ...base, inputs: { tokenTypeIds: 'attention_mask' } }, 'x/manifest.json')).toThrow(
      /x\/manifest\.json: invalid manifest: field 'inputs\.tokenTypeIds': 'attention_mask' is already named by inputs\.attentionMask/,
    );
    expect(() => parseManifest({ ...base, inputs: { attentionMask: 'input_ids' } })).toThrow(ModelLoadError);
    // null twice is fine: neither is fed
    expect(parseManifest({ ...base, inputs: { attentionMask: null, tokenTypeIds: null } }).inputs.attentionMask).toBeNull();
  });

  it("accepts pooling 'cls' only with a clsToken", () => {
    expect(parseManifest({ ...base, pooling: 'cls', clsToken: '[CLS]' }).pooling).toBe('cls');
    expect(() => parseManifest({ ...base, pooling: 'cls' })).toThrow(/field 'pooling': 'cls' pools the vector of the clsToken position: set clsToken/);
  });
});

describe('readEmbeddingTable', () => {
  let root: string;
  beforeAll(() => (root = mkdtempSync(join(tmpdir(), 'lateral-model-dir-'))));
  afterAll(() => rmSync(root, { recursive: true, force: true }));

  /** Writes a graph input_ids -> ... -> out and returns its path. */
  function graph(name: string, build: (g: GraphBuilder) => void, idsType: 'INT64' | 'INT32' = 'INT64'): string {
    const g = new GraphBuilder();
    build(g);
    const path = join(root, `${name}.onnx`);
    writeModel(
      path,
      makeModel(
        g.build(name, [makeValueInfo('input_ids', idsType, ['batch', 'seq']), makeValueInfo('attention_mask', idsType, ['batch', 'seq'])], [
          makeValueInfo('out', 'FLOAT', ['batch', 'seq', 4]),
        ]),
        { extraOpsets: [{ domain: 'com.microsoft', version: 1 }] },
      ),
    );
    return path;
  }
  const table = (g: GraphBuilder, name: string, rows: number) => g.constant(floatTensor(name, [rows, 4], new Float32Array(rows * 4).fill(0.5)));

  it('finds the 2-d initializer the ids are gathered from, skipping other Gathers', () => {
    const path = graph('direct', (g) => {
      const pos = table(g, 'position_embeddings', 512);
      const shape = g.op('Shape', ['attention_mask']);
      g.op('Gather', [pos, shape]); // a Gather, but not on the ids
      g.op('Gather', [table(g, 'word_embeddings', 30522), 'input_ids'], { axis: 0 }, 'out');
    });
    expect(readEmbeddingTable(path, 'input_ids')).toEqual({ name: 'word_embeddings', rows: 30522 });
    expect(readEmbeddingTable(path, 'ids')).toBeNull(); // no Gather on an input of that name
  });

  it('follows Cast / Identity of the ids (int32 exports) and reads fused EmbedLayerNormalization', () => {
    const cast = graph(
      'cast',
      (g) => {
        const ids = g.op('Identity', [g.op('Cast', ['input_ids'], { to: 7 })]);
        g.op('Gather', [table(g, 'emb', 1000), ids], { axis: 0 }, 'out');
      },
      'INT32',
    );
    expect(readEmbeddingTable(cast, 'input_ids')).toEqual({ name: 'emb', rows: 1000 });

    const fused = graph('fused', (g) => {
      const word = table(g, 'word', 250);
      const pos = table(g, 'pos', 64);
      const node = makeNode('EmbedLayerNormalization', ['input_ids', '', word, pos, '', 'gamma', 'beta', 'attention_mask'], ['out', 'mask_index']);
      node.domain = 'com.microsoft';
      g.nodes.push(node);
    });
    expect(readEmbeddingTable(fused, 'input_ids')).toEqual({ name: 'word', rows: 250 });
  });

  it('gives null when the table is not an initializer, and for unreadable files', () => {
    const computed = graph('computed', (g) => {
      const t = g.op('Mul', [table(g, 'q', 100), g.constant(floatTensor('scale', [], [2]))]); // e.g. dequantised
      g.op('Gather', [t, 'input_ids'], { axis: 0 }, 'out');
    });
    expect(readEmbeddingTable(computed, 'input_ids')).toBeNull();
    const junk = join(root, 'junk.onnx');
    writeFileSync(junk, Buffer.from([0x3a, 0xff, 0xff, 0xff, 0x0f, 1, 2, 3]));
    expect(readEmbeddingTable(junk, 'input_ids')).toBeNull();
    expect(readEmbeddingTable(join(root, 'missing.onnx'), 'input_ids')).toBeNull();
  });
});
