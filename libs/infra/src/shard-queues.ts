import { Queue } from 'bullmq';
import type { Redis } from 'ioredis';
import { ShardJobPayloadSchema, shardQueueName, type ShardJobPayload } from '@lateral/shared';
import { BULLMQ_CONNECTION_OPTIONS, DEFAULT_JOB_OPTIONS, withRequestId } from './queues';

/**
 * Producer of the shard queues (`shard-<i>`, one per shard index, shared by every collection):
 * the children of a sharded re-rank or search. A child fails its parent when it fails for good.
 */
export class ShardQueues {
  private readonly queues = new Map<number, Queue>();

  constructor(private readonly connection: Redis, private readonly prefix: string, private readonly attempts: number) {}

  get(shard: number): Queue {
    let q = this.queues.get(shard);
    if (!q) {
      q = new Queue(shardQueueName(shard), { ...BULLMQ_CONNECTION_OPTIONS, connection: this.connection, prefix: this.prefix, defaultJobOptions: DEFAULT_JOB_OPTIONS(this.attempts) });
      this.queues.set(shard, q);
    }
    return q;
  }

  /** Adds a child of `parent` (a job id and its queue's qualified name); a job id already there is left as it is (BullMQ). */
  async add(jobId: string, payload: ShardJobPayload, parent: { id: string; queue: string }): Promise<void> {
    const data = withRequestId(payload);
    ShardJobPayloadSchema.parse(data);
    await this.get(payload.shard).add(shardQueueName(payload.shard), data, { jobId, parent, failParentOnFailure: true });
  }

  /** Waiting, active and failed counts per shard queue opened so far. */
  async counts(): Promise<Record<string, Record<string, number>>> {
    const out: Record<string, Record<string, number>> = {};
    for (const [i, q] of this.queues) out[shardQueueName(i)] = await q.getJobCounts('waiting', 'active', 'completed', 'failed');
    return out;
  }

  async close(): Promise<void> {
    await Promise.all([...this.queues.values()].map((q) => q.close()));
  }
}
