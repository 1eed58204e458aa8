import { QueueName } from '@lateral/shared';
import { runMain } from '@lateral/infra';
import { runWorkerApp } from '@lateral/workers';

/** Commits and re-ranking (CPU pool); encodes queries itself. */
runMain(() => runWorkerApp('scorer-worker', [QueueName.commit, QueueName.merge, QueueName.refit, QueueName.rerank, QueueName.batch]));
