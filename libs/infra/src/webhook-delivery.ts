/**
 * Webhook deliveries: the `webhook` queue's jobs. A finished re-rank or search job queues one
 * (enqueueWebhook); a worker of the `webhook` queue POSTs it (deliverWebhook), signed with
 * WEBHOOK_SECRET, so a slow receiver never holds a scorer. The host is resolved here, at delivery,
 * and every address is checked again (callbackRefusal) inside the connection's own lookup, so the
 * address checked is the address connected to.
 */
import dns from 'node:dns';
import http from 'node:http';
import https from 'node:https';
import { isIP, type LookupFunction } from 'node:net';
import {
  PermanentJobError,
  QueueName,
  WEBHOOK_SIGNATURE_HEADER,
  callbackRefusal,
  parseRetryAfter,
  signWebhook,
  type Config,
  type JobPayload,
  type JobResults,
  type WebhookEvent,
} from '@lateral/shared';
import { RETRY_AFTER_BACKOFF, type JobQueues } from './queues';

type WebhookSettings = Pick<Config, 'WEBHOOK_ALLOWED_HOSTS' | 'WEBHOOK_SECRET' | 'WEBHOOK_TIMEOUT_MS' | 'WEBHOOK_ATTEMPTS' | 'WEBHOOK_BACKOFF_MS'>;

/**
 * A delivery that may succeed later (timeout, connection error, 408, 429, 5xx): BullMQ retries it
 * with backoff, or after `retryAfterMs` when the receiver's 429 / 503 carried a Retry-After
 * (retryAfterBackoff, queues.ts).
 */
export class WebhookRetryableError extends Error {
  constructor(message: string, readonly retryAfterMs?: number) {
    super(message);
  }
}

/** The longest Retry-After a delivery honours; a receiver asking for more is not retried (bounded in time like every client here). */
export const WEBHOOK_MAX_RETRY_AFTER_MS = 3_600_000;

/** Queues the delivery of `event` to `url` (one job per job and outcome: a retried job does not deliver twice). */
export async function enqueueWebhook(queues: JobQueues, config: WebhookSettings, tenantId: string, url: string, event: WebhookEvent): Promise<void> {
  const jobId = `${tenantId}~${event.kind}~${event.id}~${event.status}`;
  await queues.add(QueueName.webhook, jobId, { tenantId, url, body: event }, {
    attempts: config.WEBHOOK_ATTEMPTS,
    // exponential from WEBHOOK_BACKOFF_MS, or the receiver's Retry-After when it sent one
    backoff: { type: RETRY_AFTER_BACKOFF, delay: config.WEBHOOK_BACKOFF_MS },
  });
}

/** POSTs one webhook. Throws WebhookRetryableError (retried) or PermanentJobError (refused URL, 4xx); the message names the host and the status. */
export async function deliverWebhook(config: WebhookSettings, p: JobPayload<QueueName.webhook>): Promise<JobResults[QueueName.webhook]> {
  const url = new URL(p.url);
  const refusal = callbackRefusal(p.url, config.WEBHOOK_ALLOWED_HOSTS);
  if (refusal) throw new PermanentJobError(`webhook to ${url.host} refused: ${refusal}`);
  if (!config.WEBHOOK_SECRET) throw new PermanentJobError(`webhook to ${url.host} refused: WEBHOOK_SECRET is not set`);
  const body = JSON.stringify(p.body);
  const t = Math.floor(Date.now() / 1000);
  let address = '';
  let refused: string | null = null;
  // Resolve at delivery, check every address, connect only to a checked one.
  const lookup: LookupFunction = (hostname, options, callback) => {
    dns.lookup(hostname, { ...options, all: true }, (err, addresses) => {
      if (err) return callback(err, '', 4);
      const list = addresses as dns.LookupAddress[];
      for (const a of list) {
        const why = callbackRefusal(p.url, config.WEBHOOK_ALLOWED_HOSTS, a.address);
        if (why) {
          refused = why;
          return callback(Object.assign(new Error(why), { code: 'EWEBHOOKREFUSED' }), '', 4);
        }
      }
      const first = list[0];
      if (!first) return callback(Object.assign(new Error(`${hostname} has no address`), { code: 'ENOTFOUND' }), '', 4);
      address = first.address;
      if ((options as { all?: boolean }).all) return (callback as unknown as (e: null, a: dns.LookupAddress[]) => void)(null, list);
      callback(null, first.address, first.family);
    });
  };
  const literal = isIP(url.hostname.replace(/^\[(.*)\]$/, '$1'));
  const t0 = performance.now();
  let retryAfter: string | undefined;
  const status = await new Promise<number>((resolve, reject) => {
    const lib = url.protocol === 'https:' ? https : http;
    const req = lib.request(
      url,
      {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          'content-length': Buffer.byteLength(body),
          'user-agent': 'lateral-webhook/1',
          'x-lateral-event': p.body.event,
          [WEBHOOK_SIGNATURE_HEADER]: signWebhook(config.WEBHOOK_SECRET, body, t),
        },
        ...(literal ? {} : { lookup }),
        timeout: config.WEBHOOK_TIMEOUT_MS,
      },
      (res) => {
        res.resume(); // the receiver's body is not read
        retryAfter = res.headers['retry-after'];
        res.on('end', () => resolve(res.statusCode ?? 0));
        res.on('error', reject);
      },
    );
    const deadline = setTimeout(() => req.destroy(new WebhookRetryableError(`webhook to ${url.host}: no answer within ${config.WEBHOOK_TIMEOUT_MS} ms (WEBHOOK_TIMEOUT_MS)`)), config.WEBHOOK_TIMEOUT_MS);
    req.on('timeout', () => req.destroy(new WebhookRetryableError(`webhook to ${url.host}: no answer within ${config.WEBHOOK_TIMEOUT_MS} ms (WEBHOOK_TIMEOUT_MS)`)));
    req.on('close', () => clearTimeout(deadline));
    req.on('error', (err) => reject(err));
    req.end(body);
  }).catch((err: Error & { code?: string }) => {
    if (refused) throw new PermanentJobError(`webhook to ${url.host} refused: ${refused}`);
    if (err instanceof WebhookRetryableError) throw err;
    throw new WebhookRetryableError(`webhook to ${url.host} failed: ${err.code ?? ''} ${err.message}`.replace(/\s+/g, ' '));
  });
  const ms = Math.round(performance.now() - t0);
  if (literal) address = url.hostname.replace(/^\[(.*)\]$/, '$1');
  if (status >= 200 && status < 300) return { status, host: url.host, address, ms };
  const msg = `webhook to ${url.host} answered HTTP ${status}`;
  const askedMs = status === 429 || status === 503 ? parseRetryAfter(retryAfter) : undefined;
  if (askedMs !== undefined) {
    if (askedMs > WEBHOOK_MAX_RETRY_AFTER_MS) throw new PermanentJobError(`${msg} with Retry-After ${Math.round(askedMs / 1000)} s, over the ${WEBHOOK_MAX_RETRY_AFTER_MS / 1000} s a delivery waits: not retried`);
    throw new WebhookRetryableError(`${msg}; retrying after its Retry-After (${Math.round(askedMs / 100) / 10} s)`, askedMs);
  }
  if (status >= 500 || status === 408 || status === 429) throw new WebhookRetryableError(msg);
  throw new PermanentJobError(`${msg} (not retried: only timeouts, connection errors, 408, 429 and 5xx are)`);
}

/** The event of a finished re-rank or search job (payload of its rerank / search job, and its result or error). */
export function webhookEventFor(
  kind: 'rerank' | 'search',
  payload: { tenantId: string; collectionId?: string; rerankId?: string; searchId?: string },
  outcome: { counts: Record<string, number> } | { error: string },
): WebhookEvent {
  const id = (kind === 'rerank' ? payload.rerankId : payload.searchId) ?? '';
  const failed = 'error' in outcome;
  return {
    event: `${kind}.${failed ? 'failed' : 'completed'}`,
    id,
    kind,
    status: failed ? 'failed' : 'completed',
    tenant: payload.tenantId,
    collection: payload.collectionId ?? null,
    counts: failed ? {} : outcome.counts,
    location: `/v1/${kind}/${id}`,
    error: failed ? outcome.error.slice(0, 2000) : null,
    finishedAt: new Date().toISOString(),
  };
}
