import { createHmac, timingSafeEqual } from 'node:crypto';
import type { IncomingHttpHeaders } from 'node:http';
import type { NextFunction, Request, Response } from 'express';

/**
 * Operator authentication for /dashboard, /admin/queues and the /v1/admin operations endpoints.
 *
 * The credential is ADMIN_TOKEN (configuration). A request is an operator's when it carries
 * `Authorization: Bearer <ADMIN_TOKEN>`, or the session cookie the dashboard's login form sets
 * (an HMAC of the token, never the token itself; HttpOnly, SameSite=Strict). Without ADMIN_TOKEN
 * the operator endpoints are disabled (403 saying so), never open, except to an admin API key.
 *
 * Tenant API keys with the admin role pass `isAdmin` too: the API-key middleware in front of this
 * one (AUTH=keys), once it has verified such a key, sets `req.adminKey = true`.
 */
export const ADMIN_COOKIE = 'lateral_admin';
const SESSION_HOURS = 12;

export interface AdminRequest {
  headers: IncomingHttpHeaders;
  /** Set by an authentication layer that verified an admin-role credential of its own. */
  adminKey?: boolean;
}

/** The cookie value for a token: an HMAC, so the browser never holds the token itself. */
export function adminSession(token: string): string {
  return createHmac('sha256', token).update('lateral-admin-session-v1').digest('base64url');
}

function same(a: string, b: string): boolean {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
}

function cookie(header: string | undefined, name: string): string | undefined {
  for (const part of (header ?? '').split(';')) {
    const i = part.indexOf('=');
    if (i > 0 && part.slice(0, i).trim() === name) return part.slice(i + 1).trim();
  }
  return undefined;
}

/** True when the request carries the operator credential. */
export function isAdmin(req: AdminRequest, adminToken: string | undefined): boolean {
  if (req.adminKey === true) return true;
  if (!adminToken) return false;
  const auth = req.headers.authorization;
  if (typeof auth === 'string' && /^Bearer\s+/i.test(auth) && same(auth.replace(/^Bearer\s+/i, '').trim(), adminToken)) return true;
  const session = cookie(req.headers.cookie, ADMIN_COOKIE);
  return session !== undefined && same(session, adminSession(adminToken));
}

const escapeHtml = (s: string) => s.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);

function wantsHtml(req: Request): boolean {
  return req.method === 'GET' && /text\/html/.test(req.headers.accept ?? '') && !req.originalUrl.startsWith('/v1/');
}

function page(title: string, body: string): string {
  return `<!doctype html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1"><title>${title}</title><link rel="icon" href="data:,">
<style>body{font:15px system-ui,sans-serif;background:#0f1720;color:#e6edf3;display:flex;min-height:90vh;align-items:center;justify-content:center}
form,div.box{background:#17212b;padding:24px 28px;border-radius:8px;min-width:320px}input{width:100%;padding:8px;margin:8px 0 12px;box-sizing:border-box}
button{padding:8px 16px}.err{color:#ff7b72}</style></head><body>${body}</body></html>`;
}

function loginPage(message?: string): string {
  return page(
    'lateral: operator login',
    `<form method="post" action="/dashboard/login"><h2>lateral operations</h2>
<label for="token">Admin token (ADMIN_TOKEN)</label><input id="token" name="token" type="password" autocomplete="current-password" autofocus>
${message ? `<p class="err" role="alert">${escapeHtml(message)}</p>` : ''}<button type="submit">Sign in</button></form>`,
  );
}

const LOGIN_MAX_BYTES = 4096;

/** The login form's fields (application/x-www-form-urlencoded), read here: this middleware runs before the API's body reader. */
function readForm(req: Request): Promise<URLSearchParams> {
  if (typeof req.body === 'string') return Promise.resolve(new URLSearchParams(req.body));
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (c: Buffer) => {
      size += c.length;
      if (size > LOGIN_MAX_BYTES) {
        req.removeAllListeners('data');
        req.resume();
        reject(new Error('too large'));
      } else chunks.push(c);
    });
    req.on('end', () => resolve(new URLSearchParams(Buffer.concat(chunks).toString('utf8'))));
    req.on('error', reject);
  });
}

export const ADMIN_DISABLED_MESSAGE =
  'operator endpoints are disabled: set ADMIN_TOKEN (at least 16 characters) to enable /dashboard, /admin/queues and /v1/admin/* (docs/operations.md, "Operations dashboard")';

/**
 * Express middleware in front of every operator path. Also serves the login form (GET without a
 * session: 401 + the form, nothing of the dashboard) and handles POST /dashboard/login and
 * /dashboard/logout. Everything else without the credential: 401 JSON (`WWW-Authenticate: Bearer`).
 */
export function adminAuth(adminToken: string | undefined) {
  return (req: Request & AdminRequest, res: Response, next: NextFunction): void => {
    res.setHeader('Cache-Control', 'no-store');
    // An admin-role API key (AUTH=keys), verified by markAdminApiKey in front of this middleware.
    if (req.adminKey === true) return next();
    if (!adminToken) {
      if (wantsHtml(req)) {
        res.status(403).type('html').send(page('lateral: operator endpoints disabled', `<div class="box"><h2>Disabled</h2><p>${escapeHtml(ADMIN_DISABLED_MESSAGE)}</p></div>`));
      } else res.status(403).json({ error: 'admin_disabled', message: ADMIN_DISABLED_MESSAGE });
      return;
    }
    const url = req.originalUrl.split('?')[0];
    if (req.method === 'POST' && url === '/dashboard/login') {
      void readForm(req).then((form) => {
        if (!same(form.get('token') ?? '', adminToken)) {
          res.status(401).type('html').send(loginPage('wrong token'));
          return;
        }
        const secure = req.secure || req.headers['x-forwarded-proto'] === 'https' ? '; Secure' : '';
        res.setHeader('Set-Cookie', `${ADMIN_COOKIE}=${adminSession(adminToken)}; Path=/; HttpOnly; SameSite=Strict; Max-Age=${SESSION_HOURS * 3600}${secure}`);
        res.redirect(303, '/dashboard');
      }, () => res.status(413).json({ error: 'payload_too_large', message: `the login form is at most ${LOGIN_MAX_BYTES} bytes` }));
      return;
    }
    if (req.method === 'POST' && url === '/dashboard/logout') {
      res.setHeader('Set-Cookie', `${ADMIN_COOKIE}=; Path=/; HttpOnly; SameSite=Strict; Max-Age=0`);
      res.redirect(303, '/dashboard');
      return;
    }
    if (isAdmin(req, adminToken)) return next();
    res.setHeader('WWW-Authenticate', 'Bearer realm="lateral-admin"');
    if (wantsHtml(req)) res.status(401).type('html').send(loginPage());
    else res.status(401).json({ error: 'unauthorized', message: 'operator credential required: Authorization: Bearer <ADMIN_TOKEN>, or sign in at /dashboard' });
  };
}
