import { describe, expect, it } from 'vitest';
import { jobName, parsePayload, QueueName } from './queues';

describe('job payloads: names that say what the job is', () => {
  it("a batch re-rank file's step carries rerankBatchId; a job queued before the rename (batchId) is read the same", () => {
    expect(parsePayload(QueueName.batch, { step: 'plan', tenantId: 't', rerankBatchId: 'b1' })).toEqual({ step: 'plan', tenantId: 't', rerankBatchId: 'b1' });
    expect(parsePayload(QueueName.batch, { step: 'chunk', tenantId: 't', batchId: 'b1', chunk: 2 })).toEqual({ step: 'chunk', tenantId: 't', rerankBatchId: 'b1', chunk: 2 });
    expect(parsePayload(QueueName.batch, { step: 'finalize', tenantId: 't', batchId: 'b1', chunks: 3 })).toEqual({ step: 'finalize', tenantId: 't', rerankBatchId: 'b1', chunks: 3 });
    expect(() => parsePayload(QueueName.batch, { step: 'plan', tenantId: 't' })).toThrow();
    expect(() => parsePayload(QueueName.batch, { step: 'plan', tenantId: 't', rerankBatchId: '../x' })).toThrow();
  });

  it("a delete on the commit queue is named 'delete', a segment commit 'commit', every other job its queue's name", () => {
    expect(jobName(QueueName.commit, { op: 'delete', tenantId: 't', collectionId: 'c', deleteId: 'd', requestKey: 'k' })).toBe('delete');
    expect(jobName(QueueName.commit, { tenantId: 't', collectionId: 'c', ingestionId: null, batchId: 'b', segmentKey: 'k', codecVersion: 1, documents: 1 })).toBe('commit');
    expect(jobName(QueueName.commit, { op: 'merge', tenantId: 't', collectionId: 'c', trigger: 'api' })).toBe('merge');
    expect(jobName(QueueName.search, { tenantId: 't', collectionId: 'c', searchId: 's', requestKey: 'k' })).toBe('search');
  });
});
