import { QueueName } from '@lateral/shared';
import { runMain } from '@lateral/infra';
import { runWorkerApp } from '@lateral/pipeline';

/** Index commits and re-ranking (CPU pool); encodes queries itself. */
runMain(() => runWorkerApp('scorer-worker', [QueueName.index, QueueName.rerank]));
