import { QueueName } from '@lateral/shared';
import type { Runtime } from '@lateral/infra';
import { cleanupTextCache } from '@lateral/pipeline';

const DAY_MS = 24 * 3600 * 1000;

/**
 * Expiry of the text cache (TEXT_CACHE_TTL_DAYS): reads already refuse expired entries; this
 * deletes them, once a minute after start and then daily, in processes that serve encode-texts
 * (the writers). S3 lifecycle rules do the same on a real bucket; the embedded server has none.
 * Returns a stop function.
 */
export function startTextCacheCleanup(rt: Runtime, queues: QueueName[]): () => void {
  if (!queues.includes(QueueName.encodeTexts)) return () => undefined;
  const run = () =>
    cleanupTextCache(rt.store, rt.config.TEXT_CACHE_TTL_DAYS)
      .then((n) => n > 0 && rt.logger.info(`text cache: deleted ${n} expired entries`))
      .catch((err) => rt.logger.warn(`text cache cleanup: ${(err as Error).message}`));
  let daily: NodeJS.Timeout | undefined;
  const first = setTimeout(() => {
    void run();
    daily = setInterval(() => void run(), DAY_MS);
    daily.unref();
  }, 60_000);
  first.unref();
  return () => {
    clearTimeout(first);
    if (daily) clearInterval(daily);
  };
}
