import { startEmbeddedS3 } from '@lateral/infra';
import { controlByStdin, FaultProxy } from './fault-proxy';

/**
 * The S3 host of the cross-host fault suite (cluster-hosts.faults.spec.ts), run inside its own
 * network namespace: the embedded S3 server on the namespace's loopback, reached by the other
 * hosts only through a FaultProxy listening on the host's address (S3_HOST_ADDRESS:S3_HOST_PORT).
 * Commands on stdin (`controlByStdin`): `delay <ms>` (the stand-in for `tc netem delay`, which this
 * kernel lacks) and `stats`. The process exits when stdin closes.
 */
async function main(): Promise<void> {
  const dir = process.env.S3_HOST_DIR;
  const address = process.env.S3_HOST_ADDRESS;
  const port = Number(process.env.S3_HOST_PORT);
  if (!dir || !address || !port) throw new Error('S3_HOST_DIR, S3_HOST_ADDRESS and S3_HOST_PORT are required');
  const s3 = await startEmbeddedS3({ dir, bucket: process.env.S3_BUCKET ?? 'faults', accessKeyId: 'S3RVER', secretAccessKey: 'S3RVER' });
  const proxy = await FaultProxy.start(s3.endpoint, { host: address, port });
  controlByStdin(proxy, () => s3.stop());
  console.log(`s3 host ready on ${proxy.endpoint}`);
}

main().catch((err: Error) => {
  console.error(`s3 host failed: ${err.stack ?? err.message}`);
  process.exit(1);
});
