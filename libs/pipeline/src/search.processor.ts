import type { Job } from 'bullmq';
import {
  PermanentJobError,
  QueueName,
  SearchRequestSchema,
  MAX_SEARCH_TOP_K,
  ValidationError,
  collectionShards,
  s3Keys,
  type Collection,
  type CollectionManifest,
  type JobPayload,
  type JobResults,
  type SearchHit,
  type SearchMode,
  type SearchRequest,
  type SearchResult,
} from '@lateral/shared';
import { ShapeError, hybridLinear, rrf } from '@lateral/scoring';
import { logSearchDone } from './job-logs';
import { degradedFields } from './degraded-results';
import {
  andMasks,
  bm25SearchSteps,
  compileFilter,
  denseSearchSteps,
  docMask,
  exhaustiveSearchSteps,
  mebertSearchSteps,
  xtrSearchSteps,
  type DocMask,
  type Hit,
  type SearchSegment,
  type SegmentIndex,
  type XtrProbe,
} from '@lateral/search';
import { eventLoopYielder, runStepsYielding } from './event-loop';
import type { EncodedText, TokenEncoder } from '@lateral/model';
import type { ScorerResources } from '@lateral/kernels';
import type { CollectionRepository, GenerationRepository, IvfCentroidRepository, ObjectStore } from '@lateral/infra';
import type { SearchNeeds, SearchPart, SegmentCache } from './segment-cache';
import { permanentModelErrors } from './encode.processor';
import type { EncoderProvider } from './encoders';
import { specialTokenIds } from './index.processor';
import { scoreGroup } from './scorers';
import { GROUP_DEPTH_FACTOR, hitShaping, type HitDocumentDeps } from './hit-documents';
import { isFanoutJob, shardedSearch, type ShardCoordinatorDeps } from './shard-fanout';

/** What the search processor touches. */
export interface SearchDeps extends HitDocumentDeps {
  store: Pick<ObjectStore, 'getJson' | 'putJson'>;
  collections: Pick<CollectionRepository, 'get'>;
  generations: Pick<GenerationRepository, 'manifest'>;
  ivf: Pick<IvfCentroidRepository, 'get'>;
  encoders: EncoderProvider;
  /** Segments with their indexes and live documents, and (second stage) views over candidates: one cache. */
  segments: Pick<SegmentCache, 'searchParts' | 'searchGeneration' | 'view'>;
  scorers: ScorerResources;
  /** Fans searches of collections with several shards out to the shard queues (absent: every segment is searched here). */
  shardCoordinator?: ShardCoordinatorDeps;
}

type LoadedSegment = SearchPart;

const modeLabel = (m: SearchMode) => m.name;

/**
 * Search over a whole collection: every segment of the current generation is searched with its
 * own index (SPEC 3: XTR over the token IVF, BM25, dense, ME-BERT, exhaustive MaxSim, hybrids)
 * and the per-segment lists are merged exactly. Filters and superseded documents become masks
 * applied before ranking. An optional second stage re-scores the top hits with a re-rank scorer.
 */
export async function searchProcessor(deps: SearchDeps, p: JobPayload<QueueName.search>, job?: Pick<Job, 'updateProgress'>): Promise<JobResults[QueueName.search]> {
  const t0 = Date.now();
  const raw = await deps.store.getJson<unknown>(p.requestKey);
  if (!raw) throw new PermanentJobError(`search request missing from S3: ${p.requestKey}`);
  const parsed = SearchRequestSchema.safeParse(raw);
  if (!parsed.success) throw new PermanentJobError(`invalid stored search request ${p.requestKey}: ${parsed.error.message}`);
  const req: SearchRequest = parsed.data;
  const collection = await deps.collections.get(p.tenantId, req.collection);
  if (!collection) throw new PermanentJobError(`collection ${p.tenantId}/${req.collection} does not exist`);
  let predicate;
  try {
    predicate = req.filter === undefined ? undefined : compileFilter(req.filter);
  } catch (err) {
    if (err instanceof ValidationError) throw new PermanentJobError(err.message);
    throw err;
  }
  const manifest = await deps.generations.manifest(p.tenantId, req.collection);
  const resultKey = s3Keys.searchResult(p.tenantId, p.searchId);
  const empty = (reason: string, generation: number, timings = { encodeQueriesMs: 0, searchMs: 0, loadMs: 0 }) =>
    finish(deps, resultKey, { searchId: p.searchId, collection: req.collection, mode: req.mode, generation, results: req.queries.map((q) => ({ queryId: q.id, hits: [], reason })), timings: { totalMs: Date.now() - t0, ...timings } });
  if (!manifest || manifest.segments.length === 0) return empty('the collection has no committed generation yet', 0);
  // Several shards: one child job per shard queue and round, merged here (shard-fanout.ts).
  if (deps.shardCoordinator && collectionShards(collection) > 1 && isFanoutJob(job)) return shardedSearch({ ...deps, shardCoordinator: deps.shardCoordinator }, p, req, collection, manifest, job, t0);

  const tLoad = Date.now();
  // Segments that cannot be read (checksum, decoding, missing object) are left out and named: the result says it is degraded.
  const { parts, unavailable } = await deps.segments.searchGeneration(collection, manifest, searchNeeds(req));
  // Deleted and superseded documents (the generation's live table) and the filter, before ranking.
  const yieldEvery = eventLoopYielder();
  const masks: (DocMask | undefined)[] = [];
  for (const part of parts) {
    masks.push(andMasks(part.live, predicate ? docMask(part.segment, predicate) : undefined));
    await yieldEvery();
  }
  const loadMs = Date.now() - tLoad;

  const encoder = await deps.encoders(collection.model).catch(permanentModelErrors);
  const tEnc = Date.now();
  // BM25 ranks by the query's terms alone: its vectors are only needed for explain or a second stage.
  const vectorsNeeded = req.mode.name !== 'bm25' || !!req.explain || !!req.rerank;
  const queries = vectorsNeeded
    ? await encoder.encodeQueries(req.queries.map((q) => q.text)).catch(permanentModelErrors)
    : req.queries.map((): EncodedText => ({ tokenIds: new Int32Array(0), vectors: new Float32Array(0), weights: null, length: 0, truncated: false }));
  const encodeQueriesMs = Date.now() - tEnc;
  const specials = specialTokenIds(encoder);
  const skip = (id: number) => specials.has(id) || encoder.tokenizer.skipIds.has(id);
  const needsIvf = req.mode.name === 'xtr' || (req.mode.name === 'hybrid' && req.mode.base === 'xtr');
  const ivf = needsIvf ? await deps.ivf.get(p.tenantId, req.collection, manifest.codecVersion) : null;
  if (needsIvf && !ivf) throw new Error(`IVF centroids of ${req.collection} v${manifest.codecVersion} are missing from S3`);
  const searchParts = parts.map((part, s) => ({ segment: part.segment, index: part.index, mask: masks[s] }));

  const shaping = hitShaping(collection, req, Math.min(10 * MAX_SEARCH_TOP_K, req.topK * GROUP_DEPTH_FACTOR)); // group, include
  const tSearch = Date.now();
  const results: SearchResult['results'] = [];
  for (const [qi, q] of req.queries.entries()) {
    const e = queries[qi];
    const terms = Array.from(encoder.tokenizer.contentIds(q.text)).filter((id) => !skip(id));
    const depth = Math.max(shaping.depth, req.rerank?.depth ?? 0);
    // XTR's probe (query tokens x centroids) as one ORT GEMM, before the per-segment work.
    const xtrNprobe = req.mode.name === 'xtr' || (req.mode.name === 'hybrid' && req.mode.base === 'xtr') ? Math.min(req.mode.nprobe, ivf!.k) : 0;
    const probe = xtrNprobe > 0 && e.length > 0 ? await (await deps.scorers.ivfProbe()).probe(e.vectors, e.length, ivf!.centroids, e.vectors.length / e.length, xtrNprobe) : undefined;
    const { hits, reason } = await firstStage(searchParts, req.mode, depth, { encoded: e, pool: () => encoder.pool(e), terms, skip, ivf, probe, explain: req.explain }, yieldEvery);
    let out: SearchHit[] = hits.map((h) => toHit(h, parts, modeLabel(req.mode), req.explain ? { encoder, query: e } : null));
    if (req.rerank && out.length > 0) out = await secondStage(deps, collection, manifest, encoder, e, out.slice(0, req.rerank.depth), req.rerank.scorer);
    results.push({ queryId: q.id, hits: out.slice(0, shaping.depth), ...(reason ? { reason } : {}) });
    await job?.updateProgress(Math.round((100 * (qi + 1)) / req.queries.length));
  }
  await shaping.finish(deps, manifest, results);
  const searchMs = Date.now() - tSearch;
  return finish(deps, resultKey, {
    searchId: p.searchId,
    collection: req.collection,
    mode: req.mode,
    generation: manifest.generation,
    results,
    timings: { totalMs: Date.now() - t0, encodeQueriesMs, searchMs, loadMs },
    ...degradedFields(unavailable),
  });
}

/**
 * What the request reads of each segment beyond its index (SearchNeeds): BM25 and dense (and
 * their hybrid) no token rows, XTR and ME-BERT (and XTR's hybrid) the rows' scores, exhaustive
 * their vectors; explain the token ids; a filter the metadata.
 */
export function searchNeeds(req: Pick<SearchRequest, 'mode' | 'filter' | 'explain'>): SearchNeeds {
  const m = req.mode;
  const base = m.name === 'hybrid' ? m.base : m.name;
  const rows = base === 'bm25' || base === 'dense' ? 'none' : base === 'xtr' || base === 'mebert' ? 'scores' : 'vectors';
  return { rows, tokenIds: !!req.explain, metadata: req.filter !== undefined };
}

/** One query as the first stage needs it. */
export interface FirstStageQuery {
  encoded: EncodedText;
  /** The pooled query vector (dense, ME-BERT). */
  pool: () => Float32Array;
  /** Its BM25 terms (special and skipped tokens removed) and the build's skip rule. */
  terms: number[];
  skip: (id: number) => boolean;
  /** The collection's IVF centroids (XTR) and the query's probe when computed elsewhere (the ORT GEMM). */
  ivf: { centroids: Float32Array; k: number } | null;
  probe?: XtrProbe;
  explain?: boolean;
}

/**
 * The first stage of a search over the segments: every segment with its own index, the
 * per-segment lists merged exactly (@lateral/search). The work runs in the library's bounded
 * steps (per segment, and slices within one), awaiting `yieldEvery` between them, so a search
 * over hundreds of segments never holds the event loop (BullMQ renews the job's lock on a
 * timer); the hits are those of the synchronous functions, bit for bit.
 */
export async function firstStage(parts: readonly SearchSegmentPart[], mode: SearchMode, n: number, q: FirstStageQuery, yieldEvery: () => Promise<void>): Promise<{ hits: Hit[]; reason?: string }> {
  const e = q.encoded;
  switch (mode.name) {
    case 'bm25':
      if (q.terms.length === 0) return { hits: [], reason: 'the query has no searchable terms (only stop words, punctuation or special tokens)' };
      return { hits: await runStepsYielding(bm25SearchSteps(parts, q.terms, n, { k1: mode.k1, b: mode.b }, q.skip), yieldEvery) };
    case 'dense':
      return { hits: await runStepsYielding(denseSearchSteps(parts, q.pool(), n), yieldEvery) };
    case 'mebert':
      return { hits: await runStepsYielding(mebertSearchSteps(parts, q.pool(), mode.m, n), yieldEvery) };
    case 'exhaustive':
      if (e.length === 0) return { hits: [], reason: 'the query has no tokens' };
      return { hits: await runStepsYielding(exhaustiveSearchSteps(parts, e.vectors, e.length, n, { explain: q.explain }), yieldEvery) };
    case 'xtr': {
      if (e.length === 0) return { hits: [], reason: 'the query has no tokens' };
      const ivf = q.ivf!;
      const r = await runStepsYielding(xtrSearchSteps(parts, e.vectors, e.length, ivf.centroids, { kPrime: mode.kPrime, nprobe: Math.min(mode.nprobe, ivf.k), topN: n, explain: q.explain, probe: q.probe }), yieldEvery);
      return { hits: r.hits };
    }
    case 'hybrid': {
      const base: SearchMode = mode.base === 'xtr' ? { name: 'xtr', kPrime: mode.kPrime, nprobe: mode.nprobe } : mode.base === 'dense' ? { name: 'dense' } : { name: 'exhaustive' };
      const a = (await firstStage(parts, base, mode.depth, q, yieldEvery)).hits;
      const b = (await firstStage(parts, { name: 'bm25', k1: mode.k1, b: mode.b }, mode.depth, q, yieldEvery)).hits;
      return { hits: fuse(a, b, mode, n) };
    }
  }
}

/** A segment as the first stage searches it: its index and the mask of its searchable documents. */
export interface SearchSegmentPart {
  segment: SearchSegment;
  index: SegmentIndex;
  mask?: DocMask;
}

async function finish(deps: Pick<SearchDeps, 'store'>, resultKey: string, result: SearchResult): Promise<JobResults[QueueName.search]> {
  await deps.store.putJson(resultKey, result);
  const hits = result.results.reduce((s, r) => s + r.hits.length, 0);
  logSearchDone(result, hits);
  return { resultKey, queries: result.results.length, hits };
}

/** Linear (explicit lambda, normalisation) or RRF fusion of two hit lists over their union. */
export function fuse(a: Hit[], b: Hit[], mode: Extract<SearchMode, { name: 'hybrid' }>, n: number): Hit[] {
  const byKey = new Map<number, Hit>();
  for (const h of [...a, ...b]) if (!byKey.has(h.key)) byKey.set(h.key, { ...h, explain: undefined });
  const keys = [...byKey.keys()];
  let scored: { key: number; score: number }[];
  if (mode.fusion === 'rrf') {
    const fused = rrf([a.map((h) => String(h.key)), b.map((h) => String(h.key))], mode.rrfK);
    scored = fused.map((f) => ({ key: Number(f.id), score: f.score }));
  } else {
    const sa = new Map(a.map((h) => [h.key, h.score]));
    const sb = new Map(b.map((h) => [h.key, h.score]));
    const s = hybridLinear(Float64Array.from(keys, (k) => sa.get(k) ?? NaN), Float64Array.from(keys, (k) => sb.get(k) ?? NaN), mode.lambda!, mode.normalization);
    scored = keys.map((key, i) => ({ key, score: s[i] }));
  }
  scored.sort((x, y) => y.score - x.score || x.key - y.key);
  return scored.slice(0, n).map(({ key, score }) => ({ ...byKey.get(key)!, score }));
}

export function toHit(h: Hit, parts: LoadedSegment[], scoredBy: string, explain: { encoder: TokenEncoder; query: EncodedText } | null): SearchHit {
  const seg = parts[h.segment].segment;
  const hit: SearchHit = { id: seg.docIds[h.doc], score: h.score, scoredBy };
  if (explain && h.explain) {
    const tok = (id: number) => explain.encoder.tokenizer.tokenizer.id_to_token(id) ?? `#${id}`;
    hit.explain = Array.from(h.explain.rows, (row, i) => ({
      queryToken: tok(explain.query.tokenIds[i]),
      docToken: row >= 0 ? tok(seg.tokenIds[row]) : '',
      similarity: h.explain!.similarities[i],
      imputed: row < 0,
    }));
  }
  return hit;
}

/** The second stage: the first stage's top hits re-scored by a re-rank scorer over the loaded generation. */
async function secondStage(deps: SearchDeps, collection: Collection, manifest: CollectionManifest, encoder: TokenEncoder, q: EncodedText, hits: SearchHit[], scorer: NonNullable<SearchRequest['rerank']>['scorer']): Promise<SearchHit[]> {
  const view = await deps.segments.view(collection, manifest, hits.map((h) => h.id));
  const kept = hits.filter((h) => view.rowOf.has(h.id));
  const rows = kept.map((h) => view.rowOf.get(h.id)!);
  const scores = await scoreGroup(deps.scorers, { view, encoder, queries: [q], rows, firstStage: [Float64Array.from(kept, (h) => h.score)], yieldEvery: () => new Promise<void>((r) => setImmediate(r)), tenantId: collection.tenantId }, scorer).catch((err) => {
    if (err instanceof ValidationError || err instanceof ShapeError) throw new PermanentJobError(err.message);
    throw err;
  });
  return kept
    .map((h, i) => ({ id: h.id, score: scores[0][i], scoredBy: `rerank:${scorer.name}` }))
    .sort((a, b) => (Number.isNaN(b.score) ? -1 : b.score - a.score));
}
