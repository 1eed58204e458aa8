import { ForbiddenException, HttpException, Inject, Injectable, SetMetadata, UnauthorizedException, type CanActivate, type ExecutionContext, type Provider } from '@nestjs/common';
import { APP_GUARD, Reflector } from '@nestjs/core';
import type { Runtime } from '@lateral/infra';
import type { Request, Response } from 'express';
import { roleAllows, type Role } from '@lateral/shared';
import { ApiKeysService } from './api-keys.service';
import { setRequestAuth } from './request-context';

/** What a route needs: a role, or nothing at all ('public'). */
export type RouteAccess = Role | 'public';

const ACCESS = 'lateral:access';

/** Declares the role a controller or handler needs, instead of the default rule (routeAccess). */
export const RequiresRole = (role: RouteAccess) => SetMetadata(ACCESS, role);

/**
 * The default rule when a route declares nothing: health is public, and so are the operator paths
 * for this guard (admin-auth.ts checks them: ADMIN_TOKEN or an admin key); /v1/admin needs admin;
 * re-rank and search (submitting and reading jobs, the Cohere-compatible re-rank too) and every GET
 * need read; anything else changes a tenant's data (collections, ingestion, recompression,
 * deletes, batches, judgments, training) and needs write.
 */
export function routeAccess(method: string, path: string, operatorPaths: readonly string[] = []): RouteAccess {
  if (path === '/v1/health' || path.startsWith('/v1/health/')) return 'public';
  if (under(path, operatorPaths)) return 'public';
  if (path === '/v1/admin' || path.startsWith('/v1/admin/')) return 'admin';
  // re-rank, search, and the Cohere-compatible re-rank (its clients send Authorization: Bearer <key>)
  if (/^\/v1\/(rerank|search|compat\/cohere)(\/|$)/.test(path)) return 'read';
  if (method === 'GET' || method === 'HEAD' || method === 'OPTIONS') return 'read';
  return 'write';
}

/** Injection token: the operator paths (admin.module.ts ADMIN_PATHS), checked by admin-auth.ts before Nest runs. */
export const OPERATOR_PATHS = Symbol('OPERATOR_PATHS');

function under(path: string, prefixes: readonly string[]): boolean {
  return prefixes.some((p) => path === p || path.startsWith(`${p}/`));
}

/**
 * Express middleware in front of admin-auth.ts on the operator paths: with AUTH=keys, a request
 * presenting a live API key of role admin is marked (`req.adminKey`), which admin-auth accepts as
 * the operator credential, like ADMIN_TOKEN. Any other key is left to admin-auth (401).
 */
export function markAdminApiKey(keys: ApiKeysService) {
  return (req: Request & { adminKey?: boolean }, _res: Response, next: (err?: unknown) => void): void => {
    const presented = keys.enabled ? presentedKey(req) : null;
    if (!presented) return next();
    keys.verify(presented).then(
      (who) => {
        if (who?.role === 'admin') req.adminKey = true;
        next();
      },
      () => next(), // S3 unreachable: not marked, admin-auth decides (ADMIN_TOKEN still works)
    );
  };
}

/** The key a request presents: `Authorization: Bearer <key>`, else `x-api-key: <key>`. */
export function presentedKey(req: Pick<Request, 'headers'>): string | null {
  const auth = req.headers.authorization;
  if (typeof auth === 'string') {
    const m = /^Bearer\s+(\S+)\s*$/i.exec(auth);
    if (m) return m[1]!;
  }
  const x = req.headers['x-api-key'];
  if (typeof x === 'string' && x.trim()) return x.trim();
  return null;
}

/**
 * With AUTH=keys, every route but the public ones needs a live API key: 401 without one (or with
 * a revoked, rotated-away or unknown one), 403 naming the role needed when the key's role is
 * below it, 429 + Retry-After over the key's rate limit. The key's tenant becomes the request's
 * tenant (request-context.ts), so every collection, ingestion and job the services touch is that
 * tenant's: another tenant's ids are simply not there (404, as for an unknown id).
 * With AUTH=none it lets everything through (single tenant, DEFAULT_TENANT).
 */
@Injectable()
export class ApiKeysGuard implements CanActivate {
  constructor(
    @Inject(ApiKeysService) private readonly keys: ApiKeysService,
    @Inject(Reflector) private readonly reflector: Reflector,
    @Inject(OPERATOR_PATHS) private readonly operatorPaths: readonly string[],
  ) {}

  async canActivate(ctx: ExecutionContext): Promise<boolean> {
    if (ctx.getType() !== 'http' || !this.keys.enabled) return true;
    const req = ctx.switchToHttp().getRequest<Request>();
    const res = ctx.switchToHttp().getResponse<Response>();
    const need = this.reflector.getAllAndOverride<RouteAccess | undefined>(ACCESS, [ctx.getHandler(), ctx.getClass()]) ?? routeAccess(req.method, req.path, this.operatorPaths);
    if (need === 'public') return true;
    const presented = presentedKey(req);
    if (!presented) {
      res.setHeader('WWW-Authenticate', 'Bearer');
      throw new UnauthorizedException('an API key is required (AUTH=keys): send `Authorization: Bearer <key>` or `x-api-key: <key>`');
    }
    const who = await this.keys.verify(presented);
    if (!who) {
      res.setHeader('WWW-Authenticate', 'Bearer error="invalid_token"');
      throw new UnauthorizedException('the API key is not valid: unknown, revoked or rotated');
    }
    const rate = await this.keys.take(who);
    if (!rate.allowed) {
      res.setHeader('Retry-After', String(rate.retryAfterSeconds));
      throw new HttpException(
        `rate limit of API key '${who.keyId}' exceeded: ${rate.limit!.perSecond} requests per second, burst ${rate.limit!.burst} (RATE_LIMIT_PER_SECOND / RATE_LIMIT_BURST or the key's own limit); retry after ${rate.retryAfterSeconds} s`,
        429,
      );
    }
    if (!roleAllows(who.role, need)) {
      throw new ForbiddenException(`this endpoint needs an API key with role '${need}' (or above); this key's role is '${who.role}'`);
    }
    setRequestAuth({ keyId: who.keyId, tenantId: who.tenantId, role: who.role });
    return true;
  }
}

/** The providers app.ts registers: the key service and the guard on every route. */
export function apiKeyProviders(rt: Runtime, operatorPaths: readonly string[] = []): Provider[] {
  return [
    { provide: ApiKeysService, useFactory: () => new ApiKeysService(rt) },
    { provide: OPERATOR_PATHS, useValue: operatorPaths },
    { provide: APP_GUARD, useClass: ApiKeysGuard },
  ];
}
