import { Body, Controller, Delete, Get, HttpCode, Inject, Param, Post } from '@nestjs/common';
import { CollectionsService } from './collections.service';
import { json } from '../common/json-body';
import { CollectionIdParam } from '../common/path-params';

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

  @Post(':id/reindex')
  @HttpCode(202)
  reindex(@Param('id', CollectionIdParam) id: string, @Body() body: unknown) {
    // no body: the defaults (WARP at 4 bits)
    return this.svc.reindex(id, body === undefined || body === '' ? {} : json(body));
  }

  @Post(':id/recompress')
  @HttpCode(202)
  recompress(@Param('id', CollectionIdParam) id: string, @Body() body: unknown) {
    return this.svc.recompress(id, json(body));
  }
}
