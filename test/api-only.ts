import type { NestExpressApplication } from '@nestjs/platform-express';
import type { Config } from '@lateral/shared';
import { createLogger, createRuntime, resolveServices, type Runtime } from '@lateral/infra';
import { closeApi, createApiApp } from '@lateral/http-api';

/** The API alone (no workers) on a free port, for tests of what the API answers by itself. */
export async function startApiOnly(config: Config): Promise<{ url: string; rt: Runtime; app: NestExpressApplication; stop: () => Promise<void> }> {
  const logger = createLogger('error', 'test');
  const services = await resolveServices(config, logger);
  const rt = await createRuntime(config, services, logger);
  const app = await createApiApp(rt);
  (app as unknown as { unsubscribeFromProcessSignals?: () => void }).unsubscribeFromProcessSignals?.();
  await app.listen(0, '127.0.0.1');
  const { port } = app.getHttpServer().address() as { port: number };
  return {
    url: `http://127.0.0.1:${port}`,
    rt,
    app,
    stop: async () => {
      await closeApi(app);
      await rt.close();
      await services.stop();
    },
  };
}
