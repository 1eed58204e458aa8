import type { NestExpressApplication } from '@nestjs/platform-express';
import { QueueName, type Config } from '@lateral/shared';
import { createLogger, createRuntime, resolveServices, type Runtime, type WorkerHost } from '@lateral/infra';
import { HANDLED_QUEUES, startWorkers } from '@lateral/workers';
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
export async function startServer(config: Config, opts: { queues?: QueueName[]; quiet?: boolean; closeGraceMs?: number } = {}): Promise<Server> {
  const logger = createLogger(opts.quiet ? 'warn' : config.LOG_LEVEL, 'lateral');
  const services = await resolveServices(config, logger);
  const runtime = await createRuntime(config, services, logger);
  const workers = startWorkers(runtime, opts.queues ?? HANDLED_QUEUES);
  const app = await createApiApp(runtime);
  await app.listen(config.PORT, config.HOST);
  const addr = app.getHttpServer().address() as { port: number };
  const url = `http://${config.HOST}:${addr.port}`;
  return {
    url,
    runtime,
    app,
    workers,
    stop: async () => {
      const step = async (what: string, fn: () => Promise<unknown>) => {
        const t = Date.now();
        await fn();
        if (process.env.LATERAL_DEBUG_STOP) console.error(`stop: ${what} ${Date.now() - t} ms`);
      };
      await step('api', () => closeApi(app));
      await step('workers', () => workers.close(opts.closeGraceMs));
      await step('runtime', () => runtime.close());
      await step('services', () => services.stop());
    },
  };
}
