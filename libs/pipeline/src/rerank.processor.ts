import type { Job } from 'bullmq';
import { PermanentJobError, QueueName, RerankRequestSchema, s3Keys, type JobPayload, type JobResults, type RerankResult, type ScorerSpec } from '@lateral/shared';
import { dense, maxsimBatch, meanPool, topK } from '@lateral/scoring';
import type { EncodedText } from '@lateral/model';
import type { PipelineContext } from './context';
import type { CollectionView, CollectionViewCache } from './collection-view';
import { permanentModelErrors } from './encode.processor';

/** Scores one query against candidate rows of a collection view. */
export function scoreCandidates(view: CollectionView, query: EncodedText, rows: number[], scorer: ScorerSpec): Float32Array {
  const d = view.dims;
  const scores = new Float32Array(rows.length);
  if (scorer.name === 'dense') {
    const qv = meanPool(query.vectors, query.length, d, true);
    for (let i = 0; i < rows.length; i++) scores[i] = dense(qv, view.docVectors.subarray(rows[i] * d, (rows[i] + 1) * d));
    return scores;
  }
  // The blocked batch kernel reads candidates as one contiguous T x d block: use the view's own
  // storage when the candidates are the whole collection in order, else gather them once.
  const whole = rows.length === view.docIds.length && rows.every((r, i) => r === i);
  if (whole) return maxsimBatch(query.vectors, query.length, view.vectors, view.offsets, d, { normalize: scorer.normalize });
  const offsets = new Uint32Array(rows.length + 1);
  for (let i = 0; i < rows.length; i++) offsets[i + 1] = offsets[i] + (view.offsets[rows[i] + 1] - view.offsets[rows[i]]);
  const gathered = new Float32Array(offsets[rows.length] * d);
  for (let i = 0; i < rows.length; i++) gathered.set(view.vectors.subarray(view.offsets[rows[i]] * d, view.offsets[rows[i] + 1] * d), offsets[i] * d);
  return maxsimBatch(query.vectors, query.length, gathered, offsets, d, { normalize: scorer.normalize });
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
  const results: RerankResult['results'] = [];
  for (let qi = 0; qi < req.queries.length; qi++) {
    const q = req.queries[qi];
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
    const scores = view && rows.length > 0 ? scoreCandidates(view, queries[qi], rows, req.scorer) : new Float32Array(0);
    results.push({ queryId: q.id, hits: topK(scores, ids, req.topK).map((h) => ({ id: h.id, score: h.score })), missing });
    // One query at a time, then yield: BullMQ's lock renewal and (all-in-one) the API keep running.
    await new Promise((r) => setImmediate(r));
    if (qi % 16 === 15) await job?.updateProgress(Math.round((100 * (qi + 1)) / req.queries.length));
  }
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
