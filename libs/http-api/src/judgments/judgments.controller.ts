import { Body, Controller, Delete, Get, HttpCode, Inject, Param, Post, Req } from '@nestjs/common';
import type { Request } from 'express';
import { resourceId } from '@lateral/shared';
import { JudgmentsService } from './judgments.service';
import { FusionFitService } from './fusion-fit.service';
import { json } from '../common/json-body';
import { CollectionIdParam, pathParam } from '../common/path-params';

const JudgmentsIdParam = pathParam('judgmentsId', resourceId('judgments id'));
const TrainIdParam = pathParam('trainId', resourceId('train id'));

/** Relevance judgments of a collection and what is fitted on them: training runs, hybrid's fusion weight. */
@Controller('v1')
export class JudgmentsController {
  constructor(
    @Inject(JudgmentsService) private readonly svc: JudgmentsService,
    @Inject(FusionFitService) private readonly fusion: FusionFitService,
  ) {}

  /** Hybrid's fusion weight fitted on a judgment set (searches the judged queries; answers when done) and stored in the collection record. */
  @Post('collections/:id/fusion/fit')
  @HttpCode(200)
  fitFusion(@Param('id', CollectionIdParam) id: string, @Body() body: unknown) {
    return this.fusion.fit(id, typeof body === 'string' && body.trim() === '' ? {} : json(body));
  }

  /** Drops the collection's fitted fusion: hybrid searches go back to the service's defaults. */
  @Delete('collections/:id/fusion')
  @HttpCode(200)
  clearFusion(@Param('id', CollectionIdParam) id: string) {
    return this.fusion.clear(id);
  }

  /** JSON, NDJSON (one judged query per line) or TREC `{ "qrels", "topics" }` -> 201 with the stored set's id and unknown document ids. */
  @Post('collections/:id/judgments')
  @HttpCode(201)
  store(@Param('id', CollectionIdParam) id: string, @Body() body: unknown, @Req() req: Request) {
    return this.svc.store(id, typeof body === 'string' ? body : JSON.stringify(body ?? ''), req.headers['content-type']);
  }

  @Get('collections/:id/judgments/:judgmentsId')
  judgments(@Param('id', CollectionIdParam) id: string, @Param('judgmentsId', JudgmentsIdParam) judgmentsId: string) {
    return this.svc.get(id, judgmentsId);
  }

  @Post('collections/:id/train')
  @HttpCode(202)
  train(@Param('id', CollectionIdParam) id: string, @Body() body: unknown) {
    return this.svc.train(id, typeof body === 'string' && body.trim() === '' ? {} : json(body));
  }

  @Get('train/:trainId')
  status(@Param('trainId', TrainIdParam) trainId: string) {
    return this.svc.status(trainId);
  }

  @Delete('train/:trainId')
  @HttpCode(202)
  cancel(@Param('trainId', TrainIdParam) trainId: string) {
    return this.svc.cancel(trainId);
  }
}
