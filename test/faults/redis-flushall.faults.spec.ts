import path from 'node:path';
import { Redis } from 'ioredis';
import { afterAll, describe, expect, it } from 'vitest';
import { loadCranfield } from '../../scripts/lib/cranfield';
import { until } from '../helpers';
import { census, report, startCluster, watchIngestion, type Cluster } from './harness';

/**
 * Redis loses its data in the middle of an ingestion (issue 27 item 2): FLUSHALL while 1,000
 * accepted documents are between encode and commit. The jobs that would have moved them on are
 * gone; S3 still holds every batch. The worker process's reconciler notices (its sentinel key is
 * gone), enqueues each unfinished batch again at the step S3 says is next, and the ingestion ends
 * `done` with every document searchable once. Before the reconciler, 488 of 1,000 were never
 * committed and the ingestion stayed `processing` forever.
 */
describe('fault: FLUSHALL mid-ingestion', () => {
  let cluster: Cluster | undefined;
  afterAll(async () => cluster?.stop());

  it('1,000 of 1,000 documents searchable once after Redis lost every job', async () => {
    cluster = await startCluster({ env: { ENCODE_BATCH_DOCUMENTS: '50', RECONCILE_INTERVAL_SECONDS: '60' } });
    const { api } = cluster;
    const cran = loadCranfield(path.resolve('data/cranfield'));
    const docs = cran.docs.slice(0, 1000).map((d) => ({ id: d.id, text: d.text || 'empty' }));
    expect((await api('POST', '/v1/collections', { id: 'flushed' })).status).toBe(201);
    const ing = await api('POST', '/v1/collections/flushed/documents', docs);
    expect(ing.status).toBe(202);
    // mid-way: some batches committed, the rest between encode and commit
    const before = await until(async () => {
      const s = (await api('GET', ing.body.status)).body as { stages: { encoded: number; indexed: number } };
      return s.stages.indexed >= 200 ? s.stages : null;
    }, 240_000, 50);
    const redis = new Redis(cluster.redis.url, { maxRetriesPerRequest: 1 });
    await redis.flushall();
    const tFlush = Date.now();
    await redis.quit();
    const mid = (await api('GET', ing.body.status)).body as { state: string; stages: { indexed: number } };
    const watch = watchIngestion(api, ing.body.status, 300_000, 250);
    await watch.done.catch(async (err: Error) => {
      throw new Error(`${err.message}\n${await cluster!.diagnose()}`);
    });
    const tDone = Date.now();
    expect(watch.earlyDone).toBe(false);
    const c = await census(cluster, 'flushed', docs);
    const log = cluster.workers[0].output();
    report('redis-flushall', {
      accepted: docs.length,
      encodedAtFlush: before.encoded,
      indexedSeenBeforeFlush: before.indexed,
      indexedAtFlush: mid.stages.indexed,
      searchable: c.searchable,
      duplicated: c.duplicated,
      lost: c.lost,
      wrongText: c.wrongText,
      flushToDoneMs: tDone - tFlush,
      reconcilerPasses: (log.match(/reconciler \(/g) ?? []).length,
    });
    expect(mid.stages.indexed, 'the flush came mid-way').toBeLessThan(docs.length);
    expect(log).toMatch(/reconciler \(Redis lost its data\): .*re-enqueued/);
    expect(c).toEqual({ listed: docs.length, searchable: docs.length, duplicated: 0, lost: 0, wrongText: 0, collectionDocuments: docs.length, manifestDocuments: docs.length });
  }, 600_000);
});
