import type { NestExpressApplication } from '@nestjs/platform-express';
import { QueueName, type Config } from '@lateral/shared';
import { createLogger, createRuntime, resolveServices, type Logger, type Runtime, type WorkerHost } from '@lateral/infra';
import { HANDLED_QUEUES, startWorkers, workersReady } from '@lateral/workers';
import { closeApi, createApiApp } from '@lateral/http-api';

export interface Server {
  url: string;
  runtime: Runtime;
  app: NestExpressApplication;
  workers: WorkerHost;
  stop(): Promise<void>;
}

/**
 * API + every worker in one process, with the embedded Redis and S3 when none are configured.
 * Used by `npm start`, the demo, the benchmarks and the integration tests.
 */
export async function startServer(config: Config, opts: { queues?: QueueName[]; quiet?: boolean; closeGraceMs?: number; logger?: Logger } = {}): Promise<Server> {
  const logger = opts.logger ?? createLogger(opts.quiet ? 'warn' : config.LOG_LEVEL, 'lateral');
  const services = await resolveServices(config, logger);
  const runtime = await createRuntime(config, services, logger);
  const workers = startWorkers(runtime, opts.queues ?? HANDLED_QUEUES);
  const app = await createApiApp(runtime);
  detachNestSignalHandlers(app);
  // Answers once the compute threads are up (they load while the API app is made).
  await workersReady(workers);
  await app.listen(config.PORT, config.HOST);
  const addr = app.getHttpServer().address() as { port: number };
  const url = `http://${config.HOST}:${addr.port}`;
  const queues = opts.queues ?? HANDLED_QUEUES;
  let stopping: Promise<void> | undefined;
  return {
    url,
    runtime,
    app,
    workers,
    stop: () =>
      (stopping ??= (async () => {
        const step = async (what: string, fn: () => Promise<unknown>) => {
          const t = Date.now();
          logger.info(`stopping ${what}`);
          await fn();
          if (process.env.LATERAL_DEBUG_STOP) console.error(`stop: ${what} ${Date.now() - t} ms`);
        };
        await step(`API ${url}`, () => closeApi(app));
        await step(`workers (${queues.join(', ')}; active jobs finish first)`, () => workers.close(opts.closeGraceMs));
        await step('Redis and S3 connections', () => runtime.close());
        await services.stop();
      })()),
  };
}

/**
 * NestJS's `enableShutdownHooks` (libs/http-api/src/app.ts) adds its own SIGINT/SIGTERM listeners,
 * which close the app and then re-send the signal to the process: with ours (stopOnSignal) that
 * killed the process with exit code 130 before the workers and the embedded services were stopped.
 * The entry points own the process's signals; `stop()` closes the app itself.
 */
export function detachNestSignalHandlers(app: NestExpressApplication): void {
  (app as unknown as { unsubscribeFromProcessSignals?: () => void }).unsubscribeFromProcessSignals?.();
}
