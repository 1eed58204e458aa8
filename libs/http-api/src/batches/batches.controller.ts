import { Body, Controller, Get, HttpCode, Inject, Param, Post, Query, Req, Res } from '@nestjs/common';
import type { Request, Response } from 'express';
import { BatchesService } from './batches.service';
import { json } from '../common/json-body';
import { JobIdParam } from '../common/path-params';

const NDJSON = /^application\/(x-ndjson|ndjson|jsonl)\s*(;|$)/i;

@Controller('v1/batches')
export class BatchesController {
  constructor(@Inject(BatchesService) private readonly svc: BatchesService) {}

  /**
   * A JSONL body (Content-Type application/jsonl, application/x-ndjson): streamed to S3, with the
   * batch's options in the query string; or JSON `{ input: "<S3 key>", ... }`. 202 + Location.
   */
  @Post()
  @HttpCode(202)
  async create(@Req() req: Request, @Body() body: unknown, @Query() query: Record<string, unknown>, @Res({ passthrough: true }) res: Response) {
    const upload = NDJSON.test(String(req.headers['content-type'] ?? ''));
    const out = upload ? await this.svc.createFromUpload(req, query) : await this.svc.createFromKey(json(body));
    res.setHeader('Location', `/v1/batches/${out.id}`);
    return out;
  }

  /** The status; `?wait=S` answers once the batch is completed, failed or cancelled, or after S seconds. */
  @Get(':id')
  status(@Param('id', JobIdParam) id: string, @Query('wait') wait?: unknown) {
    return this.svc.status(id, this.svc.parseWait(wait));
  }

  @Post(':id/cancel')
  @HttpCode(200)
  cancel(@Param('id', JobIdParam) id: string) {
    return this.svc.cancel(id);
  }

  /** The result file (JSONL, one line per input row, in the input's order), streamed from S3. */
  @Get(':id/results')
  async results(@Param('id', JobIdParam) id: string, @Res() res: Response) {
    const stream = await this.svc.results(id);
    res.status(200).setHeader('Content-Type', 'application/x-ndjson');
    stream.on('error', () => res.destroy());
    stream.pipe(res);
  }
}
