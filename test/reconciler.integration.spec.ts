import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { QueueName, jobIds, s3Keys, textJobIds } from '@lateral/shared';
import { reconcile } from '@lateral/workers';
import { startApiOnly } from './api-only';
import { http, testConfig } from './helpers';

/**
 * The reconciler (issue 27 item 2) against real Redis and a real S3 server, with the API alone (no
 * worker takes the jobs, so what Redis holds is what the test left there): while the jobs exist it
 * adds nothing; when Redis lost them (this test's keys deleted, as FLUSHALL would) it enqueues
 * each batch again at the step S3 says is next; a batch whose accepted documents are gone ends
 * failed with the reason; a batch file with no job gets its plan again. The whole recovery of a
 * FLUSHALL mid-ingestion runs in the fault suite (redis-flushall.faults.spec.ts).
 */
describe('reconciler: work whose jobs Redis lost is enqueued again from S3', () => {
  const config = testConfig({ ENCODE_BATCH_DOCUMENTS: '10' });
  let server: Awaited<ReturnType<typeof startApiOnly>>;
  const api = (method: string, url: string, body?: unknown, headers: Record<string, string> = {}) => http(server.url, method, url, body, headers);
  /** What FLUSHALL does to this test's part of the shared Redis. */
  const loseRedis = async () => {
    const keys = await server.rt.redis.keys(`${config.REDIS_PREFIX}*`);
    if (keys.length) await server.rt.redis.del(...keys);
  };

  beforeAll(async () => {
    server = await startApiOnly(config);
  });
  afterAll(async () => {
    await server?.stop();
  });

  it('re-enqueues lost ingestion batches, fails the ones that cannot finish with the reason, and re-plans batch files', async () => {
    expect((await api('POST', '/v1/collections', { id: 'c' })).status).toBe(201);
    const docs = Array.from({ length: 35 }, (_, i) => ({ id: `d${i}`, text: `document ${i} on supersonic flutter` }));
    const ing = await api('POST', '/v1/collections/c/documents', docs);
    expect(ing.status).toBe(202);
    const ingestionId = ing.body.ingestionId as string;
    const batches = Array.from({ length: 4 }, (_, i) => `${ingestionId}-${String(i).padStart(5, '0')}`);
    const batch = await api('POST', `/v1/batches?model=${config.DEFAULT_MODEL}`, JSON.stringify({ custom_id: 'r', query: 'q', candidates: [{ text: 'a' }] }) + '\n', { 'content-type': 'application/jsonl' });
    expect(batch.status).toBe(202);

    // the jobs are there: nothing to do
    const idle = await reconcile(server.rt);
    expect(idle).toMatchObject({ unfinished: 4, requeued: { encode: 0, compress: 0, index: 0 }, failed: 0, batchFiles: 0 });

    await loseRedis();
    const encode = server.rt.queues.get(QueueName.encode);
    expect(await encode.getJob(jobIds.encode('default', 'c', batches[0]))).toBeUndefined();
    // one batch has lost its accepted documents too: it can never finish
    await server.rt.store.delete(s3Keys.batchDocuments('default', 'c', batches[3]));
    const pass = await reconcile(server.rt);
    expect(pass).toMatchObject({ unfinished: 4, requeued: { encode: 3, compress: 0, index: 0 }, failed: 1, batchFiles: 1 });
    for (const b of batches.slice(0, 3)) {
      const job = await encode.getJob(jobIds.encode('default', 'c', b));
      expect(job?.data).toMatchObject({ tenantId: 'default', collectionId: 'c', ingestionId, batchId: b, documentsKey: s3Keys.batchDocuments('default', 'c', b), documents: 10 });
    }
    expect(await server.rt.queues.get(QueueName.batch).getJob(textJobIds.batchPlan('default', batch.body.id))).toBeDefined();
    const status = await api('GET', ing.body.status);
    expect(status.body.state).toBe('failed');
    expect(status.body.stages).toMatchObject({ accepted: 35, failed: 5 });
    expect(status.body.failures[0]).toMatchObject({ batchId: batches[3], stage: 'encode' });
    expect(status.body.failures[0].error).toContain('accepted documents are no longer in S3');

    // a second pass finds the jobs it added (idempotent), and the failed batch stays failed
    const again = await reconcile(server.rt);
    expect(again).toMatchObject({ unfinished: 3, requeued: { encode: 0, compress: 0, index: 0 }, failed: 0, batchFiles: 0 });
  });
});
