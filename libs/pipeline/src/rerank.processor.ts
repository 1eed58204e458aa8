import type { Job } from 'bullmq';
import { PermanentJobError, QueueName, RerankRequestSchema, s3Keys, type JobPayload, type JobResults, type RerankResult, type ScorerSpec } from '@lateral/shared';
import { dense, meanPool, topK } from '@lateral/scoring';
import type { EncodedText } from '@lateral/model';
import type { PipelineContext } from './context';
import type { CollectionView, CollectionViewCache } from './collection-view';
import type { GemmMaxsim } from './gemm-maxsim';
import { permanentModelErrors } from './encode.processor';

/** Candidate rows of a collection view as one contiguous T x d block with C + 1 offsets. */
export function gatherRows(view: CollectionView, rows: number[]): { docs: Float32Array; offsets: Uint32Array } {
  const d = view.dims;
  if (rows.length === view.docIds.length && rows.every((r, i) => r === i)) return { docs: view.vectors, offsets: view.offsets };
  const offsets = new Uint32Array(rows.length + 1);
  for (let i = 0; i < rows.length; i++) offsets[i + 1] = offsets[i] + (view.offsets[rows[i] + 1] - view.offsets[rows[i]]);
  const docs = new Float32Array(offsets[rows.length] * d);
  for (let i = 0; i < rows.length; i++) docs.set(view.vectors.subarray(view.offsets[rows[i]] * d, view.offsets[rows[i] + 1] * d), offsets[i] * d);
  return { docs, offsets };
}

/**
 * Scores queries that share one candidate list. MaxSim runs as GEMMs over the shared candidate
 * tokens (all queries of the group at once); dense is one dot product per candidate.
 */
export async function scoreGroup(gemm: GemmMaxsim, view: CollectionView, queries: EncodedText[], rows: number[], scorer: ScorerSpec, yieldEvery: () => Promise<void>): Promise<Float32Array[]> {
  const d = view.dims;
  if (scorer.name === 'dense') {
    return queries.map((q) => {
      const qv = meanPool(q.vectors, q.length, d, true);
      const scores = new Float32Array(rows.length);
      for (let i = 0; i < rows.length; i++) scores[i] = dense(qv, view.docVectors.subarray(rows[i] * d, (rows[i] + 1) * d));
      return scores;
    });
  }
  const { docs, offsets } = gatherRows(view, rows);
  return gemm.score(queries, docs, offsets, d, { normalize: scorer.normalize, yieldEvery });
}

export async function rerankProcessor(ctx: PipelineContext, views: CollectionViewCache, p: JobPayload<QueueName.rerank>, job?: Job): Promise<JobResults[QueueName.rerank]> {
  const t0 = Date.now();
  const raw = await ctx.store.getJson<unknown>(p.requestKey);
  if (!raw) throw new PermanentJobError(`re-rank request missing from S3: ${p.requestKey}`);
  const parsed = RerankRequestSchema.safeParse(raw);
  if (!parsed.success) throw new PermanentJobError(`invalid stored re-rank request ${p.requestKey}: ${parsed.error.message}`);
  const req = parsed.data;
  const collection = await ctx.collections.get(p.tenantId, req.collection);
  if (!collection) throw new PermanentJobError(`collection ${p.tenantId}/${req.collection} does not exist`);
  const manifest = await ctx.collections.manifest(p.tenantId, req.collection);
  const tLoad = Date.now();
  const view: CollectionView | null = manifest ? await views.get(manifest) : null;
  const loadMs = Date.now() - tLoad;
  const encoder = await ctx.encoders(collection.model).catch(permanentModelErrors);
  const tEnc = Date.now();
  const queries = await encoder.encodeQueries(req.queries.map((q) => q.text)).catch(permanentModelErrors);
  const encodeQueriesMs = Date.now() - tEnc;
  const tScore = Date.now();
  let missingTotal = 0;
  let candidatesTotal = 0;
  // Resolve candidates, then group queries that share the same candidate list (the common bulk
  // case: one list for many queries) so each group is scored in one pass over its tokens.
  const resolved = req.queries.map((q) => {
    const ids: string[] = [];
    const rows: number[] = [];
    const missing: string[] = [];
    const seen = new Set<string>();
    for (const id of q.candidates) {
      if (seen.has(id)) continue;
      seen.add(id);
      const row = view?.rowOf.get(id);
      if (row === undefined) missing.push(id);
      else {
        ids.push(id);
        rows.push(row);
      }
    }
    candidatesTotal += ids.length;
    missingTotal += missing.length;
    return { ids, rows, missing, key: rows.join(',') };
  });
  const groups = new Map<string, number[]>();
  resolved.forEach((r, i) => groups.set(r.key, [...(groups.get(r.key) ?? []), i]));
  const scores: Float32Array[] = new Array(req.queries.length);
  let done = 0;
  let lastYield = Date.now();
  const yieldEvery = async () => {
    // Bounded chunks: give BullMQ's lock renewal (and, all-in-one, the API) the event loop.
    if (Date.now() - lastYield > 50) {
      await new Promise((r) => setImmediate(r));
      lastYield = Date.now();
    }
  };
  for (const members of groups.values()) {
    const rows = resolved[members[0]].rows;
    if (!view || rows.length === 0) {
      for (const i of members) scores[i] = new Float32Array(0);
      continue;
    }
    const gemm = await views.gemm();
    const out = await scoreGroup(gemm, view, members.map((i) => queries[i]), rows, req.scorer, yieldEvery);
    members.forEach((qi, k) => (scores[qi] = out[k]));
    done += members.length;
    await job?.updateProgress(Math.round((100 * done) / req.queries.length));
  }
  const results: RerankResult['results'] = req.queries.map((q, i) => ({
    queryId: q.id,
    hits: topK(scores[i], resolved[i].ids, req.topK).map((h) => ({ id: h.id, score: h.score })),
    missing: resolved[i].missing,
  }));
  const result: RerankResult = {
    rerankId: p.rerankId,
    collection: req.collection,
    scorer: req.scorer,
    generation: manifest?.generation ?? 0,
    results,
    timings: { totalMs: Date.now() - t0, encodeQueriesMs, scoreMs: Date.now() - tScore, loadMs },
  };
  const resultKey = s3Keys.rerankResult(p.tenantId, p.rerankId);
  await ctx.store.putJson(resultKey, result);
  return { resultKey, queries: req.queries.length, candidates: candidatesTotal, missing: missingTotal };
}
