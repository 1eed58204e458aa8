import { AsyncLocalStorage } from 'node:async_hooks';
import type { Config, Role } from '@lateral/shared';

/** Who made the request: set by ApiKeysGuard (AUTH=keys) before any controller runs. */
export interface RequestAuth {
  keyId: string;
  tenantId: string;
  role: Role;
}

interface RequestStore {
  auth?: RequestAuth;
}

const storage = new AsyncLocalStorage<RequestStore>();

/**
 * Express middleware giving each request its own store, so the services (constructed once) read
 * the caller's tenant without every controller passing it down. Registered after the body parser:
 * the parser's stream callbacks would otherwise run outside the request's context.
 */
export function requestContextMiddleware(_req: unknown, _res: unknown, next: () => void): void {
  storage.run({}, next);
}

export function setRequestAuth(auth: RequestAuth): void {
  const store = storage.getStore();
  if (!store) throw new Error('no request context: requestContextMiddleware is not registered');
  store.auth = auth;
}

export function requestAuth(): RequestAuth | undefined {
  return storage.getStore()?.auth;
}

/**
 * The tenant every collection, ingestion and job of this request belongs to: DEFAULT_TENANT with
 * AUTH=none, the API key's tenant with AUTH=keys. Fails closed: with keys, a request that did not
 * pass the guard has no tenant.
 */
export function currentTenant(config: Pick<Config, 'AUTH' | 'DEFAULT_TENANT'>): string {
  if (config.AUTH === 'none') return config.DEFAULT_TENANT;
  const auth = requestAuth();
  if (!auth) throw new Error('AUTH=keys but this request carries no authenticated tenant');
  return auth.tenantId;
}
