/**
 * The embedded S3 server's thread (./s3-thread.ts): runs startEmbeddedS3 here, posts its endpoint,
 * and closes it when told to stop.
 */
import { parentPort, workerData } from 'node:worker_threads';
import { startEmbeddedS3 } from './embedded-services';

const opts = workerData as Parameters<typeof startEmbeddedS3>[0];

startEmbeddedS3({ ...opts, logger: undefined }).then(
  (s3) => {
    parentPort!.on('message', (m: { t: string }) => {
      if (m.t !== 'stop') return;
      void s3.stop().then(
        () => process.exit(0),
        () => process.exit(1),
      );
    });
    parentPort!.postMessage({ t: 'started', endpoint: s3.endpoint });
  },
  (err: Error) => {
    parentPort!.postMessage({ t: 'failed', message: err.message });
    process.exit(1);
  },
);
