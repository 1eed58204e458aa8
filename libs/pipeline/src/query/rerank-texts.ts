import type { Job } from 'bullmq';
import { PermanentJobError, QueueName, type JobResults, type RerankRequest, type RerankResult } from '@lateral/shared';
import { topK } from '@lateral/scoring';
import type { RerankDeps } from './query-deps';
import { anyTextCandidate, candidateIds, resolveCandidates, scoreResolved, type ResolvableCandidate, type ResolveTextDeps } from './rerank-candidates';
import { type CollectionView, degradedFields, splitUnavailable } from '@lateral/serving';
import { permanentModelErrors } from '../model-errors';

/** Sums the encode-texts children's results of a job (a re-rank job's, or a batch chunk's). */
export async function childTextStats(job: Pick<Job, 'getChildrenValues'> | undefined): Promise<{ encoded: number; reused: number }> {
  // A job replayed or run outside a flow (tests, handlers called directly) may carry no children.
  return textStatsOf(typeof job?.getChildrenValues === 'function' ? await job.getChildrenValues().catch(() => ({})) : {});
}

/** Sums the encode-texts results among a job's children values. */
export function textStatsOf(values: Record<string, unknown>): { encoded: number; reused: number } {
  let encoded = 0;
  let reused = 0;
  for (const [key, v] of Object.entries(values)) {
    if (!key.includes(`:${QueueName.encodeTexts}:`)) continue;
    const r = v as Partial<JobResults[QueueName.encodeTexts]>;
    encoded += r.encoded ?? 0;
    reused += r.reused ?? 0;
  }
  return { encoded, reused };
}

export type RerankJobDeps = RerankDeps & ResolveTextDeps;

/** A re-rank request whose text candidates may also be named by their hash (a batch chunk's rows). */
export type ResolvableRerankRequest = Omit<RerankRequest, 'queries'> & { queries: { id: string; text: string; candidates: ResolvableCandidate[] }[] };

/** Whether rerankWithTexts scores this request (text candidates, or no collection); else rerankByIds does. */
export const hasTextCandidates = (req: Pick<ResolvableRerankRequest, 'collection' | 'queries'>) => !req.collection || anyTextCandidate(req.queries);

/** Scores a parsed request with text candidates in memory (a batch chunk calls it directly). */
export async function rerankWithTexts(
  deps: RerankJobDeps,
  tenantId: string,
  rerankId: string,
  req: ResolvableRerankRequest,
  job?: Pick<Job, 'updateProgress'>,
  textStats: { encoded: number; reused: number } = { encoded: 0, reused: 0 },
  t0 = Date.now(),
): Promise<{ result: RerankResult; candidates: number; missing: number }> {
  const p = { tenantId, rerankId };
  const collection = req.collection ? await deps.collections.get(p.tenantId, req.collection) : null;
  if (req.collection && !collection) throw new PermanentJobError(`collection ${p.tenantId}/${req.collection} does not exist`);
  const model = collection?.model ?? req.model!;
  if (collection && req.model && req.model !== collection.model) throw new PermanentJobError(`model ${req.model} is not collection ${collection.id}'s model (${collection.model})`);
  const manifest = collection ? await deps.generations.manifest(p.tenantId, collection.id) : null;
  const tLoad = Date.now();
  const ids = candidateIds(req.queries);
  const view: CollectionView | null = collection && manifest && ids.length > 0 ? await deps.views.view(collection, manifest, ids) : null;
  const encoder = await deps.encoders(model).catch(permanentModelErrors);
  const { resolved, texts } = await resolveCandidates(deps, { tenantId: p.tenantId, collection, encoder, model, view }, req.queries);
  const loadMs = Date.now() - tLoad;

  // Rows of a batch repeat queries: encode each distinct query text once.
  const tEnc = Date.now();
  const distinct = [...new Set(req.queries.map((q) => q.text))];
  const encodedDistinct = await encoder.encodeQueries(distinct).catch(permanentModelErrors);
  const byText = new Map(distinct.map((t, i) => [t, encodedDistinct[i]]));
  const queries = req.queries.map((q) => byText.get(q.text)!);
  const encodeQueriesMs = Date.now() - tEnc;

  const tScore = Date.now();
  const scores = await scoreResolved(deps.scorers, resolved, { encoder, queries, scorer: req.scorer, tenantId }, job);
  const results: RerankResult['results'] = req.queries.map((q, i) => ({
    queryId: q.id,
    hits: topK(scores[i], resolved[i].ids, req.topK).map((h) => ({ id: h.id, score: h.score })),
    ...splitUnavailable(resolved[i].missing, view),
  }));
  const textsOut = texts ? { candidates: texts.candidates, encoded: textStats.encoded, reused: textStats.reused } : undefined;
  const result: RerankResult = {
    rerankId: p.rerankId,
    ...(collection ? { collection: collection.id } : {}),
    model,
    ...(textsOut ? { texts: textsOut } : {}),
    scorer: req.scorer,
    generation: manifest?.generation ?? 0,
    vectors: 'fp32',
    results,
    timings: { totalMs: Date.now() - t0, encodeQueriesMs, scoreMs: Date.now() - tScore, loadMs },
    ...degradedFields(view?.unavailable),
  };
  const candidates = resolved.reduce((s, r) => s + r.ids.length, 0);
  const missing = results.reduce((s, r) => s + r.missing.length, 0); // unavailable candidates are not missing
  return { result, candidates, missing };
}
