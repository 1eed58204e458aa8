import { INLINE_JOB_BYTES } from '@lateral/shared';
import type { ObjectStore } from '@lateral/infra';

/**
 * The object store as one re-rank or search job sees it (issue 31 item 2): its request comes from
 * the job's data when the API put it there (a small request is never written to S3), and its
 * result, when its JSON is at most INLINE_JOB_BYTES, is kept for the job's return value instead
 * of being written to S3 (`inline()`), so the API answers a waiting request without an S3 round
 * trip either way. Everything else goes to `store` as before; a large result is written under its
 * key as before. A retried job reads the same data and returns the same result.
 */
export function jobObjects(store: ObjectStore, job: { requestKey: string; request?: unknown }, resultKey: string): { store: ObjectStore; inline(): { result?: unknown } } {
  let result: { value: unknown } | null = null;
  const getJson = async <T>(key: string): Promise<T | null> => (key === job.requestKey && job.request !== undefined ? (job.request as T) : store.getJson<T>(key));
  const putJson = async (key: string, value: unknown): Promise<void> => {
    if (key === resultKey && Buffer.byteLength(JSON.stringify(value)) <= INLINE_JOB_BYTES) {
      result = { value };
      return;
    }
    await store.putJson(key, value);
  };
  const view = new Proxy(store, {
    get(target, prop) {
      if (prop === 'getJson') return getJson;
      if (prop === 'putJson') return putJson;
      const v = Reflect.get(target, prop, target) as unknown;
      return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(target) : v;
    },
  });
  return { store: view, inline: () => (result ? { result: (result as { value: unknown }).value } : {}) };
}
