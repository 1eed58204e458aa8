import { loadConfig } from '@lateral/shared';
import { createLogger, createRuntime, requireServices, runMain, stopOnSignal } from '@lateral/infra';
import { closeApi, createApiApp } from '@lateral/http-api';

/** The API process alone: needs REDIS_URL and S3 (S3_ENDPOINT or AWS); runs no workers. */
async function main() {
  const config = loadConfig();
  const logger = createLogger(config.LOG_LEVEL, 'api');
  const rt = await createRuntime(config, requireServices(config), logger);
  const app = await createApiApp(rt);
  // The process's signals are ours (stopOnSignal); NestJS's own listeners would re-send the signal
  // and kill the process before it is closed (see detachNestSignalHandlers in apps/all-in-one).
  (app as unknown as { unsubscribeFromProcessSignals?: () => void }).unsubscribeFromProcessSignals?.();
  await app.listen(config.PORT, config.HOST);
  stopOnSignal(
    async () => {
      logger.info('stopping API');
      await closeApi(app);
      logger.info('stopping Redis and S3 connections');
      await rt.close();
    },
    { logger },
  );
  // After the handlers: a signal sent as soon as this line is seen finds them installed.
  logger.info(`API on http://${config.HOST}:${config.PORT} (OpenAPI: /openapi.json, docs: /docs)`);
}

runMain(main);
