import { Controller, Get, Inject, Res } from '@nestjs/common';
import type { Response } from 'express';
import type { Runtime } from '@lateral/infra';
import { RUNTIME } from './tokens';

@Controller('v1/health')
export class HealthController {
  constructor(@Inject(RUNTIME) private readonly rt: Runtime) {}

  @Get()
  async health(@Res({ passthrough: true }) res: Response) {
    const check = async (fn: () => Promise<unknown>) => {
      const t = Date.now();
      try {
        await fn();
        return { ok: true, ms: Date.now() - t };
      } catch (err) {
        return { ok: false, ms: Date.now() - t, error: (err as Error).message };
      }
    };
    const [redis, s3] = await Promise.all([check(() => this.rt.redis.ping()), check(() => this.rt.store.ping())]);
    const ok = redis.ok && s3.ok;
    if (!ok) {
      res.status(503);
      res.setHeader('Retry-After', '5');
    }
    return { status: ok ? 'ok' : 'degraded', redis, s3, queues: ok ? await this.rt.queues.counts().catch(() => null) : null };
  }
}
