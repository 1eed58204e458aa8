import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { loadCranfield } from '../../scripts/lib/cranfield';
import { census, manifestsAndMissingSegments, report, startCluster, watchIngestion, type Cluster } from './harness';

/**
 * 50 ingestions of one collection sent at once (10 documents each, 500 in all, on top of 100
 * already there) while 20 re-ranks over the existing 100 run at once: every re-rank completes
 * with each of its candidates exactly once, every committed manifest names only segments that exist,
 * no commit loses another's segment to a race, and at the end every document is searchable once with its text.
 */
describe('fault: 50 concurrent ingests of one collection with 20 concurrent re-ranks', () => {
  let cluster: Cluster | undefined;
  afterAll(async () => cluster?.stop());

  it('indexes every document once; counts are exact', async () => {
    cluster = await startCluster({});
    const { api } = cluster;
    const docs = loadCranfield(path.resolve('data/cranfield')).docs.slice(0, 600).map((d) => ({ id: d.id, text: d.text || 'empty' }));
    const seed = docs.slice(0, 100);
    expect((await api('POST', '/v1/collections', { id: 'cc' })).status).toBe(201);
    const first = await api('POST', '/v1/collections/cc/documents', seed);
    await watchIngestion(api, first.body.status).done;

    const parts = Array.from({ length: 50 }, (_, i) => docs.slice(100 + i * 10, 110 + i * 10));
    const rerankOnce = async () => {
      const rr = await api('POST', '/v1/rerank?wait=60', { collection: 'cc', queries: [{ id: 'q', text: 'heat transfer in a boundary layer', candidates: seed.map((d) => d.id) }], topK: seed.length });
      return rr.body;
    };
    const t0 = Date.now();
    const [ingests, reranks] = await Promise.all([
      Promise.all(parts.map((p) => api('POST', '/v1/collections/cc/documents', p))),
      Promise.all(Array.from({ length: 20 }, rerankOnce)),
    ]);
    expect(ingests.map((r) => r.status)).toEqual(parts.map(() => 202));
    for (const rr of reranks) {
      expect(rr.status, JSON.stringify(rr).slice(0, 500)).toBe('completed');
      const ids = rr.result.results[0].hits.map((h: { id: string }) => h.id);
      expect(ids).toHaveLength(seed.length);
      expect(new Set(ids).size).toBe(seed.length);
      expect(rr.result.results[0].missing).toEqual([]);
    }
    // One poller at a time (50 at once would load the small machine more than the ingestions do).
    const watches = [];
    const finals = [];
    for (const r of ingests) {
      const w = watchIngestion(api, r.body.status, 300_000, 100);
      watches.push(w);
      finals.push(await w.done);
    }
    const tDone = Date.now();
    expect(watches.filter((w) => w.earlyDone)).toHaveLength(0);
    for (const f of finals) expect(f.stages).toMatchObject({ accepted: 10, indexed: 10, failed: 0 });
    const { generations, missing } = await manifestsAndMissingSegments(cluster, 'cc');
    expect(missing).toEqual([]);
    // At least one generation per concurrent ingestion on top of the seed's (each commits its own).
    expect(generations).toBeGreaterThanOrEqual(55);
    const c = await census(cluster, 'cc', docs);
    report('concurrent-ingest-rerank', {
      accepted: docs.length,
      searchable: c.searchable,
      duplicated: c.duplicated,
      lost: c.lost,
      wrongText: c.wrongText,
      reranksCompleted: reranks.filter((r) => r.status === 'completed').length,
      generations,
      sendToAllDoneMs: tDone - t0,
    });
    expect(c).toEqual({ listed: docs.length, searchable: docs.length, duplicated: 0, lost: 0, wrongText: 0, collectionDocuments: docs.length, manifestDocuments: docs.length });
  }, 420_000);
});
