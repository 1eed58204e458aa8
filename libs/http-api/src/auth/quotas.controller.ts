import { Body, Controller, Get, Inject, Param, Put } from '@nestjs/common';
import { TenantQuotaUpdateSchema, ValidationError, resourceId, type Config } from '@lateral/shared';
import { RequiresRole } from './api-keys.guard';
import { json } from '../common/json-body';
import { pathParam } from '../common/path-params';
import { currentTenant } from '../common/request-context';
import { TenantQuotas } from './quotas';
import { CONFIG } from '../common/tokens';
import { zodIssues } from '../common/zod-issues';

const TenantParam = pathParam('tenant', resourceId('tenant'));

/**
 * Per-tenant quotas and usage for the operator: GET and PUT /v1/admin/quotas/{tenant}, behind
 * adminAuth like /v1/admin/overview (ADMIN_TOKEN, or an admin API key with AUTH=keys).
 */
@RequiresRole('public')
@Controller('v1/admin/quotas')
export class TenantQuotasAdminController {
  constructor(@Inject(TenantQuotas) private readonly quotas: TenantQuotas) {}

  @Get(':tenant')
  get(@Param('tenant', TenantParam) tenant: string) {
    return this.quotas.status(tenant);
  }

  @Put(':tenant')
  put(@Param('tenant', TenantParam) tenant: string, @Body() body: unknown) {
    const parsed = TenantQuotaUpdateSchema.safeParse(json(body));
    if (!parsed.success) throw new ValidationError('invalid quota', zodIssues(parsed.error));
    return this.quotas.put(tenant, parsed.data);
  }
}

/** GET /v1/quota: the caller's own tenant's quotas and usage (role read). */
@Controller('v1/quota')
export class QuotaController {
  constructor(
    @Inject(TenantQuotas) private readonly quotas: TenantQuotas,
    @Inject(CONFIG) private readonly config: Config,
  ) {}

  @Get()
  get() {
    return this.quotas.status(currentTenant(this.config));
  }
}
