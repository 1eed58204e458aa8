import { ForbiddenException, HttpException, Inject, Injectable, SetMetadata, type CanActivate, type ExecutionContext, type Provider } from '@nestjs/common';
import { APP_GUARD, Reflector } from '@nestjs/core';
import type { VerifiedKey } from '@lateral/infra';
import type { Request, Response } from 'express';
import { roleAllows, type Role } from '@lateral/shared';
import { ApiKeysService, type ApiKeysDeps } from './api-keys.service';
import { setRequestAuth } from '../common/request-context';
import { OVERLOAD_RETRY_AFTER_SECONDS, serviceFault } from '../common/http-errors.filter';

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

const CALLER = Symbol('lateral:api-key-caller');
type CallerRequest = Request & { [CALLER]?: VerifiedKey };

type Authenticated = { ok: true; who: VerifiedKey } | { ok: false; status: 401 | 429; error: 'unauthorized' | 'rate_limited'; message: string };

/**
 * Who presents this request's key, after its rate limit: 401 without a key or with an unknown,
 * revoked or rotated-away one (WWW-Authenticate set), 429 over the key's limit (Retry-After set).
 */
async function authenticate(keys: ApiKeysService, req: Request, res: Response): Promise<Authenticated> {
  const presented = presentedKey(req);
  if (!presented) {
    res.setHeader('WWW-Authenticate', 'Bearer');
    return { ok: false, status: 401, error: 'unauthorized', message: 'an API key is required (AUTH=keys): send `Authorization: Bearer <key>` or `x-api-key: <key>`' };
  }
  const who = await keys.verify(presented);
  if (!who) {
    res.setHeader('WWW-Authenticate', 'Bearer error="invalid_token"');
    return { ok: false, status: 401, error: 'unauthorized', message: 'the API key is not valid: unknown, revoked or rotated' };
  }
  const rate = await keys.take(who);
  if (!rate.allowed) {
    res.setHeader('Retry-After', String(rate.retryAfterSeconds));
    return {
      ok: false,
      status: 429,
      error: 'rate_limited',
      message: `rate limit of API key '${who.keyId}' exceeded: ${rate.limit!.perSecond} requests per second, burst ${rate.limit!.burst} (RATE_LIMIT_PER_SECOND / RATE_LIMIT_BURST or the key's own limit); retry after ${rate.retryAfterSeconds} s`,
    };
  }
  return { ok: true, who };
}

/**
 * Express middleware before the body is read (app.ts): with AUTH=keys, a /v1 request that is not
 * public by routeAccess is authenticated and rate-limited here, so a caller without a live key,
 * or over its limit, is refused before its body takes memory or a body-parsing slot. The guard
 * then checks the role (which may depend on the route's metadata) with the caller found here.
 * Routes made public only by @RequiresRole('public') must be public in routeAccess too (the
 * operator paths are).
 */
export function authenticateEarly(keys: ApiKeysService, operatorPaths: readonly string[] = []) {
  return (req: CallerRequest, res: Response, next: (err?: unknown) => void): void => {
    if (!keys.enabled || !req.path.startsWith('/v1/') || routeAccess(req.method, req.path, operatorPaths) === 'public') return next();
    authenticate(keys, req, res).then((result) => {
      if (result.ok) {
        req[CALLER] = result.who;
        return next();
      }
      res.status(result.status).json({ error: result.error, message: result.message });
    }, (err: unknown) => {
      // S3 (the key records) or Redis (the rate limits) unreachable, or too slow under load: like every other call then.
      if (serviceFault(err, keys.loadProbe)?.kind === 'overloaded') {
        res.setHeader('Retry-After', String(OVERLOAD_RETRY_AFTER_SECONDS));
        res.status(503).json({ error: 'overloaded', message: `the service is overloaded: the API key could not be checked in time (the object store or Redis did not answer); retry after ${OVERLOAD_RETRY_AFTER_SECONDS} s` });
        return;
      }
      res.setHeader('Retry-After', '5');
      res.status(503).json({ error: 'unavailable', message: 'the API key cannot be checked: the object store or Redis is unreachable; retry after the Retry-After header' });
    });
  };
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
    const early = (req as CallerRequest)[CALLER];
    const result = early ? { ok: true as const, who: early } : await authenticate(this.keys, req, res);
    if (!result.ok) throw new HttpException(result.message, result.status);
    const who = result.who;
    if (!roleAllows(who.role, need)) {
      throw new ForbiddenException(`this endpoint needs an API key with role '${need}' (or above); this key's role is '${who.role}'`);
    }
    setRequestAuth({ keyId: who.keyId, tenantId: who.tenantId, role: who.role });
    return true;
  }
}

/** The providers app.ts registers: the key service and the guard on every route. */
export function apiKeyProviders(deps: ApiKeysDeps, operatorPaths: readonly string[] = []): Provider[] {
  return [
    { provide: ApiKeysService, useFactory: () => new ApiKeysService(deps) },
    { provide: OPERATOR_PATHS, useValue: operatorPaths },
    { provide: APP_GUARD, useClass: ApiKeysGuard },
  ];
}
