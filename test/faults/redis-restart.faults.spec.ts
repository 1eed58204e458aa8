import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { startEmbeddedRedis } from '@lateral/infra';
import { loadCranfield } from '../../scripts/lib/cranfield';
import { until } from '../helpers';
import { census, report, startCluster, watchIngestion, type Cluster } from './harness';

/**
 * Redis (append-only file on, fsync every second) stopped and started again on the same port and
 * folder in the middle of an ingestion of 600 documents: the ingestion completes, every document
 * is searchable once with its text, and the API (health, re-rank) and the worker process recover
 * by themselves, neither restarted. The stop is a SIGTERM (Redis flushes its append-only file), as
 * a service manager's restart sends; Redis is down for 3 s.
 */
describe('fault: Redis restarted mid-ingestion', () => {
  let cluster: Cluster | undefined;
  afterAll(async () => cluster?.stop());

  it('the ingestion completes and the API and workers recover without a restart', async () => {
    cluster = await startCluster({ persistentRedis: true });
    const { api } = cluster;
    const docs = loadCranfield(path.resolve('data/cranfield')).docs.slice(0, 600).map((d) => ({ id: d.id, text: d.text || 'empty' }));
    expect((await api('POST', '/v1/collections', { id: 'r' })).status).toBe(201);
    const ing = await api('POST', '/v1/collections/r/documents', docs);
    expect(ing.status).toBe(202);
    const watch = watchIngestion(api, ing.body.status);
    const before = await until(async () => {
      const last = watch.seen.at(-1);
      return last && last.indexed >= 100 && last.indexed < docs.length ? last : null;
    }, 180_000, 20);
    const { port, dir } = cluster.redis;
    const worker = cluster.workers[0];
    await cluster.redis.stop();
    const down = await api('GET', '/v1/health');
    expect(down.status).toBe(503);
    await new Promise((r) => setTimeout(r, 3000));
    cluster.redis = await startEmbeddedRedis({ dir, port, persistent: true });
    const tBack = Date.now();
    await until(async () => (await api('GET', '/v1/health')).status === 200, 60_000, 50);
    const tHealthy = Date.now();
    const done = await watch.done;
    const tDone = Date.now();
    expect(watch.earlyDone).toBe(false);
    expect(done.stages).toMatchObject({ accepted: docs.length, indexed: docs.length, failed: 0 });
    expect(worker.child.exitCode, 'the worker process was not restarted').toBeNull();
    const c = await census(cluster, 'r', docs);
    report('redis-restart', {
      accepted: docs.length,
      indexedAtStop: before.indexed,
      searchable: c.searchable,
      duplicated: c.duplicated,
      lost: c.lost,
      wrongText: c.wrongText,
      statusNon200: watch.errors,
      redisBackToHealthyMs: tHealthy - tBack,
      redisBackToDoneMs: tDone - tBack,
    });
    expect(c).toEqual({ listed: docs.length, searchable: docs.length, duplicated: 0, lost: 0, wrongText: 0, collectionDocuments: docs.length, manifestDocuments: docs.length });
  }, 420_000);
});
