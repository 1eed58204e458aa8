import { mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startEmbeddedRedis, type EmbeddedRedis } from '@lateral/infra';
import { QueueName, s3Keys, type CollectionManifest } from '@lateral/shared';
import { startServer, type Server } from '../apps/all-in-one/src/server';
import { loadCranfield } from '../scripts/lib/cranfield';
import { http, testConfig, until } from './helpers';

/**
 * S3 is the one source of truth: a Redis that restarts empty (FLUSHALL) loses queues and caches
 * only. After a restart on the emptied Redis, every collection is listed again, re-ranking returns
 * the same ranking, old ingestions still report done, re-creating a collection is a 409, and new
 * ingestions commit the next generations without overwriting any manifest (a WARP refit due at the
 * restart commits its own generations beside them, moving segments to a later centroid epoch).
 */
describe('recovery from an emptied Redis (real Redis of its own, real S3 server)', () => {
  let redis: EmbeddedRedis;
  let server: Server | undefined;
  const cran = loadCranfield(path.resolve('data/cranfield'));
  let config: ReturnType<typeof testConfig>;

  /** Waits until the refit queue holds no job (a finished refit queues the next epoch before it ends, so an empty queue is a settled one). */
  const refitsSettled = () =>
    until(async () => {
      const c = await server!.runtime.queues.get(QueueName.refit).getJobCounts('waiting', 'active', 'delayed', 'prioritized');
      return c.waiting + c.active + c.delayed + c.prioritized === 0;
    }, 120_000, 200);

  beforeAll(async () => {
    // A Redis of this file's own: FLUSHALL must not touch the other files' queues.
    redis = await startEmbeddedRedis({ dir: mkdtempSync(path.join(os.tmpdir(), 'lateral-recovery-redis-')) });
    config = testConfig({ REDIS_URL: redis.url, ENCODE_BATCH_DOCUMENTS: '64' });
  });
  afterAll(async () => {
    await server?.stop();
    await redis?.stop();
  });

  const api = (method: string, url: string, body?: unknown) => http(server!.url, method, url, body);
  const waitDone = (status: string) =>
    until(async () => {
      const s = await api('GET', status);
      return s.body.state === 'done' ? s.body : s.body.state === 'failed' ? Promise.reject(new Error(JSON.stringify(s.body))) : null;
    }, 120_000);
  const docs = cran.docs.slice(0, 200);
  const queries = cran.queries.slice(0, 3);
  const rerank = async (collection: string) => {
    const rr = await api('POST', '/v1/rerank?wait=60', {
      collection,
      queries: queries.map((q) => ({ id: q.id, text: q.text, candidates: docs.map((d) => d.id) })),
      scorer: 'maxsim',
      topK: 50,
    });
    expect(rr.body.status).toBe('completed');
    return rr.body.result.results as { queryId: string; hits: { id: string; score: number }[] }[];
  };

  it('lists every collection, re-ranks the same, and continues at the next generation after FLUSHALL and a restart', async () => {
    server = await startServer(config, { quiet: true });
    const names = ['alpha', 'beta', 'gamma'];
    for (const id of names) expect((await api('POST', '/v1/collections', { id })).status).toBe(201);
    const ing = await api('POST', '/v1/collections/alpha/documents', docs.map((d) => ({ id: d.id, text: d.text })));
    expect(ing.body.batches).toBe(4);
    await waitDone(ing.body.status);
    await waitDone((await api('POST', '/v1/collections/beta/documents', [{ id: 'b1', text: 'heat transfer in a laminar boundary layer' }])).body.status);
    // With MERGE_AFTER_COMMIT off (testConfig) no commit asks for a WARP refit: four commits, four generations.
    const before = await api('GET', '/v1/collections/alpha');
    expect(before.body).toMatchObject({ documents: 200, generation: 4, segments: 4 });
    const g0 = 4;
    const ranked = await rerank('alpha');

    await server.stop();
    server = undefined;
    const client = new Redis(redis.url);
    await client.flushall();
    expect(await client.dbsize()).toBe(0);
    client.disconnect();

    const t0 = Date.now();
    server = await startServer(config, { quiet: true });
    const list = await api('GET', '/v1/collections');
    const recoverMs = Date.now() - t0;
    expect(list.status).toBe(200);
    expect(list.body.collections.map((c: { id: string }) => c.id)).toEqual(names);
    const after = await api('GET', '/v1/collections/alpha');
    expect(after.body).toMatchObject({ documents: 200, generation: g0, segments: 4 });
    expect(after.body.stages).toMatchObject({ accepted: 200, encoded: 200, compressed: 200, indexed: 200, failed: 0 });
    const old = await api('GET', ing.body.status);
    expect(old.body).toMatchObject({ state: 'done', stages: { accepted: 200, indexed: 200 } });
    expect(await rerank('alpha')).toEqual(ranked);
    expect((await api('POST', '/v1/collections', { id: 'alpha' })).status).toBe(409);

    // Eight single-document ingestions continue at generations g0 + 1..; no manifest is overwritten.
    const firstManifest = await server.runtime.store.getJson(s3Keys.manifest(config.DEFAULT_TENANT, 'alpha', 1));
    for (let i = 0; i < 8; i++) {
      const one = await api('POST', '/v1/collections/alpha/documents', [{ id: `new-${i}`, text: `supersonic flutter of a swept wing, case ${i}` }]);
      expect(one.status).toBe(202);
      await waitDone(one.body.status);
    }
    // A WARP refit due at the restart is asked by the reconciler's first pass (with MERGE_AFTER_COMMIT
    // off nothing else asks it: docs/storage.md) and commits generations of its own between the
    // ingestions, each moving segments to a later centroid epoch and adding none: waited out, its
    // commits counted below.
    await refitsSettled();
    const grown = await api('GET', '/v1/collections/alpha');
    expect(grown.body).toMatchObject({ documents: 208, segments: 12 });
    const last: number = grown.body.generation;
    const manifests = await server.runtime.store.list(s3Keys.manifestPrefix(config.DEFAULT_TENANT, 'alpha'));
    expect(manifests).toHaveLength(last);
    expect(await server.runtime.store.getJson(s3Keys.manifest(config.DEFAULT_TENANT, 'alpha', 1))).toEqual(firstManifest);
    // Generations g0 + 1..last: the eight ingestions' commits (one segment appended each, the others kept)
    // and the refit's (the same segments, some at a later epoch); nothing else.
    const manifestAt = async (g: number) => (await server!.runtime.generations.manifest(config.DEFAULT_TENANT, 'alpha', g))!;
    const batches = (m: CollectionManifest) => m.segments.map((r) => r.batchId);
    let ingests = 0;
    let refitCommits = 0;
    for (let g = g0 + 1, prev = await manifestAt(g0); g <= last; g++) {
      const cur = await manifestAt(g);
      if (cur.segments.length === prev.segments.length + 1) {
        expect(batches(cur).slice(0, -1)).toEqual(batches(prev));
        ingests++;
      } else {
        expect(batches(cur)).toEqual(batches(prev));
        expect(cur.segments.some((r, i) => (r.warpEpoch ?? 0) > (prev.segments[i]!.warpEpoch ?? 0))).toBe(true);
        refitCommits++;
      }
      prev = cur;
    }
    expect(ingests).toBe(8);
    expect(last).toBe(g0 + 8 + refitCommits);
    // every segment object of generation g0 is still listed in the last generation, unchanged
    const same = (m: CollectionManifest) => m.segments.slice(0, 4).map((r) => ({ batchId: r.batchId, key: r.key, checksum: r.checksum, documents: r.documents }));
    expect(same(await manifestAt(last))).toEqual(same(await manifestAt(g0)));
    console.log(`recovery: 3 collections and 200 + 1 documents listed ${recoverMs} ms after the restart on an emptied Redis; generation ${g0} before the restart, ${refitCommits} refit commit(s) beside the 8 ingestions after it`);
  });
});
