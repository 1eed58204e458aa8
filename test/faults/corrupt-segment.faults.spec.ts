import { randomBytes } from 'node:crypto';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { loadCranfield } from '../../scripts/lib/cranfield';
import { http } from '../helpers';
import { report, startCluster, watchIngestion, type Cluster } from './harness';

/**
 * A segment object of a committed generation overwritten in S3 with 64 flipped bytes (three
 * segments of 20 documents; the middle one broken). What the code does today, asserted as it is:
 * - every re-rank and search over the collection fails at once (no retry: corruption is not
 *   transient) with an error naming the segment object and the section whose checksum failed,
 *   and the operations view lists the failed jobs with that reason;
 * - a re-rank whose candidates all live in the healthy segments fails too: the collection's
 *   generation is loaded as a whole, so the rest of the collection does NOT keep serving
 *   (what issue 12 asks for and is missing: skip or quarantine the broken segment);
 * - the document store (texts, per-document reads) and new ingestions keep working.
 */
describe('fault: a corrupted segment object in S3', () => {
  let cluster: Cluster | undefined;
  afterAll(async () => cluster?.stop());
  const token = randomBytes(24).toString('base64url');

  it('fails re-rank and search with an error naming the object; documents and ingestion keep working', async () => {
    cluster = await startCluster({ env: { ADMIN_TOKEN: token } });
    const { api } = cluster;
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

    const named = new RegExp(`segment "${bad.key.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}" is corrupt in section "\\w+": checksum mismatch`);
    const rerank = (candidates: string[]) => api('POST', '/v1/rerank?wait=30', { collection: 'x', queries: [{ id: 'q', text: 'boundary layer', candidates }], topK: candidates.length });
    const all = await rerank(docs.slice(0, 60).map((d) => d.id));
    expect(all.status).toBe(200);
    expect(all.body).toMatchObject({ status: 'failed' });
    expect(all.body.error).toMatch(named);
    const healthyOnly = await rerank([...docs.slice(0, 20), ...docs.slice(40, 60)].map((d) => d.id));
    expect(healthyOnly.body.status, 'today the whole generation is loaded: the healthy segments do not serve alone').toBe('failed');
    expect(healthyOnly.body.error).toMatch(named);
    const search = await api('POST', '/v1/search?wait=30', { collection: 'x', queries: [{ id: 'q', text: 'boundary layer' }], topK: 10 });
    expect(search.body.status).toBe('failed');
    expect(search.body.error).toMatch(named);

    // The operations view lists the failed jobs, with the reason and no retry spent on them.
    const ov = await http(cluster.server.url, 'GET', '/v1/admin/overview', undefined, { authorization: `Bearer ${token}` });
    expect(ov.status).toBe(200);
    const failed = (ov.body.failedJobs as { queue: string; failedReason: string; attemptsMade: number }[]).filter((j) => named.test(j.failedReason));
    expect(failed.map((j) => j.queue).sort()).toEqual(['rerank', 'rerank', 'search']);
    expect(failed.every((j) => j.attemptsMade === 1)).toBe(true);

    // Documents are read from the document store, not from segments: a document of the broken segment still reads back.
    const doc = await api('GET', `/v1/collections/x/documents/${docs[25].id}`);
    expect(doc.status).toBe(200);
    expect(doc.body.text).toBe(docs[25].text);
    // A new ingestion commits the next generation (the commit does not read older segments).
    const more = await api('POST', '/v1/collections/x/documents', docs.slice(60));
    const done = await watchIngestion(api, more.body.status).done;
    expect(done.stages).toMatchObject({ accepted: 20, indexed: 20, failed: 0 });
    expect((await api('GET', '/v1/collections/x')).body.documents).toBe(80);
    report('corrupt-segment', {
      documents: 80,
      corruptSegmentDocuments: bad.documents,
      rerankAll: all.body.status,
      rerankHealthySegmentsOnly: healthyOnly.body.status,
      search: search.body.status,
      failedJobsInOverview: failed.length,
      documentReads: doc.status,
      newIngestion: done.state,
    });
  }, 420_000);
});
