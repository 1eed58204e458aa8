import readline from 'node:readline';
import { startEmbeddedS3 } from '@lateral/infra';
import { FaultProxy } from './fault-proxy';

/**
 * The S3 host of the cross-host fault suite (cluster-hosts.faults.spec.ts), run inside its own
 * network namespace: the embedded S3 server on the namespace's loopback, reached by the other
 * hosts only through a FaultProxy listening on the host's address (S3_HOST_ADDRESS:S3_HOST_PORT).
 * Commands on stdin, one a line, each answered `ok <command>` on stdout: `delay <ms>` (every chunk
 * relayed is held that long, each way: the stand-in for `tc netem delay`, which this kernel
 * lacks), `stats` (`stats <delayed chunks> <connections>`). The process exits when stdin closes.
 */
async function main(): Promise<void> {
  const dir = process.env.S3_HOST_DIR;
  const address = process.env.S3_HOST_ADDRESS;
  const port = Number(process.env.S3_HOST_PORT);
  if (!dir || !address || !port) throw new Error('S3_HOST_DIR, S3_HOST_ADDRESS and S3_HOST_PORT are required');
  const s3 = await startEmbeddedS3({ dir, bucket: process.env.S3_BUCKET ?? 'faults', accessKeyId: 'S3RVER', secretAccessKey: 'S3RVER' });
  const proxy = await FaultProxy.start(s3.endpoint, { host: address, port });
  const lines = readline.createInterface({ input: process.stdin });
  lines.on('line', (line) => {
    const [cmd, arg] = line.trim().split(/\s+/);
    if (cmd === 'delay' && Number.isFinite(Number(arg))) {
      proxy.delayMs = Number(arg);
      console.log(`ok ${line.trim()}`);
    } else if (cmd === 'stats') {
      console.log(`stats ${proxy.delayedChunks} ${proxy.counts.pass}`);
    } else {
      console.log(`error unknown command: ${line.trim()}`);
    }
  });
  lines.once('close', () => {
    void proxy.stop().then(() => s3.stop()).finally(() => process.exit(0));
  });
  console.log(`s3 host ready on ${proxy.endpoint}`);
}

main().catch((err: Error) => {
  console.error(`s3 host failed: ${err.stack ?? err.message}`);
  process.exit(1);
});
