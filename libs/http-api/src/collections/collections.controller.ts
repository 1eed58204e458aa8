import { Body, Controller, Delete, Get, HttpCode, Inject, Param, Post, Query, Req, Res } from '@nestjs/common';
import type { Request, Response } from 'express';
import { CollectionsService } from './collections.service';
import { json } from '../common/json-body';
import { CollectionIdParam, DocumentIdParam, IngestionIdParam } from '../common/path-params';

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
  get(@Param('id', CollectionIdParam) id: string) {
    return this.svc.describe(id);
  }

  @Delete(':id')
  @HttpCode(204)
  async remove(@Param('id', CollectionIdParam) id: string) {
    await this.svc.delete(id);
  }

  /** 202 with the accepted ingestion; with `wait` (query or body), 200 and its final status when it finished in time. */
  @Post(':id/documents')
  async ingest(@Param('id', CollectionIdParam) id: string, @Body() body: unknown, @Query('wait') wait: string | undefined, @Req() req: Request, @Res({ passthrough: true }) res: Response) {
    const out = await this.svc.ingestAndWait(id, typeof body === 'string' ? body : JSON.stringify(body ?? ''), req.headers['content-type'], wait);
    res.status(out.status);
    if (out.status === 202) res.setHeader('Location', String(out.body.status));
    return out.body;
  }

  /** Live document ids, sorted, one page (`limit`, opaque `cursor`). */
  @Get(':id/documents')
  documentIds(@Param('id', CollectionIdParam) id: string, @Query('limit') limit: unknown, @Query('cursor') cursor: unknown) {
    return this.svc.documentIds(id, limit, cursor);
  }

  /** One live document: text, metadata, tokens, truncation, the generation and segment holding it. */
  @Get(':id/documents/:docId')
  document(@Param('id', CollectionIdParam) id: string, @Param('docId', DocumentIdParam) docId: string) {
    return this.svc.document(id, docId);
  }

  @Post(':id/recompress')
  @HttpCode(202)
  recompress(@Param('id', CollectionIdParam) id: string, @Body() body: unknown) {
    return this.svc.recompress(id, json(body));
  }

  @Get(':id/ingestions/:ingestionId')
  ingestion(@Param('id', CollectionIdParam) id: string, @Param('ingestionId', IngestionIdParam) ingestionId: string) {
    return this.svc.ingestion(id, ingestionId);
  }
}
