import path from 'node:path';
import { Job } from 'bullmq';
import { afterAll, describe, expect, it } from 'vitest';
import { QueueName, mergeJobId, s3Keys } from '@lateral/shared';
import { loadCranfield } from '../../scripts/lib/cranfield';
import { until } from '../helpers';
import { census, manifestsAndMissingSegments, report, startCluster, watchIngestion, type Cluster } from './harness';

/**
 * kill -9 of the worker process that runs the merge queue (as the deployed scorer pool does,
 * beside commits and deletes) while a merge job runs, then a new worker process: the merge is
 * resumed once its job lock (and the dead worker's merge lease) expires and completes; the
 * generation sequence in S3 gains exactly one
 * generation (the merge's), every manifest is whole and every segment and search index it names
 * exists (no half-committed generation); the documents are counted exactly, and re-rank returns
 * the same hits with the same scores as before the merge. 1,000 Cranfield documents in 50
 * single-batch segments, merged into one (MERGE_FACTOR 50, no merges after commits).
 */
describe('fault: kill -9 of the worker mid-merge', () => {
  let cluster: Cluster | undefined;
  afterAll(async () => cluster?.stop());

  it('retries the merge, commits one whole generation, loses and changes nothing', async () => {
    cluster = await startCluster({ env: { MERGE_AFTER_COMMIT: 'false', MERGE_FACTOR: '50' } });
    const { api } = cluster;
    const { runtime } = cluster.server;
    const tenant = cluster.config.DEFAULT_TENANT;
    const docs = loadCranfield(path.resolve('data/cranfield')).docs.slice(0, 1000).map((d) => ({ id: d.id, text: d.text || 'empty' }));
    // The IVF path: the generation counts below are the merge's own commits (a WARP collection's merge may commit a centroid refit first).
    expect((await api('POST', '/v1/collections', { id: 'm', search: { layout: 'ivf' } })).status).toBe(201);
    const ing = await api('POST', '/v1/collections/m/documents', docs);
    expect(ing.status).toBe(202);
    await watchIngestion(api, ing.body.status).done;
    const before = (await runtime.generations.manifest(tenant, 'm'))!;
    expect(before.segments).toHaveLength(50);
    const query = (candidates: string[]) =>
      api('POST', '/v1/rerank?wait=60', { collection: 'm', queries: [{ id: 'q', text: 'heat transfer in a boundary layer', candidates }], topK: candidates.length });
    const ranked = await query(docs.map((d) => d.id));
    expect(ranked.body.status).toBe('completed');
    const hitsBefore = ranked.body.result.results[0].hits as { id: string; score: number }[];

    // The merge: queued through the API (no wait), killed as soon as the worker holds it.
    const queued = await api('POST', '/v1/collections/m/merge?wait=0');
    expect(queued.status).toBe(202);
    const jobId = mergeJobId(tenant, 'm', 'api', before.generation);
    const queue = runtime.queues.get(QueueName.merge);
    const tQueued = Date.now();
    await until(async () => ((await (await Job.fromId(queue, jobId))?.getState()) === 'active' ? true : null), 120_000, 10);
    const tActive = Date.now();
    await cluster.workers[0].kill9();
    const tKill = Date.now();
    const atKill = (await runtime.generations.manifest(tenant, 'm'))!;
    expect(atKill.generation, 'the merge must not have committed before the kill').toBe(before.generation);
    expect((await Job.fromId(queue, jobId))!.finishedOn, 'the merge job must not have finished before the kill').toBeFalsy();

    await cluster.spawnWorker();
    const tRestarted = Date.now();
    const finished = await until(
      async () => {
        const job = await Job.fromId(queue, jobId);
        const state = await job?.getState();
        if (state === 'failed') throw new Error(`merge failed: ${job!.failedReason}\n${await cluster!.diagnose()}`);
        return state === 'completed' ? job! : null;
      },
      240_000,
      100,
    ).catch(async (err: Error) => {
      throw new Error(`${err.message}\n${await cluster!.diagnose()}`);
    });
    const tDone = Date.now();
    const out = finished.returnvalue as { generation: number; committed: boolean; merged: { status: string; inputs: number; dropped: number } };

    // One generation more, the merge's: one segment holding all 1,000 documents, and it is whole.
    const after = (await runtime.generations.manifest(tenant, 'm'))!;
    expect(after.generation).toBe(before.generation + 1);
    expect(after.segments).toHaveLength(1);
    expect(after.segments[0].documents).toBe(1000);
    const sequence = await manifestsAndMissingSegments(cluster, 'm');
    expect(sequence).toEqual({ generations: before.generation + 1, missing: [] });
    for (const ref of after.segments) expect(await runtime.store.exists(s3Keys.segmentIndex(tenant, 'm', ref.batchId, ref.codecVersion)), `index of ${ref.key}`).toBe(true);
    // Every manifest object in S3 is one of the sequence 1..n (none written beside it by the killed attempt).
    const listed = (await runtime.store.list(s3Keys.manifestPrefix(tenant, 'm'))).map((o) => o.key).sort();
    expect(listed).toEqual(Array.from({ length: after.generation }, (_, i) => s3Keys.manifest(tenant, 'm', i + 1)));

    // Exact counts, and the same re-rank results.
    const c = await census(cluster, 'm', docs);
    expect(c).toEqual({ listed: 1000, searchable: 1000, duplicated: 0, lost: 0, wrongText: 0, collectionDocuments: 1000, manifestDocuments: 1000 });
    const again = await query(docs.map((d) => d.id));
    expect(again.body.result.generation).toBe(after.generation);
    expect(again.body.result.results[0].hits).toEqual(hitsBefore);

    report('merge-kill-9', {
      documents: 1000,
      segmentsBefore: before.segments.length,
      segmentsAfter: after.segments.length,
      generations: `${before.generation} -> ${after.generation}`,
      queuedToActiveMs: tActive - tQueued,
      killToRestartedMs: tRestarted - tKill,
      killToMergedMs: tDone - tKill,
      attemptsMade: finished.attemptsMade,
      resumedAttemptMs: (finished.finishedOn ?? 0) - (finished.processedOn ?? 0),
      finalAttempt: `${out.merged.status}, committed ${out.committed}`,
      searchable: c.searchable,
      duplicated: c.duplicated,
      lost: c.lost,
      rerankUnchanged: true,
    });
  }, 420_000);
});
