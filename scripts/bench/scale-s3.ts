/**
 * The S3 server of `npm run bench -- scale`, in a process of its own so its memory is measured
 * apart from the load generator's: the embedded s3rver on `argv[2]` (a folder), bucket `argv[3]`.
 * Prints `S3 <endpoint>` when it serves; stops on SIGTERM or when its parent goes away (stdin EOF).
 */
import { startEmbeddedS3 } from '@lateral/infra';

async function main() {
  const [dir, bucket] = process.argv.slice(2);
  if (!dir || !bucket) throw new Error('usage: scale-s3.ts <dir> <bucket>');
  const s3 = await startEmbeddedS3({ dir, bucket, accessKeyId: 'S3RVER', secretAccessKey: 'S3RVER' });
  console.log(`S3 ${s3.endpoint}`);
  const stop = () => void s3.stop().finally(() => process.exit(0));
  process.once('SIGTERM', stop);
  process.stdin.on('end', stop).resume();
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
