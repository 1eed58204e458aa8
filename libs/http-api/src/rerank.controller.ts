import { Body, Controller, Get, Inject, Param, Post, Query, Res } from '@nestjs/common';
import type { Response } from 'express';
import { RerankService } from './rerank.service';
import { json } from './json-body';

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
