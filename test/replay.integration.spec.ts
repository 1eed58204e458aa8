import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Job as BullJob, type Job } from 'bullmq';
import { QueueName, jobIds, s3Keys, type JobPayload } from '@lateral/shared';
import type { JobHandler } from '@lateral/infra';
import { pipelineHandlers } from '@lateral/workers';
import { startServer, type Server } from '../apps/all-in-one/src/server';
import { loadCranfield } from '../scripts/lib/cranfield';
import { http, testConfig, until } from './helpers';

/**
 * BullMQ delivers at least once: every job kind, delivered again after it completed (a worker
 * killed between its side effects and its acknowledgement), changes nothing: no generation is
 * added, no stage counts twice, the objects it writes are byte-identical.
 */
describe('replayed jobs change nothing (real Redis, real S3 server, real ONNX model)', () => {
  let server: Server;
  const config = testConfig({ ENCODE_BATCH_DOCUMENTS: '64' });
  const docs = loadCranfield(path.resolve('data/cranfield')).docs.slice(0, 100);
  const t = config.DEFAULT_TENANT;
  const fakeJob = { updateProgress: async () => undefined } as unknown as Job;

  beforeAll(async () => {
    server = await startServer(config, { quiet: true });
  });
  afterAll(async () => {
    await server?.stop();
  });
  const api = (method: string, url: string, body?: unknown) => http(server.url, method, url, body);
  const idle = () =>
    until(async () => {
      const counts = await server.runtime.queues.counts();
      return Object.values(counts).every((c) => (c.waiting ?? 0) + (c.active ?? 0) + (c.delayed ?? 0) === 0);
    }, 60_000);
  const state = async (status: string) => (await api('GET', status)).body;
  /** A finished job's data as BullMQ holds it (what a second delivery would carry). */
  const jobData = async (queue: QueueName, id: string) => (await BullJob.fromId(server.runtime.queues.get(queue), id))!.data as unknown;

  it('encode, compress, index, commit, rerank and search replays leave generations, counts and objects as they were', async () => {
    await api('POST', '/v1/collections', { id: 'replay', codec: { kind: 'eden', bits: 4 } });
    const ing = await api('POST', '/v1/collections/replay/documents', docs.map((d) => ({ id: d.id, text: d.text })));
    expect(ing.body.batches).toBe(2);
    await until(async () => (await state(ing.body.status)).state === 'done', 120_000);
    await idle();
    const before = await api('GET', '/v1/collections/replay');
    expect(before.body).toMatchObject({ generation: 2, documents: 100, stages: { accepted: 100, encoded: 100, compressed: 100, indexed: 100, failed: 0 } });
    const statusBefore = await state(ing.body.status);
    const handlers = pipelineHandlers(server.runtime);
    const run = <Q extends QueueName>(q: Q, p: JobPayload<Q>) => (handlers[q] as JobHandler<Q>)(p, fakeJob);
    const batchId = `${ing.body.ingestionId}-00000`;
    const common = { tenantId: t, collectionId: 'replay', ingestionId: ing.body.ingestionId as string, batchId, documents: 64 };
    const rawKey = s3Keys.rawVectors(t, 'replay', batchId);
    const segmentKey = s3Keys.segment(t, 'replay', batchId, 1);
    const indexKey = s3Keys.segmentIndex(t, 'replay', batchId, 1);
    const rawBefore = await server.runtime.store.get(rawKey);
    const segBefore = await server.runtime.store.get(segmentKey);
    const indexBefore = await server.runtime.store.get(indexKey);
    expect(indexBefore).not.toBeNull();
    const headKey = s3Keys.segmentHead(t, 'replay', batchId, 1);
    const headBefore = await server.runtime.store.get(headKey);
    expect(headBefore).not.toBeNull();

    // commit: the batch is already in the current generation with the same segment
    const commit = await run(QueueName.commit, { ...common, segmentKey, codecVersion: 1 });
    expect(commit).toEqual({ generation: 2, committed: false });
    // compress and encode: the same bytes again; their follow-up jobs commit nothing new
    await run(QueueName.compress, { ...common, rawKey, codecVersion: 1 });
    expect(Buffer.from((await server.runtime.store.get(segmentKey))!).equals(Buffer.from(segBefore!))).toBe(true);
    await run(QueueName.encode, { ...common, documentsKey: s3Keys.batchDocuments(t, 'replay', batchId) });
    expect(Buffer.from((await server.runtime.store.get(rawKey))!).equals(Buffer.from(rawBefore!))).toBe(true);
    // index: the same search index bytes again (its commit then commits nothing)
    await run(QueueName.index, { ...common, segmentKey, codecVersion: 1 });
    expect(Buffer.from((await server.runtime.store.get(indexKey))!).equals(Buffer.from(indexBefore!))).toBe(true);
    expect(Buffer.from((await server.runtime.store.get(headKey))!).equals(Buffer.from(headBefore!))).toBe(true);
    await idle();
    expect(Buffer.from((await server.runtime.store.get(indexKey))!).equals(Buffer.from(indexBefore!))).toBe(true);
    // twice more, concurrently
    await Promise.all([run(QueueName.commit, { ...common, segmentKey, codecVersion: 1 }), run(QueueName.commit, { ...common, segmentKey, codecVersion: 1 })]);

    const after = await api('GET', '/v1/collections/replay');
    expect(after.body.generation).toBe(2);
    expect(after.body.documents).toBe(100);
    expect(after.body.stages).toEqual(before.body.stages);
    expect(await state(ing.body.status)).toEqual(statusBefore);
    expect(await server.runtime.store.list(s3Keys.manifestPrefix(t, 'replay'))).toHaveLength(2);

    // rerank: the same result object again
    const rr = await api('POST', '/v1/rerank?wait=60', { collection: 'replay', queries: [{ id: 'q', text: 'supersonic flutter', candidates: docs.map((d) => d.id) }], topK: 10 });
    expect(rr.body.status).toBe('completed');
    const rerankId = rr.body.id as string;
    // Delivered again with the job's own data (a small request travels in it, not in S3) ...
    const again = await run(QueueName.rerank, (await jobData(QueueName.rerank, jobIds.rerank(t, rerankId))) as JobPayload<QueueName.rerank>);
    // ... and its result (small: in the return value, else under resultKey) the same.
    const stored = (again.result as { results: unknown } | undefined) ?? (await server.runtime.store.getJson<{ results: unknown }>(again.resultKey));
    expect(stored!.results).toEqual(rr.body.result.results);

    // search: the same hits again, the generation unchanged
    for (const mode of ['xtr', 'bm25']) {
      const sr = await api('POST', '/v1/search?wait=60', { collection: 'replay', mode, topK: 10, queries: [{ id: 'q', text: 'supersonic flutter' }] });
      expect(sr.body.status, JSON.stringify(sr.body)).toBe('completed');
      expect(sr.body.result.results[0].hits.length).toBeGreaterThan(0);
      const searchId = sr.body.id as string;
      const replayed = await run(QueueName.search, (await jobData(QueueName.search, jobIds.search(t, searchId))) as JobPayload<QueueName.search>);
      const storedSearch = (replayed.result as { generation: number; results: unknown } | undefined) ?? (await server.runtime.store.getJson<{ generation: number; results: unknown }>(replayed.resultKey));
      expect(storedSearch!.generation).toBe(2);
      expect(storedSearch!.results).toEqual(sr.body.result.results);
    }
    expect((await api('GET', '/v1/collections/replay')).body.generation).toBe(2);
  }, 240_000); // an ingestion (waits up to 120 s), idle queues and seven replays: past the 60 s default on a loaded machine

  it('a document ingested again counts once in the live documents', async () => {
    const ing = await api('POST', '/v1/collections/replay/documents', docs.slice(0, 5).map((d) => ({ id: d.id, text: `${d.text} (revised)` })));
    await until(async () => (await state(ing.body.status)).state === 'done', 60_000);
    const col = await api('GET', '/v1/collections/replay');
    expect(col.body).toMatchObject({ generation: 3, documents: 100, stages: { accepted: 105, indexed: 105 } });
  });
});
