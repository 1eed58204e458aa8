import { QueueName } from '@lateral/shared';
import { runMain } from '@lateral/infra';
import { runWorkerApp } from '@lateral/workers';

/** Bulk document work (GPU pool in production): encode text to token vectors, compress into segments. */
runMain(() => runWorkerApp('encoder-worker', [QueueName.encode, QueueName.compress, QueueName.encodeTexts]));
