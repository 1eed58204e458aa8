import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { loadCranfield } from '../../scripts/lib/cranfield';
import { until } from '../helpers';
import { census, report, startCluster, watchIngestion, type Cluster } from './harness';

/**
 * kill -9 of the ingestion worker process (encode, compress, index, commit) in the middle of
 * ingesting 1,000 of Cranfield's documents (50 batches of 20), then a new worker process: every
 * accepted document is searchable exactly once with its text, the ingestion never reports `done`
 * while documents are missing, and the time from the kill to the first progress after it and to `done` is measured. With the default
 * JOB_LOCK_SECONDS (30) and JOB_STALLED_CHECK_SECONDS (10), the killed worker's jobs are resumed by
 * the new one once their locks expire.
 */
describe('fault: kill -9 of the ingestion worker mid-ingestion', () => {
  let cluster: Cluster | undefined;
  afterAll(async () => cluster?.stop());

  it('loses and duplicates nothing, never reports done early, and recovers', async () => {
    cluster = await startCluster({});
    const { api } = cluster;
    const docs = loadCranfield(path.resolve('data/cranfield')).docs.slice(0, 1000).map((d) => ({ id: d.id, text: d.text || 'empty' }));
    expect((await api('POST', '/v1/collections', { id: 'k' })).status).toBe(201);
    const ing = await api('POST', '/v1/collections/k/documents', docs);
    expect(ing.status).toBe(202);
    expect(ing.body.batches).toBe(50);
    const watch = watchIngestion(api, ing.body.status);
    // Kill once part of the collection is indexed and the rest is still on its way.
    const before = await until(async () => {
      const last = watch.seen.at(-1);
      return last && last.indexed >= 200 && last.indexed < docs.length ? last : null;
    }, 180_000, 20);
    const tKill = Date.now();
    await cluster.workers[0].kill9();
    const atKill = (await api('GET', ing.body.status)).body;
    expect(atKill.state, 'the ingestion must still be in progress at the kill').toBe('processing');
    await cluster.spawnWorker();
    const tRestarted = Date.now();
    const indexedAtRestart = (await api('GET', ing.body.status)).body.stages.indexed as number;
    // Recovered: the first status after the restart that shows more documents indexed.
    const resumed = until(async () => ((watch.seen.at(-1)?.indexed ?? 0) > indexedAtRestart ? Date.now() : null), 180_000, 20);
    const done = await watch.done.catch(async (err: Error) => {
      throw new Error(`${err.message}; last status ${JSON.stringify(watch.seen.at(-1))}\n${await cluster!.diagnose()}`);
    });
    const tDone = Date.now();
    const tResumed = await resumed;
    expect(watch.earlyDone, JSON.stringify(watch.seen.at(-1))).toBe(false);
    expect(done.stages).toMatchObject({ accepted: docs.length, indexed: docs.length, failed: 0 });
    const c = await census(cluster, 'k', docs);
    const figures = {
      accepted: docs.length,
      indexedAtKill: before.indexed,
      searchable: c.searchable,
      duplicated: c.duplicated,
      lost: c.lost,
      wrongText: c.wrongText,
      statusPolls: watch.seen.length,
      workerStartMs: tRestarted - tKill,
      killToProgressMs: tResumed - tKill,
      killToDoneMs: tDone - tKill,
      restartToDoneMs: tDone - tRestarted,
    };
    report('worker-kill-9', figures);
    expect(c).toEqual({ listed: docs.length, searchable: docs.length, duplicated: 0, lost: 0, wrongText: 0, collectionDocuments: docs.length, manifestDocuments: docs.length });
  }, 420_000);
});
