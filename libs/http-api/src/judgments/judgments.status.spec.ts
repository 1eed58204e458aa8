import { describe, expect, it } from 'vitest';
import type { JobRecord, JobRecordRepository } from '@lateral/infra';
import { JudgmentsService, type JudgmentsDeps } from './judgments.service';

/**
 * GET /v1/train/{id} reads the job, then its state. A run that ends between the two (a DELETE's
 * cancel reaching the worker) used to be answered from the stale copy: state 'failed' with no
 * failedReason, so a cancelled run was reported 'failed' with no error (seen once in CI, in
 * test/training.integration.spec.ts), and a completed one had no return value to read. The job is
 * read again once its state is final by JobRecordRepository.read (its own spec,
 * libs/infra/src/job-records.repository.spec.ts); here, the service's answer from that record.
 */
describe('JudgmentsService.status, a run that ends while it is read', () => {
  const deps = (report: unknown, job: Partial<JobRecord>) =>
    ({
      config: { AUTH: 'none', DEFAULT_TENANT: 'default', REDIS_PREFIX: 'p' },
      jobs: { read: async () => ({ id: 'j', data: { collectionId: 'c' }, progress: { epoch: 0 }, failedReason: undefined, returnvalue: undefined, ...job }) } as unknown as JobRecordRepository,
      trainingCancels: { isCancelled: async () => false },
      store: { getJson: async () => report },
    }) as unknown as JudgmentsDeps;

  it('a cancel recorded after the first read: cancelled, with the reason', async () => {
    const st = await new JudgmentsService(deps(null, { state: 'failed', failedReason: 'training tr-1 was cancelled in epoch 0' })).status('tr-1');
    expect(st).toMatchObject({ trainId: 'tr-1', collection: 'c', status: 'cancelled', error: 'training tr-1 was cancelled in epoch 0' });
  });

  it('a completion recorded after the first read: completed, with its report', async () => {
    const st = await new JudgmentsService(deps({ head: 'lite' }, { state: 'completed', returnvalue: { reportKey: 'r.json' } })).status('tr-2');
    expect(st).toMatchObject({ status: 'completed', result: { head: 'lite' } });
  });
});
