import { Body, Controller, Get, Inject, Param, Post, Query, Req, Res } from '@nestjs/common';
import type { Request, Response } from 'express';
import { DocumentsService } from './documents.service';
import { CollectionIdParam, DocumentIdParam, IngestionIdParam } from '../common/path-params';

/** A collection's documents: ingest, the ingestion's progress, and reads of live documents (deletes: deletes.controller.ts). */
@Controller('v1/collections')
export class DocumentsController {
  constructor(@Inject(DocumentsService) private readonly svc: DocumentsService) {}

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

  @Get(':id/ingestions/:ingestionId')
  ingestion(@Param('id', CollectionIdParam) id: string, @Param('ingestionId', IngestionIdParam) ingestionId: string) {
    return this.svc.ingestion(id, ingestionId);
  }
}
