import type { Job } from 'bullmq';
import {
  PermanentJobError,
  QueueName,
  SearchRequestSchema,
  MAX_SEARCH_TOP_K,
  WARP_DEFAULT_EXACT,
  ValidationError,
  collectionShards,
  s3Keys,
  withCollectionFusion,
  type Collection,
  type CollectionManifest,
  type JobPayload,
  type JobResults,
  type SearchHit,
  type SearchMode,
  type SearchRequest,
  type SearchResult,
} from '@lateral/shared';
import { ShapeError } from '@lateral/scoring';
import { logSearchDone } from '../job-logs';
import { storedFilterPredicate } from '../stored-filter';
import { bm25Pass, type DocPredicate, type Hit, type SegmentPass } from '@lateral/search';
import type { EncodedText, TokenEncoder } from '@lateral/model';
import type { SearchDeps } from './query-deps';
import { shardedSearch } from './shard-fanout';
import { isFanoutJob } from './shard-rounds';
import {
  GROUP_DEPTH_FACTOR,
  degradedFields,
  eventLoopYielder,
  firstStagePass,
  hitSegments,
  hitShaping,
  runStepsYielding,
  scoreGroup,
  searchNeeds,
  searchSegments,
  bm25QueryTerms,
  fuse,
  needsBm25,
  toHit,
  warpScan,
  type FirstStage,
} from '@lateral/serving';
import { permanentModelErrors } from '../model-errors';
import { usesWarp, warpEpoch, warpExactStage, warpFilterMasks } from './warp-search';
import { EarlyQueryEncodings } from './early-encoding';

/** Per process (per compute thread): the model each collection was last searched with, to start its queries' encoding early. */
const earlyEncodings = new EarlyQueryEncodings();

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
  // Both paths below encode the queries whenever the request needs their vectors: the encoding starts in the encoder's
  // session thread while the reads that follow run (with the model this thread last searched the collection with, else once
  // the record names it), so that they overlap it (early-encoding.ts).
  const texts = parsed.data.queries.map((q) => q.text);
  const wantsVectors = parsed.data.mode.name !== 'bm25' || !!parsed.data.explain || !!parsed.data.rerank;
  const guess = wantsVectors ? earlyEncodings.modelOf(p.tenantId, parsed.data.collection) : undefined;
  // The record and the current manifest read at once (each one Redis GET through the serving cache when nothing changed),
  // asked before the encoding starts (its tokenizing and posting would delay them: measured slower that way at load ~13).
  const recordRead = deps.collections.get(p.tenantId, parsed.data.collection);
  const reads = Promise.all([recordRead, deps.generations.manifest(p.tenantId, parsed.data.collection)]);
  let early = guess !== undefined ? EarlyQueryEncodings.start(deps.encoders, guess, texts) : undefined;
  reads.catch(() => undefined); // awaited below; the record's own failure is thrown first
  const collection = await recordRead;
  if (!collection) throw new PermanentJobError(`collection ${p.tenantId}/${parsed.data.collection} does not exist`);
  const fanout = !!deps.shardCoordinator && collectionShards(collection) > 1 && isFanoutJob(job);
  if (wantsVectors && !fanout) {
    if (early && early.model !== collection.model) earlyEncodings.forget(p.tenantId, parsed.data.collection);
    earlyEncodings.remember(p.tenantId, parsed.data.collection, collection.model);
    if (!early?.take(collection.model)) early = EarlyQueryEncodings.start(deps.encoders, collection.model, texts);
  }
  const [, manifest] = await reads;
  // A hybrid naming no weight fuses with the collection's fitted one, else the defaults (the result's mode says which).
  const req: SearchRequest = withCollectionFusion(parsed.data, collection);
  const predicate = storedFilterPredicate(req.filter);
  const resultKey = s3Keys.searchResult(p.tenantId, p.searchId);
  const empty = (reason: string, generation: number, timings = { encodeQueriesMs: 0, searchMs: 0, loadMs: 0 }) =>
    finish(deps, resultKey, { searchId: p.searchId, collection: req.collection, mode: req.mode, generation, results: req.queries.map((q) => ({ queryId: q.id, hits: [], reason })), timings: { totalMs: Date.now() - t0, ...timings } });
  if (!manifest || manifest.segments.length === 0) return empty('the collection has no committed generation yet', 0);
  // Several shards: one child job per shard queue and round, merged here (shard-fanout.ts).
  if (fanout && deps.shardCoordinator) return shardedSearch({ ...deps, shardCoordinator: deps.shardCoordinator }, p, req, collection, manifest, job, t0);
  // The queries' encoding, started above whenever their vectors are needed (undefined for BM25 alone).
  const encoding = early?.take(collection.model);

  // Mode xtr, and hybrid's xtr part, on a collection with a WARP search layout (filtered or not) run WARP's engine. Explain keeps
  // the IVF path below: it names the document token behind each query token's score, which WARP's packed lists do not hold.
  if (usesWarp(collection, req)) return warpSearchJob(deps, p, req, collection, manifest, job, t0, predicate, encoding ?? EarlyQueryEncodings.start(deps.encoders, collection.model, texts).encoding);

  // The generation's segments, read one window at a time as the pass reaches them (searchSegments):
  // what the search holds is bounded by the request, not by the collection.
  const plan = await deps.segments.searchPlan(collection, manifest, searchNeeds(req));
  const yieldEvery = eventLoopYielder();

  // BM25 ranks by the query's terms alone: its vectors are only needed for explain or a second stage (encoding started above when they are).
  const encoded = encoding ? await encoding.catch(permanentModelErrors) : null;
  const encoder = await deps.encoders(collection.model).catch(permanentModelErrors);
  const queries = encoded ? encoded.queries : req.queries.map((): EncodedText => ({ tokenIds: new Int32Array(0), vectors: new Float32Array(0), weights: null, length: 0, truncated: false }));
  const encodeQueriesMs = encoded ? Math.round(encoded.ms) : 0;
  // BM25's terms under the collection's analyser (analysed words, or the encoder's pieces).
  const bm25 = bm25QueryTerms(collection, encoder, req.queries.map((q) => q.text));
  const skip = bm25.skip;
  // The generation's stored statistics: BM25 (and hybrid) read only their terms' postings, in one walk.
  const bm25Stats = needsBm25(req.mode) ? ((await deps.bm25Stats?.get(p.tenantId, req.collection, manifest.generation)) ?? undefined) : undefined;
  const needsIvf = req.mode.name === 'xtr' || (req.mode.name === 'hybrid' && req.mode.base === 'xtr');
  const ivf = needsIvf ? await deps.ivf.get(p.tenantId, req.collection, manifest.codecVersion) : null;
  if (needsIvf && !ivf) throw new Error(`IVF centroids of ${req.collection} v${manifest.codecVersion} are missing from S3`);

  const shaping = hitShaping(collection, req, Math.min(10 * MAX_SEARCH_TOP_K, req.topK * GROUP_DEPTH_FACTOR)); // group, include
  const depth = Math.max(shaping.depth, req.rerank?.depth ?? 0);
  const tSearch = Date.now();
  // One pass per query; every query's pass sees each segment while it is open.
  const stages: FirstStage[] = [];
  for (let qi = 0; qi < req.queries.length; qi++) {
    const e = queries[qi];
    const terms = bm25.terms[qi];
    // XTR's probe (query tokens x centroids) as one ORT GEMM, before the per-segment work.
    const xtrNprobe = req.mode.name === 'xtr' || (req.mode.name === 'hybrid' && req.mode.base === 'xtr') ? Math.min(req.mode.nprobe, ivf!.k) : 0;
    const probe = xtrNprobe > 0 && e.length > 0 ? await (await deps.scorers.ivfProbe()).probe(e.vectors, e.length, ivf!.centroids, e.vectors.length / e.length, xtrNprobe) : undefined;
    stages.push(firstStagePass(req.mode, depth, { encoded: e, pool: () => encoder.pool(e), terms, skip, bm25Stats, ivf, probe, explain: req.explain }));
  }
  const passes = stages.flatMap((st) => (st.pass ? [st.pass] : []));
  const searched = await searchSegments(plan, passes, {
    predicate,
    yieldEvery,
    // The pass is most of the work: 0-90 %, the queries' hits and second stages the rest.
    onSegment: (done, total) => (done === total || done % 16 === 0 ? job?.updateProgress(Math.round((90 * done) / total)) : undefined),
  });
  const unavailable = plan.unavailable(searched.failed);
  const loadMs = searched.loadMs;

  const results: SearchResult['results'] = [];
  for (const [qi, q] of req.queries.entries()) {
    const e = queries[qi];
    const st = stages[qi];
    const hits = st.pass ? await runStepsYielding(st.pass.finish(plan.parts.length), yieldEvery) : [];
    const segs = await hitSegments(plan, hits, !!req.explain);
    let out: SearchHit[] = hits.map((h) => toHit(h, segs, modeLabel(req.mode), req.explain ? { encoder, query: e } : null));
    if (req.rerank && out.length > 0) out = await secondStage(deps, collection, manifest, encoder, e, out.slice(0, req.rerank.depth), req.rerank.scorer);
    results.push({ queryId: q.id, hits: out.slice(0, shaping.depth), ...(st.reason ? { reason: st.reason } : {}) });
    await job?.updateProgress(90 + Math.round((10 * (qi + 1)) / req.queries.length));
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
 * Mode xtr over the generation's WARP search layouts (warpScan): each segment's list directory
 * (kept in memory), per query its probed lists' byte ranges alone, scored from the packed codes
 * and merged exactly; a segment whose layout cannot be read is named (degraded answer). The
 * result's `stats.warp` says what each query read. kPrime does not apply (WARP imputes from
 * cumulative list sizes); nprobe is clamped to the collection's centroids as XTR's is.
 *
 * Hybrid with base xtr: its token part is this scan (the top `depth` per query), its BM25 part one
 * pass over the same plan's indexes (the generation's stored statistics when kept), fused as the
 * IVF path fuses them (fuse: same normalisation, weight, RRF and depth). A segment unreadable for
 * either part is left out of both and named.
 */
async function warpSearchJob(
  deps: SearchDeps,
  p: JobPayload<QueueName.search>,
  req: SearchRequest,
  collection: Collection,
  manifest: CollectionManifest,
  job: Pick<Job, 'updateProgress'> | undefined,
  t0: number,
  predicate: DocPredicate | undefined,
  encoding: Promise<{ queries: EncodedText[]; ms: number }>,
): Promise<JobResults[QueueName.search]> {
  const mode = req.mode as Extract<SearchMode, { name: 'xtr' | 'hybrid' }>;
  const hybrid = mode.name === 'hybrid' ? mode : null;
  const cv = manifest.codecVersion;
  const { centroids, codec } = await warpEpoch(deps, p.tenantId, req.collection, cv, 0);
  // Hits name their documents from the segments' heads where the cache reads heads: no segment is read whole for its ids.
  const plan = await deps.segments.searchPlan(collection, manifest, { rows: 'none', tokenIds: false, metadata: predicate !== undefined, pooled: false });
  // A filter: each segment's mask from its documents' metadata (the segment opened without its rows, one at a time), and its live documents.
  const { masks, failed: failedBefore } = await warpFilterMasks(plan, predicate);
  const yieldEvery = eventLoopYielder();
  // Started before the record and manifest reads (searchProcessor); its time is the encoding's own, which those reads overlap.
  const { queries, ms } = await encoding.catch(permanentModelErrors);
  const encodeQueriesMs = Math.round(ms);
  const encoder = await deps.encoders(collection.model).catch(permanentModelErrors);
  const shaping = hitShaping(collection, req, Math.min(10 * MAX_SEARCH_TOP_K, req.topK * GROUP_DEPTH_FACTOR));
  const depth = Math.max(shaping.depth, req.rerank?.depth ?? 0);
  // WARP's first `exact` hits per query re-scored by exact MaxSim (mode xtr, and hybrid's token part before the fusion; WARP_DEFAULT_EXACT when the request names none).
  const exact = mode.exact ?? WARP_DEFAULT_EXACT;
  const tSearch = Date.now();
  const tLoad = Date.now();
  // A refitted collection's segments name their centroid epoch (SegmentRef.warpEpoch): its centroids and codec.
  const epoch = (e: number) => warpEpoch(deps, p.tenantId, req.collection, cv, e);
  const scan = await warpScan(deps.segments, collection, manifest, plan, queries.map((e) => ({ vectors: e.vectors, n: e.length })), {
    centroids,
    codec,
    epoch,
    nprobe: mode.nprobe,
    tPrime: mode.tPrime,
    // Q C^T and the top centroids per query token as one ONNX Runtime GEMM + TopK (n x K x d multiply-adds: 100 M at K = 8,192, d = 384).
    centroidTop: async (q, n, c, d, k) => (await deps.scorers.ivfProbe()).top(q, n, c, d, k),
    masks,
    failed: failedBefore,
    topN: hybrid ? Math.max(hybrid.depth, exact) : Math.max(depth, exact),
    yieldEvery,
  });
  const failed = new Map(scan.failed);
  // The exact final stage over each query's token list (hits a failed segment holds are left out and it is named).
  const tokenHits: Hit[][] = [];
  const tExact = performance.now();
  for (const [qi, hits] of scan.hits.entries()) {
    if (!hits || exact === 0) {
      tokenHits.push(hits ?? []);
      continue;
    }
    const ex = await warpExactStage(deps, collection, plan, queries[qi], hits, exact);
    for (const [position, err] of ex.failed) if (!failed.has(position)) failed.set(position, err);
    tokenHits.push(ex.hits);
  }
  const exactMs = Math.round((performance.now() - tExact) * 100) / 100;
  // Hybrid: BM25's part over the same plan (its indexes), then the fusion of the two lists per query.
  let fused: Hit[][] | null = null;
  if (hybrid) {
    const bm25 = bm25QueryTerms(collection, encoder, req.queries.map((q) => q.text));
    const bm25Stats = (await deps.bm25Stats?.get(p.tenantId, req.collection, manifest.generation)) ?? undefined;
    const passes: (SegmentPass | null)[] = bm25.terms.map((t) => (t.length > 0 ? bm25Pass(t, hybrid.depth, { k1: hybrid.k1, b: hybrid.b }, bm25.skip, bm25Stats) : null));
    const searched = await searchSegments(plan, passes.filter((x): x is SegmentPass => x !== null), { predicate, yieldEvery });
    for (const [position, err] of searched.failed) if (!failed.has(position)) failed.set(position, err);
    const kept = (hits: Hit[]) => hits.filter((h) => !failed.has(plan.parts[h.segment].position));
    fused = [];
    for (const [qi, pass] of passes.entries()) {
      const b = pass ? await runStepsYielding(pass.finish(plan.parts.length), yieldEvery) : [];
      fused.push(fuse(kept(tokenHits[qi].slice(0, hybrid.depth)), kept(b), hybrid, depth));
    }
  }
  const loadMs = Date.now() - tLoad;
  await job?.updateProgress(90);
  const results: SearchResult['results'] = [];
  for (const [qi, q] of req.queries.entries()) {
    const hits = fused ? fused[qi] : tokenHits[qi].filter((h) => !failed.has(plan.parts[h.segment].position));
    const segs = await hitSegments(plan, hits, false);
    let out: SearchHit[] = hits.map((h) => toHit(h, segs, modeLabel(req.mode), null));
    if (req.rerank && out.length > 0) out = await secondStage(deps, collection, manifest, encoder, queries[qi], out.slice(0, req.rerank.depth), req.rerank.scorer);
    results.push({ queryId: q.id, hits: out.slice(0, shaping.depth), ...(!fused && scan.hits[qi] === null ? { reason: 'the query has no tokens' } : {}) });
  }
  await shaping.finish(deps, manifest, results);
  return finish(deps, s3Keys.searchResult(p.tenantId, p.searchId), {
    searchId: p.searchId,
    collection: req.collection,
    mode: req.mode,
    generation: manifest.generation,
    results,
    timings: { totalMs: Date.now() - t0, encodeQueriesMs, searchMs: Date.now() - tSearch, loadMs, ...(exact > 0 ? { exactMs } : {}) },
    stats: {
      warp: {
        nprobe: scan.nprobe,
        centroids: scan.centroids,
        epochs: scan.epochs,
        segments: scan.segments,
        layoutBytes: scan.layoutBytes,
        queries: req.queries.map((q, qi) => ({ queryId: q.id, ...scan.queries[qi] })),
      },
    },
    ...degradedFields(plan.unavailable(failed)),
  });
}

async function finish(deps: Pick<SearchDeps, 'store'>, resultKey: string, result: SearchResult): Promise<JobResults[QueueName.search]> {
  await deps.store.putJson(resultKey, result);
  const hits = result.results.reduce((s, r) => s + r.hits.length, 0);
  logSearchDone(result, hits);
  return { resultKey, queries: result.results.length, hits };
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
