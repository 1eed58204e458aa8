import type { Job } from 'bullmq';
import { PermanentJobError, QueueName, RerankRequestSchema, collectionShards, s3Keys, type JobPayload, type JobResults, type RerankRequest, type RerankResult } from '@lateral/shared';
import { topK } from '@lateral/scoring';
import { addLogContext, type ObjectStore } from '@lateral/infra';
import { logRerankDone } from '../job-logs';
import type { RerankDeps } from './query-deps';
import { shardedRerank } from './shard-fanout';
import { isFanoutJob } from './shard-rounds';
import { type CollectionView, hitShaping, degradedFields, splitUnavailable } from '@lateral/serving';
import { permanentModelErrors } from '../model-errors';
import { candidateIds, resolveIdCandidates, scoreResolved } from './rerank-candidates';

/** The re-rank request a job's payload names, read from S3 and parsed (a missing or invalid one never succeeds). */
export async function loadRerankRequest(store: Pick<ObjectStore, 'getJson'>, requestKey: string): Promise<RerankRequest> {
  const raw = await store.getJson<unknown>(requestKey);
  if (!raw) throw new PermanentJobError(`re-rank request missing from S3: ${requestKey}`);
  const parsed = RerankRequestSchema.safeParse(raw);
  if (!parsed.success) throw new PermanentJobError(`invalid stored re-rank request ${requestKey}: ${parsed.error.message}`);
  return parsed.data;
}

/**
 * A re-rank whose candidates are all ids of the collection's documents: scored against the
 * cached segments holding them (or fanned out over the shard queues), then top-k, with the
 * request's passages, group and include. The re-rank queue's handler (rerank.processor.ts) and a
 * batch chunk of ids (batch.processor.ts) run it.
 */
export async function rerankByIds(
  deps: RerankDeps,
  p: JobPayload<QueueName.rerank>,
  job?: Pick<Job, 'updateProgress'>,
  stored?: RerankRequest,
  t0 = Date.now(),
): Promise<JobResults[QueueName.rerank]> {
  const { views, scorers } = deps;
  const req = stored ?? (await loadRerankRequest(deps.store, p.requestKey));
  // Requests with text candidates (which may name no collection) are scored by rerankProcessor (rerank.processor.ts).
  if (!req.collection) throw new PermanentJobError(`re-rank request ${p.rerankId} names no collection; it belongs to rerankProcessor`);
  addLogContext({ collection: req.collection }); // the payload names no collection: from here on, every line of this job says it
  const collection = await deps.collections.get(p.tenantId, req.collection);
  if (!collection) throw new PermanentJobError(`collection ${p.tenantId}/${req.collection} does not exist`);
  // Several shards: one child job per shard queue, merged here (shard-fanout.ts).
  if (deps.shardCoordinator && collectionShards(collection) > 1 && isFanoutJob(job)) return shardedRerank({ ...deps, shardCoordinator: deps.shardCoordinator }, p, req, collection, job, t0);
  const manifest = await deps.generations.manifest(p.tenantId, req.collection);
  const shaping = hitShaping(collection, req, Number.MAX_SAFE_INTEGER); // passages, group, include
  await shaping.expand(deps, manifest, req.queries);
  const tLoad = Date.now();
  const view: CollectionView | null = manifest ? await views.view(collection, manifest, candidateIds(req.queries)) : null;
  const loadMs = Date.now() - tLoad;
  const encoder = await deps.encoders(collection.model).catch(permanentModelErrors);
  const tEnc = Date.now();
  const queries = await encoder.encodeQueries(req.queries.map((q) => q.text)).catch(permanentModelErrors);
  const encodeQueriesMs = Date.now() - tEnc;
  const tScore = Date.now();
  // Resolve candidates, then group queries that share the same candidate list (the common bulk
  // case: one list for many queries) so each group is scored in one pass over its tokens.
  const resolved = req.queries.map((q) => resolveIdCandidates(q.candidates, view));
  const candidatesTotal = resolved.reduce((s, r) => s + r.ids.length, 0);
  const scores = await scoreResolved(scorers, resolved, { encoder, queries, scorer: req.scorer, tenantId: p.tenantId }, job);
  const results: RerankResult['results'] = req.queries.map((q, i) => ({
    queryId: q.id,
    hits: topK(scores[i], resolved[i].ids, shaping.depth).map((h) => ({ id: h.id, score: h.score })),
    ...splitUnavailable(resolved[i].missing, view),
  }));
  await shaping.finish(deps, manifest, results);
  const result: RerankResult = {
    rerankId: p.rerankId,
    collection: req.collection,
    scorer: req.scorer,
    generation: manifest?.generation ?? 0,
    ...(view ? { vectors: view.rotated ? ('rotated-int8' as const) : ('fp32' as const) } : {}),
    results,
    timings: { totalMs: Date.now() - t0, encodeQueriesMs, scoreMs: Date.now() - tScore, loadMs },
    ...degradedFields(view?.unavailable),
  };
  // Candidates of an unreadable segment are listed as unavailable, not counted as missing.
  const missingTotal = results.reduce((s, r) => s + r.missing.length, 0);
  const resultKey = s3Keys.rerankResult(p.tenantId, p.rerankId);
  await deps.store.putJson(resultKey, result);
  logRerankDone(result, { queries: req.queries.length, candidates: candidatesTotal, missing: missingTotal });
  return { resultKey, queries: req.queries.length, candidates: candidatesTotal, missing: missingTotal };
}
