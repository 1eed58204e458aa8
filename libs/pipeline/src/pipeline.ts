import { QueueName, jobIds, type JobPayload, type JobResults } from '@lateral/shared';
import type { JobQueues } from '@lateral/infra';

/** Which batch of which ingestion a step's job is about: carried unchanged from step to step. */
const batchOf = (p: Pick<JobPayload<QueueName.compress>, 'tenantId' | 'collectionId' | 'ingestionId' | 'batchId'>) => ({
  tenantId: p.tenantId,
  collectionId: p.collectionId,
  ingestionId: p.ingestionId,
  batchId: p.batchId,
});

/**
 * The pipeline's next step, decided in one place: encode -> compress -> index -> commit.
 * Called at the end of a processor (before it returns), so a crash between the two cannot lose
 * the chain; a retried job re-adds the same deterministic job id, which BullMQ de-duplicates.
 */
export async function enqueueNext<Q extends QueueName>(queues: Pick<JobQueues, 'add'>, queue: Q, payload: JobPayload<Q>, result: JobResults[Q]): Promise<void> {
  switch (queue) {
    case QueueName.encode: {
      const p = payload as JobPayload<QueueName.encode>;
      const r = result as JobResults[QueueName.encode];
      await queues.add(QueueName.compress, jobIds.compress(p.tenantId, p.collectionId, p.batchId, r.codecVersion), { ...batchOf(p), rawKey: r.rawKey, codecVersion: r.codecVersion, documents: r.documents });
      return;
    }
    case QueueName.compress: {
      const p = payload as JobPayload<QueueName.compress>;
      const r = result as JobResults[QueueName.compress];
      await queues.add(QueueName.index, jobIds.index(p.tenantId, p.collectionId, p.batchId, p.codecVersion), { ...batchOf(p), segmentKey: r.segmentKey, codecVersion: p.codecVersion, documents: p.documents });
      return;
    }
    case QueueName.index: {
      // The segment and its search index are both written: commit it.
      const p = payload as JobPayload<QueueName.index>;
      const r = result as JobResults[QueueName.index];
      await queues.add(QueueName.commit, jobIds.commit(p.tenantId, p.collectionId, p.batchId, p.codecVersion), { ...p, ...(r.segment ? { verified: r.segment } : {}) });
      return;
    }
    default:
      return;
  }
}
