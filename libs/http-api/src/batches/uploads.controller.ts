import { Controller, HttpCode, Inject, Param, Put, Req, Res } from '@nestjs/common';
import type { Request, Response } from 'express';
import { ValidationError, resourceId } from '@lateral/shared';
import { BatchesService } from './batches.service';
import { pathParam } from '../common/path-params';

const NDJSON = /^application\/(x-ndjson|ndjson|jsonl)\s*(;|$)/i;
const UploadNameParam = pathParam('name', resourceId('upload name'));

/**
 * The caller's own files (`tenants/<tenant>/uploads/<name>`): a batch names one as its `input`
 * (POST /v1/batches with JSON `{ "input": "<name>" }`), so a batch can be re-run over the same file
 * without uploading it again. No other object of the bucket can be named by a request.
 */
@Controller('v1/uploads')
export class UploadsController {
  constructor(@Inject(BatchesService) private readonly svc: BatchesService) {}

  /** A JSONL file (Content-Type application/jsonl or application/x-ndjson), streamed to S3; 201 + Location. */
  @Put(':name')
  @HttpCode(201)
  async put(@Param('name', UploadNameParam) name: string, @Req() req: Request, @Res({ passthrough: true }) res: Response) {
    if (!NDJSON.test(String(req.headers['content-type'] ?? ''))) {
      req.resume();
      throw new ValidationError('an upload is a JSONL file: send it with Content-Type: application/jsonl', [{ field: 'content-type', message: 'application/jsonl or application/x-ndjson' }]);
    }
    const out = await this.svc.upload(name, req);
    res.setHeader('Location', `/v1/uploads/${name}`);
    return out;
  }
}
