import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { startEmbeddedRedis } from '@lateral/infra';
import { loadCranfield } from '../../scripts/lib/cranfield';
import { until } from '../helpers';
import { census, report, startCluster, watchIngestion, type Cluster } from './harness';

/**
 * Redis lost after an ingestion: kill -9 of redis-server (no append-only file, so nothing of its
 * data survives) and an empty one started on the same port. S3 is the source of truth: the API
 * (in the test process) and the ingestion worker (a child process), neither restarted, must serve
 * the collections again by themselves, with exact counts and the same re-rank ranking, and a new
 * ingestion must run through the emptied queues to the next generation (300 documents, then 50). Times are measured from
 * the moment the empty Redis answers.
 */
describe('fault: Redis lost (started empty) after an ingestion', () => {
  let cluster: Cluster | undefined;
  afterAll(async () => cluster?.stop());

  it('collections and documents come back from S3; API and workers recover without a restart', async () => {
    // 50 documents per batch: 6 batches, so the suite's time goes to the fault, not to the ingestion before it.
    cluster = await startCluster({ persistentRedis: false, env: { ENCODE_BATCH_DOCUMENTS: '50' } });
    const { api } = cluster;
    const cran = loadCranfield(path.resolve('data/cranfield'));
    const docs = cran.docs.slice(0, 300).map((d) => ({ id: d.id, text: d.text || 'empty' }));
    const queries = cran.queries.slice(0, 3);
    // The IVF path: the generations checked below are the ingest's own commits (a WARP collection may also commit a centroid refit).
    for (const id of ['lost', 'other']) expect((await api('POST', '/v1/collections', { id, search: { layout: 'ivf' } })).status).toBe(201);
    const ing = await api('POST', '/v1/collections/lost/documents', docs);
    expect(ing.status).toBe(202);
    const watch = watchIngestion(api, ing.body.status);
    await watch.done;
    expect(watch.earlyDone).toBe(false);
    const rerank = async () => {
      const rr = await api('POST', '/v1/rerank?wait=60', {
        collection: 'lost',
        queries: queries.map((q) => ({ id: q.id, text: q.text, candidates: docs.map((d) => d.id) })),
        scorer: 'maxsim',
        topK: 50,
      });
      if (rr.body?.status !== 'completed') return null;
      return rr.body.result.results as { queryId: string; hits: { id: string; score: number }[] }[];
    };
    const ranked = await rerank();
    expect(ranked).not.toBeNull();
    const describeBefore = (await api('GET', '/v1/collections/lost')).body;

    // kill -9: Redis dies with everything it held; the new one starts empty on the same port.
    const { port, dir } = cluster.redis;
    const pid = cluster.redis.pid;
    expect(pid).toBeGreaterThan(0);
    process.kill(pid!, 'SIGKILL');
    await cluster.redis.stop();
    expect((await api('GET', '/v1/health')).status).toBe(503);
    cluster.redis = await startEmbeddedRedis({ dir: `${dir}-empty`, port, persistent: false });
    const tBack = Date.now();
    await until(async () => (await api('GET', '/v1/health')).status === 200, 60_000, 50);
    const tHealthy = Date.now();
    const listed = await until(async () => {
      const l = await api('GET', '/v1/collections');
      return l.status === 200 ? (l.body.collections as { id: string; documents: number }[]) : null;
    }, 60_000, 50);
    const tListed = Date.now();
    expect(listed.map((c) => c.id)).toEqual(['lost', 'other']);
    // The first re-rank that completes after the loss (the API's and the scorers' connections come back by themselves).
    const again = await until(rerank, 120_000, 200);
    const tRerank = Date.now();
    expect(again).toEqual(ranked);
    const after = (await api('GET', '/v1/collections/lost')).body;
    expect(after).toMatchObject({ documents: docs.length, generation: describeBefore.generation, segments: describeBefore.segments });
    expect(after.stages).toMatchObject({ accepted: docs.length, indexed: docs.length, failed: 0 });
    expect((await api('GET', ing.body.status)).body).toMatchObject({ state: 'done', stages: { accepted: docs.length, indexed: docs.length } });
    const c = await census(cluster, 'lost', docs);

    // The worker process (not restarted) takes new work from the emptied queues: the next generations follow.
    const more = cran.docs.slice(300, 350).map((d) => ({ id: d.id, text: d.text || 'empty' }));
    const ing2 = await api('POST', '/v1/collections/lost/documents', more);
    expect(ing2.status).toBe(202);
    const watch2 = watchIngestion(api, ing2.body.status);
    await watch2.done.catch(async (err: Error) => {
      throw new Error(`${err.message}\n${await cluster!.diagnose()}`);
    });
    const tIngested = Date.now();
    expect(watch2.earlyDone).toBe(false);
    expect(cluster.workers[0].child.exitCode, 'the worker process was not restarted').toBeNull();
    const all = [...docs, ...more];
    const c2 = await census(cluster, 'lost', all);
    const grown = (await api('GET', '/v1/collections/lost')).body;
    expect(grown.generation).toBeGreaterThan(describeBefore.generation);
    report('redis-lost', {
      accepted: docs.length,
      searchable: c.searchable,
      duplicated: c.duplicated,
      lost: c.lost,
      wrongText: c.wrongText,
      rerankIdentical: JSON.stringify(again) === JSON.stringify(ranked),
      redisBackToHealthyMs: tHealthy - tBack,
      redisBackToListedMs: tListed - tBack,
      redisBackToRerankMs: tRerank - tBack,
      newIngestionDocuments: more.length,
      redisBackToNewIngestionDoneMs: tIngested - tBack,
      afterNewIngestion: { searchable: c2.searchable, duplicated: c2.duplicated, lost: c2.lost },
    });
    expect(c).toEqual({ listed: docs.length, searchable: docs.length, duplicated: 0, lost: 0, wrongText: 0, collectionDocuments: docs.length, manifestDocuments: docs.length });
    expect(c2).toEqual({ listed: all.length, searchable: all.length, duplicated: 0, lost: 0, wrongText: 0, collectionDocuments: all.length, manifestDocuments: all.length });
  }, 420_000);
});
