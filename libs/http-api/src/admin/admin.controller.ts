import { Controller, Get, HttpCode, Inject, Param, Post } from '@nestjs/common';
import { AdminService } from './admin.service';
import { RequiresRole } from '../auth/api-keys.guard';

/**
 * Operations endpoints. Every path under /v1/admin/overview and /v1/admin/jobs is behind
 * adminAuth (admin-auth.ts, mounted in app.ts): 401 without the operator credential.
 */
// Operator auth is adminAuth's (in front of these paths); with AUTH=keys the API-key guard lets them through.
@RequiresRole('public')
@Controller('v1/admin')
export class AdminController {
  constructor(@Inject(AdminService) private readonly svc: AdminService) {}

  /** What the dashboard shows: queues, throughput, latency, workers, ingestions, collections, failed jobs. */
  @Get('overview')
  overview() {
    return this.svc.overview();
  }

  @Post('jobs/:queue/:jobId/retry')
  @HttpCode(202)
  retry(@Param('queue') queue: string, @Param('jobId') jobId: string) {
    return this.svc.retry(queue, jobId);
  }
}
