import type { Job } from 'bullmq';
import {
  PermanentJobError,
  QueueName,
  ValidationError,
  candidateId,
  isTextCandidate,
  textCodecRef,
  type Collection,
  type JobResults,
  type RerankRequest,
  type RerankResult,
  type TextCandidateStats,
} from '@lateral/shared';
import { ShapeError, topK } from '@lateral/scoring';
import type { TokenEncoder } from '@lateral/model';
import type { RerankDeps } from './query-deps';
import { modelVersion, textHash, type CachedText, type TextCacheReader, type TextSpace } from './text-cache';
import { type CollectionView, degradedFields, splitUnavailable, groupIndicesByKey, eventLoopYielder, scoreGroup } from '@lateral/serving';
import { permanentModelErrors } from '../model-errors';

/** One query's candidates, resolved to rows of the view it is scored against. */
export interface ResolvedQuery {
  ids: string[];
  rows: number[];
  missing: string[];
  /** First-stage scores (hybrid), NaN where a candidate has none. */
  first: Float64Array;
  /** Queries with equal keys share one candidate list (scored in one pass). */
  key: string;
  /** The collection's view, or the job's text view when the query has text candidates. */
  view: CollectionView | null;
}

export interface ResolveTextDeps {
  texts: Pick<TextCacheReader, 'read'>;
  modelsDir: string;
}

/**
 * Resolves every query's candidates before scoring. Queries with ids only are resolved against
 * the collection's view as before. Queries with text candidates are resolved against one view
 * built for the job: each distinct text once (decoded from the text cache, which the job's
 * encode-texts child filled), plus the id candidates those queries name (decoded from the
 * collection), so the scorers run unchanged on either.
 */
export async function resolveCandidates(
  deps: ResolveTextDeps,
  job: { tenantId: string; collection: Collection | null; encoder: TokenEncoder; model: string; view: CollectionView | null },
  queries: RerankRequest['queries'],
): Promise<{ resolved: ResolvedQuery[]; texts: TextCandidateStats | null }> {
  const { view } = job;
  const hasText = queries.map((q) => q.candidates.some(isTextCandidate));
  const resolved: ResolvedQuery[] = new Array(queries.length);
  queries.forEach((q, qi) => {
    if (hasText[qi]) return;
    const ids: string[] = [];
    const rows: number[] = [];
    const missing: string[] = [];
    const first: number[] = [];
    const seen = new Set<string>();
    q.candidates.forEach((cand, ci) => {
      const id = candidateId(cand, ci);
      if (seen.has(id)) return;
      seen.add(id);
      const row = view?.rowOf.get(id);
      if (row === undefined) missing.push(id);
      else {
        ids.push(id);
        rows.push(row);
        first.push(typeof cand === 'string' || cand.score === undefined ? NaN : cand.score);
      }
    });
    resolved[qi] = { ids, rows, missing, first: Float64Array.from(first), key: `c:${rows.join(',')}`, view };
  });
  if (!hasText.some(Boolean)) return { resolved, texts: null };

  // The job's text view: rows are distinct texts and distinct collection rows, in order of first use.
  const space: TextSpace = {
    tenantId: job.tenantId,
    model: job.model,
    modelVersion: await modelVersion(deps.modelsDir, job.model),
    maxTokens: job.collection?.maxDocTokens ?? job.encoder.manifest.maxDocTokens,
    codec: textCodecRef(job.collection),
  };
  const hashRow = new Map<string, number>();
  const collectionRow = new Map<number, number>();
  const sources: ({ hash: string } | { row: number })[] = [];
  let textCandidates = 0;
  const plans = queries.map((q, qi) => {
    if (!hasText[qi]) return null;
    const ids: string[] = [];
    const rows: number[] = [];
    const missing: string[] = [];
    const first: number[] = [];
    const seen = new Set<string>();
    q.candidates.forEach((cand, ci) => {
      const id = candidateId(cand, ci);
      if (seen.has(id)) return;
      seen.add(id);
      let row: number | undefined;
      if (isTextCandidate(cand)) {
        textCandidates++;
        const h = textHash(cand.text);
        row = hashRow.get(h);
        if (row === undefined) {
          row = sources.length;
          hashRow.set(h, row);
          sources.push({ hash: h });
        }
      } else {
        const r = view?.rowOf.get(typeof cand === 'string' ? cand : cand.id);
        if (r === undefined) {
          missing.push(id);
          return;
        }
        row = collectionRow.get(r);
        if (row === undefined) {
          row = sources.length;
          collectionRow.set(r, row);
          sources.push({ row: r });
        }
      }
      ids.push(id);
      rows.push(row);
      first.push(typeof cand === 'string' || cand.score === undefined ? NaN : cand.score);
    });
    return { qi, ids, rows, missing, first };
  });

  const hashes = [...hashRow.keys()];
  const cached = await deps.texts.read(space, hashes);
  const absent = hashes.filter((_, i) => !cached[i]);
  if (absent.length > 0) {
    throw new PermanentJobError(`${absent.length} candidate text(s) are not in the text cache (expired, or their encode-texts job did not run); submit the request again`);
  }
  const byHash = new Map(hashes.map((h, i) => [h, cached[i]!]));
  const textView = buildTextView(job.encoder.dims, view, sources, byHash, collectionRow);
  for (const p of plans) {
    if (!p) continue;
    resolved[p.qi] = { ids: p.ids, rows: p.rows, missing: p.missing, first: Float64Array.from(p.first), key: `t:${p.rows.join(',')}`, view: textView };
  }
  return { resolved, texts: { candidates: textCandidates, encoded: 0, reused: 0 } };
}

/** A CollectionView over per-row token blocks (no concatenated copy): cached texts and collection rows. */
function buildTextView(
  dims: number,
  view: CollectionView | null,
  sources: ({ hash: string } | { row: number })[],
  byHash: Map<string, CachedText>,
  collectionRow: Map<number, number>,
): CollectionView {
  const n = sources.length;
  const blocks: Float32Array[] = new Array(n);
  const docVectors = new Float32Array(n * dims);
  const offsets = new Uint32Array(n + 1);
  const fromCollection = [...collectionRow.keys()];
  const decoded = view && fromCollection.length > 0 ? view.rowVectors(fromCollection) : null;
  const decodedAt = new Map(fromCollection.map((r, i) => [r, i]));
  sources.forEach((s, i) => {
    if ('hash' in s) {
      const e = byHash.get(s.hash)!;
      blocks[i] = e.vectors;
      docVectors.set(e.docVector, i * dims);
    } else {
      const k = decodedAt.get(s.row)!;
      blocks[i] = decoded!.docs.subarray(decoded!.offsets[k] * dims, decoded!.offsets[k + 1] * dims);
      docVectors.set(view!.docVectors.subarray(s.row * dims, (s.row + 1) * dims), i * dims);
    }
    offsets[i + 1] = offsets[i] + blocks[i].length / dims;
  });
  const rowVectors = (rows: number[]) => {
    const out = new Uint32Array(rows.length + 1);
    rows.forEach((r, i) => (out[i + 1] = out[i] + blocks[r].length / dims));
    const docs = new Float32Array(out[rows.length] * dims);
    rows.forEach((r, i) => docs.set(blocks[r], out[i] * dims));
    return { docs, offsets: out };
  };
  return {
    generation: view?.generation ?? 0,
    dims,
    vectors: null,
    rotated: null,
    offsets,
    docVectors,
    rowOf: new Map(),
    docIds: [],
    tokens: offsets[n],
    rowVectors,
  };
}

/** Sums the encode-texts children's results of a job (a re-rank job's, or a batch chunk's). */
export async function childTextStats(job: Pick<Job, 'getChildrenValues'> | undefined): Promise<{ encoded: number; reused: number }> {
  // A job replayed or run outside a flow (tests, handlers called directly) may carry no children.
  const values = typeof job?.getChildrenValues === 'function' ? await job.getChildrenValues().catch(() => ({})) : {};
  let encoded = 0;
  let reused = 0;
  for (const [key, v] of Object.entries(values as Record<string, unknown>)) {
    if (!key.includes(`:${QueueName.encodeTexts}:`)) continue;
    const r = v as Partial<JobResults[QueueName.encodeTexts]>;
    encoded += r.encoded ?? 0;
    reused += r.reused ?? 0;
  }
  return { encoded, reused };
}

export type RerankJobDeps = RerankDeps & ResolveTextDeps;

/** Whether rerankWithTexts scores this request (text candidates, or no collection); else rerankProcessor does. */
export const hasTextCandidates = (req: Pick<RerankRequest, 'collection' | 'queries'>) => !req.collection || req.queries.some((q) => q.candidates.some(isTextCandidate));

/** Scores a parsed request with text candidates in memory (a batch chunk calls it directly). */
export async function rerankWithTexts(
  ctx: RerankJobDeps,
  tenantId: string,
  rerankId: string,
  req: RerankRequest,
  job?: Pick<Job, 'updateProgress'>,
  textStats: { encoded: number; reused: number } = { encoded: 0, reused: 0 },
  t0 = Date.now(),
): Promise<{ result: RerankResult; candidates: number; missing: number }> {
  const p = { tenantId, rerankId };
  const collection = req.collection ? await ctx.collections.get(p.tenantId, req.collection) : null;
  if (req.collection && !collection) throw new PermanentJobError(`collection ${p.tenantId}/${req.collection} does not exist`);
  const model = collection?.model ?? req.model!;
  if (collection && req.model && req.model !== collection.model) throw new PermanentJobError(`model ${req.model} is not collection ${collection.id}'s model (${collection.model})`);
  const manifest = collection ? await ctx.generations.manifest(p.tenantId, collection.id) : null;
  const tLoad = Date.now();
  const ids = [...new Set(req.queries.flatMap((q) => q.candidates.filter((c) => !isTextCandidate(c)).map((c) => (typeof c === 'string' ? c : (c.id as string)))))];
  const view: CollectionView | null = collection && manifest && ids.length > 0 ? await ctx.views.view(collection, manifest, ids) : null;
  const encoder = await ctx.encoders(model).catch(permanentModelErrors);
  const { resolved, texts } = await resolveCandidates(ctx, { tenantId: p.tenantId, collection, encoder, model, view }, req.queries);
  const loadMs = Date.now() - tLoad;

  // Rows of a batch repeat queries: encode each distinct query text once.
  const tEnc = Date.now();
  const distinct = [...new Set(req.queries.map((q) => q.text))];
  const encodedDistinct = await encoder.encodeQueries(distinct).catch(permanentModelErrors);
  const byText = new Map(distinct.map((t, i) => [t, encodedDistinct[i]]));
  const queries = req.queries.map((q) => byText.get(q.text)!);
  const encodeQueriesMs = Date.now() - tEnc;

  const tScore = Date.now();
  const groups = groupIndicesByKey(resolved, (r) => r.key);
  const scores: Float32Array[] = new Array(req.queries.length);
  let done = 0;
  let reported = 0;
  const yieldEvery = eventLoopYielder();
  for (const members of groups.values()) {
    const { rows, view: gv } = resolved[members[0]];
    if (!gv || rows.length === 0) {
      for (const i of members) scores[i] = new Float32Array(0);
      done += members.length;
      continue;
    }
    const out = await scoreGroup(
      ctx.scorers,
      { view: gv, encoder, queries: members.map((i) => queries[i]), rows, firstStage: members.map((i) => resolved[i].first), yieldEvery, tenantId },
      req.scorer,
    ).catch((err) => {
      if (err instanceof ValidationError || err instanceof ShapeError) throw new PermanentJobError(err.message);
      throw err;
    });
    members.forEach((qi, k) => (scores[qi] = out[k]));
    done += members.length;
    const pct = Math.round((100 * done) / req.queries.length);
    if (pct !== reported) await job?.updateProgress((reported = pct));
  }
  if (reported < 100) await job?.updateProgress(100);
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
