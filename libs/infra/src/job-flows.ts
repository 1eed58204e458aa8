import { FlowProducer, type FlowJob, type JobNode } from 'bullmq';
import { jobName, parsePayload, QueueName, type JobPayloadInput } from '@lateral/shared';
import type { Redis } from 'ioredis';
import { BULLMQ_CONNECTION_OPTIONS, DEFAULT_JOB_OPTIONS, withRequestId } from './queues';

/** A job of a flow: a parent runs once all its children have completed (BullMQ flows). */
export interface FlowNode<Q extends QueueName = QueueName> {
  queue: Q;
  jobId: string;
  payload: JobPayloadInput<Q>;
  children?: FlowNode[];
}

/**
 * Adds BullMQ flows (a parent job and its children, atomically) with the queues' default options;
 * a child that fails for good fails its parent. Payloads are checked like JobQueues.add does.
 */
export class JobFlows {
  private producer: FlowProducer | null = null;

  constructor(private readonly connection: Redis, private readonly prefix: string, private readonly attempts: number) {}

  async add(root: FlowNode): Promise<JobNode> {
    this.producer ??= new FlowProducer({ ...BULLMQ_CONNECTION_OPTIONS, connection: this.connection, prefix: this.prefix });
    return this.producer.add(this.toFlowJob(root));
  }

  private toFlowJob(n: FlowNode): FlowJob {
    const data = withRequestId(n.payload); // the request id rides along, as with JobQueues.add
    parsePayload(n.queue, data);
    return {
      name: jobName(n.queue, n.payload),
      queueName: n.queue,
      data,
      opts: { ...DEFAULT_JOB_OPTIONS(this.attempts), jobId: n.jobId, failParentOnFailure: true },
      children: n.children?.map((c) => this.toFlowJob(c)),
    };
  }

  async close(): Promise<void> {
    await this.producer?.close();
  }
}
