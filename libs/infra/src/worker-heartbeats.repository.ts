import type { Redis } from 'ioredis';
import { HEARTBEAT_TTL_SECONDS, heartbeatKeys, parseHeartbeat, type WorkerHeartbeat } from '@lateral/shared';

/** The workers' heartbeats as the dashboard reads them (written by libs/workers/src/heartbeat.ts). */
export class WorkerHeartbeatRepository {
  constructor(
    private readonly redis: Redis,
    private readonly prefix: string,
  ) {}

  /** Every worker whose heartbeat has not expired at `now`; expired ones are dropped from the index first. */
  async live(now = Date.now()): Promise<WorkerHeartbeat[]> {
    const index = heartbeatKeys.index(this.prefix);
    await this.redis.zremrangebyscore(index, '-inf', now - HEARTBEAT_TTL_SECONDS * 1000);
    const ids = await this.redis.zrange(index, 0, -1);
    const pipe = this.redis.pipeline();
    for (const id of ids) pipe.hgetall(heartbeatKeys.worker(this.prefix, id));
    const rows = ((await pipe.exec()) ?? []).map((r) => parseHeartbeat((r[1] as Record<string, string>) ?? {}));
    return rows.filter((w): w is WorkerHeartbeat => w !== null);
  }
}
