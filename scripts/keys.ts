/**
 * `npm run keys -- create --tenant acme --role write` (and list, show, rotate, revoke): API keys,
 * and `npm run keys -- quota acme --documents 1000000`: a tenant's quota overrides,
 * straight in S3 (the source of truth; no API process needs to run). See scripts/lib/keys-cli.ts.
 */
import path from 'node:path';
import { loadConfig } from '@lateral/shared';
import { ApiKeyRepository, ObjectStore, TenantQuotaRepository, createLogger, startEmbeddedS3 } from '@lateral/infra';
import { CliUsageError, KEYS_USAGE, runKeysCli } from './lib/keys-cli';

async function main(): Promise<number> {
  const argv = process.argv.slice(2);
  if (argv.length === 0 || argv.includes('--help') || argv.includes('-h')) {
    console.log(KEYS_USAGE);
    return argv.length === 0 ? 2 : 0;
  }
  const config = loadConfig();
  // Without S3_ENDPOINT the keys go to the embedded server's folder (what `npm start` serves).
  const embedded = config.S3_ENDPOINT
    ? null
    : await startEmbeddedS3({
        dir: path.join(config.DATA_DIR, 's3'),
        bucket: config.S3_BUCKET,
        accessKeyId: config.S3_ACCESS_KEY_ID,
        secretAccessKey: config.S3_SECRET_ACCESS_KEY,
        logger: createLogger('warn', 'keys'),
      });
  const store = ObjectStore.fromConfig(config, embedded?.endpoint ?? config.S3_ENDPOINT);
  try {
    await store.ensureBucket();
    await runKeysCli(argv, new ApiKeyRepository(store), (line) => console.log(line), new TenantQuotaRepository(store));
    return 0;
  } catch (err) {
    if (err instanceof CliUsageError) {
      console.error(`keys: ${err.message}\n\n${KEYS_USAGE}`);
      return 2;
    }
    console.error(`keys: ${(err as Error).message}`);
    return 1;
  } finally {
    store.destroy();
    await embedded?.stop();
  }
}

main().then((code) => process.exit(code));
