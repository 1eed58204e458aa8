// Tests for the build/eval scripts this library's models come from (scripts/ is not a vitest root).
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as ort from 'onnxruntime-node';
import { afterAll, describe, expect, it } from 'vitest';
// These specs test scripts/ (not an Nx project, so it has no spec root of its own); a library's
// production code never imports from scripts/.
// eslint-disable-next-line @nx/enforce-module-boundaries
import { buildModels } from '../../../scripts/build-model';
// eslint-disable-next-line @nx/enforce-module-boundaries
import { loadCranfield, ndcgAt10 } from '../../../scripts/lib/cranfield';
// eslint-disable-next-line @nx/enforce-module-boundaries
import { DEFAULT_CRANFIELD_DIR } from '../../../scripts/lib/cranfield-eval';
import { ModelManifestSchema } from '@lateral/shared';
import { GraphBuilder, TokenEncoder, encodeModel, loadStaticEmbeddings, floatAttr, floatTensor, makeModel, makeNode, makeTensor, makeValueInfo } from './index';

const root = mkdtempSync(join(tmpdir(), 'lateral-build-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

describe('onnx-graph helpers (also re-exported as scripts/lib/onnx-graph)', () => {
  it('build a graph onnxruntime runs: y = relu(x * 2 + b)', async () => {
    const g = new GraphBuilder();
    const two = g.constant(floatTensor('two', [], [2]));
    const b = g.constant(floatTensor('b', [3], [1, -10, 0.5]));
    g.op('Relu', [g.op('Add', [g.op('Mul', ['x', two]), b])], {}, 'y');
    const model = makeModel(g.build('t', [makeValueInfo('x', 'FLOAT', ['n', 3])], [makeValueInfo('y', 'FLOAT', ['n', 3])]));
    const s = await ort.InferenceSession.create(encodeModel(model));
    const out = await s.run({ x: new ort.Tensor('float32', Float32Array.from([1, 2, 3, -1, 0, 1]), [2, 3]) });
    expect(Array.from(out.y!.data as Float32Array)).toEqual([3, 0, 6.5, 0, 0, 2.5]);
    await s.release();
  });

  it('reject inconsistent tensors and non-integer INT attributes', () => {
    expect(() => makeTensor('t', [2, 3], new Float32Array(5))).toThrow(/dims \[2,3\] hold 6 elements but data has 5/);
    expect(() => makeNode('LeakyRelu', ['x'], ['y'], { alpha: 0.1 })).toThrow(/use floatAttr/);
    expect(makeNode('LeakyRelu', ['x'], ['y'], { alpha: floatAttr(0.1) }).attribute[0]!.f).toBeCloseTo(0.1);
  });
});

describe('scripts/build-model.ts', () => {
  it('builds both GloVe models with --vocab N, caches them by build.json, and --quiet prints one line', async () => {
    const out = join(root, 'models');
    const first = await buildModels({ outDir: out, vocabSize: 2000 });
    expect(first.built.sort()).toEqual(['glove-ctx-100d', 'glove-static-100d']);
    const manifest = JSON.parse(readFileSync(join(out, 'glove-static-100d', 'manifest.json'), 'utf8'));
    expect(manifest.description).toContain('2000 most frequent');
    expect(existsSync(join(out, 'test-transformer'))).toBe(false);

    const cli = spawnSync(process.execPath, ['--import', 'tsx', 'scripts/build-model.ts', '--quiet', '--out', out, '--vocab', '2000'], { encoding: 'utf8' });
    expect(cli.status).toBe(0);
    const lines = cli.stdout.trim().split('\n');
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(/built \[\], up to date \[glove-static-100d, glove-ctx-100d\]/);

    const enc = await TokenEncoder.load(join(out, 'glove-ctx-100d'), { executionProvider: 'cpu' });
    expect(enc.tokenizer.tokenizer.get_vocab().size).toBe(2007);
    const [d] = await enc.encodeDocuments(['the government said']);
    expect(d!.length).toBe(3);
    await enc.release();
  });

  it('writes the static embedding table both GloVe models declare: row i = the static model output for token id i, bit for bit', async () => {
    const out = join(root, 'models');
    await buildModels({ outDir: out, vocabSize: 2000 }); // cached by the test above
    const dirOf = (name: string) => join(out, name);
    const manifest = JSON.parse(readFileSync(join(dirOf('glove-ctx-100d'), 'manifest.json'), 'utf8'));
    expect(manifest.staticEmbeddings).toEqual({ file: 'static-embeddings.f32', dims: 100, dtype: 'fp32' });
    const st = await TokenEncoder.load(dirOf('glove-static-100d'), { executionProvider: 'cpu' });
    const table = loadStaticEmbeddings(dirOf('glove-ctx-100d'), ModelManifestSchema.parse(manifest));
    expect(table.rows).toBe(2007);
    expect(loadStaticEmbeddings(dirOf('glove-static-100d'), st.manifest).table).toEqual(table.table);
    const texts = ['The pressure distribution on a swept wing, at supersonic speed.', 'heat transfer in the laminar boundary layer of a flat plate', 'x 3 a [UNK]'];
    const docs = await st.encodeDocuments(texts);
    let tokens = 0;
    for (const d of docs) {
      tokens += d.length;
      // Same bits, not just close: side information must see what the static model would output.
      expect(Array.from(table.lookup(d.tokenIds))).toEqual(Array.from(d.vectors));
    }
    expect(tokens).toBeGreaterThan(20);
    // every id of the vocabulary at once, through the static graph
    const ids = Array.from({ length: table.rows }, (_, i) => i);
    const session = await ort.InferenceSession.create(join(dirOf('glove-static-100d'), 'model.onnx'));
    const res = await session.run({
      input_ids: new ort.Tensor('int64', BigInt64Array.from(ids, BigInt), [1, ids.length]),
      attention_mask: new ort.Tensor('int64', new BigInt64Array(ids.length).fill(1n), [1, ids.length]),
    });
    expect(Array.from(res.last_hidden_state!.data as Float32Array)).toEqual(Array.from(table.table));
    await session.release();
    await st.release();
  });
});

describe('scripts/lib/cranfield.ts', () => {
  it('computes nDCG@10 with linear gains against the ideal ranking of all judged documents', () => {
    const qrel = new Map([
      ['a', 3],
      ['b', 1],
      ['c', 4],
    ]);
    expect(ndcgAt10(['c', 'a', 'b'], qrel)).toBeCloseTo(1, 12);
    const dcg = 0 / Math.log2(2) + 3 / Math.log2(3) + 4 / Math.log2(4); // x, a, c (b not retrieved)
    const idcg = 4 + 3 / Math.log2(3) + 1 / Math.log2(4);
    expect(ndcgAt10(['x', 'a', 'c'], qrel)).toBeCloseTo(dcg / idcg, 12);
    expect(ndcgAt10(['x'], new Map())).toBe(0);
    // only the first 10 ranks count
    expect(ndcgAt10([...'0123456789'.split(''), 'c'], qrel)).toBe(0);
  });

  it.skipIf(!existsSync(DEFAULT_CRANFIELD_DIR))('loads the Cranfield collection', () => {
    const c = loadCranfield(DEFAULT_CRANFIELD_DIR);
    expect(c.docs).toHaveLength(1400);
    expect(c.queries).toHaveLength(225);
    expect(c.queries[0]).toEqual({ id: '1', text: expect.stringMatching(/^what similarity laws must be obeyed/) });
    expect(c.docs[0]!.text).toMatch(/^experimental investigation of the aerodynamics of a wing in a slipstream \. experimental/);
    expect(c.qrels.get('1')!.get('184')).toBe(3); // grade 2 -> gain 3
    const gains = new Set([...c.qrels.values()].flatMap((m) => [...m.values()]));
    expect([...gains].sort()).toEqual([1, 2, 3, 4]);
  });
});
