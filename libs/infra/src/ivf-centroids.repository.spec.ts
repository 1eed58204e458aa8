import { describe, expect, it } from 'vitest';
import { s3Keys } from '@lateral/shared';
import { IvfCentroidRepository, serializeIvfCentroids } from './ivf-centroids.repository';

/** An object store in memory that counts what it was asked for. */
function store() {
  const objects = new Map<string, Uint8Array>();
  const calls = { get: 0, getRange: 0 };
  return {
    objects,
    calls,
    get: async (key: string) => {
      calls.get++;
      return objects.get(key) ?? null;
    },
    getRange: async (key: string, offset: number, length: number) => {
      calls.getRange++;
      return objects.get(key)?.slice(offset, offset + length) ?? null;
    },
    putIfAbsent: async (key: string, bytes: Uint8Array) => {
      if (objects.has(key)) return false;
      objects.set(key, bytes);
      return true;
    },
  };
}

describe('IvfCentroidRepository.count', () => {
  const centroids = (k: number, dims: number) => ({ k, dims, centroids: new Float32Array(k * dims).fill(0.5) });

  it('reads k from the header alone (one 16-byte ranged read, never the centroids), keeps it, and answers null while none are written', async () => {
    const s = store();
    const repo = new IvfCentroidRepository(s);
    expect(await repo.count('t', 'c', 1, 2)).toBeNull();
    s.objects.set(s3Keys.ivfCentroids('t', 'c', 1, 2), serializeIvfCentroids(centroids(300, 8)));
    expect(await repo.count('t', 'c', 1, 2)).toBe(300); // a missing object is not kept as missing
    expect(await repo.count('t', 'c', 1, 2)).toBe(300);
    expect(s.calls).toEqual({ get: 0, getRange: 2 });
    expect(await repo.count('t', 'c', 1, 0)).toBeNull(); // another epoch
  });

  it('answers from centroids the process holds, without a read; forget drops the count with them', async () => {
    const s = store();
    const repo = new IvfCentroidRepository(s);
    await repo.ensure('t', 'c', 1, () => centroids(64, 4));
    const reads = { ...s.calls };
    expect(await repo.count('t', 'c', 1)).toBe(64);
    expect(s.calls).toEqual(reads);
    repo.forget('t', 'c');
    s.objects.clear();
    expect(await repo.count('t', 'c', 1)).toBeNull();
  });

  it('refuses an object that is not a centroids header, naming it', async () => {
    const s = store();
    s.objects.set(s3Keys.ivfCentroids('t', 'c', 1, 0), new Uint8Array(32));
    await expect(new IvfCentroidRepository(s).count('t', 'c', 1)).rejects.toThrow(`IVF centroids ${s3Keys.ivfCentroids('t', 'c', 1, 0)}: bad header`);
  });
});
