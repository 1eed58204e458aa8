import type { Job } from 'bullmq';
import { PermanentJobError, QueueName, RerankRequestSchema, isTextCandidate, s3Keys, type JobPayload, type JobResults } from '@lateral/shared';
import { rerankByIds } from './rerank-ids';
import { rerankWithTexts, type RerankJobDeps } from './rerank-texts';

/**
 * The re-rank queue's processor. Requests whose candidates are all ids go to rerankByIds
 * (rerank-ids.ts) unchanged; requests with text candidates (with or without a collection) are
 * scored against the text view (rerankWithTexts, rerank-texts.ts), with the same scorers,
 * grouping and top-k.
 * `textStats`: what the job's encode-texts child encoded and reused.
 */
export async function rerankJob(
  ctx: RerankJobDeps,
  p: JobPayload<QueueName.rerank>,
  job?: Pick<Job, 'updateProgress'>,
  textStats: { encoded: number; reused: number } = { encoded: 0, reused: 0 },
): Promise<JobResults[QueueName.rerank]> {
  const t0 = Date.now();
  const raw = await ctx.store.getJson<unknown>(p.requestKey);
  if (!raw) throw new PermanentJobError(`re-rank request missing from S3: ${p.requestKey}`);
  const parsed = RerankRequestSchema.safeParse(raw);
  if (!parsed.success) throw new PermanentJobError(`invalid stored re-rank request ${p.requestKey}: ${parsed.error.message}`);
  const req = parsed.data;
  if (req.collection && !req.queries.some((q) => q.candidates.some(isTextCandidate))) return rerankByIds(ctx, p, job);
  const { result, candidates, missing } = await rerankWithTexts(ctx, p.tenantId, p.rerankId, req, job, textStats, t0);
  const resultKey = s3Keys.rerankResult(p.tenantId, p.rerankId);
  await ctx.store.putJson(resultKey, result);
  return { resultKey, queries: req.queries.length, candidates, missing, ...(result.texts ? { texts: result.texts } : {}) };
}
