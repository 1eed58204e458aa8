import type { Job } from 'bullmq';
import { QueueName, s3Keys, type JobPayload, type JobResults } from '@lateral/shared';
import { loadRerankRequest, rerankByIds } from './rerank-ids';
import { hasTextCandidates, rerankWithTexts, type RerankJobDeps } from './rerank-texts';

/**
 * The re-rank queue's processor. Requests whose candidates are all ids go to rerankByIds
 * (rerank-ids.ts) unchanged; requests with text candidates (with or without a collection) are
 * scored against the text view (rerankWithTexts, rerank-texts.ts), with the same scorers,
 * grouping and top-k.
 * `textStats`: what the job's encode-texts child encoded and reused.
 */
export async function rerankProcessor(
  deps: RerankJobDeps,
  p: JobPayload<QueueName.rerank>,
  job?: Pick<Job, 'updateProgress'>,
  textStats: { encoded: number; reused: number } = { encoded: 0, reused: 0 },
): Promise<JobResults[QueueName.rerank]> {
  const t0 = Date.now();
  const req = await loadRerankRequest(deps.store, p.requestKey);
  if (!hasTextCandidates(req)) return rerankByIds(deps, p, job, req, t0);
  const { result, candidates, missing } = await rerankWithTexts(deps, p.tenantId, p.rerankId, req, job, textStats, t0);
  const resultKey = s3Keys.rerankResult(p.tenantId, p.rerankId);
  await deps.store.putJson(resultKey, result);
  return { resultKey, queries: req.queries.length, candidates, missing, ...(result.texts ? { texts: result.texts } : {}) };
}
