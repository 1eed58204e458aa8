import type { Response } from 'express';
import { processMetrics, renderMetrics, sampleQueueDepths, type ApiRepositories } from '@lateral/infra';

/** How often the per-collection gauges are re-read from S3 (a scrape never waits for it). */
export const COLLECTION_STATS_REFRESH_MS = 30_000;
/** Collections read per refresh at most, so a huge deployment does not make every refresh a crawl. */
const MAX_COLLECTIONS = 2000;

/**
 * `GET /metrics`: this process's registry in Prometheus text format. At each scrape the queue
 * depths are read from BullMQ (getJobCounts per queue; lateral_redis_up 0 and no queue series when
 * Redis does not answer within 2 s: the scrape itself always answers 200). Per-collection
 * documents, tokens and bytes come from the current manifests in S3, refreshed in the background
 * at most every 30 s.
 */
/** The repositories this service is given (app.ts passes only these: pickRepositories). */
export const METRICS_REPOSITORIES = ['config', 'collections', 'generations', 'queues', 'logger'] as const satisfies readonly (keyof ApiRepositories)[];
/** What /metrics reads: collection records and manifests (the per-collection series), the queues' counts, the logger. */
export type MetricsDeps = Pick<ApiRepositories, (typeof METRICS_REPOSITORIES)[number]>;

export function metricsEndpoint(deps: MetricsDeps) {
  let lastRefresh = 0;
  let refreshing: Promise<void> | undefined;
  const refreshCollections = async () => {
    const m = processMetrics();
    const tenants = await deps.collections.tenants(deps.config.DEFAULT_TENANT);
    const rows: { tenant: string; collection: string; documents: number; tokens: number; bytes: number }[] = [];
    for (const tenant of tenants) {
      for (const collection of await deps.collections.list(tenant)) {
        if (rows.length >= MAX_COLLECTIONS) break;
        const manifest = await deps.generations.manifest(tenant, collection);
        const segments = manifest?.segments ?? [];
        rows.push({
          tenant,
          collection,
          documents: manifest?.documents ?? segments.reduce((s, r) => s + r.documents, 0),
          tokens: segments.reduce((s, r) => s + r.tokens, 0),
          bytes: segments.reduce((s, r) => s + r.bytes, 0),
        });
      }
    }
    m.collectionDocuments.reset();
    m.collectionTokens.reset();
    m.collectionBytes.reset();
    for (const r of rows) {
      const labels = { tenant: r.tenant, collection: r.collection };
      m.collectionDocuments.set(labels, r.documents);
      m.collectionTokens.set(labels, r.tokens);
      m.collectionBytes.set(labels, r.bytes);
    }
  };
  const log = deps.logger.child('metrics');
  return async (_req: unknown, response: unknown): Promise<void> => {
    const res = response as Response;
    if (!refreshing && Date.now() - lastRefresh >= COLLECTION_STATS_REFRESH_MS) {
      const first = lastRefresh === 0;
      lastRefresh = Date.now();
      refreshing = refreshCollections()
        .catch((err: unknown) => log.warn(`per-collection metrics not refreshed: ${err instanceof Error ? err.message : String(err)}`))
        .finally(() => (refreshing = undefined));
      // The first scrape of a process waits for the figures (briefly), the later ones never do.
      if (first) await Promise.race([refreshing, new Promise((r) => setTimeout(r, 2000).unref())]);
    }
    await sampleQueueDepths(() => deps.queues.counts());
    const { contentType, body } = await renderMetrics();
    res.setHeader('content-type', contentType);
    res.status(200).send(body);
  };
}
