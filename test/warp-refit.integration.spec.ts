import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ivfCentroidCount } from '@lateral/search';
import { QueueName, refitJobId, s3Keys, type CollectionManifest } from '@lateral/shared';
import { DEFAULT_MERGE_POLICY, enqueueWarpRefit, mergeProcessor, refitProcessor, warpRefitDue, type RefitDeps } from '@lateral/pipeline';
import type { ObjectStore } from '@lateral/infra';
import { HANDLED_QUEUES, reconcile, startWorkers } from '@lateral/workers';
import { startServer, type Server } from '../apps/all-in-one/src/server';
import { testConfig, until } from './helpers';
import { mergeDepsFor } from './merge-deps';
import { warpBed } from './warp-bed';

/**
 * WARP refits on their own queue and lease (libs/pipeline/src/maintenance/refit.processor.ts),
 * through real Redis, the S3 server and the ONNX model: a merge commits while a refit is queued and
 * while one is running (its k-means done, its layouts being written), at the generation's current
 * epoch; the refit then commits against the newest generation (the segments it rebuilt were merged
 * away) and moves the merge's output in its next pass. The server runs every queue but the refit
 * queue, so the refit job the merge queues stays queued and this spec runs the processor itself.
 */
describe('WARP refits beside merges (real Redis, real S3 server, real ONNX model)', () => {
  let server: Server;
  const config = testConfig({ ENCODE_BATCH_DOCUMENTS: '100', MERGE_FACTOR: '3', KEEP_GENERATIONS: '1', GC_GRACE_SECONDS: '0', RERANK_MAX_WAIT_SECONDS: '300' });
  const { items, api, ingest, search, overlap } = warpBed(() => server);
  const manifest = () => server.runtime.generations.manifest('default', 'warp') as Promise<CollectionManifest>;

  beforeAll(async () => {
    server = await startServer(config, { quiet: true, queues: HANDLED_QUEUES.filter((q) => q !== QueueName.refit) });
    expect((await api('POST', '/v1/collections', { id: 'warp' })).status).toBe(201);
    await ingest('warp', items);
  }, 400_000);
  afterAll(async () => {
    await server?.stop();
  });

  it('a due refit whose job Redis lost is queued again by the reconciler (an ingestion that has ended commits nothing to ask it)', async () => {
    const rt = server.runtime;
    const id = refitJobId('default', 'warp', 1);
    const refits = rt.queues.get(QueueName.refit);
    // the commits queued it (due: the first fit saw one 100-document segment); lost here as with Redis' data
    await (await refits.getJob(id))?.remove();
    expect(await refits.getJob(id)).toBeUndefined();
    const pass = await reconcile(rt);
    expect(pass.refits).toBe(1);
    expect((await refits.getJob(id))?.data).toMatchObject({ tenantId: 'default', collectionId: 'warp', epoch: 1 });
    // a pass while it is held keeps the one job (its id names the collection and epoch)
    expect((await reconcile(rt)).refits).toBe(1);
    expect((await refits.getJobCounts('waiting')).waiting).toBe(1);
  });

  it('a merge commits while a refit is queued and while one runs; the refit commits on the newest generation and moves the merge output in its next pass', async () => {
    const rt = server.runtime;
    const inputs = (await manifest()).segments;
    expect(inputs).toHaveLength(3);
    expect(inputs.every((s) => (s.warpEpoch ?? 0) === 0)).toBe(true);
    const cv = inputs[0].codecVersion;
    const K0 = (await rt.ivf.get('default', 'warp', cv))!.k;
    const K1 = ivfCentroidCount(inputs.reduce((a, r) => a + r.tokens, 0));
    expect(K1).toBeGreaterThan(K0);
    const collection = (await rt.collections.get('default', 'warp'))!;
    // due: epoch 1 (the first fit saw one 100-document segment)
    expect(await warpRefitDue({ ivf: rt.ivf, ivfCentroids: 0 }, collection, await manifest())).toBe(1);

    // A refit running: its first layout write at epoch 1 is held until the merge has committed.
    let entered!: () => void;
    const inRebuild = new Promise<void>((r) => (entered = r));
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const writes: string[] = [];
    const held: ObjectStore = Object.create(rt.store);
    held.put = async (...args: Parameters<ObjectStore['put']>) => {
      if (args[0].includes('/search-layouts/v1/e1/')) {
        writes.push(args[0]);
        entered();
        await gate;
      }
      return rt.store.put(...args);
    };
    const deps: RefitDeps = { ...mergeDepsFor(rt, config, { store: held }), ivfCentroids: 0, gc: { keepGenerations: 1, graceSeconds: 0 } };
    const running = refitProcessor(deps, { tenantId: 'default', collectionId: 'warp', epoch: 1 });
    await inRebuild;
    // the new epoch is fitted, and no segment names it yet
    expect((await rt.ivf.get('default', 'warp', cv, 1))!.k).toBe(K1);
    expect((await manifest()).segments.every((s) => (s.warpEpoch ?? 0) === 0)).toBe(true);

    // The merge meanwhile: at epoch 0, its inputs' layouts merged list by list; it queues a refit job for epoch 1 (one per collection and epoch).
    const r = await api('POST', '/v1/collections/warp/merge?wait=300');
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    expect(r.body).toMatchObject({ status: 'merged', committed: true, index: 'copied', refit: refitJobId('default', 'warp', 1) });
    const queued = await rt.queues.get(QueueName.refit).getJob(refitJobId('default', 'warp', 1));
    expect(queued?.data).toMatchObject({ tenantId: 'default', collectionId: 'warp', epoch: 1 });
    expect(await enqueueWarpRefit({ collections: rt.collections, generations: rt.generations, ivf: rt.ivf, ivfCentroids: 0 }, rt.queues, 'default', 'warp')).toBe(refitJobId('default', 'warp', 1));
    expect((await rt.queues.get(QueueName.refit).getJobCounts('waiting')).waiting).toBe(1);
    const merged = (await manifest()).segments;
    expect(merged).toHaveLength(1);
    expect(merged[0].warpEpoch ?? 0).toBe(0);
    expect(await rt.store.exists(s3Keys.searchLayout('default', 'warp', merged[0].batchId, cv))).toBe(true);
    // searches read epoch 0 meanwhile
    const body = { mode: { name: 'xtr', nprobe: 65_536 }, topK: 10 };
    const during = await search('warp', body);
    expect(during.stats!.warp).toMatchObject({ segments: 1, centroids: K0, epochs: 1 });

    // The refit goes on: its first pass finds every segment it rebuilt merged away (nothing to move,
    // their epoch-1 layouts removed); its second rebuilds the merge's output and moves it.
    release();
    const out = await running;
    expect(out).toMatchObject({ status: 'done', epoch: 1, centroids: K1, refitted: true, rebuilt: 1, rounds: 2, stale: 0 });
    const after = (await manifest()).segments;
    expect(after).toHaveLength(1);
    expect(after[0]).toMatchObject({ key: merged[0].key, warpEpoch: 1 });
    expect(out.generation).toBe((await manifest()).generation);
    // the first input's layout (held), then, the other inputs' segments being gone with the merge's
    // garbage collection (KEEP_GENERATIONS 1, no grace), the merge's output in the second pass
    expect(writes).toEqual([s3Keys.searchLayout('default', 'warp', inputs[0].batchId, cv, 1), s3Keys.searchLayout('default', 'warp', merged[0].batchId, cv, 1)]);
    for (const old of inputs) {
      expect(await rt.store.exists(s3Keys.searchLayout('default', 'warp', old.batchId, cv, 1))).toBe(false);
      expect(await rt.store.exists(s3Keys.searchLayout('default', 'warp', old.batchId, cv))).toBe(false);
    }
    // the output's epoch-0 layout went to garbage collection (the refit's record, collected at the job's end)
    expect(await rt.store.exists(s3Keys.searchLayout('default', 'warp', merged[0].batchId, cv))).toBe(false);
    expect(await rt.store.exists(s3Keys.searchLayout('default', 'warp', merged[0].batchId, cv, 1))).toBe(true);
    const res = await search('warp', body);
    expect(res.stats!.warp).toMatchObject({ segments: 1, centroids: K1, epochs: 1 });
    expect(overlap(res, during)).toBeGreaterThanOrEqual(0.85);
    // nothing due any more: no refit queued
    expect(await warpRefitDue({ ivf: rt.ivf, ivfCentroids: 0 }, collection, await manifest())).toBeNull();
  }, 600_000);
});

/**
 * Ingest back-pressure (INGEST_WARP_SEGMENTS_FACTOR): a WARP collection whose generation holds more
 * than the factor x MERGE_WARP_MAX_SEGMENTS segments answers an ingest 503 + Retry-After naming the
 * overload, until a merge brings the count back; an IVF collection is not held. The server runs no
 * merge worker, so the merges its commits queue wait and this spec merges when it chooses.
 */
describe('ingest back-pressure on a WARP collection\'s segment count (real Redis, real S3 server)', () => {
  let server: Server;
  const config = testConfig({ ENCODE_BATCH_DOCUMENTS: '2', MERGE_AFTER_COMMIT: 'true', MERGE_WARP_MAX_SEGMENTS: '1', INGEST_WARP_SEGMENTS_FACTOR: '2' });
  const { docs, api, ingest } = warpBed(() => server);
  const batch = (from: number, n: number) => docs.slice(from, from + n).map((d) => ({ id: d.id, text: d.text }));

  beforeAll(async () => {
    server = await startServer(config, { quiet: true, queues: HANDLED_QUEUES.filter((q) => q !== QueueName.merge && q !== QueueName.refit) });
    expect((await api('POST', '/v1/collections', { id: 'bp' })).status).toBe(201);
    expect((await api('POST', '/v1/collections', { id: 'bpivf', search: { layout: 'ivf' } })).status).toBe(201);
  }, 120_000);
  afterAll(async () => {
    await server?.stop();
  });

  it('over twice the bound: 503 with Retry-After naming the segments and the bound, nothing accepted; a merge lets ingest in again', async () => {
    await ingest('bp', batch(0, 6)); // 3 segments of 2 documents: over 2 x 1
    const m = await server.runtime.generations.manifest('default', 'bp');
    expect(m!.segments).toHaveLength(3);
    const refused = await api('POST', '/v1/collections/bp/documents', batch(6, 2));
    expect(refused.status, JSON.stringify(refused.body)).toBe(503);
    expect(refused.headers.get('retry-after')).toBe('10');
    // load, not an outage: the error code says so (a client tells it from Redis or S3 being down)
    expect(refused.body.error).toBe('overloaded');
    expect(refused.body.message).toContain(`collection 'bp' is overloaded: 3 segments at generation ${m!.generation} + 0 batches accepted and not yet committed + this request's 1, over 2 (INGEST_WARP_SEGMENTS_FACTOR 2 x MERGE_WARP_MAX_SEGMENTS 1)`);
    expect((await server.runtime.generations.manifest('default', 'bp'))!.generation).toBe(m!.generation);
    // the IVF collection is not bound by WARP's segment count
    await ingest('bpivf', batch(0, 6));
    await ingest('bpivf', batch(6, 2));
    expect((await server.runtime.generations.manifest('default', 'bpivf'))!.segments).toHaveLength(4);
    // a merge for the bound: one segment, and ingest is accepted again
    const merged = await mergeProcessor({ ...mergeDepsFor(server.runtime, config), policy: { ...DEFAULT_MERGE_POLICY, maxSegments: 1 } }, { op: 'merge', tenantId: 'default', collectionId: 'bp', trigger: 'api' });
    expect(merged.merged).toMatchObject({ status: 'merged', reason: 'segments' });
    await ingest('bp', batch(6, 2));
    expect((await server.runtime.generations.manifest('default', 'bp'))!.segments).toHaveLength(2);
  }, 300_000);
});

/**
 * Ingest back-pressure counts the batches accepted and not yet committed (issue 32: a 100,000-document
 * run peaked at 63 segments against a bound of 24, the batches accepted before the first 503 landing
 * after it). The server runs no commit worker at first, so accepted batches stay in flight; a commit
 * worker started later lands them. Bound: 2 x 2 = 4 segments, one per 2-document batch.
 */
describe('ingest back-pressure counts batches in flight (real Redis, real S3 server)', () => {
  let server: Server;
  const config = testConfig({ ENCODE_BATCH_DOCUMENTS: '2', MERGE_AFTER_COMMIT: 'true', MERGE_WARP_MAX_SEGMENTS: '2', INGEST_WARP_SEGMENTS_FACTOR: '2', COMPUTE_THREADS: '0' });
  const { docs, api } = warpBed(() => server);
  const batch = (from: number, n: number) => docs.slice(from, from + n).map((d) => ({ id: d.id, text: d.text }));
  const manifest = () => server.runtime.generations.manifest('default', 'fl');
  const inFlight = () => server.runtime.ingestBacklog.inFlight('default', 'fl');

  beforeAll(async () => {
    server = await startServer(config, { quiet: true, queues: HANDLED_QUEUES.filter((q) => q !== QueueName.merge && q !== QueueName.refit && q !== QueueName.commit) });
    expect((await api('POST', '/v1/collections', { id: 'fl' })).status).toBe(201);
  }, 120_000);
  afterAll(async () => {
    await server?.stop();
  });

  it('refuses once committed + in flight + the request pass the bound; concurrent requests never take the count past it', async () => {
    // nothing committed: 2 + 2 batches in flight fill the bound of 4
    expect((await api('POST', '/v1/collections/fl/documents', batch(0, 4))).status).toBe(202);
    expect((await api('POST', '/v1/collections/fl/documents', batch(4, 4))).status).toBe(202);
    expect(await inFlight()).toBe(4);
    // the old check (committed segments only: 0) let this in; the segments would then have passed the bound
    const refused = await api('POST', '/v1/collections/fl/documents', batch(8, 2));
    expect(refused.status, JSON.stringify(refused.body)).toBe(503);
    expect(refused.headers.get('retry-after')).toBe('10');
    expect(refused.body.message).toContain("collection 'fl' is overloaded: 0 segments at generation 0 + 4 batches accepted and not yet committed + this request's 1, over 4 (INGEST_WARP_SEGMENTS_FACTOR 2 x MERGE_WARP_MAX_SEGMENTS 2)");
    expect(await inFlight()).toBe(4); // a refused request reserves nothing

    // a commit worker lands the four batches: each leaves the backlog as its commit is made
    const committer = startWorkers(server.runtime, [QueueName.commit]);
    try {
      await until(async () => (await manifest())?.segments.length === 4 && (await inFlight()) === 0, 180_000);
      const full = await api('POST', '/v1/collections/fl/documents', batch(8, 2));
      expect(full.status).toBe(503);
      expect(full.body.message).toContain(`4 segments at generation ${(await manifest())!.generation} + 0 batches accepted and not yet committed + this request's 1, over 4`);

      // a merge to one segment leaves room for 3 batches: of 5 concurrent one-batch requests exactly 3 are admitted (atomic in Redis)
      const merged = await mergeProcessor({ ...mergeDepsFor(server.runtime, config), policy: { ...DEFAULT_MERGE_POLICY, maxSegments: 1 } }, { op: 'merge', tenantId: 'default', collectionId: 'fl', trigger: 'api' });
      expect(merged.merged).toMatchObject({ status: 'merged', reason: 'segments' });
      expect((await manifest())!.segments).toHaveLength(1);
      const answers = await Promise.all([0, 1, 2, 3, 4].map((i) => api('POST', '/v1/collections/fl/documents', batch(10 + 2 * i, 2))));
      expect(answers.map((a) => a.status).sort()).toEqual([202, 202, 202, 503, 503]);
      // every admitted batch lands, and the count stays within the bound all the way
      let peak = 0;
      await until(async () => {
        const m = await manifest();
        peak = Math.max(peak, m!.segments.length);
        return m!.segments.length === 4 && (await inFlight()) === 0;
      }, 180_000, 50);
      expect(peak).toBe(4);
      const accepted = answers.filter((a) => a.status === 202);
      for (const a of accepted) expect((await api('GET', a.body.status)).body.state).toBe('done');
    } finally {
      await committer.close();
    }
  }, 400_000);

  it('a batch that fails for good leaves the count (the workers\' final-failure hook): it will never become a segment', async () => {
    // room again: the first case left the bound's 4 segments
    const merged = await mergeProcessor({ ...mergeDepsFor(server.runtime, config), policy: { ...DEFAULT_MERGE_POLICY, maxSegments: 1 } }, { op: 'merge', tenantId: 'default', collectionId: 'fl', trigger: 'api' });
    expect(merged.merged).toMatchObject({ status: 'merged' });
    const encode = server.runtime.queues.get(QueueName.encode);
    await encode.pause();
    let status = '';
    try {
      const ing = await api('POST', '/v1/collections/fl/documents', batch(20, 2));
      expect(ing.status, JSON.stringify(ing.body)).toBe(202);
      status = ing.body.status;
      expect(await inFlight()).toBe(1);
      // its accepted documents vanish from S3 before the encode: every attempt fails, and the last is final
      await server.runtime.store.delete(s3Keys.batchDocuments('default', 'fl', `${ing.body.ingestionId}-00000`));
    } finally {
      await encode.resume();
    }
    const failed = await until(async () => {
      const s = (await api('GET', status)).body;
      return s.state === 'failed' ? s : null;
    }, 180_000, 200);
    expect(failed.stages).toMatchObject({ accepted: 2, encoded: 0, failed: 2 });
    // the hook removes the batch before it records the failure the status reports
    expect(await inFlight()).toBe(0);
  }, 240_000);
});
