// Tests of scripts/build-model.ts: the GloVe model directories it builds, their cache and CLI
// (the pretrained models fetched from PyPI are left out here: --no-pretrained / skipPretrained).
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as ort from 'onnxruntime-node';
import { afterAll, describe, expect, it } from 'vitest';
import { ModelManifestSchema } from '@lateral/shared';
import { TokenEncoder, loadStaticEmbeddings } from '@lateral/model';
import { buildModels } from './build-model';

const root = mkdtempSync(join(tmpdir(), 'lateral-build-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

describe('scripts/build-model.ts', () => {
  it('builds both GloVe models with --vocab N, caches them by build.json, and --quiet prints one line', async () => {
    const out = join(root, 'models');
    const first = await buildModels({ outDir: out, vocabSize: 2000, skipPretrained: true });
    expect(first.built.sort()).toEqual(['glove-ctx-100d', 'glove-static-100d']);
    const manifest = JSON.parse(readFileSync(join(out, 'glove-static-100d', 'manifest.json'), 'utf8'));
    expect(manifest.description).toContain('2000 most frequent');
    expect(existsSync(join(out, 'test-transformer'))).toBe(false);

    const cli = spawnSync(process.execPath, ['--import', 'tsx', 'scripts/build-model.ts', '--quiet', '--no-pretrained', '--out', out, '--vocab', '2000'], { encoding: 'utf8' });
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
    await buildModels({ outDir: out, vocabSize: 2000, skipPretrained: true }); // cached by the test above
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
