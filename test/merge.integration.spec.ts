import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readSegment } from '@lateral/codec';
import { DEFAULT_MERGE_POLICY, commitProcessor, gcKeys, mergeProcessor, segmentObjects, type MergeDeps } from '@lateral/pipeline';
import { Job } from 'bullmq';
import { withRedisLease } from '@lateral/infra';
import { QueueName, mergeJobId, s3Keys, type CollectionManifest, type SegmentRef } from '@lateral/shared';
import { startServer, type Server } from '../apps/all-in-one/src/server';
import { loadCranfield } from '../scripts/lib/cranfield';
import { http, testConfig, until } from './helpers';
import { mergeDepsFor } from './merge-deps';

/**
 * Merges through the service (issue 10 item 3): several small ingests, deletes and a replaced id,
 * then POST /v1/collections/{id}/merge: one segment instead of several, the same re-rank and
 * exhaustive-search results (ids and scores) as before, deleted and superseded copies gone. Then
 * the two races, with the merge job's processor run here on the service's S3 and Redis and the
 * racing operation (a delete; an ingest of a new id and of an id held by an input) committed
 * through the service between the merge reading its inputs and its commit.
 */
describe('merge (real Redis, real S3 server, real ONNX model)', () => {
  let server: Server;
  const config = testConfig({ ENCODE_BATCH_DOCUMENTS: '10', MERGE_FACTOR: '4', MERGE_AFTER_COMMIT: 'false' });
  const cran = loadCranfield(path.resolve('data/cranfield'));
  const docs = cran.docs.filter((d) => d.text.length > 0).slice(0, 80);
  let merge: MergeDeps;

  const api = (method: string, url: string, body?: unknown) => http(server.url, method, url, body);
  const ingest = async (collectionId: string, items: { id: string; text: string; metadata?: Record<string, unknown> }[]) => {
    const ing = await api('POST', `/v1/collections/${collectionId}/documents`, items);
    expect(ing.status, JSON.stringify(ing.body)).toBe(202);
    await until(async () => (await api('GET', ing.body.status)).body.state === 'done', 120_000);
    return ing.body.status as string;
  };
  const rerank = async (collectionId: string, candidates: string[], text: string) => {
    const r = await api('POST', '/v1/rerank?wait=60', { collection: collectionId, scorer: 'maxsim', topK: 1000, queries: [{ id: 'q', text, candidates }] });
    expect(r.body.status, JSON.stringify(r.body)).toBe('completed');
    return r.body.result.results[0] as { hits: { id: string; score: number }[]; missing: string[] };
  };
  const search = async (collectionId: string, mode: string, text: string) => {
    const r = await api('POST', '/v1/search?wait=60', { collection: collectionId, mode, topK: 1000, queries: [{ id: 'q', text }] });
    expect(r.body.status, JSON.stringify(r.body)).toBe('completed');
    return r.body.result.results[0].hits as { id: string; score: number }[];
  };
  const manifest = async (collectionId: string) => (await server.runtime.generations.manifest('default', collectionId)) as CollectionManifest;
  const del = async (collectionId: string, id: string) => {
    const r = await api('DELETE', `/v1/collections/${collectionId}/documents/${encodeURIComponent(id)}`);
    expect(r.status, JSON.stringify(r.body)).toBe(200);
  };
  /** Ids of a segment, as stored. */
  const segmentIds = async (collectionId: string, ref: SegmentRef) =>
    readSegment((await server.runtime.store.get(ref.key))!, ref.key, await server.runtime.codecs.get('default', collectionId, ref.codecVersion)).docIds;

  beforeAll(async () => {
    server = await startServer(config, { quiet: true });
    const rt = server.runtime;
    // The merge job's dependencies, as the worker's handlers build them.
    merge = mergeDepsFor(rt, config, { policy: { ...DEFAULT_MERGE_POLICY, factor: 4 } });
  }, 180_000);
  afterAll(async () => {
    await server?.stop();
  });

  it('POST merge: one segment, the same re-rank and exhaustive results, deleted and replaced copies dropped', async () => {
    await api('POST', '/v1/collections', { id: 'm1' });
    const first = docs.slice(0, 30);
    // Three ingests of 10 documents each (one batch, one segment each), then one replacing an id.
    const statusUrls: string[] = [];
    for (let i = 0; i < 30; i += 10) statusUrls.push(await ingest('m1', first.slice(i, i + 10).map((d) => ({ id: d.id, text: d.text, metadata: { n: Number(d.id) } }))));
    await ingest('m1', [{ id: first[3].id, text: first[10].text + ' replaced', metadata: { replaced: true } }]);
    await del('m1', first[7].id);
    await del('m1', first[25].id);
    const before = await manifest('m1');
    expect(before.segments).toHaveLength(4);
    expect(before.documents).toBe(28);
    const ids = first.map((d) => d.id);
    const queries = [first[0].text, first[3].text, docs[50].text];
    const rerankBefore = await Promise.all(queries.map((q) => rerank('m1', ids, q)));
    const searchBefore = await Promise.all(queries.map((q) => search('m1', 'exhaustive', q)));
    const xtrBefore = await Promise.all(queries.map((q) => search('m1', 'xtr', q)));

    const r = await api('POST', '/v1/collections/m1/merge?wait=60');
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    // Four segments of tier 0 (factor 4): all of them; two deleted copies and one replaced copy dropped.
    expect(r.body).toMatchObject({ status: 'merged', committed: true, reason: 'tier', dropped: 3, index: 'copied' });
    expect(r.body.inputs).toEqual(before.segments.map((s) => s.key));
    const after = await manifest('m1');
    expect(after.generation).toBe(before.generation + 1);
    expect(after.segments).toHaveLength(1);
    expect(after.segments[0].key).toBe(r.body.output);
    expect(after.segments[0].documents).toBe(28);
    expect(after.segments[0].tombstones ?? []).toEqual([]);
    expect(after.documents).toBe(28);
    const merged = await segmentIds('m1', after.segments[0]);
    expect(merged).not.toContain(first[7].id);
    expect(merged).not.toContain(first[25].id);
    expect(merged.filter((id) => id === first[3].id)).toHaveLength(1);
    expect((await api('GET', '/v1/collections/m1')).body.documents).toBe(28);
    // The ingestions whose batches were merged stay done (the merged segment lists their batches).
    expect(after.segments[0].batches).toHaveLength(4);
    for (const url of statusUrls) {
      const st = (await api('GET', url)).body;
      expect(st.state, JSON.stringify(st)).toBe('done');
      expect(st.stages.indexed).toBe(10);
    }

    // Same codes for every document (copied from the inputs): the same scores.
    for (let q = 0; q < queries.length; q++) {
      const rr = await rerank('m1', ids, queries[q]);
      expect(rr.hits).toEqual(rerankBefore[q].hits);
      expect(rr.missing.sort()).toEqual([first[7].id, first[25].id].sort());
      expect(await search('m1', 'exhaustive', queries[q])).toEqual(searchBefore[q]);
      // The rebuilt index uses the collection's centroids: XTR finds the same documents.
      expect(new Set((await search('m1', 'xtr', queries[q])).map((h) => h.id))).toEqual(new Set(xtrBefore[q].map((h) => h.id)));
    }
    // Documents read back from the merged batch: the replacement's text and metadata.
    const doc = await api('GET', `/v1/collections/m1/documents/${encodeURIComponent(first[3].id)}`);
    expect(doc.status).toBe(200);
    expect(doc.body).toMatchObject({ text: first[10].text + ' replaced', metadata: { replaced: true } });
    expect(doc.body.segment.key).toBe(r.body.output);
    expect((await api('GET', `/v1/collections/m1/documents/${encodeURIComponent(first[7].id)}`)).status).toBe(404);

    // Nothing left to merge: no generation written.
    const again = await api('POST', '/v1/collections/m1/merge?wait=60');
    expect(again.status).toBe(200);
    expect(again.body).toMatchObject({ status: 'nothing-to-merge', committed: false, generation: after.generation });
    expect((await manifest('m1')).generation).toBe(after.generation);
  }, 300_000);

  it('an EDEN 4-bit collection merges to the same codes (bit-identical, copied): re-rank and exhaustive search unchanged', async () => {
    const c = 'meden';
    expect((await api('POST', '/v1/collections', { id: c, codec: { kind: 'eden', bits: 4 } })).status).toBe(201);
    for (let i = 0; i < 40; i += 10) await ingest(c, docs.slice(i, i + 10).map((d) => ({ id: d.id, text: d.text })));
    const ids = docs.slice(0, 40).map((d) => d.id);
    const queries = [docs[2].text, docs[33].text, docs[70].text];
    const before = await Promise.all(queries.map(async (q) => ({ rr: await rerank(c, ids, q), ex: await search(c, 'exhaustive', q) })));
    // Every document's coded bytes, decoded vectors and raw fp16 rows before the merge.
    const rt = server.runtime;
    const artifact = await rt.codecs.get('default', c, 1);
    const stored = async (ref: SegmentRef) => {
      const seg = readSegment((await rt.store.get(ref.key))!, ref.key, artifact);
      const raw = readSegment((await rt.store.get(s3Keys.rawVectors('default', c, ref.batchId)))!, 'raw');
      return seg.docIds.map((id, i) => ({ id, ...seg.encodedDoc(i), decoded: seg.decodeDoc(i), raw: raw.encodedDoc(i).codes, tokenIds: seg.tokenIds.subarray(seg.tokenOffsets[i], seg.tokenOffsets[i + 1]) }));
    };
    const docsBefore = new Map((await Promise.all((await manifest(c)).segments.map(stored))).flat().map((d) => [d.id, d]));
    expect(docsBefore.size).toBe(40);
    const r = await api('POST', `/v1/collections/${c}/merge?wait=60`);
    expect(r.body).toMatchObject({ status: 'merged', committed: true, dropped: 0, index: 'copied' });
    expect((await manifest(c)).segments).toHaveLength(1);
    // Copied, not re-coded: the same codes and norms, bit-identical decoded vectors, the same raw fp16 bytes.
    const docsAfter = await stored((await manifest(c)).segments[0]);
    expect(docsAfter.map((d) => d.id).sort()).toEqual([...docsBefore.keys()].sort());
    for (const d of docsAfter) {
      const b = docsBefore.get(d.id)!;
      expect(Buffer.from(d.codes).equals(Buffer.from(b.codes)), `codes of ${d.id}`).toBe(true);
      expect(Buffer.from(d.norms).equals(Buffer.from(b.norms)), `norms of ${d.id}`).toBe(true);
      expect(Buffer.from(d.decoded.buffer, d.decoded.byteOffset, d.decoded.byteLength).equals(Buffer.from(b.decoded.buffer, b.decoded.byteOffset, b.decoded.byteLength)), `vectors of ${d.id}`).toBe(true);
      expect(Buffer.from(d.raw).equals(Buffer.from(b.raw)), `raw fp16 rows of ${d.id}`).toBe(true);
      expect(Array.from(d.tokenIds)).toEqual(Array.from(b.tokenIds));
    }
    for (let q = 0; q < queries.length; q++) {
      expect((await rerank(c, ids, queries[q])).hits).toEqual(before[q].rr.hits);
      expect(await search(c, 'exhaustive', queries[q])).toEqual(before[q].ex);
    }
  }, 300_000);

  /**
   * A collection of four single-batch segments, and a merge whose commit first lets `race` commit through the service.
   * The IVF layout: a WARP collection's merge job may first commit a centroid refit (warp-refit.ts), which the race would hit instead of the merge's commit.
   */
  const mergeRacing = async (collectionId: string, race: () => Promise<void>) => {
    await api('POST', '/v1/collections', { id: collectionId, search: { layout: 'ivf' } });
    for (let i = 40; i < 80; i += 10) await ingest(collectionId, docs.slice(i, i + 10).map((d) => ({ id: d.id, text: d.text })));
    const read = await manifest(collectionId);
    expect(read.segments).toHaveLength(4);
    let raced = false;
    const generations: MergeDeps['generations'] = {
      manifest: (tenantId, id, g) => server.runtime.generations.manifest(tenantId, id, g),
      commit: async (tenantId, id, change) => {
        if (!raced) {
          raced = true;
          await race(); // the merge has read its inputs and written its segment: another generation lands first
        }
        return server.runtime.generations.commit(tenantId, id, change);
      },
    };
    const out = await mergeProcessor({ ...merge, generations }, { op: 'merge', tenantId: 'default', collectionId, trigger: 'api' });
    expect(raced).toBe(true);
    return { read, out };
  };

  it('a delete committed while a merge runs stays deleted (its tombstone is carried onto the merged segment)', async () => {
    const victim = docs[45].id;
    const { read, out } = await mergeRacing('m2', () => del('m2', victim));
    expect(out.merged).toMatchObject({ status: 'merged', dropped: 0 });
    expect(out.committed).toBe(true);
    const after = await manifest('m2');
    expect(after.generation).toBe(read.generation + 2); // the delete's, then the merge's
    expect(after.segments).toHaveLength(1);
    const merged = await segmentIds('m2', after.segments[0]);
    expect(merged).toHaveLength(40);
    expect(after.segments[0].tombstones).toEqual([merged.indexOf(victim)]);
    expect(after.documents).toBe(39);
    const ids = docs.slice(40, 80).map((d) => d.id);
    const rr = await rerank('m2', ids, docs[45].text);
    expect(rr.missing).toEqual([victim]);
    expect(rr.hits).toHaveLength(39);
    expect((await search('m2', 'exhaustive', docs[45].text)).map((h) => h.id)).not.toContain(victim);
    expect((await api('GET', '/v1/collections/m2')).body.documents).toBe(39);
    // The commit job of the victim's original batch run again (a stalled job): refused, the delete holds.
    const input = read.segments.find((r) => r.key.includes(read.segments[0].batchId))!;
    const replay = await commitProcessor(
      { store: server.runtime.store, collections: server.runtime.collections, generations: server.runtime.generations, codecs: server.runtime.codecs, liveIds: merge.liveIds, logger: server.runtime.logger },
      { tenantId: 'default', collectionId: 'm2', ingestionId: null, batchId: input.batchId, segmentKey: input.key, codecVersion: input.codecVersion, documents: input.documents },
    );
    expect(replay).toEqual({ generation: after.generation, committed: false });
    expect((await rerank('m2', ids, docs[45].text)).missing).toEqual([victim]);
  }, 300_000);

  it('an ingest committed while a merge runs is kept: a new id stays live, a replaced id serves its new copy', async () => {
    const replaced = docs[52].id;
    const { read, out } = await mergeRacing('m3', async () => {
      await ingest('m3', [
        { id: 'new-during-merge', text: docs[0].text },
        { id: replaced, text: docs[1].text },
      ]);
    });
    expect(out.merged).toMatchObject({ status: 'merged', dropped: 0 });
    const after = await manifest('m3');
    expect(after.generation).toBe(read.generation + 2);
    // The merged segment (the four inputs) and the racing ingest's own segment, after it.
    expect(after.segments).toHaveLength(2);
    const merged = await segmentIds('m3', after.segments[0]);
    expect(merged).toHaveLength(40);
    // The old copy of the replaced id, tombstoned by the ingest's commit on an input, stays tombstoned.
    expect(after.segments[0].tombstones).toEqual([merged.indexOf(replaced)]);
    expect(await segmentIds('m3', after.segments[1])).toEqual(['new-during-merge', replaced]);
    expect(after.documents).toBe(41);
    const rr = await rerank('m3', ['new-during-merge', replaced], docs[1].text);
    expect(rr.missing).toEqual([]);
    expect(rr.hits[0].id).toBe(replaced); // its new text is the query
    const doc = await api('GET', `/v1/collections/m3/documents/${encodeURIComponent(replaced)}`);
    expect(doc.body.text).toBe(docs[1].text);
    expect((await api('GET', '/v1/collections/m3')).body.documents).toBe(41);
  }, 300_000);

  it('a merge whose inputs were replaced meanwhile commits nothing', async () => {
    // The racing operation is another merge of the same inputs (run through the service).
    const { out } = await mergeRacing('m4', async () => {
      const r = await api('POST', '/v1/collections/m4/merge?wait=60');
      expect(r.body).toMatchObject({ status: 'merged', committed: true });
    });
    expect(out.committed).toBe(false);
    expect(out.merged).toMatchObject({ status: 'inputs-gone', output: null });
    const after = await manifest('m4');
    expect(after.segments).toHaveLength(1);
    expect(after.documents).toBe(40);
  }, 300_000);

  it('an input without its index: the merged index is rebuilt on the collection centroids; search unchanged', async () => {
    const c = 'm6';
    // The segment index's IVF is what xtr searches here, so the collection names that layout (WARP's layouts are merged apart from the index).
    await api('POST', '/v1/collections', { id: c, search: { layout: 'ivf' } });
    for (let i = 40; i < 80; i += 10) await ingest(c, docs.slice(i, i + 10).map((d) => ({ id: d.id, text: d.text })));
    const inputs = (await manifest(c)).segments;
    const queries = [docs[44].text, docs[71].text];
    const before = await Promise.all(queries.map(async (q) => ({ ex: await search(c, 'exhaustive', q), xtr: await search(c, 'xtr', q), bm25: await search(c, 'bm25', q) })));
    await server.runtime.store.delete(s3Keys.segmentIndex('default', c, inputs[1].batchId, inputs[1].codecVersion));
    const out = await mergeProcessor(merge, { op: 'merge', tenantId: 'default', collectionId: c, trigger: 'api' });
    expect(out.merged).toMatchObject({ status: 'merged', index: 'rebuilt', dropped: 0 });
    expect((await manifest(c)).segments).toHaveLength(1);
    for (let q = 0; q < queries.length; q++) {
      expect(await search(c, 'exhaustive', queries[q])).toEqual(before[q].ex);
      expect(await search(c, 'bm25', queries[q])).toEqual(before[q].bm25);
      expect(new Set((await search(c, 'xtr', queries[q])).map((h) => h.id))).toEqual(new Set(before[q].xtr.map((h) => h.id)));
    }
  }, 300_000);

  it('one merge per collection at a time: a second merge started meanwhile waits for the lease, then finds nothing to merge', async () => {
    const c = 'm7';
    // IVF: the merge is the job's only commit (a WARP collection's job may commit a centroid refit first)
    await api('POST', '/v1/collections', { id: c, search: { layout: 'ivf' } });
    for (let i = 40; i < 80; i += 10) await ingest(c, docs.slice(i, i + 10).map((d) => ({ id: d.id, text: d.text })));
    const before = await manifest(c);
    const exclusive: MergeDeps['exclusive'] = (tenantId, collectionId, fn) => withRedisLease(server.runtime.redis, `test:merge-lease:${tenantId}:${collectionId}`, fn, { pollMs: 20 });
    const run = () => mergeProcessor({ ...merge, exclusive }, { op: 'merge', tenantId: 'default', collectionId: c, trigger: 'api' });
    const [a, b] = await Promise.all([run(), run()]);
    // Without the lease both would copy the same four inputs and one would find them gone ('inputs-gone').
    expect([a.merged.status, b.merged.status].sort()).toEqual(['merged', 'nothing-to-merge']);
    expect([a, b].find((r) => r.merged.status === 'nothing-to-merge')!.generation).toBe(before.generation + 1);
    expect((await manifest(c)).generation).toBe(before.generation + 1);
  }, 300_000);

  it("a merge that finds the collection's lease held past its wait answers 'busy' and changes nothing", async () => {
    const c = 'm8';
    // IVF: the merge is the job's only commit (a WARP collection's job may commit a centroid refit first)
    await api('POST', '/v1/collections', { id: c, search: { layout: 'ivf' } });
    for (let i = 40; i < 80; i += 10) await ingest(c, docs.slice(i, i + 10).map((d) => ({ id: d.id, text: d.text })));
    const before = await manifest(c);
    const key = `test:merge-lease:default:${c}`;
    await server.runtime.redis.set(key, 'another-worker', 'PX', 10_000); // another process's merge holds it
    const exclusive: MergeDeps['exclusive'] = (tenantId, collectionId, fn) => withRedisLease(server.runtime.redis, `test:merge-lease:${tenantId}:${collectionId}`, fn, { pollMs: 20, maxWaitMs: 200 });
    const busy = await mergeProcessor({ ...merge, exclusive }, { op: 'merge', tenantId: 'default', collectionId: c, trigger: 'api' });
    expect(busy).toMatchObject({ generation: before.generation, committed: false, merged: { status: 'busy', inputs: [], output: null } });
    expect((await manifest(c)).generation).toBe(before.generation);
    // once the lease is free, the same merge goes through
    await server.runtime.redis.del(key);
    const done = await mergeProcessor({ ...merge, exclusive }, { op: 'merge', tenantId: 'default', collectionId: c, trigger: 'api' });
    expect(done).toMatchObject({ generation: before.generation + 1, committed: true, merged: { status: 'merged' } });
  }, 300_000);

  it('garbage collection: the objects a merge replaced go once no kept generation lists them and the grace period passed', async () => {
    const c = 'm5';
    // IVF: the merge is the job's only commit (a WARP collection's job may commit a centroid refit first; WARP's layouts' collection: test/warp-search.integration.spec.ts)
    await api('POST', '/v1/collections', { id: c, search: { layout: 'ivf' } });
    for (let i = 40; i < 80; i += 10) await ingest(c, docs.slice(i, i + 10).map((d) => ({ id: d.id, text: d.text })));
    const inputs = (await manifest(c)).segments;
    const objects = inputs.flatMap((r) => segmentObjects('default', c, r));
    // Per segment: the segment, its index, its head, raw vectors, documents, info, and the merge's merged-away marker.
    expect(objects).toHaveLength(28);
    const exist = async (keys: string[]) => Promise.all(keys.map((k) => server.runtime.store.exists(k)));
    expect(await exist(objects)).toEqual(objects.map((k) => !k.includes('/merged-away/')));
    const run = (gc: { keepGenerations: number; graceSeconds: number }) => mergeProcessor({ ...merge, gc }, { op: 'merge', tenantId: 'default', collectionId: c, trigger: 'api' });

    // Generation 5 replaces the inputs; generation 4 (which lists them) is still kept (2 kept).
    const merged = await run({ keepGenerations: 2, graceSeconds: 0 });
    expect(merged).toMatchObject({ generation: 5, committed: true, merged: { status: 'merged' } });
    expect(await exist(objects)).toEqual(objects.map(() => true));
    expect(await server.runtime.store.exists(gcKeys.record('default', c, 5))).toBe(true);
    // Generation 6: the oldest kept is 5, but the grace period (an hour) has not passed.
    await ingest(c, [{ id: 'after-merge', text: docs[0].text }]);
    expect(await run({ keepGenerations: 2, graceSeconds: 3600 })).toMatchObject({ generation: 6, committed: false, merged: { status: 'nothing-to-merge' } });
    expect(await exist(objects)).toEqual(objects.map(() => true));
    // No grace: removed, and the record with them; the merged segment's own objects stay.
    await run({ keepGenerations: 2, graceSeconds: 0 });
    expect(await exist(objects)).toEqual(objects.map(() => false));
    expect(await server.runtime.store.exists(gcKeys.record('default', c, 5))).toBe(false);
    const now = await manifest(c);
    const kept = now.segments.flatMap((r) => segmentObjects('default', c, r)).filter((k) => !k.includes('/merged-away/')); // (never merged away)
    expect(await exist(kept)).toEqual(kept.map(() => true));
    // Still served whole: re-rank, search and documents read back.
    const ids = [...docs.slice(40, 80).map((d) => d.id), 'after-merge'];
    const rr = await rerank(c, ids, docs[60].text);
    expect(rr.missing).toEqual([]);
    expect(rr.hits).toHaveLength(41);
    expect(rr.hits[0].id).toBe(docs[60].id);
    expect((await search(c, 'xtr', docs[60].text))[0].id).toBe(docs[60].id);
    expect((await api('GET', `/v1/collections/${c}/documents/${encodeURIComponent(docs[41].id)}`)).body.text).toBe(docs[41].text);
  }, 300_000);
});

describe('merges after commits (MERGE_AFTER_COMMIT)', () => {
  let server: Server;
  const config = testConfig({ ENCODE_BATCH_DOCUMENTS: '10', MERGE_FACTOR: '3', MERGE_AFTER_COMMIT: 'true' });
  const docs = loadCranfield(path.resolve('data/cranfield')).docs.filter((d) => d.text.length > 0).slice(0, 30);
  const api = (method: string, url: string, body?: unknown) => http(server.url, method, url, body);

  beforeAll(async () => {
    server = await startServer(config, { quiet: true });
  }, 180_000);
  afterAll(async () => {
    await server?.stop();
  });

  it('the third small segment fills tier 0 (factor 3): the collection\'s pending merge job on the merge queue rewrites the three into one, and asks no further merge', async () => {
    await api('POST', '/v1/collections', { id: 'auto' });
    for (let i = 0; i < 30; i += 10) {
      const ing = await api('POST', '/v1/collections/auto/documents', docs.slice(i, i + 10).map((d) => ({ id: d.id, text: d.text })));
      expect(ing.status).toBe(202);
      await until(async () => (await api('GET', ing.body.status)).body.state === 'done', 120_000);
    }
    const merged = await until(async () => {
      const m = await server.runtime.generations.manifest('default', 'auto');
      return m && m.segments.length === 1 ? m : null;
    }, 120_000);
    expect(merged.generation).toBe(4); // three commits, then one merge
    expect(merged.documents).toBe(30);
    expect(merged.segments[0].documents).toBe(30);
    // At most one merge job per commit (a request made while one waited was absorbed by it; ids name the generation asked on); exactly one of them merged.
    const queue = server.runtime.queues.get(QueueName.merge);
    await until(async () => {
      const c = await queue.getJobCounts('waiting', 'active', 'delayed', 'prioritized');
      return Object.values(c).every((n) => n === 0);
    }, 30_000);
    const jobs = await queue.getJobs(['completed']);
    expect(jobs.length).toBeGreaterThanOrEqual(1);
    expect(jobs.length).toBeLessThanOrEqual(3);
    expect(jobs.every((j) => /^default~auto~merge~commit-g[123]$/.test(j.id!))).toBe(true);
    const results = jobs.map((j) => j.returnvalue);
    const done = results.filter((r) => r.committed);
    expect(done).toHaveLength(1);
    // The merge's output fills no tier: it asks no further merge (before, every committed merge queued one more job).
    expect(done[0]).toMatchObject({ generation: 4, merged: { status: 'merged', reason: 'tier', dropped: 0 }, again: false });
    expect(results.filter((r) => !r.committed).every((r) => r.merged.status === 'nothing-to-merge' && r.again === false)).toBe(true);
    expect(await Job.fromId(queue, mergeJobId('default', 'auto', 'commit', 4))).toBeUndefined();
    const rr = await api('POST', '/v1/rerank?wait=60', { collection: 'auto', scorer: 'maxsim', topK: 1000, queries: [{ id: 'q', text: docs[4].text, candidates: docs.map((d) => d.id) }] });
    expect(rr.body.result.results[0].hits).toHaveLength(30);
    expect(rr.body.result.results[0].hits[0].id).toBe(docs[4].id);
  }, 300_000);
});
