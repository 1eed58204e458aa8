import { LIVE } from './ids';
/**
 * Webhooks (callbacks of re-rank and search requests): the payload POSTed to a request's
 * `callback` URL, its signature, and the allow-list rule (WEBHOOK_ALLOWED_HOSTS). Pure: the
 * delivery (DNS, HTTP) is in @lateral/infra (webhook-delivery.ts), which re-checks every resolved
 * address with specialAddress() and allowedCallback().
 */
import { createHmac, timingSafeEqual } from 'node:crypto';
import { isIP } from 'node:net';
import { z } from 'zod';

export const WEBHOOK_SIGNATURE_HEADER = 'x-lateral-signature';
export const MAX_CALLBACK_URL_CHARS = 2048;

/** `callback` of a re-rank or search request: an absolute http(s) URL (checked against WEBHOOK_ALLOWED_HOSTS by the API). */
export const CallbackUrlSchema = z
  .string()
  .max(MAX_CALLBACK_URL_CHARS, `callback is at most ${MAX_CALLBACK_URL_CHARS} characters`)
  .refine((s) => {
    try {
      const u = new URL(s);
      return (u.protocol === 'http:' || u.protocol === 'https:') && u.username === '' && u.password === '';
    } catch {
      return false;
    }
  }, 'callback must be an absolute http:// or https:// URL without credentials')
  .describe('Webhook: POSTed a signed WebhookEvent when the job completes or fails for good; its host must be in WEBHOOK_ALLOWED_HOSTS (400 naming `callback` otherwise).')
  .meta({ [LIVE]: 'callback-hosts' });

/** What a webhook delivery POSTs (JSON): the summary of a finished re-rank or search job and where its result is. */
export const WebhookEventSchema = z.object({
  /** `rerank.completed`, `rerank.failed`, `search.completed`, `search.failed`. */
  event: z.enum(['rerank.completed', 'rerank.failed', 'search.completed', 'search.failed']),
  id: z.string().min(1).max(256),
  kind: z.enum(['rerank', 'search']),
  status: z.enum(['completed', 'failed']),
  tenant: z.string().min(1).max(256),
  collection: z.string().max(256).nullable(),
  /** Re-rank: queries, candidates, missing; search: queries, hits. Empty when failed. */
  counts: z.record(z.string(), z.number()),
  /** Path of the job's status and result on the API: `/v1/rerank/{id}` or `/v1/search/{id}`. */
  location: z.string().min(1).max(512),
  /** The job's last error, when failed. */
  error: z.string().max(2000).nullable(),
  finishedAt: z.string(),
});
export type WebhookEvent = z.infer<typeof WebhookEventSchema>;

/** `t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<body>" with WEBHOOK_SECRET>`. */
export function signWebhook(secret: string, body: string, unixSeconds: number): string {
  const mac = createHmac('sha256', secret).update(`${unixSeconds}.${body}`).digest('hex');
  return `t=${unixSeconds},v1=${mac}`;
}

/** Receiver side (documentation and tests): true when `header` signs `body` with `secret`. */
export function verifyWebhookSignature(secret: string, body: string, header: string): boolean {
  const parts = Object.fromEntries(header.split(',').map((p) => p.split('=', 2) as [string, string]));
  const t = Number(parts.t);
  if (!Number.isInteger(t) || typeof parts.v1 !== 'string') return false;
  const expected = Buffer.from(signWebhook(secret, body, t).split('v1=')[1]!, 'hex');
  const got = Buffer.from(parts.v1, 'hex');
  return got.length === expected.length && timingSafeEqual(got, expected);
}

/** One WEBHOOK_ALLOWED_HOSTS entry: `host`, `host:port`, `*.domain`, `*.domain:port`, `[v6]:port`, or `*` (any public host). */
export interface HostPattern {
  host: string;
  port: number | null;
  wildcard: boolean;
}

export function parseAllowedHosts(raw: string): HostPattern[] {
  const out: HostPattern[] = [];
  for (const entry of raw.split(',').map((s) => s.trim().toLowerCase()).filter(Boolean)) {
    let host = entry;
    let port: number | null = null;
    const v6 = /^\[([^\]]+)\](?::(\d+))?$/.exec(entry);
    if (v6) {
      host = v6[1]!;
      port = v6[2] ? Number(v6[2]) : null;
    } else {
      const m = /^([^:]+):(\d+)$/.exec(entry);
      if (m) {
        host = m[1]!;
        port = Number(m[2]);
      }
    }
    out.push({ host, port, wildcard: host === '*' || host.startsWith('*.') });
  }
  return out;
}

/** Host of a URL as compared with the patterns: lower case, IPv6 without brackets. */
export function urlHost(u: URL): string {
  return u.hostname.toLowerCase().replace(/^\[(.*)\]$/, '$1');
}

export function urlPort(u: URL): number {
  return u.port ? Number(u.port) : u.protocol === 'https:' ? 443 : 80;
}

/** The pattern that allows this URL (an explicit one before a wildcard), or null. */
export function allowedCallback(u: URL, patterns: HostPattern[]): HostPattern | null {
  const host = urlHost(u);
  const port = urlPort(u);
  const matches = patterns.filter((p) => {
    if (p.port !== null && p.port !== port) return false;
    if (p.host === '*') return true;
    if (p.host.startsWith('*.')) return host.endsWith(p.host.slice(1)) && host.length > p.host.length - 1;
    return p.host === host;
  });
  return matches.find((p) => !p.wildcard) ?? matches[0] ?? null;
}

/** Host names that always mean a cloud metadata service. */
const METADATA_NAMES = new Set(['metadata.google.internal', 'metadata', 'metadata.azure.internal', 'instance-data', 'instance-data.ec2.internal']);

function v4(ip: string): number[] | null {
  return isIP(ip) === 4 ? ip.split('.').map(Number) : null;
}

/** An IPv4-mapped IPv6 address (::ffff:a.b.c.d or ::ffff:xxxx:xxxx) as IPv4, else null. */
function mappedV4(ip: string): string | null {
  const m = /^::ffff:(?:0:)?(.+)$/i.exec(ip);
  if (!m) return null;
  if (isIP(m[1]!) === 4) return m[1]!;
  const h = /^([0-9a-f]{1,4}):([0-9a-f]{1,4})$/i.exec(m[1]!);
  if (!h) return null;
  const a = parseInt(h[1]!, 16);
  const b = parseInt(h[2]!, 16);
  return `${a >> 8}.${a & 255}.${b >> 8}.${b & 255}`;
}

/**
 * Why an address (IP literal) or host name is never called unless the allow-list names it
 * explicitly: 'loopback', 'link-local', 'metadata' or 'unspecified'; null for an ordinary address.
 */
export function specialAddress(hostOrIp: string): 'loopback' | 'link-local' | 'metadata' | 'unspecified' | null {
  const h = hostOrIp.toLowerCase().replace(/^\[(.*)\]$/, '$1').replace(/\.$/, '');
  if (METADATA_NAMES.has(h)) return 'metadata';
  if (h === 'localhost' || h.endsWith('.localhost')) return 'loopback';
  const mapped = mappedV4(h);
  if (mapped) return specialAddress(mapped);
  const a = v4(h);
  if (a) {
    if (h === '169.254.169.254' || h === '100.100.100.200' || h === '169.254.170.2') return 'metadata';
    if (a[0] === 169 && a[1] === 254) return 'link-local';
    if (a[0] === 127) return 'loopback';
    if (a[0] === 0) return 'unspecified';
    return null;
  }
  if (isIP(h) === 6) {
    if (h === 'fd00:ec2::254') return 'metadata';
    if (/^fe[89ab][0-9a-f]:/i.test(h)) return 'link-local';
    if (/^(0{0,4}:){2,7}0{0,3}1$/.test(h) || h === '::1') return 'loopback';
    if (h === '::' || /^(0{0,4}:){2,7}0{0,4}$/.test(h)) return 'unspecified';
  }
  return null;
}

/**
 * The allow-list rule, for the URL as written (API) and again for every address its host resolves
 * to (delivery). Returns why the URL is refused, or null when it may be called:
 * - WEBHOOK_ALLOWED_HOSTS empty: webhooks are disabled;
 * - the host (and port) must match a pattern;
 * - loopback, link-local (169.254.0.0/16, fe80::/10), metadata and unspecified addresses or names
 *   are refused unless the pattern that matched names that host exactly (no wildcard), e.g.
 *   `127.0.0.1:9000` or `localhost:9000`; a wildcard (`*`, `*.example.com`) never allows them,
 *   and a name resolving to one is refused at delivery unless the name is such an explicit entry
 *   and is itself special (e.g. `localhost`).
 */
export function callbackRefusal(url: string, rawAllowed: string, resolved?: string): string | null {
  const patterns = parseAllowedHosts(rawAllowed);
  if (patterns.length === 0) return 'webhooks are disabled: WEBHOOK_ALLOWED_HOSTS is empty';
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    return 'callback must be an absolute http:// or https:// URL';
  }
  const host = urlHost(u);
  const pattern = allowedCallback(u, patterns);
  if (!pattern) return `host ${u.host} is not in WEBHOOK_ALLOWED_HOSTS`;
  const explicit = !pattern.wildcard;
  const named = specialAddress(host);
  if (named && !explicit) return `${host} is a ${named} address: only an explicit WEBHOOK_ALLOWED_HOSTS entry (not a wildcard) allows it`;
  if (resolved !== undefined) {
    const kind = specialAddress(resolved);
    // An explicitly listed special host (127.0.0.1, localhost, 169.254.x.y) may resolve to a special
    // address; any other name resolving to one (DNS rebinding, internal names) is refused.
    if (kind && !(explicit && named)) return `${host} resolves to ${resolved}, a ${kind} address, which WEBHOOK_ALLOWED_HOSTS does not name explicitly`;
  }
  return null;
}
