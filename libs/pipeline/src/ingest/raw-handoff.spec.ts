import { describe, expect, it } from 'vitest';
import { s3Keys } from '@lateral/shared';
import { RawHandoff, isRawVectorsKey } from './raw-handoff';

/** An in-memory store that counts its reads. */
function memoryStore() {
  const objects = new Map<string, Uint8Array | string>();
  const reads: string[] = [];
  return {
    objects,
    reads,
    put: async (key: string, body: Uint8Array | string) => void objects.set(key, body),
    get: async (key: string) => {
      reads.push(key);
      const v = objects.get(key);
      return v === undefined ? null : typeof v === 'string' ? new TextEncoder().encode(v) : v;
    },
  };
}

const rawKey = (batch: string) => s3Keys.rawVectors('t1', 'c1', batch);

describe('raw handoff (encode -> compress in one process)', () => {
  it('knows raw vectors keys from the other objects of a batch', () => {
    expect(isRawVectorsKey(rawKey('ing-1-00000'))).toBe(true);
    expect(isRawVectorsKey(s3Keys.segment('t1', 'c1', 'ing-1-00000', 1))).toBe(false);
    expect(isRawVectorsKey(s3Keys.batchDocuments('t1', 'c1', 'ing-1-00000'))).toBe(false);
    expect(isRawVectorsKey(s3Keys.segmentHead('t1', 'c1', 'ing-1-00000', 1))).toBe(false);
  });

  it('writes the raw batch to the store, and hands its bytes to the first read instead of reading the store; later reads go to the store', async () => {
    const store = memoryStore();
    const h = new RawHandoff();
    const view = h.view(store);
    const bytes = new Uint8Array([1, 2, 3, 4]);
    await view.put(rawKey('b1'), bytes);
    expect(store.objects.get(rawKey('b1'))).toBe(bytes);
    expect(h.bytes).toBe(4);
    expect(await view.get(rawKey('b1'))).toBe(bytes);
    expect(store.reads).toEqual([]);
    expect(h.bytes).toBe(0);
    // taken once: a retried compress job reads S3
    expect(await view.get(rawKey('b1'))).toEqual(bytes);
    expect(store.reads).toEqual([rawKey('b1')]);
  });

  it('keeps nothing but raw batches (strings and other keys are only written)', async () => {
    const store = memoryStore();
    const h = new RawHandoff();
    const view = h.view(store);
    await view.put(s3Keys.segment('t1', 'c1', 'b1', 1), new Uint8Array(8));
    await view.put(rawKey('b2'), 'text');
    expect(h.bytes).toBe(0);
    await view.get(s3Keys.segment('t1', 'c1', 'b1', 1));
    expect(store.reads).toHaveLength(1);
  });

  it('a failed write keeps nothing', async () => {
    const h = new RawHandoff();
    const view = h.view({ put: async () => Promise.reject(new Error('S3 down')), get: async () => null });
    await expect(view.put(rawKey('b1'), new Uint8Array(4))).rejects.toThrow('S3 down');
    expect(h.bytes).toBe(0);
  });

  it('holds at most maxBytes (oldest dropped first; a batch larger than the bound is not held) and for at most maxAgeMs', async () => {
    const store = memoryStore();
    let now = 0;
    const h = new RawHandoff(10, 1000, () => now);
    const view = h.view(store);
    await view.put(rawKey('a'), new Uint8Array(4));
    await view.put(rawKey('b'), new Uint8Array(4));
    await view.put(rawKey('c'), new Uint8Array(4)); // a dropped
    expect(h.bytes).toBe(8);
    await view.put(rawKey('big'), new Uint8Array(11));
    expect(h.bytes).toBe(8);
    await view.get(rawKey('a'));
    await view.get(rawKey('big'));
    expect(store.reads).toEqual([rawKey('a'), rawKey('big')]);
    now = 1001; // b and c expired
    await view.get(rawKey('b'));
    expect(store.reads).toEqual([rawKey('a'), rawKey('big'), rawKey('b')]);
    expect(h.bytes).toBe(0);
    // a batch written again replaces what was held under its key
    now = 2000;
    await view.put(rawKey('d'), new Uint8Array(4));
    const again = new Uint8Array(6);
    await view.put(rawKey('d'), again);
    expect(h.bytes).toBe(6);
    expect(await view.get(rawKey('d'))).toBe(again);
  });
});
