import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { segmentShard } from '@lateral/shared';
import { startServer, type Server } from '../apps/all-in-one/src/server';
import { testConfig } from './helpers';
import { warpBed, type WarpSpecResult } from './warp-bed';

type Result = WarpSpecResult;

/**
 * Where WARP's engine serves besides plain mode xtr (issue 32): hybrid's xtr part, and collections
 * of several shards (the exact global merge: every shard imputes with the collection-wide list
 * sizes gathered in the first round). Through HTTP, queues, S3 and the workers of the all-in-one
 * server (it holds every shard and runs the shard queues, so a 2-shard search fans out for real).
 *
 * Three collections of the same 300 Cranfield documents, fp16 vectors (no codec fitted per
 * collection), posted as 100 then 200 so every collection's first index job fits its centroids
 * and WARP codec on the same first segment: `plain` (the IVF path), `warp` (1 shard) and `warp2`
 * (2 shards), both `search: { layout: 'warp', bits: 4 }`.
 */
describe('WARP for hybrid and for sharded collections (real Redis, real S3 server, real ONNX model)', () => {
  let server: Server;
  const config = testConfig({ ENCODE_BATCH_DOCUMENTS: '100', RERANK_MAX_WAIT_SECONDS: '300' });
  const { docs, yearOf, items, ingest, search, overlap, api } = warpBed(() => server);
  const ids = (r: Result) => r.results.map((q) => q.hits.map((h) => h.id));
  const scores = (r: Result) => r.results.map((q) => q.hits.map((h) => h.score));

  beforeAll(async () => {
    server = await startServer(config, { quiet: true });
    for (const [id, extra] of [['plain', { search: { layout: 'ivf' } }], ['warp', { search: { layout: 'warp', bits: 4 } }], ['warp2', { search: { layout: 'warp', bits: 4 }, shards: 2 }]] as const) {
      const c = await api('POST', '/v1/collections', { id, codec: { kind: 'fp16' }, ...extra });
      expect(c.status, JSON.stringify(c.body)).toBe(201);
      await ingest(id, items.slice(0, 100));
      await ingest(id, items.slice(100));
    }
  }, 600_000);
  afterAll(async () => {
    await server?.stop();
  });

  it("hybrid's xtr part runs WARP: the fusion of WARP's token list with BM25's, and close to the IVF path's hybrid", async () => {
    const depth = 30;
    const rrf = await search('warp', { mode: { name: 'hybrid', base: 'xtr', fusion: 'rrf', depth }, topK: 20 });
    const w = rrf.stats?.warp;
    expect(w, 'hybrid on a WARP collection reads the layouts').toBeDefined();
    expect(w!.segments).toBe(3);
    for (const q of w!.queries) expect(q.bytesRead).toBeGreaterThan(0);
    // Its two parts, asked for alone (the same depth): hybrid RRF must be exactly their fusion.
    const xtr = await search('warp', { mode: { name: 'xtr' }, topK: depth });
    const bm25 = await search('warp', { mode: 'bm25', topK: depth });
    rrf.results.forEach((r, qi) => {
      const local = new Map<string, number>();
      for (const list of [xtr.results[qi].hits, bm25.results[qi].hits]) list.forEach((h, rank) => local.set(h.id, (local.get(h.id) ?? 0) + 1 / (60 + rank + 1)));
      const expected = [...local.values()].sort((a, b) => b - a).slice(0, 20);
      expect(r.hits.map((h) => h.score), r.queryId).toEqual(expected.map((x) => expect.closeTo(x, 12)));
      for (const h of r.hits) {
        expect(h.scoredBy).toBe('hybrid');
        expect(h.score).toBeCloseTo(local.get(h.id)!, 12);
      }
    });
    // Linear fusion (the default), against the IVF path's hybrid of the same documents.
    const linear = await search('warp', { mode: { name: 'hybrid' }, topK: 10 });
    const plainLinear = await search('plain', { mode: { name: 'hybrid' }, topK: 10 });
    expect(linear.stats?.warp).toBeDefined();
    expect(plainLinear.stats).toBeUndefined();
    const agreement = overlap(linear, plainLinear);
    console.log(`hybrid top-10 overlap WARP vs IVF: ${agreement}`);
    expect(agreement).toBeGreaterThanOrEqual(0.7);
    // A filter applies to both parts.
    const filter = { must: [{ key: 'year', range: { lte: 1952 } }] };
    const kept = new Set(docs.filter((_, i) => yearOf(i) <= 1952).map((d) => d.id));
    const filtered = await search('warp', { mode: { name: 'hybrid' }, topK: 10, filter });
    for (const r of filtered.results) for (const h of r.hits) expect(kept.has(h.id)).toBe(true);
  }, 300_000);

  it('explain keeps the IVF path (it names the document token behind each score)', async () => {
    const r = await search('warp', { mode: { name: 'xtr' }, topK: 3, explain: true });
    expect(r.stats).toBeUndefined();
    for (const q of r.results) for (const h of q.hits) expect(h.explain?.length).toBeGreaterThan(0);
  }, 300_000);

  it('a 2-shard WARP collection answers exactly what the 1-shard one does (global list sizes, exact merge), xtr and hybrid', async () => {
    const m2 = (await server.runtime.generations.manifest('default', 'warp2'))!;
    const perShard = [0, 0];
    for (const s of m2.segments) perShard[segmentShard(s, 2)] += s.documents;
    expect(perShard[0]).toBeGreaterThan(0);
    expect(perShard[1]).toBeGreaterThan(0);
    // The same centroids (fitted on the same first segment): WARP's scores are then those of one process.
    const c1 = (await server.runtime.ivf.get('default', 'warp', m2.codecVersion))!;
    const c2 = (await server.runtime.ivf.get('default', 'warp2', m2.codecVersion))!;
    expect(c2.k).toBe(c1.k);
    expect(Buffer.from(c2.centroids.buffer).equals(Buffer.from(c1.centroids.buffer)), 'both collections fitted the same centroids').toBe(true);
    for (const body of [
      { mode: { name: 'xtr' }, topK: 20 },
      { mode: { name: 'xtr', nprobe: 4 }, topK: 20 },
      { mode: { name: 'hybrid', depth: 40 }, topK: 15 },
      { mode: { name: 'xtr' }, topK: 10, filter: { must: [{ key: 'year', range: { gte: 1955 } }] } },
    ]) {
      const one = await search('warp', body);
      const two = await search('warp2', body);
      const label = JSON.stringify(body);
      expect(two.stats?.warp, label).toBeDefined();
      expect(two.stats!.warp!.segments, label).toBe(m2.segments.length);
      expect(two.degraded, label).toBeUndefined();
      expect(scores(two), label).toEqual(scores(one).map((q) => q.map((s) => expect.closeTo(s, 9))));
      // ids equal up to the order of equal scores
      two.results.forEach((q, qi) => expect(new Set(q.hits.map((h) => h.id)), label).toEqual(new Set(one.results[qi].hits.map((h) => h.id))));
      // every shard read its own segments' probed lists: together as much as the one shard's scan
      two.stats!.warp!.queries.forEach((q, qi) => expect(q.bytesRead, label).toBe(one.stats!.warp!.queries[qi].bytesRead));
    }
    expect(ids(await search('warp2', { mode: { name: 'xtr' }, topK: 5 })).every((q) => q.length === 5)).toBe(true);
    // The exact final stage on shards: each shard sends the exact scores of its first `exact` hits beside WARP's, the parent merges
    // by WARP's scores and orders the merged first `exact` by the exact ones: one process's answer (the stage off, the same too).
    for (const body of [{ mode: { name: 'xtr', exact: 20 }, topK: 20 }, { mode: { name: 'xtr', exact: 8 }, topK: 20 }, { mode: { name: 'xtr', exact: 0 }, topK: 20 }, { mode: { name: 'hybrid', depth: 40, exact: 16 }, topK: 15 }]) {
      const one = await search('warp', body);
      const two = await search('warp2', body);
      const label = JSON.stringify(body);
      expect(two.degraded, label).toBeUndefined();
      expect(scores(two), label).toEqual(scores(one).map((q) => q.map((s) => expect.closeTo(s, 5))));
      two.results.forEach((q, qi) => expect(new Set(q.hits.map((h) => h.id)), label).toEqual(new Set(one.results[qi].hits.map((h) => h.id))));
    }
  }, 400_000);
});
