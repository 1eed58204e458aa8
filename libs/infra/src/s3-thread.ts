import path from 'node:path';
import { Worker } from 'node:worker_threads';
import type { Logger } from './logger';
import type { EmbeddedS3 } from './embedded-services';

/**
 * The embedded S3 server (startEmbeddedS3: s3rver with atomic puts, conditional writes and the key
 * guard) in a worker thread of its own (issue 31 item 3): its request handling and file I/O
 * callbacks no longer share the event loop of the API and the workers, so a busy job or request
 * does not delay S3's answers, and the process's S3 client does not wait on its own loop.
 * Same interface as startEmbeddedS3; `stop()` closes the server and ends the thread.
 */
export async function startEmbeddedS3Thread(opts: { dir: string; bucket: string; accessKeyId: string; secretAccessKey: string; logger?: Logger }): Promise<EmbeddedS3> {
  const { logger, ...data } = opts;
  const worker = new Worker(path.join(__dirname, 's3-thread.cjs'), { workerData: data });
  const exited = new Promise<number>((resolve) => worker.once('exit', resolve));
  const endpoint = await new Promise<string>((resolve, reject) => {
    worker.on('message', (m: { t: string; endpoint?: string; message?: string }) => {
      if (m.t === 'started') resolve(m.endpoint!);
      else if (m.t === 'failed') reject(new Error(`the embedded S3 server did not start: ${m.message}`));
    });
    worker.once('error', reject);
    void exited.then((code) => reject(new Error(`the embedded S3 server's thread exited (code ${code}) before it started`)));
  });
  worker.on('error', (err) => logger?.error(`embedded S3 server thread: ${err.message}`));
  logger?.info(`started the embedded S3 server on ${endpoint} in its own thread (folder ${opts.dir})`);
  let stopping: Promise<void> | undefined;
  return {
    endpoint,
    stop: () =>
      (stopping ??= (async () => {
        worker.postMessage({ t: 'stop' });
        let timer: NodeJS.Timeout | undefined;
        const done = await Promise.race([exited.then(() => true), new Promise<boolean>((r) => (timer = setTimeout(() => r(false), 5000)))]);
        clearTimeout(timer);
        if (!done) await worker.terminate();
      })()),
  };
}
