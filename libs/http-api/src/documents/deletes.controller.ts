import { Controller, Delete, Get, Inject, Param, Post, Query, Body, Res } from '@nestjs/common';
import type { Response } from 'express';
import { DeletesService } from './deletes.service';
import { json } from '../common/json-body';
import { CollectionIdParam, DocumentIdParam, pathParam } from '../common/path-params';
import { resourceId } from '@lateral/shared';

const DeleteIdParam = pathParam('deleteId', resourceId('delete id'));

/**
 * Deletes of documents (issue 10): each commits a generation with tombstones through the commit
 * queue; 200 once committed (the document is then never returned by re-rank or search), 202 with
 * a status URL when the commit takes longer than `wait`.
 */
@Controller('v1/collections')
export class DeletesController {
  constructor(@Inject(DeletesService) private readonly svc: DeletesService) {}

  @Delete(':id/documents/:docId')
  async deleteOne(@Param('id', CollectionIdParam) id: string, @Param('docId', DocumentIdParam) docId: string, @Query('wait') wait: string | undefined, @Res({ passthrough: true }) res: Response) {
    const out = await this.svc.deleteOne(id, docId, this.svc.parseWait(wait));
    res.status(out.status);
    return out.body;
  }

  @Post(':id/documents/delete')
  async deleteMany(@Param('id', CollectionIdParam) id: string, @Body() body: unknown, @Query('wait') wait: string | undefined, @Res({ passthrough: true }) res: Response) {
    const out = await this.svc.deleteMany(id, json(body), this.svc.parseWait(wait));
    res.status(out.status);
    return out.body;
  }

  /** Merges small segments and drops deleted documents (the tiered policy; also run after commits with MERGE_AFTER_COMMIT). */
  @Post(':id/merge')
  async merge(@Param('id', CollectionIdParam) id: string, @Query('wait') wait: string | undefined, @Res({ passthrough: true }) res: Response) {
    const out = await this.svc.merge(id, this.svc.parseWait(wait));
    res.status(out.status);
    return out.body;
  }

  @Get(':id/deletes/:deleteId')
  async status(@Param('id', CollectionIdParam) id: string, @Param('deleteId', DeleteIdParam) deleteId: string, @Res({ passthrough: true }) res: Response) {
    const out = await this.svc.status(id, deleteId);
    res.status(out.status);
    return out.body;
  }
}
