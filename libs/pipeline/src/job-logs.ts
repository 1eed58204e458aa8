import { s3Keys, segmentBatches, type CollectionManifest, type IngestionRecord, type JobPayload, type QueueName, type RerankResult, type SearchResult } from '@lateral/shared';
import { jobLogger, type Logger, type ObjectStore } from '@lateral/infra';

/**
 * The one info line per finished ingestion, re-rank and search, with its figures. Written by the
 * job that completes the work; WorkerHost's log context adds the job id, queue, tenant, collection
 * and request id to each.
 */

const round = (x: number, digits = 1) => Number(x.toFixed(digits));

export function logRerankDone(result: RerankResult, figures: { queries: number; candidates: number; missing: number }, logger: Logger | undefined = jobLogger()): void {
  if (!logger) return;
  const t = result.timings;
  logger.info(
    `rerank ${result.rerankId} done: ${figures.queries} queries, ${figures.candidates} candidates (${figures.missing} missing), ${result.scorer.name}, ${t.totalMs} ms`,
    { event: 'rerank.done', rerankId: result.rerankId, collection: result.collection, scorer: result.scorer.name, generation: result.generation, ...figures, ...t },
  );
}

export function logSearchDone(result: SearchResult, hits: number, logger: Logger | undefined = jobLogger()): void {
  if (!logger) return;
  const t = result.timings;
  logger.info(`search ${result.searchId} done: ${result.results.length} queries, ${hits} hits, ${result.mode.name}, ${t.totalMs} ms`, {
    event: 'search.done',
    searchId: result.searchId,
    collection: result.collection,
    mode: result.mode.name,
    generation: result.generation,
    queries: result.results.length,
    hits,
    ...t,
  });
}

/**
 * After a commit: when `manifest` (the generation this commit wrote) holds every batch of the
 * commit's ingestion, logs the ingestion's documents, tokens, seconds (accepted -> committed) and
 * documents per second. Commits are serialised by the conditional manifest write, so exactly one
 * commit, the one adding the last batch, sees the set complete for the first time.
 */
export async function logIngestionIfFinished(store: Pick<ObjectStore, 'get'>, logger: Logger, p: Extract<JobPayload<QueueName.commit>, { batchId: string }>, manifest: CollectionManifest): Promise<void> {
  if (!p.ingestionId || !manifest.segments.some((s) => s.batchId === p.batchId)) return;
  const bytes = await store.get(s3Keys.ingestion(p.tenantId, p.collectionId, p.ingestionId));
  if (!bytes) return;
  const record = JSON.parse(Buffer.from(bytes).toString('utf8')) as IngestionRecord;
  const segments = new Map(manifest.segments.map((s) => [s.batchId, s]));
  // a batch a merge folded into a larger segment is committed too (its tokens are then not told apart)
  const committed = new Set(manifest.segments.flatMap((s) => segmentBatches(s)));
  if (!record.batches.every((b) => committed.has(b.batchId))) return;
  const tokens = record.batches.reduce((sum, b) => sum + (segments.get(b.batchId)?.tokens ?? 0), 0);
  const end = Date.parse(manifest.committedAt);
  const seconds = Math.max(0.001, ((Number.isFinite(end) ? end : Date.now()) - Date.parse(record.createdAt)) / 1000);
  const docsPerSecond = round(record.documents / seconds);
  logger.info(`ingestion ${record.ingestionId} done: ${record.documents} documents, ${tokens} tokens in ${round(seconds, 2)} s (${docsPerSecond} docs/s)`, {
    event: 'ingestion.done',
    ingestionId: record.ingestionId,
    documents: record.documents,
    tokens,
    batches: record.batches.length,
    seconds: round(seconds, 3),
    docsPerSecond,
    generation: manifest.generation,
  });
}
