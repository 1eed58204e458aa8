import { ValidationError, callbackRefusal, type Config } from '@lateral/shared';

/**
 * A request's `callback` (docs/webhooks.md): 400 naming `callback` and the setting when webhooks
 * are disabled (WEBHOOK_ALLOWED_HOSTS or WEBHOOK_SECRET empty) or the URL is not allowed. The
 * worker checks it again, with the addresses its host resolves to, at delivery.
 */
export function checkCallback(config: Pick<Config, 'WEBHOOK_ALLOWED_HOSTS' | 'WEBHOOK_SECRET'>, callback: string | undefined): void {
  if (callback === undefined) return;
  const refusal = config.WEBHOOK_SECRET ? callbackRefusal(callback, config.WEBHOOK_ALLOWED_HOSTS) : 'webhooks are disabled: WEBHOOK_SECRET is not set';
  if (refusal) throw new ValidationError(`callback not allowed: ${refusal}`, [{ field: 'callback', message: refusal }]);
}
