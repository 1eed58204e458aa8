import type { Redis } from 'ioredis';
import { trainingKeys } from '@lateral/shared';

/** How long a cancel flag is kept (a run is never queued longer). */
const CANCEL_FLAG_SECONDS = 7 * 24 * 3600;

/** The flags that cancel training runs: set by the API, read by the train job at each step. */
export class TrainingCancelRepository {
  constructor(
    private readonly redis: Redis,
    private readonly prefix: string,
  ) {}

  async cancel(tenantId: string, trainId: string): Promise<void> {
    await this.redis.set(trainingKeys.cancelFlag(this.prefix, tenantId, trainId), '1', 'EX', CANCEL_FLAG_SECONDS);
  }

  async isCancelled(tenantId: string, trainId: string): Promise<boolean> {
    return (await this.redis.exists(trainingKeys.cancelFlag(this.prefix, tenantId, trainId))) > 0;
  }
}
