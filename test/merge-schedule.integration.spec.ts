import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEFAULT_MERGE_POLICY, chooseMerge } from '@lateral/pipeline';
import { withRedisLease } from '@lateral/infra';
import { QueueName, redisKeys, type CollectionManifest } from '@lateral/shared';
import { startServer, type Server } from '../apps/all-in-one/src/server';
import { loadCranfield } from '../scripts/lib/cranfield';
import { http, testConfig, until } from './helpers';

/**
 * Background merges are scheduled one pending per collection (libs/pipeline/src/maintenance/
 * merge-schedule.ts; docs/scaling.md, "How merges are scheduled"). Nine commits land while the
 * collection's first merge job runs (held here on the collection's merge lease, as a long merge
 * holds it): the merge queue never holds more than one waiting merge of the collection (before,
 * one job per committed generation: nine), and once the merge goes on, the segments of the last
 * commit are merged with the rest: the follow-up merges run until the policy asks nothing more.
 */
describe('merge scheduling: one pending merge per collection (real Redis, real S3 server, real model)', () => {
  let server: Server;
  // Batches of 2 documents: one ingest of 18 makes nine commits. A lock of 60 s: the held merge waits on the lease up to 120 s.
  const config = testConfig({ ENCODE_BATCH_DOCUMENTS: '2', MERGE_FACTOR: '3', MERGE_AFTER_COMMIT: 'true', JOB_LOCK_SECONDS: '60' });
  const docs = loadCranfield(path.resolve('data/cranfield')).docs.filter((d) => d.text.length > 0).slice(0, 18);
  const api = (method: string, url: string, body?: unknown) => http(server.url, method, url, body);
  const manifest = async () => (await server.runtime.generations.manifest('default', 'many')) as CollectionManifest | null;

  beforeAll(async () => {
    server = await startServer(config, { quiet: true });
  }, 180_000);
  afterAll(async () => {
    await server?.stop();
  });

  /** The merge queue's counts sampled every 25 ms until stopped: the most waiting (waiting, delayed, prioritized, paused) and the most running at once. */
  function sampleMergeQueue() {
    const queue = server.runtime.queues.get(QueueName.merge);
    const seen = { waiting: 0, active: 0 };
    let sampling = true;
    const loop = (async () => {
      while (sampling) {
        const c = await queue.getJobCounts('waiting', 'delayed', 'prioritized', 'paused', 'active');
        seen.waiting = Math.max(seen.waiting, c.waiting + c.delayed + c.prioritized + c.paused);
        seen.active = Math.max(seen.active, c.active);
        await new Promise((r) => setTimeout(r, 25));
      }
    })();
    return {
      seen,
      stop: async () => {
        sampling = false;
        await loop;
      },
    };
  }

  it("many commits during a merge leave at most one waiting merge job; the last commit's segment still ends up merged", async () => {
    const queue = server.runtime.queues.get(QueueName.merge);
    expect((await api('POST', '/v1/collections', { id: 'many' })).status).toBe(201);
    const sampler = sampleMergeQueue();
    let before: CollectionManifest;
    let merged: CollectionManifest;
    try {
      // A long merge holds the collection's merge lease: the first merge job waits on it while the nine commits land.
      const lease = redisKeys.mergeLease(config.REDIS_PREFIX, 'default', 'many');
      before = await withRedisLease(
        server.runtime.redis,
        lease,
        async () => {
          const ing = await api('POST', '/v1/collections/many/documents', docs.map((d) => ({ id: d.id, text: d.text })));
          expect(ing.status, JSON.stringify(ing.body)).toBe(202);
          await until(async () => (await api('GET', ing.body.status)).body.state === 'done', 120_000);
          const m = (await manifest())!;
          // Nothing merged yet (the lease is held; a WARP refit may have committed a generation of its own: it takes no merge lease).
          expect(m.segments).toHaveLength(9);
          // Nine commits' requests: one merge job running (waiting on the lease) or waiting, no more.
          const c = await queue.getJobCounts('waiting', 'delayed', 'prioritized', 'active');
          expect(c.waiting + c.delayed + c.prioritized).toBeLessThanOrEqual(1);
          expect(c.waiting + c.delayed + c.prioritized + c.active).toBeGreaterThanOrEqual(1);
          return m;
        },
        { ttlMs: 60_000 },
      );
      // The lease released: the held merge reads the newest generation, and follow-ups run while the policy asks (9 -> 7 -> 5 -> 3 -> 1 segments, factor 3).
      merged = await until(
        async () => {
          const m = await manifest();
          if (!m || m.segments.length !== 1) return null;
          const c = await queue.getJobCounts('waiting', 'delayed', 'prioritized', 'active');
          return Object.values(c).every((n) => n === 0) ? m : null;
        },
        240_000,
        200,
      );
    } finally {
      await sampler.stop();
    }

    expect(sampler.seen.waiting).toBeLessThanOrEqual(1);
    expect(sampler.seen.active).toBeLessThanOrEqual(1);
    expect(merged.documents).toBe(18);
    expect(merged.segments[0].documents).toBe(18);
    // Every committed batch is in the merged segment, the last commit's included.
    expect(merged.segments[0].batches).toEqual(before.segments.map((s) => s.batchId).sort());
    expect(chooseMerge(merged.segments, merged.segments[0].codecVersion, { ...DEFAULT_MERGE_POLICY, factor: 3 })).toBeNull();

    // Four merge jobs for nine commits, each on the newest generation (WARP refits commit generations of their own beside them):
    // every one merged; the last asked no further merge.
    const jobs = (await queue.getJobs(['completed', 'failed'])).sort((a, b) => a.returnvalue.generation - b.returnvalue.generation);
    expect(jobs.map((j) => [j.returnvalue.merged.status, j.returnvalue.again])).toEqual([
      ['merged', true],
      ['merged', true],
      ['merged', true],
      ['merged', false],
    ]);
    expect(jobs.every((j) => j.returnvalue.committed && j.returnvalue.generation > before.generation)).toBe(true);
  }, 420_000);
});
