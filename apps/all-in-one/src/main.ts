import { loadConfig } from '@lateral/shared';
import { runMain, stopOnSignal } from '@lateral/infra';
import { startServer } from './server';

async function main() {
  const server = await startServer(loadConfig());
  console.log(`lateral all-in-one: API ${server.url}  OpenAPI ${server.url}/openapi.json  docs ${server.url}/docs`);
  stopOnSignal(() => server.stop());
}

runMain(main);
