import { randomBytes } from 'node:crypto';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { loadCranfield } from '../../scripts/lib/cranfield';
import { s3Keys } from '@lateral/shared';
import { http } from '../helpers';
import { report, retryingUnlessHealth, startCluster, watchIngestion, type Cluster } from './harness';

/**
 * A segment object of a committed generation overwritten in S3 with 64 flipped bytes (three
 * segments of 20 documents; the middle one broken). What the service does:
 * - re-rank and search complete from the two healthy segments: `degraded: true`, the broken
 *   object named in `unavailableSegments` with the section whose checksum failed, and the
 *   re-rank's candidates that live in it listed as `unavailable` (not silently dropped, not in
 *   `missing`); no job fails, none is retried;
 * - a re-rank whose candidates all live in healthy segments is complete and not degraded;
 * - the collection's GET and the operations overview (and the dashboard it feeds) show the
 *   degraded segment; the scorer's metric counts the detection once;
 * - the document store and new ingestions keep working, and a merge, which codes a broken
 *   segment again from its raw vectors (and rebuilds a broken index), replaces the broken
 *   segment: everything serves again, nothing shows degraded.
 */
describe('fault: a corrupted segment object in S3', () => {
  let cluster: Cluster | undefined;
  afterAll(async () => cluster?.stop());
  const token = randomBytes(24).toString('base64url');

  it('serves the healthy segments, names the broken object, shows it degraded; a merge heals it', async () => {
    // Merges only when asked (POST merge), four tier-0 segments at once.
    cluster = await startCluster({ env: { ADMIN_TOKEN: token, MERGE_AFTER_COMMIT: 'false', MERGE_FACTOR: '4' } });
    const { api } = cluster;
    const admin = (url: string) => http(cluster!.server.url, 'GET', url, undefined, { authorization: `Bearer ${token}` }, retryingUnlessHealth);
    const docs = loadCranfield(path.resolve('data/cranfield')).docs.slice(0, 80).map((d) => ({ id: d.id, text: d.text || 'empty' }));
    expect((await api('POST', '/v1/collections', { id: 'x' })).status).toBe(201);
    for (const part of [docs.slice(0, 20), docs.slice(20, 40), docs.slice(40, 60)]) {
      const ing = await api('POST', '/v1/collections/x/documents', part);
      expect(ing.status).toBe(202);
      await watchIngestion(api, ing.body.status).done;
    }
    const { runtime } = cluster.server;
    const manifest = (await runtime.generations.manifest(cluster.config.DEFAULT_TENANT, 'x'))!;
    expect(manifest.segments.map((s) => s.documents)).toEqual([20, 20, 20]);
    const bad = manifest.segments[1];
    const bytes = (await runtime.store.get(bad.key))!;
    const broken = Uint8Array.from(bytes);
    const mid = Math.floor(broken.length / 2);
    for (let i = mid; i < mid + 64; i++) broken[i] ^= 0xff;
    await runtime.store.put(bad.key, broken);
    const tCorrupted = Date.now();
    const badIds = docs.slice(20, 40).map((d) => d.id);
    const healthyIds = [...docs.slice(0, 20), ...docs.slice(40, 60)].map((d) => d.id);

    const named = new RegExp(`segment "${bad.key.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}" is corrupt in section "\\w+": checksum mismatch`);
    const rerank = (candidates: string[]) => api('POST', '/v1/rerank?wait=30', { collection: 'x', queries: [{ id: 'q', text: 'boundary layer', candidates }], topK: candidates.length });
    const all = await rerank(docs.slice(0, 60).map((d) => d.id));
    const tDetected = Date.now();
    expect(all.status).toBe(200);
    expect(all.body.status, JSON.stringify(all.body).slice(0, 1000)).toBe('completed');
    const rr = all.body.result;
    expect(rr.degraded).toBe(true);
    expect(rr.unavailableSegments).toHaveLength(1);
    expect(rr.unavailableSegments[0]).toMatchObject({ key: bad.key, object: 'segment', segment: bad.key, documents: 20 });
    expect(rr.unavailableSegments[0].reason).toMatch(named);
    // Every healthy candidate scored, each once; the broken segment's candidates named, none missing.
    const hitIds = (rr.results[0].hits as { id: string }[]).map((h) => h.id);
    expect([...hitIds].sort()).toEqual([...healthyIds].sort());
    expect([...rr.results[0].unavailable].sort()).toEqual([...badIds].sort());
    expect(rr.results[0].missing).toEqual([]);

    // Candidates only in healthy segments: complete, not degraded.
    const healthyOnly = await rerank(healthyIds);
    expect(healthyOnly.body.status).toBe('completed');
    expect(healthyOnly.body.result.degraded).toBeUndefined();
    expect(healthyOnly.body.result.results[0].hits).toHaveLength(40);
    expect(healthyOnly.body.result.results[0].unavailable).toBeUndefined();

    // Search: the healthy segments' documents only, the broken segment named.
    const search = await api('POST', '/v1/search?wait=30', { collection: 'x', queries: [{ id: 'q', text: 'boundary layer' }], topK: 60, mode: { name: 'exhaustive' } });
    expect(search.body.status, JSON.stringify(search.body).slice(0, 1000)).toBe('completed');
    expect(search.body.result.degraded).toBe(true);
    expect(search.body.result.unavailableSegments.map((u: { key: string }) => u.key)).toEqual([bad.key]);
    const searchIds = (search.body.result.results[0].hits as { id: string }[]).map((h) => h.id);
    expect(searchIds.filter((id) => badIds.includes(id))).toEqual([]);
    expect([...searchIds].sort()).toEqual([...healthyIds].sort());

    // The collection and the operations view show it (the scorer writes degraded.json as it detects: poll briefly).
    const shown = async () => {
      for (let i = 0; i < 50; i++) {
        const ov = await admin('/v1/admin/overview');
        const row = (ov.body.collections as { id: string; degradedSegments: number; unavailableSegments: { key: string; reason: string }[] }[]).find((c) => c.id === 'x');
        if (row && row.degradedSegments > 0) return { ov, row };
        await new Promise((r) => setTimeout(r, 200));
      }
      throw new Error('the overview never showed the degraded segment');
    };
    const { ov, row } = await shown();
    const tShown = Date.now();
    expect(row.degradedSegments).toBe(1);
    expect(row.unavailableSegments[0]).toMatchObject({ key: bad.key, segment: bad.key, object: 'segment', documents: 20, generation: manifest.generation });
    expect(row.unavailableSegments[0].reason).toMatch(named);
    // No job failed, none retried.
    expect((ov.body.failedJobs as { failedReason: string }[]).filter((j) => named.test(j.failedReason))).toEqual([]);
    const coll = await api('GET', '/v1/collections/x');
    expect(coll.body.degraded).toMatchObject({ generation: manifest.generation, segments: [{ key: bad.key, documents: 20 }] });
    // Counted once, however many requests met it.
    const metrics = await http(cluster.server.url, 'GET', '/metrics', undefined, { authorization: `Bearer ${token}` }, retryingUnlessHealth);
    const text = typeof metrics.body === 'string' ? metrics.body : JSON.stringify(metrics.body);
    expect(text).toMatch(/lateral_segment_unavailable_total\{object="segment"\} 1\b/);
    expect(text).toMatch(/lateral_segments_unavailable\{object="segment"\} 1\b/);

    // Documents are read from the document store, not from segments: a document of the broken segment still reads back.
    const doc = await api('GET', `/v1/collections/x/documents/${docs[25].id}`);
    expect(doc.status).toBe(200);
    expect(doc.body.text).toBe(docs[25].text);
    // A new ingestion commits the next generation, and its documents serve beside the healthy ones.
    const more = await api('POST', '/v1/collections/x/documents', docs.slice(60));
    const done = await watchIngestion(api, more.body.status).done;
    expect(done.stages).toMatchObject({ accepted: 20, indexed: 20, failed: 0 });
    expect((await api('GET', '/v1/collections/x')).body.documents).toBe(80);
    const withNew = await rerank(docs.map((d) => d.id));
    expect(withNew.body.result.results[0].hits).toHaveLength(60);
    expect(withNew.body.result.results[0].unavailable).toHaveLength(20);

    // A corrupt search index (of the new segment, not read by this scorer yet: a copy it holds
    // stays good): search leaves that segment out too and names the index; re-rank does not need
    // it and still scores the segment's documents.
    const first = (await runtime.generations.manifest(cluster.config.DEFAULT_TENANT, 'x'))!.segments[3];
    const indexKey = s3Keys.segmentIndex(cluster.config.DEFAULT_TENANT, 'x', first.batchId, first.codecVersion);
    const index = Uint8Array.from((await runtime.store.get(indexKey))!);
    for (let i = Math.floor(index.length / 2); i < Math.floor(index.length / 2) + 64; i++) index[i] ^= 0xff;
    await runtime.store.put(indexKey, index);
    const searchBadIndex = await api('POST', '/v1/search?wait=30', { collection: 'x', queries: [{ id: 'q', text: 'boundary layer' }], topK: 80, mode: { name: 'exhaustive' } });
    expect(searchBadIndex.body.status).toBe('completed');
    const unavailableNow = searchBadIndex.body.result.unavailableSegments as { key: string; object: string; segment: string; reason: string; documents: number }[];
    expect(unavailableNow.map((u) => [u.object, u.key, u.segment, u.documents])).toEqual([
      ['segment', bad.key, bad.key, 20],
      ['index', indexKey, first.key, 20],
    ]);
    expect(unavailableNow[1].reason).toContain(indexKey);
    expect(searchBadIndex.body.result.results[0].hits).toHaveLength(40);
    expect((await rerank(docs.slice(60).map((d) => d.id))).body.result.results[0].hits).toHaveLength(20);

    // A merge copies the sound segments' rows, codes the broken one again from its raw vectors and
    // rebuilds the index (one input's is corrupt): healed.
    const merge = await api('POST', '/v1/collections/x/merge?wait=60');
    expect(merge.body, JSON.stringify(merge.body)).toMatchObject({ status: 'merged', committed: true, recoded: 1, index: 'rebuilt' });
    const after = (await runtime.generations.manifest(cluster.config.DEFAULT_TENANT, 'x'))!;
    expect(after.segments.map((s) => s.key)).not.toContain(bad.key);
    const healed = await rerank(docs.map((d) => d.id));
    expect(healed.body.status).toBe('completed');
    expect(healed.body.result.degraded).toBeUndefined();
    expect(healed.body.result.results[0].hits).toHaveLength(80);
    const healedSearch = await api('POST', '/v1/search?wait=30', { collection: 'x', queries: [{ id: 'q', text: 'boundary layer' }], topK: 80, mode: { name: 'exhaustive' } });
    expect(healedSearch.body.result.degraded).toBeUndefined();
    expect(healedSearch.body.result.results[0].hits).toHaveLength(80);
    expect((await api('GET', '/v1/collections/x')).body.degraded).toBeUndefined();
    await new Promise((r) => setTimeout(r, 1100)); // the overview is cached for a second
    const rowAfter = ((await admin('/v1/admin/overview')).body.collections as { id: string; degradedSegments: number; unavailableSegments: unknown[] }[]).find((c) => c.id === 'x')!;
    expect(rowAfter).toMatchObject({ degradedSegments: 0, unavailableSegments: [] });

    report('corrupt-segment', {
      documents: 60,
      corruptSegmentDocuments: bad.documents,
      rerankAll: `${all.body.status}, degraded, ${hitIds.length} scored / ${rr.results[0].unavailable.length} unavailable / 60`,
      rerankHealthySegmentsOnly: `${healthyOnly.body.status}, not degraded`,
      searchServed: `${searchIds.length} of 60 documents`,
      corruptionToDegradedAnswerMs: tDetected - tCorrupted,
      corruptionToOverviewMs: tShown - tCorrupted,
      failedJobs: 0,
      documentReads: doc.status,
      newIngestion: done.state,
      searchWithCorruptIndex: `${searchBadIndex.body.result.results[0].hits.length} of 80 documents`,
      afterMerge: `${healed.body.result.results[0].hits.length} of 80 served, not degraded`,
    });
  }, 420_000);
});
