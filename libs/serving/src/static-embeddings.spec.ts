import { cpSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { PermanentJobError, type Collection, type CollectionManifest } from '@lateral/shared';
import type { CodecArtifact } from '@lateral/codec';
import { ModelLoadError } from '@lateral/model';
import { StaticEmbeddingsCache, generationSideInfo, sideInfoReader } from './static-embeddings';

const MODELS = resolve('.cache/models');
const root = mkdtempSync(join(tmpdir(), 'lateral-se-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

const manifestOf = (versions: number[]): CollectionManifest => ({
  tenantId: 't',
  collectionId: 'c',
  generation: 1,
  codecVersion: versions.at(-1)!,
  committedAt: '',
  segments: versions.map((v, i) => ({ batchId: `b${i}`, codecVersion: v, key: `k${i}`, documents: 1, tokens: 1, bytes: 1, checksum: '' })),
});

describe('StaticEmbeddingsCache', () => {
  it('loads a model table once per process, null for a model without one', async () => {
    const cache = new StaticEmbeddingsCache(MODELS);
    const a = cache.forModel('glove-ctx-100d');
    expect(cache.forModel('glove-ctx-100d')).toBe(a);
    const se = (await a)!;
    expect(se.dims).toBe(100);
    const ids = Int32Array.from([7, 8, 7]);
    const rows = sideInfoReader(se)(0, ids);
    expect(rows).toHaveLength(300);
    expect(Array.from(rows.subarray(0, 100))).toEqual(Array.from(rows.subarray(200, 300)));
    expect(await cache.forModel('test-transformer')).toBeNull();
    await expect(cache.forCollection({ tenantId: 't', id: 'c', model: 'test-transformer' })).rejects.toThrow(PermanentJobError);
    await expect(cache.forCollection({ tenantId: 't', id: 'c', model: 'test-transformer' })).rejects.toThrow(/model 'test-transformer' declares no staticEmbeddings/);
  });

  it('reports a broken table as ModelLoadError and retries after a fix', async () => {
    const models = join(root, 'models');
    cpSync(join(MODELS, 'glove-static-100d'), join(models, 'm'), { recursive: true });
    writeFileSync(join(models, 'm', 'static-embeddings.f32'), new Uint8Array(400));
    const cache = new StaticEmbeddingsCache(models);
    await expect(cache.forModel('m')).rejects.toThrow(ModelLoadError);
    await expect(cache.forModel('m')).rejects.toThrow(/has 400 bytes, expected 60002800 \(150007 token ids/);
    cpSync(join(MODELS, 'glove-static-100d', 'static-embeddings.f32'), join(models, 'm', 'static-embeddings.f32'));
    expect((await cache.forModel('m'))?.rows).toBe(150007);
  });
});

describe('generationSideInfo', () => {
  const artifact = (sideInfo: boolean) => ({ settings: { sideInfo } }) as unknown as CodecArtifact;
  const deps = (model: string, sideByVersion: Record<number, boolean>) => {
    const asked: number[] = [];
    return {
      asked,
      deps: {
        collections: { get: async () => ({ tenantId: 't', id: 'c', model }) as Collection },
        codecs: { get: async (_t: string, _c: string, v: number) => (asked.push(v), artifact(sideByVersion[v]!)) },
        staticEmbeddings: new StaticEmbeddingsCache(MODELS),
      },
    };
  };

  it('gives a reader only when a segment of the generation was written with side information', async () => {
    const none = deps('glove-ctx-100d', { 1: false, 2: false });
    expect(await generationSideInfo(none.deps)(manifestOf([1, 2, 2]))).toBeUndefined();
    expect(none.asked.sort()).toEqual([1, 2]);
    const mixed = deps('glove-ctx-100d', { 1: false, 2: true });
    const reader = await generationSideInfo(mixed.deps)(manifestOf([1, 2]));
    expect(reader!(0, Int32Array.from([9]))).toHaveLength(100);
  });

  it('fails permanently when the model has no table', async () => {
    const d = deps('test-transformer', { 1: true });
    await expect(generationSideInfo(d.deps)(manifestOf([1]))).rejects.toThrow(PermanentJobError);
  });
});
