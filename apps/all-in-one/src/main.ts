import { randomBytes } from 'node:crypto';
import { loadConfig } from '@lateral/shared';
import { createLogger, runMain, stopOnSignal } from '@lateral/infra';
import { startServer } from './server';

async function main() {
  const loaded = loadConfig();
  // The dashboard works on the first start: without ADMIN_TOKEN this run makes one and prints it
  // (it lives as long as the process). Remote or not, the dashboard still asks for it.
  const madeToken = loaded.ADMIN_TOKEN ? null : randomBytes(18).toString('base64url');
  const config = madeToken ? { ...loaded, ADMIN_TOKEN: madeToken } : loaded;
  const server = await startServer(config);
  const { services } = server.runtime;
  // The signal handlers first, then the banner that says the service is up: a SIGINT sent as soon
  // as the banner is seen must find them installed (before, it could kill the process outright).
  stopOnSignal(() => server.stop(), { logger: createLogger(config.LOG_LEVEL, 'lateral'), timeoutMs: (config.SHUTDOWN_GRACE_SECONDS + 30) * 1000 });
  console.log(`lateral all-in-one: API ${server.url}  OpenAPI ${server.url}/openapi.json  docs ${server.url}/docs`);
  console.log(`  dashboard ${server.url}/dashboard  ${madeToken ? `operator token for this run: ${madeToken} (set ADMIN_TOKEN to choose your own)` : 'operator token: ADMIN_TOKEN'}`);
  console.log(`  Redis ${services.redisUrl}  S3 ${services.s3Endpoint ?? 'AWS'}  (Ctrl-C or SIGTERM stops it cleanly)`);
}

runMain(main);
