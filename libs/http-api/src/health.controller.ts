import { existsSync } from 'node:fs';
import path from 'node:path';
import { Controller, Get, Inject, Res } from '@nestjs/common';
import type { Response } from 'express';
import type { Runtime } from '@lateral/infra';
import { RUNTIME } from './tokens';
import { serviceDownMessage } from './http-errors.filter';

/**
 * Ready or not: 200 `ok` when Redis and S3 answer and the default model is built; otherwise 503
 * `degraded`. A backing service that is down adds `Retry-After` (it may come back by itself); a
 * missing default model does not (it needs `npm run build-model`), but the process is not ready
 * either: creating a collection without a model, and every ingestion into one, would fail.
 */
@Controller('v1/health')
export class HealthController {
  constructor(@Inject(RUNTIME) private readonly rt: Runtime) {}

  @Get()
  async health(@Res({ passthrough: true }) res: Response) {
    const check = async (service: 'Redis' | 'S3', fn: () => Promise<unknown>) => {
      const t = Date.now();
      try {
        await fn();
        return { ok: true, ms: Date.now() - t };
      } catch (err) {
        // the cause goes to the log; the caller is told which service, and what to do (no address,
        // bucket or client-library internals)
        this.rt.logger.warn(`health: ${service} check failed: ${(err as Error).message}`);
        return { ok: false, ms: Date.now() - t, error: serviceDownMessage(service) };
      }
    };
    const [redis, s3] = await Promise.all([check('Redis', () => this.rt.redis.ping()), check('S3', () => this.rt.store.ping())]);
    const models = this.models();
    const services = redis.ok && s3.ok;
    if (!services || !models.ok) res.status(503);
    if (!services) res.setHeader('Retry-After', '5');
    return {
      status: services && models.ok ? 'ok' : 'degraded',
      redis,
      s3,
      models,
      queues: redis.ok ? await this.rt.queues.counts().catch(() => null) : null,
    };
  }

  /** The default model (DEFAULT_MODEL) must have its manifest.json under MODELS_DIR. */
  private models() {
    const { DEFAULT_MODEL: name, MODELS_DIR: dir } = this.rt.config;
    const missing = existsSync(path.resolve(dir, name, 'manifest.json')) ? [] : [name];
    if (missing.length === 0) return { ok: true, default: name, missing };
    const out = path.resolve(dir) === path.resolve('.cache/models') ? '' : ` -- --out ${dir}`;
    return {
      ok: false,
      default: name,
      missing,
      hint: `run npm run build-model${out} (builds the built-in models into MODELS_DIR), or set DEFAULT_MODEL to a model directory under MODELS_DIR (${dir})`,
    };
  }
}
