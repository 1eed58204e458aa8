/**
 * The S3 server of `npm run bench -- scale`, in a process of its own so its memory is measured
 * apart from the load generator's: the embedded s3rver on `argv[2]` (a folder), bucket `argv[3]`.
 * Prints `S3 <endpoint>` when it serves; stops on SIGTERM or when its parent goes away (stdin EOF).
 */
import { startEmbeddedS3 } from '@lateral/infra';
import { CliUsageError, parseCliOrExit } from '../lib/cli';

const USAGE = 'usage: tsx scripts/bench/scale-s3.ts <dir> <bucket> (started by npm run bench -- scale)';

async function main() {
  const [dir, bucket] = parseCliOrExit('scale-s3', USAGE, process.argv.slice(2), {}, { positionals: true }, ({ positionals }) => {
    if (positionals.length !== 2) throw new CliUsageError(`a folder and a bucket, got ${positionals.length} argument(s)`);
    return positionals as [string, string];
  });
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
