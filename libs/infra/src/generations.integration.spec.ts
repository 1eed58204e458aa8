import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { s3Keys, type SegmentRef } from '@lateral/shared';
import { startEmbeddedS3, type EmbeddedS3 } from './embedded-services';
import { GenerationRepository } from './generations.repository';
import { ObjectStore } from './object-store';

/** Generations committed by conditional writes on a real s3rver over HTTP (its own server). */
const BUCKET = 'generations-test';
const CREDS = { accessKeyId: 'S3RVER', secretAccessKey: 'S3RVER' };
let dir: string;
let s3: EmbeddedS3;
const stores: ObjectStore[] = [];
const newStore = () => {
  const s = new ObjectStore(BUCKET, { endpoint: s3.endpoint, region: 'us-east-1', forcePathStyle: true, ...CREDS });
  stores.push(s);
  return s;
};
const ref = (batchId: string): SegmentRef => ({ batchId, codecVersion: 1, key: `seg/${batchId}`, documents: 1, tokens: 10, bytes: 100, checksum: '00000000' });
const add = (batchId: string) => (segments: SegmentRef[]) => (segments.some((s) => s.batchId === batchId) ? null : { segments: [...segments, ref(batchId)], codecVersion: 1 });

beforeAll(async () => {
  dir = mkdtempSync(path.join(os.tmpdir(), 'lateral-generations-'));
  s3 = await startEmbeddedS3({ dir, bucket: BUCKET, ...CREDS });
});
afterAll(async () => {
  for (const s of stores) s.destroy();
  await s3?.stop();
  rmSync(dir, { recursive: true, force: true });
});

describe('GenerationRepository', () => {
  it('three committers (separate clients, as separate processes) never write one generation twice and lose no change', async () => {
    const repos = [0, 1, 2].map(() => new GenerationRepository(newStore(), { backoffMs: 5 }));
    const results = await Promise.all(repos.flatMap((r, i) => [0, 1, 2, 3].map((k) => r.commit('t', 'race', add(`b${i}-${k}`)))));
    expect(results.every((x) => x.committed)).toBe(true);
    expect(new Set(results.map((x) => x.manifest.generation)).size).toBe(12);
    const fresh = new GenerationRepository(newStore());
    expect(await fresh.current('t', 'race')).toBe(12);
    const last = await fresh.manifest('t', 'race');
    expect(last!.segments.map((s) => s.batchId).sort()).toEqual(repos.flatMap((_, i) => [0, 1, 2, 3].map((k) => `b${i}-${k}`)).sort());
    // every generation is the previous one plus exactly one segment
    for (let g = 2; g <= 12; g++) {
      const prev = (await fresh.manifest('t', 'race', g - 1))!.segments;
      const cur = (await fresh.manifest('t', 'race', g))!.segments;
      expect(cur.slice(0, prev.length)).toEqual(prev);
      expect(cur).toHaveLength(prev.length + 1);
    }
  });

  it('a replayed change writes no generation', async () => {
    const repo = new GenerationRepository(newStore());
    expect((await repo.commit('t', 'replay', add('a'))).committed).toBe(true);
    const again = await repo.commit('t', 'replay', add('a'));
    expect(again).toMatchObject({ committed: false, manifest: { generation: 1 } });
    expect(await newStore().list(s3Keys.manifestPrefix('t', 'replay'))).toHaveLength(1);
  });

  it('an S3 error during a commit leaves the previous generation current; the retry commits the next one', async () => {
    const store = newStore();
    const repo = new GenerationRepository(store);
    await repo.commit('t', 'faulty', add('a'));
    const failing = Object.create(store) as ObjectStore;
    failing.putJsonIfAbsent = async () => {
      throw new Error('writing s3://generations-test/...: connect ECONNREFUSED');
    };
    await expect(new GenerationRepository(failing).commit('t', 'faulty', add('b'))).rejects.toThrow(/ECONNREFUSED/);
    expect(await repo.current('t', 'faulty')).toBe(1);
    const retried = await new GenerationRepository(store).commit('t', 'faulty', add('b'));
    expect(retried.manifest).toMatchObject({ generation: 2, segments: [{ batchId: 'a' }, { batchId: 'b' }] });
  });

  it('finds the current generation past what it remembered, and starts over after a delete', async () => {
    const a = new GenerationRepository(newStore());
    const b = new GenerationRepository(newStore());
    await a.commit('t', 'moving', add('x'));
    expect(await b.current('t', 'moving')).toBe(1);
    await a.commit('t', 'moving', add('y'));
    await a.commit('t', 'moving', add('z'));
    expect(await b.current('t', 'moving')).toBe(3);
    await newStore().deletePrefix(s3Keys.collectionPrefix('t', 'moving'));
    await a.commit('t', 'moving', add('fresh')); // a remembered 3: it must notice the collection is new
    const m = await b.manifest('t', 'moving');
    expect(m).toMatchObject({ generation: 1, segments: [{ batchId: 'fresh' }] });
  });
});
