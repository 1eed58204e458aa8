import { loadConfig } from '@lateral/shared';
import { createLogger, runMain, stopOnSignal } from '@lateral/infra';
import { startServer } from './server';

async function main() {
  const config = loadConfig();
  const server = await startServer(config);
  const { services } = server.runtime;
  console.log(`lateral all-in-one: API ${server.url}  OpenAPI ${server.url}/openapi.json  docs ${server.url}/docs`);
  console.log(`  Redis ${services.redisUrl}  S3 ${services.s3Endpoint ?? 'AWS'}  (Ctrl-C or SIGTERM stops it cleanly)`);
  stopOnSignal(() => server.stop(), { logger: createLogger(config.LOG_LEVEL, 'lateral'), timeoutMs: (config.SHUTDOWN_GRACE_SECONDS + 30) * 1000 });
}

runMain(main);
