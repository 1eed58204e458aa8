import { mkdtempSync, readdirSync, statSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseWarpDirectory } from '@lateral/search';
import { s3Keys, type CollectionManifest, type WarpSearchStats } from '@lateral/shared';
import { startServer, type Server } from '../apps/all-in-one/src/server';
import { loadCranfield } from '../scripts/lib/cranfield';
import { http, testConfig, until } from './helpers';

type Result = {
  results: { queryId: string; hits: { id: string; score: number }[] }[];
  stats?: { warp?: WarpSearchStats };
  degraded?: true;
  unavailableSegments?: { key: string; object: string; segment: string; reason: string }[];
};

/**
 * A scorer with an empty disk and memory (a new pod) answers a WARP search by ranged GETs of the
 * probed lists (real Redis, real S3 server, the real worker and read path; SCORER_WARP_WHOLE_BYTES 0
 * so these small layouts are read as large ones are, and SCORER_WARP_RANGE_GAP_BYTES 0 since their
 * lists are a few hundred bytes: the default gap would join most of them), never fetching a layout whole, and returns
 * the same hits as a warm scorer. The warm scorer's second search reads nothing (hot lists).
 */
describe('WARP layouts read by ranges on a cold scorer (real Redis, real S3 server)', () => {
  const diskA = mkdtempSync(path.join(os.tmpdir(), 'lateral-warp-disk-a-'));
  const diskB = mkdtempSync(path.join(os.tmpdir(), 'lateral-warp-disk-b-'));
  const config = testConfig({ ENCODE_BATCH_DOCUMENTS: '100', SCORER_WARP_WHOLE_BYTES: '0', SCORER_WARP_RANGE_GAP_BYTES: '0', SCORER_DISK_CACHE_DIR: diskA, RERANK_MAX_WAIT_SECONDS: '300' });
  const cran = loadCranfield(path.resolve('data/cranfield'));
  const docs = cran.docs.filter((d) => d.text.length > 0).slice(0, 200);
  const queries = cran.queries.slice(0, 6).map((q) => ({ id: q.id, text: q.text }));
  let server: Server;
  const api = (method: string, url: string, body?: unknown) => http(server.url, method, url, body);
  const search = async (nprobe = 16): Promise<Result> => {
    const r = await api('POST', '/v1/search?wait=240', { collection: 'w', queries, mode: { name: 'xtr', nprobe }, topK: 10 });
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    expect(r.body.status, JSON.stringify(r.body)).toBe('completed');
    return r.body.result as Result;
  };

  beforeAll(async () => {
    server = await startServer(config, { quiet: true });
    expect((await api('POST', '/v1/collections', { id: 'w', search: { layout: 'warp', bits: 4 } })).status).toBe(201);
    const ing = await api('POST', '/v1/collections/w/documents', docs.map((d) => ({ id: d.id, text: d.text })));
    expect(ing.status, JSON.stringify(ing.body)).toBe(202);
    await until(async () => (await api('GET', ing.body.status)).body.state === 'done', 240_000);
  }, 300_000);
  afterAll(async () => {
    await server?.stop();
  });

  it('the same hits cold and warm; the cold scorer fetched list ranges (sparse copies), not whole layouts; warm reads nothing', async () => {
    const m = (await server.runtime.generations.manifest('default', 'w')) as CollectionManifest;
    expect(m.segments.length).toBe(2);
    const layoutSizes = new Set<number>();
    for (const ref of m.segments) layoutSizes.add((await server.runtime.store.get(s3Keys.searchLayout('default', 'w', ref.batchId, ref.codecVersion, ref.warpEpoch ?? 0)))!.byteLength);

    const first = await search();
    const warm = await search();
    expect(warm.results).toEqual(first.results);
    for (const q of warm.stats!.warp!.queries) expect([q.bytesFetched, q.ranges]).toEqual([0, 0]); // every probed list in memory
    for (const q of first.stats!.warp!.queries) expect(q.bytesRead).toBeGreaterThan(0);

    // A new scorer over an empty disk folder and an empty memory: the same S3 and Redis.
    await server.stop();
    server = await startServer({ ...config, SCORER_DISK_CACHE_DIR: diskB }, { quiet: true });
    const cold = await search();
    expect(cold.degraded).toBeUndefined();
    expect(cold.results).toEqual(warm.results);
    const w = cold.stats!.warp!;
    const listBytes = w.layoutBytes - w.segments * (w.centroids * 8 + 64);
    let fetched = 0;
    for (const q of w.queries) {
      expect(q.ranges).toBeGreaterThan(0);
      expect(q.bytesFetched).toBeGreaterThan(0);
      fetched += q.bytesFetched;
    }
    // six queries of 16 probes fetched a part of the lists (each list fetched once, kept in memory after)
    expect(fetched).toBeLessThan(listBytes);
    // On disk: sparse copies (.part) of the layouts, never a whole copy of one.
    const files = readdirSync(diskB).map((n) => ({ n, size: statSync(path.join(diskB, n)).size }));
    expect(files.filter((f) => f.n.endsWith('.part')).length).toBe(2);
    for (const f of files.filter((x) => x.n.endsWith('.obj'))) expect(layoutSizes.has(f.size)).toBe(false);
  }, 600_000);
  it('a corrupt list range fetched by a ranged GET is named like a corrupt segment (the list and its bytes): the degraded answer from the other segment', async () => {
    const m = (await server.runtime.generations.manifest('default', 'w')) as CollectionManifest;
    const bad = m.segments[0];
    const key = s3Keys.searchLayout('default', 'w', bad.batchId, bad.codecVersion, bad.warpEpoch ?? 0);
    const bytes = new Uint8Array((await server.runtime.store.get(key))!);
    const dir = parseWarpDirectory(bytes, key);
    let c = 0;
    for (let i = 1; i < dir.centroidCount; i++) if (dir.counts[i] > dir.counts[c]) c = i;
    bytes[dir.offsets[c] + 2] ^= 0x40;
    await server.runtime.store.put(key, bytes);
    // a new scorer (the previous one holds the good lists in memory), every list probed so list c is read
    await server.stop();
    const diskC = mkdtempSync(path.join(os.tmpdir(), 'lateral-warp-disk-c-'));
    server = await startServer({ ...config, SCORER_DISK_CACHE_DIR: diskC }, { quiet: true });
    const res = await search(65_536);
    expect(res.degraded).toBe(true);
    expect(res.unavailableSegments).toEqual([
      expect.objectContaining({ key, object: 'index', segment: bad.key, reason: expect.stringContaining(`corrupt in section "list ${c}": checksum mismatch in bytes ${dir.offsets[c]}..${dir.offsets[c + 1]}`) }),
    ]);
    for (const r of res.results) expect(r.hits.length).toBeGreaterThan(0);
    // read by ranges here too: no whole copy of the layout on disk
    for (const n of readdirSync(diskC).filter((x) => x.endsWith('.obj'))) expect(statSync(path.join(diskC, n)).size).not.toBe(bytes.byteLength);
  }, 600_000);
});
