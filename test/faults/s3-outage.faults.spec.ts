import { randomBytes } from 'node:crypto';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { loadCranfield } from '../../scripts/lib/cranfield';
import { http, until } from '../helpers';
import { FaultProxy } from './fault-proxy';
import { census, manifestsAndMissingSegments, report, retryingUnlessHealth, startCluster, watchIngestion, type Cluster } from './harness';

/**
 * The S3 endpoint failing for a window in the middle of an ingestion of 600 documents: the API and
 * the worker process reach the S3 server only through a fault-injecting TCP proxy, which resets
 * every connection for 3 s, then accepts and never answers for 3 s (held connections are reset at
 * the end), then refuses connections for 3 s. Jobs retry and finish; every committed manifest
 * (each generation search could have served) names only segment objects that exist; every
 * document is searchable once with its text.
 */
describe('fault: S3 failing for a window (reset, stall, refuse) mid-ingestion', () => {
  let cluster: Cluster | undefined;
  let proxy: FaultProxy | undefined;
  afterAll(async () => {
    await proxy?.set('pass');
    await cluster?.stop();
    await proxy?.stop();
  });

  const token = randomBytes(24).toString('base64url');

  it('jobs retry and finish; no partial segment or generation is visible', async () => {
    cluster = await startCluster({
      env: { ADMIN_TOKEN: token },
      s3Via: async (endpoint) => {
        proxy = await FaultProxy.start(endpoint);
        return proxy.endpoint;
      },
    });
    const { api } = cluster;
    const docs = loadCranfield(path.resolve('data/cranfield')).docs.slice(0, 600).map((d) => ({ id: d.id, text: d.text || 'empty' }));
    expect((await api('POST', '/v1/collections', { id: 's' })).status).toBe(201);
    const ing = await api('POST', '/v1/collections/s/documents', docs);
    expect(ing.status).toBe(202);
    const watch = watchIngestion(api, ing.body.status);
    const before = await until(async () => {
      const last = watch.seen.at(-1);
      return last && last.indexed >= 100 && last.indexed < docs.length ? last : null;
    }, 180_000, 20);
    const tOutage = Date.now();
    for (const mode of ['reset', 'stall', 'refuse'] as const) {
      await proxy!.set(mode);
      await new Promise((r) => setTimeout(r, 3000));
    }
    await proxy!.set('pass');
    const tBack = Date.now();
    const health = await until(async () => (await api('GET', '/v1/health')).status === 200, 60_000, 50);
    expect(health).toBe(true);
    const done = await watch.done.catch(async (err: Error) => {
      // What was left where: the queues, the failed jobs and the worker's last lines.
      const ov = await http(cluster!.server.url, 'GET', '/v1/admin/overview', undefined, { authorization: `Bearer ${token}` }, retryingUnlessHealth);
      const left = JSON.stringify({ last: watch.seen.at(-1), queues: ov.body?.queues, failedJobs: ov.body?.failedJobs });
      throw new Error(`${err.message}\n${left.slice(0, 4000)}\nworker:\n${cluster!.workers[0].output().slice(-3000)}`);
    });
    const tDone = Date.now();
    expect(watch.earlyDone).toBe(false);
    expect(done.stages).toMatchObject({ accepted: docs.length, indexed: docs.length, failed: 0 });
    expect(cluster.workers[0].child.exitCode, 'the worker process kept running').toBeNull();
    const { generations, missing } = await manifestsAndMissingSegments(cluster, 's');
    const c = await census(cluster, 's', docs);
    report('s3-outage', {
      accepted: docs.length,
      indexedAtOutage: before.indexed,
      searchable: c.searchable,
      duplicated: c.duplicated,
      lost: c.lost,
      wrongText: c.wrongText,
      outageMs: tBack - tOutage,
      connectionsFaulted: { reset: proxy!.counts.reset, stalled: proxy!.counts.stall },
      generations,
      missingSegments: missing.length,
      backToDoneMs: tDone - tBack,
    });
    expect(proxy!.counts.reset + proxy!.counts.stall, 'the outage must have met S3 traffic').toBeGreaterThan(0);
    expect(missing).toEqual([]);
    expect(generations).toBeGreaterThan(0);
    expect(c).toEqual({ listed: docs.length, searchable: docs.length, duplicated: 0, lost: 0, wrongText: 0, collectionDocuments: docs.length, manifestDocuments: docs.length });
  }, 420_000);
});
