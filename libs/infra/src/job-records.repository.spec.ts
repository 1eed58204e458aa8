import { Job } from 'bullmq';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { QueueName } from '@lateral/shared';
import { JobRecordRepository } from './job-records.repository';
import type { JobQueues } from './queues';

/**
 * A job read, then its state: a job that ends between the two (a training run's cancel reaching
 * the worker) used to be answered from the stale copy, with no failedReason and no return value
 * (seen once in CI, in test/training.integration.spec.ts). read() reads it again once the state is final.
 */
describe('JobRecordRepository.read, a job that ends while it is read', () => {
  afterEach(() => vi.restoreAllMocks());
  const repo = () => new JobRecordRepository({ get: () => ({}) } as unknown as JobQueues, {} as never);

  /** The job as read first (active, nothing recorded; its state read afterwards is final), and as read again. */
  const jobs = (state: 'failed' | 'completed', ended: Partial<Job>) => {
    const stale = { id: 'j', data: { collectionId: 'c' }, progress: { epoch: 0 }, opts: {}, failedReason: undefined, returnvalue: undefined, getState: async () => state };
    const fresh = { ...stale, ...ended };
    return vi.spyOn(Job, 'fromId').mockResolvedValueOnce(stale as unknown as Job).mockResolvedValue(fresh as unknown as Job);
  };

  it('a failure recorded after the first read: failed, with the reason', async () => {
    const fromId = jobs('failed', { failedReason: 'training tr-1 was cancelled in epoch 0' });
    const r = await repo().read(QueueName.train, 'j');
    expect(r).toMatchObject({ state: 'failed', data: { collectionId: 'c' }, failedReason: 'training tr-1 was cancelled in epoch 0' });
    expect(fromId).toHaveBeenCalledTimes(2);
  });

  it('a completion recorded after the first read: completed, with its return value', async () => {
    jobs('completed', { returnvalue: { reportKey: 'r.json' } });
    const r = await repo().read(QueueName.train, 'j');
    expect(r).toMatchObject({ state: 'completed', returnvalue: { reportKey: 'r.json' } });
  });

  it('a job not found: null', async () => {
    vi.spyOn(Job, 'fromId').mockResolvedValue(undefined);
    expect(await repo().read(QueueName.train, 'j')).toBeNull();
  });
});
