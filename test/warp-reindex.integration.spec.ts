import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { indexProcessor, mergeProcessor, type MergeDeps } from '@lateral/pipeline';
import { s3Keys, type Collection, type CollectionManifest } from '@lateral/shared';
import { startServer, type Server } from '../apps/all-in-one/src/server';
import { testConfig, until } from './helpers';
import { mergeDepsFor } from './merge-deps';
import { warpBed } from './warp-bed';

/**
 * Re-indexing an IVF collection to WARP search layouts (POST /v1/collections/{id}/reindex,
 * libs/pipeline/src/maintenance/warp-reindex.ts), through HTTP, queues, S3 and the workers: a
 * collection whose record names no `search` (stored before WARP was the default) is searched
 * through the IVF; the re-index builds every live segment's layout at a new centroid epoch from
 * its codes, and only then does mode xtr run WARP's engine; segments ingested while it runs get
 * their layouts from their index jobs.
 */
describe('re-index to WARP search layouts (real Redis, real S3 server, real ONNX model)', () => {
  let server: Server;
  const config = testConfig({ ENCODE_BATCH_DOCUMENTS: '100', MERGE_AFTER_COMMIT: 'false', RERANK_MAX_WAIT_SECONDS: '300' });
  const { items, api, ingest, search, overlap } = warpBed(() => server);
  const manifest = (collectionId: string) => server.runtime.generations.manifest('default', collectionId) as Promise<CollectionManifest>;
  const record = async (collectionId: string) => (await server.runtime.collections.get('default', collectionId)) as Collection;
  let merge: MergeDeps;

  beforeAll(async () => {
    server = await startServer(config, { quiet: true });
    const rt = server.runtime;
    // The merge job's dependencies, as the worker's handlers build them (for the job run here).
    merge = mergeDepsFor(rt, config);
  }, 180_000);
  afterAll(async () => {
    await server?.stop();
  });

  it('an old record (no `search`) stays on the IVF; POST reindex builds every layout, then xtr runs WARP with the same top 10', async () => {
    expect((await api('POST', '/v1/collections', { id: 'legacy' })).status).toBe(201);
    // The record as stored before WARP became the default: no `search` field at all.
    const { search: _, ...old } = await record('legacy');
    await server.runtime.collections.update(old as Collection);
    expect((await api('GET', '/v1/collections/legacy')).body.search).toBeUndefined();
    await ingest('legacy', items.slice(0, 200));
    const segments = (await manifest('legacy')).segments;
    expect(segments.length).toBe(2);
    for (const s of segments) expect(await server.runtime.store.exists(s3Keys.searchLayout('default', 'legacy', s.batchId, s.codecVersion))).toBe(false);
    const before = await search('legacy', { mode: 'xtr', topK: 10 });
    expect(before.stats?.warp).toBeUndefined();

    // Bad input names the field; an unknown collection is a 404.
    for (const [body, field] of [[{ search: { layout: 'ivf' } }, 'search.layout'], [{ search: { bits: 3 } }, 'search.bits'], [{ search: { layout: 'warp', nprobe: 8 } }, 'search'], [{ layouts: 'warp' }, 'layouts']] as const) {
      const r = await api('POST', '/v1/collections/legacy/reindex', body);
      expect(r.status, JSON.stringify(body)).toBe(400);
      expect(JSON.stringify(r.body)).toContain(field);
    }
    expect((await api('POST', '/v1/collections/nope/reindex', {})).status).toBe(404);

    const asked = await api('POST', '/v1/collections/legacy/reindex', {});
    expect(asked.status, JSON.stringify(asked.body)).toBe(202);
    expect(asked.body).toMatchObject({ collection: 'legacy', search: { layout: 'warp', bits: 4 }, status: '/v1/collections/legacy' });
    // Other bits while it runs (or once it is done): 409.
    expect((await api('POST', '/v1/collections/legacy/reindex', { search: { bits: 2 } })).status).toBe(409);
    await until(async () => (await api('GET', '/v1/collections/legacy')).body.search?.layout === 'warp', 240_000);
    const described = (await api('GET', '/v1/collections/legacy')).body;
    expect(described.search).toEqual({ layout: 'warp', bits: 4 });
    expect(described.reindex).toBeUndefined();

    // Every live segment has its layout at the re-index's epoch (1), committed before the switch.
    const after = await manifest('legacy');
    expect(after.segments.map((s) => s.batchId).sort()).toEqual(segments.map((s) => s.batchId).sort());
    for (const s of after.segments) {
      expect(s.warpEpoch).toBe(1);
      expect(await server.runtime.store.exists(s3Keys.searchLayout('default', 'legacy', s.batchId, s.codecVersion, 1))).toBe(true);
    }
    const warp = await search('legacy', { mode: 'xtr', topK: 10 });
    expect(warp.stats!.warp!.epochs).toBe(1);
    expect(warp.stats!.warp!.segments).toBe(2);
    const agreement = overlap(warp, before);
    console.log(`re-index figures: ${JSON.stringify({ agreement, centroids: warp.stats!.warp!.centroids })}`);
    expect(agreement).toBeGreaterThanOrEqual(0.8);

    // Once WARP, a second re-index is a 409; an ingest afterwards gets its layout from its index job.
    const again = await api('POST', '/v1/collections/legacy/reindex', { search: { bits: 2 } });
    expect(again.status).toBe(409);
    expect(JSON.stringify(again.body)).toContain('already has WARP search layouts');
    await ingest('legacy', items.slice(200, 240));
    const grown = await manifest('legacy');
    expect(grown.segments).toHaveLength(3);
    const fresh = grown.segments.find((s) => !segments.some((x) => x.batchId === s.batchId))!;
    expect(fresh.warpEpoch).toBe(1);
    expect(await server.runtime.store.exists(s3Keys.searchLayout('default', 'legacy', fresh.batchId, fresh.codecVersion, 1))).toBe(true);
    expect((await search('legacy', { mode: 'xtr', topK: 10 })).stats!.warp!.segments).toBe(3);
  }, 600_000);

  it("searches read the IVF until the re-index's last commit; a segment ingested meanwhile gets its layout from its index job", async () => {
    expect((await api('POST', '/v1/collections', { id: 'racing', search: { layout: 'ivf' } })).status).toBe(201);
    await ingest('racing', items.slice(0, 200));
    const read = await manifest('racing');
    // What POST reindex records (the job is run here, with a commit that lets an ingest and a search in first).
    const c = await record('racing');
    await server.runtime.collections.update({ ...c, reindex: { search: { layout: 'warp', bits: 2 }, codecVersion: c.codecVersion, startedAt: new Date().toISOString() } });
    let raced: { stats: unknown; reindex: Collection['reindex'] } | null = null;
    const generations: MergeDeps['generations'] = {
      manifest: (tenantId, id, g) => server.runtime.generations.manifest(tenantId, id, g),
      commit: async (tenantId, id, change) => {
        if (!raced) {
          // Layouts built and the epoch fitted, nothing committed yet: the IVF still answers, and an ingest now writes its layout at the epoch.
          const during = await search('racing', { mode: 'xtr', topK: 10 });
          await ingest('racing', items.slice(200, 240));
          raced = { stats: during.stats?.warp, reindex: (await record('racing')).reindex };
        }
        return server.runtime.generations.commit(tenantId, id, change);
      },
    };
    const out = await mergeProcessor({ ...merge, generations }, { op: 'merge', tenantId: 'default', collectionId: 'racing', trigger: 'reindex' });
    expect(raced).not.toBeNull();
    expect(raced!.stats).toBeUndefined();
    expect(raced!.reindex).toMatchObject({ search: { layout: 'warp', bits: 2 }, epoch: 1 });
    expect(out.reindex).toMatchObject({ status: 'done', bits: 2, epoch: 1, built: read.segments.length, unreadable: [] });
    expect((await record('racing')).search).toEqual({ layout: 'warp', bits: 2 });
    expect((await record('racing')).reindex).toBeUndefined();
    const now = await manifest('racing');
    expect(now.segments).toHaveLength(3);
    for (const s of now.segments) {
      expect(s.warpEpoch).toBe(1);
      expect(await server.runtime.store.exists(s3Keys.searchLayout('default', 'racing', s.batchId, s.codecVersion, 1))).toBe(true);
    }
    const res = await search('racing', { mode: 'xtr', topK: 10 });
    expect(res.stats!.warp!.segments).toBe(3);
    expect(res.stats!.warp!.epochs).toBe(1);

    // An index job that read the record before the switch (no layout to write) and ends after it:
    // it reads the record again and writes the segment's layout at the generation's epoch.
    const seg = now.segments[0];
    const key = s3Keys.searchLayout('default', 'racing', seg.batchId, seg.codecVersion, 1);
    const kept = (await server.runtime.store.get(key))!;
    await server.runtime.store.delete(key);
    const switched = await record('racing');
    let reads = 0;
    const queued: unknown[] = [];
    await indexProcessor(
      {
        ...merge,
        // the first read: the record as it was before the re-index; the second (after the index is written): as it is now
        collections: { get: async () => (reads++ === 0 ? { ...switched, search: { layout: 'ivf' }, reindex: undefined } : switched) },
        queues: { add: async (...args: unknown[]) => (queued.push(args), { id: 'x' }) as never },
      },
      { tenantId: 'default', collectionId: 'racing', ingestionId: null, batchId: seg.batchId, segmentKey: seg.key, codecVersion: seg.codecVersion, documents: seg.documents },
    );
    expect(reads).toBe(2);
    expect(queued).toHaveLength(1);
    const rewritten = await server.runtime.store.get(key);
    expect(rewritten).not.toBeNull();
    expect(Buffer.from(rewritten!).equals(Buffer.from(kept))).toBe(true);
  }, 600_000);
});
