import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readSegment } from '@lateral/codec';
import { ivfCentroidCount, parseWarpDirectory, warpDirectoryBytes } from '@lateral/search';
import { WARP_DEFAULT_NPROBE, refitJobId, s3Keys, type CollectionManifest } from '@lateral/shared';
import { startServer, type Server } from '../apps/all-in-one/src/server';
import { testConfig, until } from './helpers';
import { warpBed } from './warp-bed';

/**
 * Mode xtr on a collection created with the default search layout (`search: { layout: 'warp' }`) runs WARP's engine over the
 * segments' centroid-major search layouts (written by the index job), through HTTP, queues, S3
 * and the workers: its top 10 agrees with XTR over the segment index of a plain collection (`layout: 'ivf'`) of the
 * same documents, each query reads only its probed lists' bytes (stats.warp), and a corrupt
 * layout is named like a corrupt segment (the degraded answer, the rest served).
 */
describe('WARP search layouts (real Redis, real S3 server, real ONNX model)', () => {
  let server: Server;
  // Merges on request only (MERGE_AFTER_COMMIT false), of 3 segments; garbage collected at once.
  // A merge that refits waits up to 300 s (RERANK_MAX_WAIT_SECONDS bounds `wait`): k-means and assignment on a loaded 2-core machine.
  const config = testConfig({ ENCODE_BATCH_DOCUMENTS: '100', MERGE_FACTOR: '3', KEEP_GENERATIONS: '1', GC_GRACE_SECONDS: '0', RERANK_MAX_WAIT_SECONDS: '300' });
  const { docs, yearOf, items, queries, api, ingest, search, overlap } = warpBed(() => server);
  const manifest = (collectionId: string) => server.runtime.generations.manifest('default', collectionId) as Promise<CollectionManifest>;

  beforeAll(async () => {
    server = await startServer(config, { quiet: true });
    expect((await api('POST', '/v1/collections', { id: 'plain', search: { layout: 'ivf' } })).status).toBe(201);
    // WARP at 4 bits is the default of a new collection
    const created = await api('POST', '/v1/collections', { id: 'warp' });
    expect(created.status).toBe(201);
    expect((created.body as { search?: unknown }).search).toEqual({ layout: 'warp', bits: 4 });
    await ingest('plain', items);
    await ingest('warp', items);
  }, 400_000);
  afterAll(async () => {
    await server?.stop();
  });

  it("refuses bad search layout settings with a 400 naming the field; 'ivf' writes no layouts", async () => {
    for (const [search, field] of [[{ layout: 'warp', bits: 3 }, 'search.bits'], [{ layout: 'plaid' }, 'search.layout'], [{ layout: 'ivf', bits: 4 }, 'search.bits']] as const) {
      const r = await api('POST', '/v1/collections', { id: 'bad', search });
      expect(r.status).toBe(400);
      expect(JSON.stringify(r.body)).toContain(field);
    }
    const bad = await api('POST', '/v1/search', { collection: 'warp', queries, mode: { name: 'xtr', nprobe: 0 } });
    expect(bad.status).toBe(400);
    expect(JSON.stringify(bad.body)).toContain('nprobe');
    for (const [mode, field] of [[{ name: 'xtr', exact: -1 }, 'exact'], [{ name: 'xtr', exact: 1001 }, 'exact'], [{ name: 'hybrid', exact: -1 }, 'exact'], [{ name: 'xtr', tPrime: 0 }, 'tPrime'], [{ name: 'xtr', tPrime: 1.5 }, 'tPrime']] as const) {
      const r = await api('POST', '/v1/search', { collection: 'warp', queries, mode });
      expect(r.status).toBe(400);
      expect(JSON.stringify(r.body)).toContain(field);
    }
    // an 'ivf' collection has no layouts; every segment of the warp one has one, beside its index
    const plain = await manifest('plain');
    for (const ref of plain.segments) expect(await server.runtime.store.exists(s3Keys.searchLayout('default', 'plain', ref.batchId, ref.codecVersion))).toBe(false);
    expect((await search('plain', { mode: 'xtr' })).stats).toBeUndefined();
    // A WARP layout's own nprobe default where the request names none (the plain collection's IVF keeps 32).
    const def = await search('warp', { mode: 'xtr' });
    expect(def.stats!.warp!.nprobe).toBe(Math.min(WARP_DEFAULT_NPROBE, def.stats!.warp!.centroids));
    expect((await search('warp', { mode: { name: 'xtr', nprobe: 3 } })).stats!.warp!.nprobe).toBe(3);
  });

  it('WARP top 10 agrees with XTR over the plain collection; each query reads only its probed lists', async () => {
    const m = await manifest('warp');
    expect(m.segments.length).toBe(3);
    let layoutBytes = 0;
    let directoryBytes = 0;
    for (const ref of m.segments) {
      const key = s3Keys.searchLayout('default', 'warp', ref.batchId, ref.codecVersion);
      const bytes = (await server.runtime.store.get(key))!;
      const dir = parseWarpDirectory(bytes, key, { documents: ref.documents, bits: 4 });
      expect(dir.byteLength).toBe(bytes.byteLength);
      expect(dir.tokens).toBe(ref.tokens);
      layoutBytes += bytes.byteLength;
      directoryBytes += warpDirectoryBytes(dir.centroidCount);
    }
    const K = (await server.runtime.ivf.get('default', 'warp', m.codecVersion))!.k;
    // every list probed: WARP scores every token from its packed residual (no imputation)
    const all = await search('warp', { mode: { name: 'xtr', nprobe: 65_536 }, topK: 10 });
    const reference = await search('plain', { mode: { name: 'xtr', kPrime: 100_000, nprobe: 65_536 }, topK: 10 });
    const exhaustive = await search('plain', { mode: 'exhaustive', topK: 10 });
    const plainDefault = await search('plain', { mode: 'xtr', topK: 10 });
    const probed = await search('warp', { mode: { name: 'xtr', nprobe: 32 }, topK: 10 });
    const figures = {
      K,
      layoutBytes,
      directoryBytes,
      'overlap(warp nprobe=K, plain xtr exact)': overlap(all, reference),
      'overlap(warp nprobe=K, exhaustive)': overlap(all, exhaustive),
      'overlap(warp nprobe=32, plain xtr exact)': overlap(probed, reference),
      'overlap(warp nprobe=32, plain xtr default)': overlap(probed, plainDefault),
      'overlap(plain xtr default, plain xtr exact)': overlap(plainDefault, reference),
      'bytesRead nprobe=K (per query)': all.stats!.warp!.queries.map((q) => q.bytesRead),
      'bytesRead nprobe=32 (per query)': probed.stats!.warp!.queries.map((q) => q.bytesRead),
      'ranges nprobe=32 (per query)': probed.stats!.warp!.queries.map((q) => q.ranges),
      // search job time for the 10 queries (ms; a busy 2-core machine: indicative only)
      searchMs: { warpAll: all.timings.searchMs, warp32: probed.timings.searchMs, plainExact: reference.timings.searchMs, plainDefault: plainDefault.timings.searchMs, exhaustive: exhaustive.timings.searchMs },
    };
    console.log(`warp figures: ${JSON.stringify(figures)}`);
    for (const r of [...all.results, ...probed.results]) {
      expect(r.hits).toHaveLength(10);
      expect(r.hits[0].scoredBy).toBe('xtr');
    }
    expect(figures['overlap(warp nprobe=K, plain xtr exact)']).toBeGreaterThanOrEqual(0.8);
    expect(figures['overlap(warp nprobe=32, plain xtr exact)']).toBeGreaterThanOrEqual(0.7);
    for (const res of [all, probed]) {
      const w = res.stats!.warp!;
      expect(w).toMatchObject({ segments: 3, layoutBytes });
      expect(res.degraded).toBeUndefined();
      for (const q of w.queries) {
        expect(q.bytesRead).toBeGreaterThan(0);
        // lists only: never the directory, never more than the lists of the three objects
        expect(q.bytesRead).toBeLessThanOrEqual(layoutBytes - directoryBytes);
      }
    }
    expect(all.stats!.warp!.nprobe).toBe(K);
    // The exact final stage: WARP's top 10 (exact: 0) re-scored by MaxSim / n and ranked by it; tPrime changes only the imputation.
    const raw = await search('warp', { mode: { name: 'xtr', nprobe: 32, exact: 0 }, topK: 10 });
    const exact = await search('warp', { mode: { name: 'xtr', nprobe: 32, exact: 10 }, topK: 10 });
    const tp = await search('warp', { mode: { name: 'xtr', nprobe: 32, exact: 0, tPrime: 5 }, topK: 10 });
    raw.results.forEach((r, qi) => {
      const e = exact.results[qi].hits;
      expect(new Set(e.map((h) => h.id))).toEqual(new Set(r.hits.map((h) => h.id)));
      for (let k = 1; k < e.length; k++) expect(e[k].score).toBeLessThanOrEqual(e[k - 1].score);
      expect(e.every((h) => h.scoredBy === 'xtr')).toBe(true);
      expect(tp.results[qi].hits).toHaveLength(10);
    });
    // The exact stage reads the candidates' rows where the scan found them (SegmentCache.documentRows), not through the
    // re-rank stage's view: its scores equal that stage's MaxSim / n (the second stage over WARP's top 10, scorer maxsim normalised).
    const viewed = await search('warp', { mode: { name: 'xtr', nprobe: 32, exact: 0 }, topK: 10, rerank: { depth: 10, scorer: { name: 'maxsim', normalize: true } } });
    viewed.results.forEach((r, qi) => {
      const byId = new Map(exact.results[qi].hits.map((h) => [h.id, h.score]));
      expect(r.hits).toHaveLength(10);
      for (const h of r.hits) expect(byId.get(h.id)).toBeCloseTo(h.score, 5);
    });
    // Hybrid's token part goes through the same stage before the fusion: with every hit of the part re-scored (exact = depth),
    // the fused list is that of hybrid over exact XTR's scores; the stage off by default changes nothing.
    const hybridRaw = await search('warp', { mode: { name: 'hybrid', nprobe: 32, depth: 10, exact: 0, lambda: 0 }, topK: 10 });
    const hybridExact = await search('warp', { mode: { name: 'hybrid', nprobe: 32, depth: 10, exact: 10, lambda: 0 }, topK: 10 });
    hybridExact.results.forEach((r, qi) => {
      // lambda 0, minmax: the order is the token part's (its last hit normalises to 0 and ties with BM25-only hits, so the first 9).
      expect(r.hits.slice(0, 9).map((h) => h.id)).toEqual(exact.results[qi].hits.slice(0, 9).map((h) => h.id));
      expect(hybridRaw.results[qi].hits.slice(0, 9).map((h) => h.id)).toEqual(raw.results[qi].hits.slice(0, 9).map((h) => h.id));
    });
    // A filter: WARP's engine with each segment's mask (no fallback to the IVF path), the same documents as plain XTR's filtered search.
    const filter = { must: [{ key: 'year', range: { lte: 1952 } }] };
    const kept = new Set(docs.filter((_, i) => yearOf(i) <= 1952).map((d) => d.id));
    const wf = await search('warp', { mode: { name: 'xtr', nprobe: 65_536 }, topK: 10, filter });
    const pf = await search('plain', { mode: { name: 'xtr', kPrime: 100_000, nprobe: 65_536 }, topK: 10, filter });
    expect(wf.stats?.warp).toBeDefined();
    for (const r of wf.results) {
      expect(r.hits).toHaveLength(10);
      for (const h of r.hits) expect(kept.has(h.id)).toBe(true);
    }
    expect(overlap(wf, pf)).toBeGreaterThanOrEqual(0.8);
    // a probe reads a fraction of the lists
    for (const q of probed.stats!.warp!.queries) expect(q.bytesRead).toBeLessThan(0.65 * (layoutBytes - directoryBytes)); // measured 30-54 % (300 documents, K 1,024: many small lists)
   }, 300_000); // five searches of 10 queries, exhaustive and exact XTR among them: over a minute on a loaded machine

  it("a merge job merges at the current epoch, then queues a refit job (its own queue) that refits the centroids as the collection grew (PLAID's rule on its live tokens) and moves every layout to the new epoch; garbage collection removes the old layouts", async () => {
    const gone = docs[5].id;
    expect((await api('DELETE', `/v1/collections/warp/documents/${encodeURIComponent(gone)}`)).status).toBe(200);
    const inputs = (await manifest('warp')).segments;
    const cv = inputs[0].codecVersion;
    const K0 = (await server.runtime.ivf.get('default', 'warp', cv))!.k;
    const tokens = inputs.reduce((a, r) => a + r.tokens, 0);
    // the first fit saw one 100-document segment; the three hold enough tokens for more centroids
    const K1 = ivfCentroidCount(tokens);
    expect(K1).toBeGreaterThan(K0);
    const body = { mode: { name: 'xtr', nprobe: 65_536 }, topK: 10 };
    const before = await search('warp', body);
    const r = await api('POST', '/v1/collections/warp/merge?wait=300');
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    // the merge ran at epoch 0 (the inputs' layouts merged list by list) and named the refit it queued
    expect(r.body).toMatchObject({ status: 'merged', committed: true, dropped: 1, refit: refitJobId('default', 'warp', 1) });
    const mergedRef = (await manifest('warp')).segments[0];
    // the refit job, on the refit queue: done once the generation's one segment is at epoch 1
    await until(async () => (await manifest('warp')).segments[0]?.warpEpoch === 1, 300_000);
    expect((await server.runtime.ivf.get('default', 'warp', cv, 1))!.k).toBe(K1);
    expect(await server.runtime.warpCodecs.get('default', 'warp', cv, 1)).not.toBeNull();
    const after = await manifest('warp');
    expect(after.segments).toHaveLength(1);
    const ref = after.segments[0];
    expect(ref.key).toBe(mergedRef.key);
    expect(ref.warpEpoch).toBe(1);
    const key = s3Keys.searchLayout('default', 'warp', ref.batchId, ref.codecVersion, 1);
    expect(key).toContain('/search-layouts/v1/e1/');
    const dir = parseWarpDirectory((await server.runtime.store.get(key))!, key, { documents: ref.documents, centroidCount: K1 });
    expect(dir).toMatchObject({ documents: docs.length - 1, tokens: ref.tokens });
    // the inputs' layouts are gone (the merge's record), and so is the merged segment's of epoch 0 (the refit's record, collected by the refit job)
    await until(async () => !(await server.runtime.store.exists(s3Keys.searchLayout('default', 'warp', ref.batchId, ref.codecVersion))), 30_000);
    for (const old of inputs) {
      expect(await server.runtime.store.exists(s3Keys.searchLayout('default', 'warp', old.batchId, old.codecVersion))).toBe(false);
      expect(await server.runtime.store.exists(s3Keys.searchLayout('default', 'warp', old.batchId, old.codecVersion, 1))).toBe(false);
    }
    // every list probed: the same documents' scores from residuals against other centroids, close to before
    const res = await search('warp', body);
    expect(res.stats!.warp).toMatchObject({ segments: 1, centroids: K1, epochs: 1, nprobe: K1 });
    for (const q of res.results) expect(q.hits.map((h) => h.id)).not.toContain(gone);
    const kept = { ...before, results: before.results.map((q) => ({ ...q, hits: q.hits.filter((h) => h.id !== gone) })) };
    expect(overlap(res, kept)).toBeGreaterThanOrEqual(0.85);
    const probed = await search('warp', { mode: { name: 'xtr', nprobe: 32 }, topK: 10 });
    const reference = await search('plain', { mode: { name: 'xtr', kPrime: 100_000, nprobe: 65_536 }, topK: 10 });
    console.log(`warp refit figures: ${JSON.stringify({ K0, K1, tokens, 'overlap(refit all, before)': overlap(res, kept), 'overlap(refit nprobe=32, plain xtr exact)': overlap(probed, reference), bytesRead32: probed.stats!.warp!.queries.map((q) => q.bytesRead) })}`);
    expect(overlap(probed, reference)).toBeGreaterThanOrEqual(0.7);

    // A segment ingested after the refit is indexed at the new epoch (no rebuild needed).
    await ingest('warp', [{ id: 'after-refit', text: docs[5].text }]);
    const grown = (await manifest('warp')).segments;
    const added = grown.find((s) => s.batchId !== ref.batchId)!;
    expect(added.warpEpoch).toBe(1);
    expect(await server.runtime.store.exists(s3Keys.searchLayout('default', 'warp', added.batchId, added.codecVersion, 1))).toBe(true);
    expect(await server.runtime.store.exists(s3Keys.searchLayout('default', 'warp', added.batchId, added.codecVersion))).toBe(false);
    const found = await search('warp', { mode: { name: 'xtr', nprobe: 32 }, topK: 10, queries: [{ id: 'q', text: docs[5].text }] });
    expect(found.results[0].hits[0].id).toBe('after-refit');
    expect(found.stats!.warp).toMatchObject({ segments: 2, epochs: 1 });
  }, 600_000);

  it('a corrupt layout is named like a corrupt segment: the degraded answer from the other segments; a merge rebuilds it', async () => {
    expect((await api('POST', '/v1/collections', { id: 'warpbad', search: { layout: 'warp', bits: 2 } })).status).toBe(201);
    await ingest('warpbad', docs.slice(0, 200).map((d) => ({ id: d.id, text: d.text })));
    const m = await manifest('warpbad');
    expect(m.segments.length).toBe(2);
    const bad = m.segments[1];
    const key = s3Keys.searchLayout('default', 'warpbad', bad.batchId, bad.codecVersion);
    const bytes = new Uint8Array((await server.runtime.store.get(key))!);
    const dir = parseWarpDirectory(bytes, key);
    // one byte of the largest list flipped: the directory still reads, that list's range does not
    let c = 0;
    for (let i = 1; i < dir.centroidCount; i++) if (dir.counts[i] > dir.counts[c]) c = i;
    bytes[dir.offsets[c] + 1] ^= 0xff;
    await server.runtime.store.put(key, bytes);
    const res = await search('warpbad', { mode: { name: 'xtr', nprobe: 65_536 }, topK: 10 });
    expect(res.degraded).toBe(true);
    expect(res.unavailableSegments).toEqual([expect.objectContaining({ key, segment: bad.key, object: 'index', reason: expect.stringMatching(new RegExp(`list ${c}`)), documents: bad.documents })]);
    // the documents of the corrupt segment (batches commit in any order)
    const badIds = new Set(readSegment((await server.runtime.store.get(bad.key))!, bad.key, await server.runtime.codecs.get('default', 'warpbad', bad.codecVersion)).docIds);
    expect(badIds.size).toBe(bad.documents);
    for (const r of res.results) {
      expect(r.hits.length).toBeGreaterThan(0);
      for (const h of r.hits) expect(badIds.has(h.id)).toBe(false);
    }
    expect(res.stats!.warp!.segments).toBe(2);

    // A merge reads every input layout whole: the corrupt one is refused and the merged segment's layout rebuilt from its vectors.
    await ingest('warpbad', docs.slice(200, 300).map((d) => ({ id: d.id, text: d.text })));
    const r = await api('POST', '/v1/collections/warpbad/merge?wait=300');
    expect(r.body).toMatchObject({ status: 'merged', committed: true });
    const merged = (await manifest('warpbad')).segments;
    expect(merged).toHaveLength(1);
    const healed = await search('warpbad', { mode: { name: 'xtr', nprobe: 65_536 }, topK: 10 });
    expect(healed.degraded).toBeUndefined();
    expect(healed.stats!.warp!.segments).toBe(1);
    expect(healed.results.some((q) => q.hits.some((h) => badIds.has(h.id)))).toBe(true);
  }, 600_000);
});
