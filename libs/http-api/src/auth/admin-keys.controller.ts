import { Body, Controller, Delete, ForbiddenException, Get, HttpCode, Inject, NotFoundException, Param, Post, Query } from '@nestjs/common';
import { CreateApiKeySchema, ValidationError, resourceId } from '@lateral/shared';
import { ApiKeysService } from './api-keys.service';
import { RequiresRole } from './api-keys.guard';
import { json } from '../common/json-body';
import { zodIssues } from '../common/zod-issues';

/**
 * Key management (admin keys only; keys of every tenant). The secret is in the answer of create
 * and rotate only. With AUTH=none these answer 403: nobody is authenticated, so nobody may mint
 * keys over HTTP (the CLI, `npm run keys`, works in both modes).
 */
@Controller('v1/admin/keys')
@RequiresRole('admin')
export class AdminKeysController {
  constructor(@Inject(ApiKeysService) private readonly keys: ApiKeysService) {}

  private requireKeysMode(): void {
    if (!this.keys.enabled) throw new ForbiddenException('API key management over HTTP needs AUTH=keys (with AUTH=none, use `npm run keys`)');
  }

  @Get()
  async list(@Query('tenant') tenant: string | undefined) {
    this.requireKeysMode();
    if (tenant !== undefined) {
      const t = resourceId('tenant').safeParse(tenant);
      if (!t.success) throw new ValidationError(`invalid query parameter 'tenant': ${t.error.issues[0]?.message}`, [{ field: 'query.tenant', message: t.error.issues[0]?.message ?? 'invalid' }]);
    }
    return { keys: await this.keys.repository.list(tenant) };
  }

  @Post()
  @HttpCode(201)
  async create(@Body() body: unknown) {
    this.requireKeysMode();
    const parsed = CreateApiKeySchema.safeParse(json(body));
    if (!parsed.success) throw new ValidationError('invalid API key request', zodIssues(parsed.error));
    const { key, info } = await this.keys.repository.create(parsed.data);
    return { ...info, key };
  }

  @Get(':id')
  async get(@Param('id') id: string) {
    this.requireKeysMode();
    const info = await this.keys.repository.get(id);
    if (!info) throw new NotFoundException(`API key '${safeId(id)}' not found`);
    return info;
  }

  @Post(':id/rotate')
  @HttpCode(200)
  async rotate(@Param('id') id: string) {
    this.requireKeysMode();
    if (!(await this.keys.repository.get(id))) throw new NotFoundException(`API key '${safeId(id)}' not found`);
    const { key, info } = await this.keys.repository.rotate(id);
    return { ...info, key };
  }

  @Delete(':id')
  async revoke(@Param('id') id: string) {
    this.requireKeysMode();
    if (!(await this.keys.repository.get(id))) throw new NotFoundException(`API key '${safeId(id)}' not found`);
    return this.keys.repository.revoke(id);
  }
}

/** Echo an id only when it is a plausible key id (never 10 kB of control characters). */
function safeId(id: string): string {
  return /^[a-z0-9]{1,32}$/.test(id) ? id : '(invalid id)';
}
