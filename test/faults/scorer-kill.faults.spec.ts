import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { QueueName } from '@lateral/shared';
import { loadCranfield } from '../../scripts/lib/cranfield';
import { until } from '../helpers';
import { census, liveIdTable, report, startCluster, watchIngestion, type Cluster, type Doc } from './harness';

/**
 * kill -9 of the scorer worker (the process that builds each segment's search index and commits
 * it into the next generation: `index` and `commit`, as docs/deploy.md's scorer worker runs them)
 * in the middle of ingesting 2,000 documents (20 batches of 100), while a separate encoder worker
 * (`encode`, `compress`) keeps going; then a new scorer process. Every accepted document must be
 * searchable exactly once with its text, no id may be live twice in the current generation's
 * segment id tables, and the ingestion must never report `done` early (status polled every 100 ms).
 */
const ENCODER_QUEUES = [QueueName.encode, QueueName.compress];
const SCORER_QUEUES = [QueueName.index, QueueName.commit];

describe('fault: kill -9 of the scorer worker mid-ingestion', () => {
  let cluster: Cluster | undefined;
  afterAll(async () => cluster?.stop());

  it('loses and duplicates nothing, never reports done early, and recovers', async () => {
    // 100 documents per batch (20 batches): fewer index and commit jobs, so the suite's time goes to the fault.
    cluster = await startCluster({ workers: 0, env: { ENCODE_BATCH_DOCUMENTS: '100' } });
    const encoder = await cluster.spawnWorker(ENCODER_QUEUES);
    const scorer = await cluster.spawnWorker(SCORER_QUEUES);
    const { api } = cluster;
    // 2,000 documents: Cranfield's 1,400 and 600 of them again under other ids (with a marker, so texts differ too).
    const cran = loadCranfield(path.resolve('data/cranfield')).docs.map((d) => ({ id: d.id, text: d.text || 'empty' }));
    const docs: Doc[] = [...cran, ...cran.slice(0, 600).map((d) => ({ id: `${d.id}-b`, text: `${d.text} (second copy)` }))];
    expect(docs).toHaveLength(2000);
    expect((await api('POST', '/v1/collections', { id: 's' })).status).toBe(201);
    const ing = await api('POST', '/v1/collections/s/documents', docs);
    expect(ing.status).toBe(202);
    expect(ing.body.batches).toBe(20);
    const watch = watchIngestion(api, ing.body.status);
    // Kill once part of the collection is committed and the rest is still on its way.
    const before = await until(async () => {
      const last = watch.seen.at(-1);
      return last && last.indexed >= 400 && last.indexed < docs.length - 400 ? last : null;
    }, 240_000, 20);
    const tKill = Date.now();
    await scorer.kill9();
    const atKill = (await api('GET', ing.body.status)).body;
    expect(atKill.state, 'the ingestion must still be in progress at the kill').toBe('processing');
    // While no scorer runs, nothing more is committed, and the ingestion must not say done.
    await new Promise((r) => setTimeout(r, 1000));
    const whileDown = (await api('GET', ing.body.status)).body;
    expect(whileDown.state).toBe('processing');
    await cluster.spawnWorker(SCORER_QUEUES);
    const tRestarted = Date.now();
    const indexedAtRestart = (await api('GET', ing.body.status)).body.stages.indexed as number;
    const resumed = until(async () => ((watch.seen.at(-1)?.indexed ?? 0) > indexedAtRestart ? Date.now() : null), 240_000, 20);
    const done = await watch.done.catch(async (err: Error) => {
      throw new Error(`${err.message}; last status ${JSON.stringify(watch.seen.at(-1))}\n${await cluster!.diagnose()}`);
    });
    const tDone = Date.now();
    const tResumed = await resumed;
    expect(watch.earlyDone, JSON.stringify(watch.seen.at(-1))).toBe(false);
    expect(watch.seen.filter((s) => s.state === 'done' && s.indexed < docs.length)).toEqual([]);
    expect(done.stages).toMatchObject({ accepted: docs.length, indexed: docs.length, failed: 0 });
    expect(encoder.child.exitCode, 'the encoder worker was not restarted').toBeNull();
    const c = await census(cluster, 's', docs);
    const table = await liveIdTable(cluster, 's');
    report('scorer-kill-9', {
      accepted: docs.length,
      indexedAtKill: before.indexed,
      searchable: c.searchable,
      duplicated: c.duplicated,
      lost: c.lost,
      wrongText: c.wrongText,
      idTableLive: table.live,
      idTableRepeated: table.repeated,
      statusPolls: watch.seen.length,
      workerStartMs: tRestarted - tKill,
      killToProgressMs: tResumed - tKill,
      killToDoneMs: tDone - tKill,
      restartToDoneMs: tDone - tRestarted,
    });
    expect(c).toEqual({ listed: docs.length, searchable: docs.length, duplicated: 0, lost: 0, wrongText: 0, collectionDocuments: docs.length, manifestDocuments: docs.length });
    expect(table).toEqual({ live: docs.length, repeated: 0 });
  }, 420_000);
});
