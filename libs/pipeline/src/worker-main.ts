import { loadConfig, type QueueName } from '@lateral/shared';
import { createLogger, stopOnSignal } from '@lateral/infra';
import { createRuntime, requireServices, startWorkers } from './runtime';

/**
 * Entry shared by the standalone worker apps: the queues come from WORKER_QUEUES when set,
 * otherwise from the app's defaults. Closes gracefully on SIGTERM (finishes active jobs).
 */
export async function runWorkerApp(name: string, defaults: QueueName[]): Promise<void> {
  const config = loadConfig();
  const logger = createLogger(config.LOG_LEVEL, name);
  const rt = await createRuntime(config, requireServices(config), logger);
  const queues = config.WORKER_QUEUES.length ? config.WORKER_QUEUES : defaults;
  const host = startWorkers(rt, queues);
  logger.info(`${name} working on ${queues.join(', ')} (onnx: ${config.ORT_EXECUTION_PROVIDER})`);
  stopOnSignal(async () => {
    logger.info('closing workers');
    await host.close();
    await rt.close();
  });
}
