import { QueueName } from '@lateral/shared';
import { runWorkerApp } from '@lateral/pipeline';

/** Index commits and re-ranking (CPU pool); encodes queries itself. */
runWorkerApp('scorer-worker', [QueueName.index, QueueName.rerank]).catch((err) => {
  console.error(err instanceof Error ? err.message : err);
  process.exit(1);
});
