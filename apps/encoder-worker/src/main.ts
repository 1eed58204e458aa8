import { QueueName } from '@lateral/shared';
import { runWorkerApp } from '@lateral/pipeline';

/** Bulk document work (GPU pool in production): encode text to token vectors, compress into segments. */
runWorkerApp('encoder-worker', [QueueName.encode, QueueName.compress]).catch((err) => {
  console.error(err instanceof Error ? err.message : err);
  process.exit(1);
});
