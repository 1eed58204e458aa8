import { Body, Controller, Get, Inject, Param, Post, Query, Res } from '@nestjs/common';
import type { Response } from 'express';
import { RerankService } from './rerank.service';
import { submitAsync } from '../common/json-body';
import { JobIdParam } from '../common/path-params';

@Controller('v1/rerank')
export class RerankController {
  constructor(@Inject(RerankService) private readonly svc: RerankService) {}

  @Post()
  submit(@Body() body: unknown, @Query('wait') wait: string | undefined, @Res({ passthrough: true }) res: Response) {
    return submitAsync(this.svc, body, wait, res, '/v1/rerank');
  }

  @Get(':id')
  status(@Param('id', JobIdParam) id: string, @Query('wait') wait: string | undefined) {
    return this.svc.status(id, this.svc.parseWait(wait));
  }
}
