import { z } from 'zod';
import { WEBHOOK_SIGNATURE_HEADER, WebhookEventSchema } from '@lateral/shared';
import type { ApiRegistry } from './registry';

const SIGNATURE =
  `\`${WEBHOOK_SIGNATURE_HEADER}: t=<unix seconds>,v1=<hex>\`: v1 is HMAC-SHA256, keyed with WEBHOOK_SECRET, over the string \`<t>.<raw request body>\`. ` +
  'Recompute it over the bytes received, compare in constant time, and reject an old t (replay). ' +
  'Any 2xx completes the delivery; a timeout (WEBHOOK_TIMEOUT_MS), connection error, 408, 429 or 5xx is retried with exponential backoff ' +
  '(WEBHOOK_BACKOFF_MS, doubling) up to WEBHOOK_ATTEMPTS, then the delivery (a job of the `webhook` queue) is failed with the host and status in its message; other answers fail it at once. ' +
  'Only hosts in WEBHOOK_ALLOWED_HOSTS are called; loopback, link-local and metadata addresses only when an entry names them exactly (docs/webhooks.md).';

/** OpenAPI 3.1 `webhooks`: what lateral POSTs to a re-rank or search request's `callback` (docs/webhooks.md). */
export function registerWebhooks(api: ApiRegistry): void {
  const event = api.schema('WebhookEvent', {
    ...api.output(WebhookEventSchema),
    description: `POSTed (application/json) to a re-rank or search request's \`callback\` when the job completes or fails for good. \`location\` is the job's GET path (/v1/rerank/{id}, /v1/search/{id}). Signed: ${SIGNATURE}`,
  });
  api.registry.registerWebhook({
    method: 'post',
    path: 'jobFinished',
    summary: 'A re-rank or search with a `callback` completed or failed',
    description: SIGNATURE,
    request: {
      headers: z.object({
        [WEBHOOK_SIGNATURE_HEADER]: z.string().regex(/^t=\d+,v1=[0-9a-f]{64}$/).describe(SIGNATURE),
        'x-lateral-event': z.enum(['rerank.completed', 'rerank.failed', 'search.completed', 'search.failed']),
      }),
      body: { required: true, content: { 'application/json': { schema: event } } },
    },
    responses: { '200': { description: 'any 2xx: delivered' }, '500': { description: 'timeouts, 408, 429 and 5xx are retried with backoff' } },
  });
}
