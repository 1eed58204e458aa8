import { Job } from 'bullmq';
import { afterEach, describe, expect, it, vi } from 'vitest';
import type { Runtime } from '@lateral/infra';
import { JudgmentsService } from './judgments.service';

/**
 * GET /v1/train/{id} reads the job, then its state. A run that ends between the two (a DELETE's
 * cancel reaching the worker) used to be answered from the stale copy: state 'failed' with no
 * failedReason, so a cancelled run was reported 'failed' with no error (seen once in CI, in
 * test/training.integration.spec.ts), and a completed one had no return value to read.
 */
describe('JudgmentsService.status, a run that ends while it is read', () => {
  afterEach(() => vi.restoreAllMocks());

  const runtime = (report: unknown) =>
    ({
      config: { AUTH: 'none', DEFAULT_TENANT: 'default', REDIS_PREFIX: 'p' },
      queues: { get: () => ({}) },
      redis: { exists: async () => 0 },
      store: { getJson: async () => report },
    }) as unknown as Runtime;

  /** The job as read first (active, nothing recorded), and as read again after it ended. */
  const jobs = (state: 'failed' | 'completed', ended: Partial<Job>) => {
    const stale = { data: { collectionId: 'c' }, progress: { epoch: 0 }, failedReason: undefined, returnvalue: undefined, getState: async () => state };
    const fresh = { ...stale, ...ended };
    return vi.spyOn(Job, 'fromId').mockResolvedValueOnce(stale as unknown as Job).mockResolvedValue(fresh as unknown as Job);
  };

  it('a cancel recorded after the first read: cancelled, with the reason', async () => {
    const fromId = jobs('failed', { failedReason: 'training tr-1 was cancelled in epoch 0' });
    const st = await new JudgmentsService(runtime(null)).status('tr-1');
    expect(st).toMatchObject({ trainId: 'tr-1', collection: 'c', status: 'cancelled', error: 'training tr-1 was cancelled in epoch 0' });
    expect(fromId).toHaveBeenCalledTimes(2);
  });

  it('a completion recorded after the first read: completed, with its report', async () => {
    jobs('completed', { returnvalue: { reportKey: 'r.json' } });
    const st = await new JudgmentsService(runtime({ head: 'lite' })).status('tr-2');
    expect(st).toMatchObject({ status: 'completed', result: { head: 'lite' } });
  });
});
