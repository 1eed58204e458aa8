import { existsSync } from 'node:fs';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { Controller, Get, Inject, Res } from '@nestjs/common';
import type { Response } from 'express';
import { classifyDependencyError, eventLoopMonitor, isBusy, type ApiRepositories } from '@lateral/infra';
import type { Produces, ServiceCheckSchema } from '@lateral/shared';
import { HEALTH_CHECKS } from '../common/tokens';
import { OVERLOAD_RETRY_AFTER_SECONDS, SERVICE_RETRY_AFTER_SECONDS, serviceDownMessage, serviceOverloadedMessage } from '../common/http-errors.filter';

/** One dependency's check: answered (`ok`), or not, and then whether that was load (`overloaded`) or an outage. */
export interface ServiceCheck {
  ok: boolean;
  ms: number;
  /** true: it did not answer in time because of load (a connected Redis that was slow, or this process's event loop held up): not an outage. */
  overloaded?: boolean;
  error?: string;
}

/** A check fits the documented schema (a compile-time check). */
export type ServiceCheckBody = Produces<typeof ServiceCheckSchema, ServiceCheck>;

class CheckTimeout extends Error {}

/**
 * Health that tells the truth (issue 27 item 3):
 *
 * - `GET /v1/health/live` (liveness): the process answers. It touches no dependency and never
 *   fails because the process is busy or a dependency is slow; it says how far the event loop lags.
 * - `GET /v1/health/ready` (readiness): Redis, S3 and the default model. 200 `ok` when all are
 *   there; 200 `overloaded` when a check got no answer in time because of load (a connected Redis,
 *   or an S3 endpoint that accepts connections, that did not answer; or any check while this
 *   process's event loop was held up past EVENT_LOOP_OVERLOAD_MS): the pod is busy, not broken,
 *   and taking it out of the load balancer
 *   would move its load onto the others; 503 `degraded` when Redis or S3 is down (+ Retry-After,
 *   it may come back by itself) or the default model is missing (no Retry-After: it needs
 *   `npm run build-model`). Each check is bounded by HEALTH_CHECK_TIMEOUT_MS.
 * - `GET /v1/health`: the readiness answer, kept for existing clients and probes.
 */
/** The repositories this service is given (app.ts passes only these: pickRepositories). */
export const HEALTH_REPOSITORIES = ['config', 'logger', 'queues', 'store'] as const satisfies readonly (keyof ApiRepositories)[];
/** What the readiness check reads: Redis (through the queues' connection), S3, the model directories, the logger. */
export type HealthDeps = Pick<ApiRepositories, (typeof HEALTH_REPOSITORIES)[number]>;

@Controller('v1/health')
export class HealthController {
  private readonly startedAt = Date.now();

  constructor(@Inject(HEALTH_CHECKS) private readonly deps: HealthDeps) {}

  @Get()
  health(@Res({ passthrough: true }) res: Response) {
    return this.ready(res);
  }

  @Get('live')
  live() {
    const monitor = eventLoopMonitor();
    return { status: 'ok' as const, uptimeSeconds: Math.round((Date.now() - this.startedAt) / 1000), eventLoopLagMs: monitor.maxLagMs(10_000) };
  }

  @Get('ready')
  async ready(@Res({ passthrough: true }) res: Response) {
    const { HEALTH_CHECK_TIMEOUT_MS: timeoutMs, EVENT_LOOP_OVERLOAD_MS: overloadLagMs } = this.deps.config;
    const monitor = eventLoopMonitor();
    const check = async (service: 'Redis' | 'S3', fn: () => Promise<unknown>): Promise<ServiceCheck> => {
      const t = performance.now();
      try {
        await withTimeout(fn(), timeoutMs);
        return { ok: true, ms: Math.round(performance.now() - t) };
      } catch (err) {
        const ms = Math.round(performance.now() - t);
        const load = { lagMs: monitor.maxLagMs(ms + 1000), utilization: monitor.utilization(ms + 1000), overloadLagMs };
        const redisStatus = this.deps.queues.connectionStatus;
        // Our own time limit: load when the process was busy meanwhile, or when the dependency is
        // there (Redis connected; S3 accepting connections): it is slow, not down.
        const there = async () => (service === 'Redis' ? redisStatus === 'ready' : this.deps.store.accepts(Math.min(1000, timeoutMs)));
        const fault =
          err instanceof CheckTimeout
            ? { kind: isBusy(load) || (await there()) ? 'overloaded' : 'down', busy: isBusy(load) }
            : classifyDependencyError((err as { cause?: unknown }).cause ?? err, { ...load, redisStatus });
        const overloaded = fault?.kind === 'overloaded';
        // the cause goes to the log; the caller is told which service, and what to do (no address,
        // bucket or client-library internals)
        this.deps.logger.warn(`health: ${service} check ${overloaded ? 'overloaded' : 'failed'} after ${ms} ms (event loop lag up to ${load.lagMs} ms): ${(err as Error).message}`);
        if (overloaded) return { ok: false, ms, overloaded: true, error: serviceOverloadedMessage(service, fault.busy, load.lagMs) };
        return { ok: false, ms, error: serviceDownMessage(service) };
      }
    };
    const [redis, s3] = await Promise.all([check('Redis', () => this.deps.queues.ping()), check('S3', () => this.deps.store.ping())]);
    const models = this.models();
    const down = (!redis.ok && !redis.overloaded) || (!s3.ok && !s3.overloaded);
    const overloaded = !down && (!redis.ok || !s3.ok);
    if (down || !models.ok) res.status(503);
    if (down) res.setHeader('Retry-After', String(SERVICE_RETRY_AFTER_SECONDS));
    else if (overloaded && models.ok) res.setHeader('Retry-After', String(OVERLOAD_RETRY_AFTER_SECONDS));
    return {
      status: down || !models.ok ? ('degraded' as const) : overloaded ? ('overloaded' as const) : ('ok' as const),
      redis,
      s3,
      models,
      eventLoopLagMs: monitor.maxLagMs(10_000),
      queues: redis.ok ? await withTimeout(this.deps.queues.counts(), timeoutMs).catch(() => null) : null,
    };
  }

  /** The default model (DEFAULT_MODEL) must have its manifest.json under MODELS_DIR. */
  private models() {
    const { DEFAULT_MODEL: name, MODELS_DIR: dir } = this.deps.config;
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

/** `p`, or a CheckTimeout after `ms` (the promise itself goes on; its outcome is ignored). */
function withTimeout<T>(p: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const limit = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new CheckTimeout(`no answer within HEALTH_CHECK_TIMEOUT_MS (${ms} ms)`)), ms);
  });
  p.catch(() => undefined);
  return Promise.race([p, limit]).finally(() => clearTimeout(timer));
}
