import { Body, Controller, Delete, Get, HttpCode, Inject, Param, Post, Query, Req, Res } from '@nestjs/common';
import type { Request, Response } from 'express';
import { ValidationError } from '@lateral/shared';
import type { Runtime } from '@lateral/infra';
import { describeJsonError } from './documents';
import { CollectionsService } from './collections.service';
import { RerankService } from './rerank.service';
import { RUNTIME } from './tokens';

/** Bodies arrive as text (one parser for JSON and NDJSON, with line numbers in errors). */
function json(body: unknown): unknown {
  if (typeof body !== 'string' || body.length === 0) {
    if (body && typeof body === 'object') return body;
    throw new ValidationError('request body is empty: expected JSON', [{ field: 'body', message: 'required' }]);
  }
  try {
    return JSON.parse(body);
  } catch (err) {
    throw new ValidationError(`malformed JSON: ${describeJsonError(body, err)}`, [{ field: 'body', message: (err as Error).message }]);
  }
}

@Controller('v1/collections')
export class CollectionsController {
  constructor(@Inject(CollectionsService) private readonly svc: CollectionsService) {}

  @Post()
  @HttpCode(201)
  create(@Body() body: unknown) {
    return this.svc.create(json(body));
  }

  @Get()
  list() {
    return this.svc.list();
  }

  @Get(':id')
  get(@Param('id') id: string) {
    return this.svc.describe(id);
  }

  @Delete(':id')
  @HttpCode(204)
  async remove(@Param('id') id: string) {
    await this.svc.delete(id);
  }

  @Post(':id/documents')
  @HttpCode(202)
  ingest(@Param('id') id: string, @Body() body: unknown, @Req() req: Request) {
    return this.svc.ingest(id, typeof body === 'string' ? body : JSON.stringify(body ?? ''), req.headers['content-type']);
  }

  @Post(':id/recompress')
  @HttpCode(202)
  recompress(@Param('id') id: string, @Body() body: unknown) {
    return this.svc.recompress(id, json(body));
  }

  @Get(':id/ingestions/:ingestionId')
  ingestion(@Param('id') id: string, @Param('ingestionId') ingestionId: string) {
    return this.svc.ingestion(id, ingestionId);
  }
}

@Controller('v1/rerank')
export class RerankController {
  constructor(@Inject(RerankService) private readonly svc: RerankService) {}

  @Post()
  async submit(@Body() body: unknown, @Query('wait') wait: string | undefined, @Res({ passthrough: true }) res: Response) {
    const parsed = json(body) as Record<string, unknown>;
    const bodyWait = parsed && typeof parsed === 'object' && 'wait' in parsed ? parsed.wait : undefined;
    if (bodyWait !== undefined) delete parsed.wait;
    const out = await this.svc.submit(parsed, this.svc.parseWait(wait ?? bodyWait));
    res.status(out.status);
    if (out.status === 202) res.setHeader('Location', `/v1/rerank/${out.body.id}`);
    return out.body;
  }

  @Get(':id')
  status(@Param('id') id: string, @Query('wait') wait: string | undefined) {
    return this.svc.status(id, this.svc.parseWait(wait));
  }
}

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
