import { Module, type DynamicModule } from '@nestjs/common';
import type { NestExpressApplication } from '@nestjs/platform-express';
import { BullBoardModule, type BullBoardModuleOptions } from '@bull-board/nestjs';
import { ExpressAdapter } from '@bull-board/express';
import { BullMQAdapter } from '@bull-board/api/bullMQAdapter';
import { ALL_QUEUES, type Config } from '@lateral/shared';
import { adminAuth } from '../auth/admin-auth';
import { AdminController } from './admin.controller';
import { AdminService, type AdminDeps } from './admin.service';
import { DashboardController } from './dashboard.controller';

/** Every operator path: adminAuth answers 401 (or 403 when ADMIN_TOKEN is unset) before anything else runs. */
export const ADMIN_PATHS = ['/dashboard', '/admin/queues', '/v1/admin/overview', '/v1/admin/jobs', '/v1/admin/quotas'];

/** The operations dashboard, its JSON endpoints and the queue board (@bull-board) at /admin/queues. */
@Module({})
export class AdminModule {
  static register(deps: AdminDeps): DynamicModule {
    return {
      module: AdminModule,
      imports: [
        // @bull-board/express 9.10.1 carries its own copy of @bull-board/api (9.10.1, beside the root's
        // 9.10.2): the same classes at run time, two declarations for the type checker.
        BullBoardModule.forRoot({ route: '/admin/queues', adapter: ExpressAdapter as unknown as BullBoardModuleOptions['adapter'], middleware: adminAuth(deps.config.ADMIN_TOKEN) }),
        BullBoardModule.forFeature(...ALL_QUEUES.map((name) => ({ name, queue: deps.queues.get(name), adapter: BullMQAdapter }))),
      ],
      controllers: [AdminController, DashboardController],
      providers: [{ provide: AdminService, useFactory: () => new AdminService(deps) }],
    };
  }
}

/** Puts adminAuth in front of every operator path (first, so an unauthenticated request's body is never read). */
export function mountAdminAuth(app: NestExpressApplication, config: Pick<Config, 'ADMIN_TOKEN'>): void {
  app.use(ADMIN_PATHS, adminAuth(config.ADMIN_TOKEN));
  app.use('/admin/queues', offlineQueueBoard);
}

/** bull-board's page links a stylesheet of a web font service: removed, so opening the board sends no request off the machine (it falls back to the system fonts). */
const EXTERNAL_STYLESHEET = /<link\b[^>]*href="https?:\/\/[^"]*"[^>]*>/g;

function offlineQueueBoard(_req: unknown, res: { send: (body: unknown) => unknown }, next: () => void): void {
  const send = res.send.bind(res);
  res.send = (body: unknown) => send(typeof body === 'string' && body.startsWith('<!') ? body.replace(EXTERNAL_STYLESHEET, '') : body);
  next();
}
