import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { redisKeys, type Collection, type SegmentRef } from '@lateral/shared';
import { startEmbeddedRedis, startEmbeddedS3, type EmbeddedRedis, type EmbeddedS3 } from './embedded-services';
import { CollectionRepository } from './collection.repository';
import { GenerationRepository } from './generations.repository';
import { ObjectStore } from './object-store';
import { ServingCache } from './serving-cache';

/**
 * The serving cache (issue 31 item 2) against a real redis-server and s3rver: a writer process and
 * two reader processes (separate clients and repositories), every read after an acknowledged
 * change sees it (read-your-writes), through ingest commits, deletes (tombstone commits),
 * re-compressions (a commit plus a record update), a collection deleted and created again, and a
 * Redis that lost its data.
 */
const BUCKET = 'serving-cache-test';
const CREDS = { accessKeyId: 'S3RVER', secretAccessKey: 'S3RVER' };
const PREFIX = 'sc';
let dir: string;
let s3: EmbeddedS3;
let redisServer: EmbeddedRedis;
const clients: Redis[] = [];
const stores: ObjectStore[] = [];

/** One process's view: its own S3 and Redis clients, repositories (with the bump hooks, as createRuntime wires them) and cache. */
function processView() {
  const store = new ObjectStore(BUCKET, { endpoint: s3.endpoint, region: 'us-east-1', forcePathStyle: true, ...CREDS });
  const redis = new Redis(redisServer.url);
  stores.push(store);
  clients.push(redis);
  const bump = (tenantId: string, collectionId: string) => ServingCache.bump(redis, PREFIX, tenantId, collectionId);
  const collections = new CollectionRepository(store, bump);
  const generations = new GenerationRepository(store, { onCommit: bump, backoffMs: 5 });
  // Counts S3 reads of the record and manifest, to tell cached reads from S3 reads.
  const loads = { collection: 0, manifest: 0 };
  const serving = new ServingCache(
    redis,
    PREFIX,
    { get: (tenantId, collectionId) => (loads.collection++, collections.get(tenantId, collectionId)) },
    { manifest: (tenantId, collectionId) => (loads.manifest++, generations.manifest(tenantId, collectionId)) },
  );
  return { store, redis, collections, generations, serving, loads };
}

const ref = (batchId: string, codecVersion = 1): SegmentRef => ({ batchId, codecVersion, key: `seg/${batchId}`, documents: 1, tokens: 10, bytes: 100, checksum: '00000000' });
const collection = (id: string, codecVersion = 1): Collection => ({ tenantId: 't', id, model: 'glove-ctx-100d', codecVersion, createdAt: new Date().toISOString() }) as unknown as Collection;

beforeAll(async () => {
  dir = mkdtempSync(path.join(os.tmpdir(), 'lateral-serving-cache-'));
  s3 = await startEmbeddedS3({ dir: path.join(dir, 's3'), bucket: BUCKET, ...CREDS });
  redisServer = await startEmbeddedRedis({ dir: path.join(dir, 'redis') });
});
afterAll(async () => {
  for (const c of clients) c.disconnect();
  for (const s of stores) s.destroy();
  await s3?.stop();
  await redisServer?.stop();
  rmSync(dir, { recursive: true, force: true });
});

describe('ServingCache (real Redis and S3)', () => {
  it('reads S3 once while nothing changes, and every reader sees each acknowledged ingest, delete and re-compression at once', async () => {
    const writer = processView();
    const readers = [processView(), processView()];
    expect(await writer.collections.create(collection('c'))).toBe(true);
    for (const r of readers) {
      expect((await r.serving.collection('t', 'c'))?.id).toBe('c');
      expect(await r.serving.manifest('t', 'c')).toBeNull();
    }
    // Ingest: each commit is seen by the next read of every reader.
    for (let i = 1; i <= 3; i++) {
      const done = await writer.generations.commit('t', 'c', (segs) => ({ segments: [...segs, ref(`b${i}`)], codecVersion: 1 }));
      expect(done.manifest.generation).toBe(i);
      for (const r of readers) expect((await r.serving.manifest('t', 'c'))?.generation).toBe(i);
    }
    // Nothing changes: further reads come from memory (no S3 read), and copies (a caller may mutate its own).
    await readers[0].serving.collection('t', 'c');
    const before = { ...readers[0].loads };
    for (let i = 0; i < 5; i++) {
      const m = await readers[0].serving.manifest('t', 'c');
      expect(m?.segments).toHaveLength(3);
      m!.segments.length = 0;
      expect((await readers[0].serving.collection('t', 'c'))?.id).toBe('c');
    }
    expect(readers[0].loads).toEqual(before);
    // A delete commits tombstones: the next generation, seen at once.
    await writer.generations.commit('t', 'c', (segs) => ({ segments: segs.map((s) => (s.batchId === 'b1' ? { ...s, tombstones: [0] } : s)), codecVersion: 1 }));
    for (const r of readers) expect((await r.serving.manifest('t', 'c'))?.generation).toBe(4);
    // A re-compression: segments of codec 2 committed, then the record's codec version updated.
    await writer.generations.commit('t', 'c', () => ({ segments: [ref('b1', 2), ref('b2', 2), ref('b3', 2)], codecVersion: 2 }));
    await writer.collections.update(collection('c', 2));
    for (const r of readers) {
      expect((await r.serving.manifest('t', 'c'))?.codecVersion).toBe(2);
      expect((await r.serving.collection('t', 'c'))?.codecVersion).toBe(2);
    }
    // A replayed commit (nothing new) still tells the caches: a process that died between its
    // S3 write and its bump is covered by the job's retry.
    expect((await writer.generations.commit('t', 'c', () => null)).committed).toBe(false);
  });

  it('a deleted collection reads as gone at once, and one created again under the same id as new', async () => {
    const writer = processView();
    const reader = processView();
    await writer.collections.create(collection('d'));
    await writer.generations.commit('t', 'd', () => ({ segments: [ref('x1'), ref('x2')], codecVersion: 1 }));
    expect((await reader.serving.manifest('t', 'd'))?.segments).toHaveLength(2);
    await writer.collections.delete('t', 'd');
    expect(await reader.serving.collection('t', 'd')).toBeNull();
    expect(await reader.serving.manifest('t', 'd')).toBeNull();
    writer.generations.forget('t', 'd');
    await writer.collections.create(collection('d'));
    await writer.generations.commit('t', 'd', () => ({ segments: [ref('y1')], codecVersion: 1 }));
    expect((await reader.serving.collection('t', 'd'))?.id).toBe('d');
    const m = await reader.serving.manifest('t', 'd');
    expect(m?.segments.map((s) => s.batchId)).toEqual(['y1']);
  });

  it('a Redis that lost its data (FLUSHALL) never makes an old entry look current', async () => {
    const writer = processView();
    const reader = processView();
    await writer.collections.create(collection('f'));
    await writer.generations.commit('t', 'f', () => ({ segments: [ref('f1')], codecVersion: 1 }));
    expect((await reader.serving.manifest('t', 'f'))?.generation).toBe(1);
    await writer.redis.flushall();
    // Written while Redis had lost the token, and after: both seen.
    await writer.generations.commit('t', 'f', (segs) => ({ segments: [...segs, ref('f2')], codecVersion: 1 }));
    expect((await reader.serving.manifest('t', 'f'))?.generation).toBe(2);
    await writer.redis.del(redisKeys.servingVersion(PREFIX, 't', 'f'));
    expect((await reader.serving.manifest('t', 'f'))?.generation).toBe(2);
    await writer.generations.commit('t', 'f', (segs) => ({ segments: [...segs, ref('f3')], codecVersion: 1 }));
    expect((await reader.serving.manifest('t', 'f'))?.generation).toBe(3);
  });

  it('reads S3 directly (uncached, still correct) when Redis does not answer', async () => {
    const writer = processView();
    await writer.collections.create(collection('r'));
    await writer.generations.commit('t', 'r', () => ({ segments: [ref('r1')], codecVersion: 1 }));
    const store = writer.store;
    const down = { get: () => Promise.reject(new Error('connection refused')), set: () => Promise.reject(new Error('connection refused')) };
    const reader = new ServingCache(down as never, PREFIX, new CollectionRepository(store), new GenerationRepository(store));
    expect((await reader.manifest('t', 'r'))?.generation).toBe(1);
    await writer.generations.commit('t', 'r', (segs) => ({ segments: [...segs, ref('r2')], codecVersion: 1 }));
    expect((await reader.manifest('t', 'r'))?.generation).toBe(2);
    expect((await reader.collection('t', 'r'))?.id).toBe('r');
  });
});
