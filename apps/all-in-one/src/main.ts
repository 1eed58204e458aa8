import { loadConfig } from '@lateral/shared';
import { startServer } from './server';

async function main() {
  const server = await startServer(loadConfig());
  console.log(`lateral all-in-one: API ${server.url}  OpenAPI ${server.url}/openapi.json  docs ${server.url}/docs`);
  const stop = async () => {
    await server.stop();
    process.exit(0);
  };
  process.once('SIGTERM', stop);
  process.once('SIGINT', stop);
}

main().catch((err) => {
  console.error(err instanceof Error ? err.message : err);
  process.exit(1);
});
