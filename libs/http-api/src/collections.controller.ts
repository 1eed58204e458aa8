import { Body, Controller, Delete, Get, HttpCode, Inject, Param, Post, Req } from '@nestjs/common';
import type { Request } from 'express';
import { CollectionsService } from './collections.service';
import { json } from './json-body';
import { CollectionIdParam, IngestionIdParam } from './path-params';

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

  @Post(':id/documents')
  @HttpCode(202)
  ingest(@Param('id', CollectionIdParam) id: string, @Body() body: unknown, @Req() req: Request) {
    return this.svc.ingest(id, typeof body === 'string' ? body : JSON.stringify(body ?? ''), req.headers['content-type']);
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
