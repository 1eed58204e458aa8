import { WaitingChildrenError, type Job } from 'bullmq';
import {
  MAX_SEARCH_TOP_K,
  PermanentJobError,
  QueueName,
  SearchRequestSchema,
  ValidationError,
  s3Keys,
  segmentShard,
  shardWorkKey,
  shardWorkPrefix,
  type Collection,
  type CollectionManifest,
  type JobPayload,
  type JobResults,
  type RerankRequest,
  type RerankResult,
  type ScorerSpec,
  type SearchHit,
  type SearchMode,
  type SearchRequest,
  type SearchResult,
  type ShardJobPayload,
  type ShardJobResult,
  type UnavailableSegment,
} from '@lateral/shared';
import { ShapeError, topK } from '@lateral/scoring';
import {
  Bm25StatsPass,
  bm25Pass,
  compileFilter,
  densePass,
  exhaustivePass,
  mebertPass,
  mergeShardHits,
  sumBm25Stats,
  xtrGlobalCut,
  xtrPass,
  type Bm25Stats,
  type Hit,
  type SegmentPass,
  type Steps,
  type XtrPass,
} from '@lateral/search';
import type { EncodedText } from '@lateral/model';
import { jobLogger, type ObjectStore, type ShardQueues } from '@lateral/infra';
import { type RerankDeps } from './rerank.processor';
import { type SearchDeps } from './search.processor';
import { logRerankDone, logSearchDone } from '../job-logs';
import { hitSegments, searchSegments, specialTokenIds, fuseHybrid, hybridBase, scoreGroup, GROUP_DEPTH_FACTOR, hitShaping, groupIndicesByKey, eventLoopYielder, runStepsYielding, fuse, searchNeeds, toHit, degradedFields, splitUnavailable } from '@lateral/serving';
import { permanentModelErrors } from '../model-errors';

/**
 * Sharded re-rank and search (issue 10 item 4). The parent job, on the rerank or search queue,
 * pins the current generation, writes each round's input to S3 and adds one child per shard to
 * the queue `shard-<i>` (BullMQ flow: the parent waits in waiting-children and runs again when
 * every child has completed; a child failing for good fails it). Children read the generation's
 * segments of their shard only and write their partial result to S3; the parent merges:
 * - re-rank: every candidate's score comes from the one shard holding its live copy, then the
 *   same top-k as one process (ties by candidate position); hybrid scorers fuse in the parent,
 *   over the whole candidate set, as they do in one process.
 * - search: BM25 first gathers the shards' statistics (N, total length, df of the query terms),
 *   XTR the shards' top-k' lists per query token (merged into the global lists: the imputation
 *   score and how many entries of each shard survive); then every shard ranks its documents with
 *   those global figures and the parent merges the top-n by (score, global document key), the
 *   order of one process. A second stage re-ranks the merged hits through the shards again.
 * Rounds are idempotent: child job ids derive from the parent's, and a parent that runs again
 * reads what its children left in S3. Once the parent has written its result, the rounds' inputs
 * and partial results (shardWorkPrefix) are removed.
 */

/** The parent job as the fan-out uses it (a BullMQ job of the rerank or search queue). */
export type FanoutJob = Pick<Job, 'id' | 'data' | 'token' | 'queueQualifiedName' | 'getChildrenValues' | 'moveToWaitingChildren' | 'updateData' | 'updateProgress'>;

export interface ShardCoordinatorDeps {
  queues: Pick<ShardQueues, 'add'>;
  /** Where the round inputs and the shards' partial results are removed once the parent merged them. */
  store: Pick<ObjectStore, 'deletePrefix'>;
}

/**
 * Removes a parent's round inputs and its shards' partial results (shardWorkPrefix), once its
 * result is written. Best effort: a leftover costs storage only, so a failed delete is logged
 * and the job still completes.
 */
async function dropShardWork(deps: { shardCoordinator: ShardCoordinatorDeps }, kind: RoundBase['kind'], tenantId: string, parentId: string): Promise<void> {
  const prefix = shardWorkPrefix(kind, tenantId, parentId);
  try {
    await deps.shardCoordinator.store.deletePrefix(prefix);
  } catch (err) {
    jobLogger()?.warn(`sharded ${kind} ${parentId}: its shards' partial results under ${prefix} could not be removed: ${(err as Error).message}`);
  }
}

/**
 * Removes the shard work of a re-rank or search that failed for good (the worker's final-failure
 * hook): a completed parent removes its own (dropShardWork), a failed one never gets there, and
 * its rounds' inputs and partial results would stay in S3. Nothing is listed for other queues or
 * for an unsharded job (its prefix is empty). Returns the objects removed.
 */
export async function dropShardWorkOfFailedJob(store: Pick<ObjectStore, 'deletePrefix'>, queue: QueueName, data: { tenantId?: unknown; rerankId?: unknown; searchId?: unknown }): Promise<number> {
  const kind = queue === QueueName.rerank ? 'rerank' : queue === QueueName.search ? 'search' : null;
  const parentId = kind === 'rerank' ? data.rerankId : data.searchId;
  if (!kind || typeof parentId !== 'string' || typeof data.tenantId !== 'string') return 0;
  return store.deletePrefix(shardWorkPrefix(kind, data.tenantId, parentId));
}

/** Whether `job` can be a flow parent (a real BullMQ job; handlers called directly in tests pass none). */
export function isFanoutJob(job: unknown): job is FanoutJob {
  return !!job && typeof (job as FanoutJob).moveToWaitingChildren === 'function' && typeof (job as FanoutJob).token === 'string';
}

const GEN_FIELD = 'shardGeneration';

/** The generation the parent pinned (recorded in its job data the first time, so every round and re-run reads the same one). */
async function pinnedManifest(
  deps: { generations: Pick<SearchDeps['generations'], 'manifest'> },
  job: FanoutJob,
  current: CollectionManifest,
): Promise<CollectionManifest> {
  const pinned = (job.data as Record<string, unknown>)[GEN_FIELD];
  if (typeof pinned === 'number') {
    if (pinned === current.generation) return current;
    const m = await deps.generations.manifest(current.tenantId, current.collectionId, pinned);
    if (!m) throw new PermanentJobError(`generation ${pinned} of ${current.collectionId}, pinned by this sharded job, is gone`);
    return m;
  }
  await job.updateData({ ...(job.data as object), [GEN_FIELD]: current.generation });
  return current;
}

interface RoundBase {
  kind: 'rerank' | 'search';
  tenantId: string;
  collectionId: string;
  parentId: string;
  shards: number;
  generation: number;
}

/**
 * One round over every shard: the partials (in shard order) when the round's children have all
 * completed; otherwise the children are queued (same ids on a re-run: nothing twice) and the job
 * is parked in waiting-children (WaitingChildrenError: BullMQ runs it again once they complete).
 */
async function round<T>(deps: { store: Pick<SearchDeps['store'], 'getJson' | 'putJson'>; shardCoordinator: ShardCoordinatorDeps }, job: FanoutJob, base: RoundBase, r: number, input: () => unknown): Promise<T[]> {
  for (let attempt = 0; attempt < 2; attempt++) {
    const values = Object.values((await job.getChildrenValues()) as Record<string, ShardJobResult | null>).filter((v): v is ShardJobResult => !!v && v.round === r);
    if (values.length >= base.shards) {
      const byShard = new Map(values.map((v) => [v.shard, v.outputKey]));
      return Promise.all(
        Array.from({ length: base.shards }, async (_, i) => {
          const key = byShard.get(i);
          const v = key ? await deps.store.getJson<T>(key) : null;
          if (!v) throw new Error(`shard ${i}'s partial result of round ${r} is missing (${key ?? 'no child result'})`);
          return v;
        }),
      );
    }
    if (attempt > 0) break;
    const inputKey = shardWorkKey(base.kind, base.tenantId, base.parentId, `input-r${r}.json`);
    await deps.store.putJson(inputKey, input());
    for (let shard = 0; shard < base.shards; shard++) {
      const payload: ShardJobPayload = {
        kind: base.kind, tenantId: base.tenantId, collectionId: base.collectionId, parentId: base.parentId, round: r, shard, shards: base.shards, generation: base.generation,
        inputKey, outputKey: shardWorkKey(base.kind, base.tenantId, base.parentId, `r${r}-s${shard}.json`),
      };
      await deps.shardCoordinator.queues.add(`${base.parentId}~r${r}~s${shard}`, payload, { id: job.id!, queue: job.queueQualifiedName });
    }
    if (await job.moveToWaitingChildren(job.token!)) throw new WaitingChildrenError();
    // Every child had already completed: read them.
  }
  throw new Error(`round ${r} of ${base.parentId}: children completed but their results are not all there`);
}

// ---------------------------------------------------------------- re-rank

/** The re-rank round's input: the (expanded) queries with their distinct candidates, and the scorer each shard runs. */
interface RerankInput {
  scorer: ScorerSpec;
  queries: { text: string; ids: string[]; first: (number | null)[] }[];
}

/** A shard's scores: per query, the candidates it holds (index into the query's ids) and their scores. */
interface RerankPartial {
  found: { at: number[]; scores: number[] }[];
  /** Segments of the shard that could not be read, and the candidate ids they hold (not scored). */
  unavailable?: UnavailableSegment[];
  unavailableIds?: string[];
  rotated: boolean;
  loadMs: number;
  encodeQueriesMs: number;
  scoreMs: number;
}

/** Re-ranks `queries` through the shards (round `r`): per query, the score of each id (NaN where no shard holds it: missing). */
async function rerankThroughShards(
  deps: { store: Pick<SearchDeps['store'], 'getJson' | 'putJson'>; shardCoordinator: ShardCoordinatorDeps },
  job: FanoutJob,
  base: RoundBase,
  r: number,
  scorer: ScorerSpec,
  queries: RerankInput['queries'],
): Promise<{ scores: Float32Array[]; found: Uint8Array[]; partials: RerankPartial[] }> {
  // Hybrid fuses over the whole candidate set: the shards compute its base scores, the fusion is here.
  const shardScorer = scorer.name === 'hybrid' ? hybridBase(scorer) : scorer;
  const partials = await round<RerankPartial>(deps, job, base, r, () => ({ scorer: shardScorer, queries } satisfies RerankInput));
  const scores = queries.map((q) => new Float32Array(q.ids.length).fill(NaN));
  const found = queries.map((q) => new Uint8Array(q.ids.length));
  for (const part of partials) {
    part.found.forEach((f, qi) => {
      f.at.forEach((at, k) => {
        if (found[qi][at]) return; // a copy in a lower shard wins (never happens when commits tombstone superseded copies)
        found[qi][at] = 1;
        scores[qi][at] = f.scores[k];
      });
    });
  }
  if (scorer.name === 'hybrid') {
    queries.forEach((q, qi) => {
      const keep = q.ids.flatMap((_, j) => (found[qi][j] ? [j] : []));
      const fused = fuseHybrid(scorer, Float32Array.from(keep, (j) => scores[qi][j]), Float64Array.from(keep, (j) => q.first[j] ?? NaN));
      keep.forEach((j, k) => (scores[qi][j] = fused[k]));
    });
  }
  return { scores, found, partials };
}

export type ShardedDeps = RerankDeps & SearchDeps & { shardCoordinator: ShardCoordinatorDeps };

/** The parent of a sharded re-rank (a collection of several shards, every candidate given by id). */
export async function shardedRerank(
  deps: RerankDeps & { shardCoordinator: ShardCoordinatorDeps },
  p: JobPayload<QueueName.rerank>,
  req: RerankRequest,
  collection: Collection,
  job: FanoutJob,
  t0: number,
): Promise<JobResults[QueueName.rerank]> {
  const current = await deps.generations.manifest(p.tenantId, collection.id);
  const resultKey = s3Keys.rerankResult(p.tenantId, p.rerankId);
  const shaping = hitShaping(collection, req, Number.MAX_SAFE_INTEGER);
  if (!current) {
    const result: RerankResult = {
      rerankId: p.rerankId, collection: collection.id, scorer: req.scorer, generation: 0,
      results: req.queries.map((q) => ({ queryId: q.id, hits: [], missing: [...new Set(q.candidates.map((c) => (typeof c === 'string' ? c : (c.id ?? ''))))] })),
      timings: { totalMs: Date.now() - t0, encodeQueriesMs: 0, scoreMs: 0, loadMs: 0 },
    };
    await shaping.finish(deps, null, result.results);
    await deps.store.putJson(resultKey, result);
    return { resultKey, queries: req.queries.length, candidates: 0, missing: result.results.reduce((s, r) => s + r.missing.length, 0) };
  }
  const manifest = await pinnedManifest(deps, job, current);
  await shaping.expand(deps, manifest, req.queries);
  const queries = req.queries.map((q) => {
    const ids: string[] = [];
    const first: (number | null)[] = [];
    const seen = new Set<string>();
    for (const cand of q.candidates) {
      const id = typeof cand === 'string' ? cand : (cand.id ?? '');
      if (seen.has(id)) continue;
      seen.add(id);
      ids.push(id);
      first.push(typeof cand === 'string' || cand.score === undefined ? null : cand.score);
    }
    return { text: q.text, ids, first };
  });
  const base: RoundBase = { kind: 'rerank', tenantId: p.tenantId, collectionId: collection.id, parentId: p.rerankId, shards: collection.shards!, generation: manifest.generation };
  const { scores, found, partials } = await rerankThroughShards(deps, job, base, 2, req.scorer, queries);
  // Candidates held by a segment a shard could not read: named as unavailable, the result degraded (as in one job).
  const unavailableIds = partials.flatMap((x) => x.unavailableIds ?? []);
  let candidatesTotal = 0;
  let missingTotal = 0;
  const results: RerankResult['results'] = queries.map((q, qi) => {
    const keep = q.ids.flatMap((_, j) => (found[qi][j] ? [j] : []));
    const missing = q.ids.filter((_, j) => !found[qi][j]);
    candidatesTotal += keep.length;
    missingTotal += missing.length;
    const hits = topK(Float32Array.from(keep, (j) => scores[qi][j]), keep.map((j) => q.ids[j]), shaping.depth);
    return { queryId: req.queries[qi].id, hits: hits.map((h) => ({ id: h.id, score: h.score })), ...splitUnavailable(missing, { unavailableIds }) };
  });
  await shaping.finish(deps, manifest, results);
  const max = (f: (x: RerankPartial) => number) => Math.max(0, ...partials.map(f));
  const result: RerankResult = {
    rerankId: p.rerankId,
    collection: collection.id,
    scorer: req.scorer,
    generation: manifest.generation,
    vectors: partials.every((x) => x.rotated) ? 'rotated-int8' : 'fp32',
    results,
    timings: { totalMs: Date.now() - t0, encodeQueriesMs: max((x) => x.encodeQueriesMs), scoreMs: max((x) => x.scoreMs), loadMs: max((x) => x.loadMs) },
    ...degradedFields(partials.flatMap((x) => x.unavailable ?? [])),
  };
  await deps.store.putJson(resultKey, result);
  await dropShardWork(deps, 'rerank', p.tenantId, p.rerankId);
  await job.updateProgress(100);
  logRerankDone(result, { queries: req.queries.length, candidates: candidatesTotal, missing: missingTotal });
  return { resultKey, queries: req.queries.length, candidates: candidatesTotal, missing: missingTotal };
}

/** A shard's part of a re-rank: the candidates its segments hold, scored. */
async function rerankChild(deps: ShardedDeps, collection: Collection, manifest: CollectionManifest, scope: Scope, input: RerankInput): Promise<RerankPartial> {
  const tLoad = Date.now();
  const ids = [...new Set(input.queries.flatMap((q) => q.ids))];
  const view = await deps.views.view(collection, scopedManifest(manifest, scope), ids);
  const loadMs = Date.now() - tLoad;
  const encoder = await deps.encoders(collection.model).catch(permanentModelErrors);
  const tEnc = Date.now();
  const encoded = await encoder.encodeQueries(input.queries.map((q) => q.text)).catch(permanentModelErrors);
  const encodeQueriesMs = Date.now() - tEnc;
  const tScore = Date.now();
  const resolved = input.queries.map((q) => {
    const at: number[] = [];
    const rows: number[] = [];
    const first: number[] = [];
    q.ids.forEach((id, j) => {
      const row = view.rowOf.get(id);
      if (row === undefined) return;
      at.push(j);
      rows.push(row);
      first.push(q.first[j] ?? NaN);
    });
    return { at, rows, first: Float64Array.from(first), key: rows.join(',') };
  });
  const found: RerankPartial['found'] = resolved.map((r) => ({ at: r.at, scores: [] }));
  const yieldEvery = eventLoopYielder();
  for (const members of groupIndicesByKey(resolved, (r) => r.key).values()) {
    const rows = resolved[members[0]].rows;
    if (rows.length === 0) continue;
    const out = await scoreGroup(deps.scorers, { view, encoder, queries: members.map((i) => encoded[i]), rows, firstStage: members.map((i) => resolved[i].first), yieldEvery, tenantId: collection.tenantId }, input.scorer).catch((err) => {
      if (err instanceof ValidationError || err instanceof ShapeError) throw new PermanentJobError(err.message);
      throw err;
    });
    members.forEach((qi, k) => (found[qi].scores = Array.from(out[k])));
  }
  return { found, unavailable: view.unavailable ?? [], unavailableIds: view.unavailableIds ?? [], rotated: !!view.rotated, loadMs, encodeQueriesMs, scoreMs: Date.now() - tScore };
}

// ---------------------------------------------------------------- search

interface Scope {
  shard: number;
  shards: number;
}

/**
 * The generation restricted to one shard's segments. Its committedAt is marked with the shard,
 * so the segment cache keeps the shard's id table apart from the whole generation's. An id's
 * live copy is decided within the shard: commits tombstone every superseded copy, so no other
 * shard holds a live copy of it.
 */
export function scopedManifest(manifest: CollectionManifest, scope: Scope): CollectionManifest {
  return { ...manifest, committedAt: `${manifest.committedAt}#shard-${scope.shard}-of-${scope.shards}`, segments: manifest.segments.filter((s) => segmentShard(s, scope.shards) === scope.shard) };
}

const needsBm25 = (m: SearchMode) => m.name === 'bm25' || m.name === 'hybrid';
const needsXtr = (m: SearchMode) => m.name === 'xtr' || (m.name === 'hybrid' && m.base === 'xtr');

/** Round 1 of a search, per query: the shard's BM25 statistics of the query terms and its merged XTR top-k' lists. */
interface StatsPartial {
  queries: {
    bm25?: { documents: number; totalLength: number; terms: number[]; df: number[] };
    /** per query token: (score, global key, row) of the shard's top-k' entries, best first */
    xtr?: { scores: number[]; keys: number[]; rows: number[] }[];
  }[];
}

/** Round 2's input, per query: the global BM25 statistics and, for XTR, the imputation scores and each shard's surviving entries per query token. */
interface SearchInput {
  queries: {
    bm25?: { documents: number; totalLength: number; terms: number[]; df: number[] };
    xtr?: { imputed: number[]; survivors: number[][] };
  }[];
}

interface ShardHit extends SearchHit {
  key: number;
}

/** Round 2: per query, the shard's ranked hits (hybrid: its two lists) and the reason a query has none. */
interface HitsPartial {
  queries: { hits: ShardHit[]; second?: ShardHit[]; reason?: string }[];
  unavailable?: UnavailableSegment[];
  loadMs: number;
  encodeQueriesMs: number;
  searchMs: number;
}

/**
 * What every search child prepares: the request, the shard's segments as a plan (opened one
 * window at a time by the pass, searchSegments; global document keys), the encoded queries.
 */
async function searchContext(deps: ShardedDeps, collection: Collection, manifest: CollectionManifest, scope: Scope, req: SearchRequest) {
  let predicate;
  try {
    predicate = req.filter === undefined ? undefined : compileFilter(req.filter);
  } catch (err) {
    if (err instanceof ValidationError) throw new PermanentJobError(err.message);
    throw err;
  }
  const bases = new Map<string, number>();
  let docBase = 0;
  for (const s of manifest.segments) {
    bases.set(s.key, docBase);
    docBase += s.documents;
  }
  const plan = await deps.segments.searchPlan(collection, scopedManifest(manifest, scope), searchNeeds(req), (ref) => bases.get(ref.key)!);
  const yieldEvery = eventLoopYielder();
  const encoder = await deps.encoders(collection.model).catch(permanentModelErrors);
  const tEnc = Date.now();
  const vectorsNeeded = req.mode.name !== 'bm25' || !!req.explain;
  const queries = vectorsNeeded
    ? await encoder.encodeQueries(req.queries.map((q) => q.text)).catch(permanentModelErrors)
    : req.queries.map((): EncodedText => ({ tokenIds: new Int32Array(0), vectors: new Float32Array(0), weights: null, length: 0, truncated: false }));
  const encodeQueriesMs = Date.now() - tEnc;
  const specials = specialTokenIds(encoder);
  const skip = (id: number) => specials.has(id) || encoder.tokenizer.skipIds.has(id);
  const ivf = needsXtr(req.mode) ? await deps.ivf.get(collection.tenantId, collection.id, manifest.codecVersion) : null;
  if (needsXtr(req.mode) && !ivf) throw new Error(`IVF centroids of ${collection.id} v${manifest.codecVersion} are missing from S3`);
  const terms = req.queries.map((q) => Array.from(encoder.tokenizer.contentIds(q.text)).filter((id) => !skip(id)));
  return { plan, predicate, encoder, queries, skip, ivf, terms, encodeQueriesMs, yieldEvery };
}

type SearchContext = Awaited<ReturnType<typeof searchContext>>;

/** Query `qi`'s XTR pass over the shard's segments (its probe as one ORT GEMM); null when the query has no tokens. */
async function xtrShardPass(deps: ShardedDeps, ctx: SearchContext, mode: Extract<SearchMode, { name: 'xtr' }>, qi: number, topN: number, explain?: boolean): Promise<XtrPass | null> {
  const e = ctx.queries[qi];
  if (e.length === 0) return null;
  const ivf = ctx.ivf!;
  const nprobe = Math.min(mode.nprobe, ivf.k);
  const probe = await (await deps.scorers.ivfProbe()).probe(e.vectors, e.length, ivf.centroids, e.vectors.length / e.length, nprobe);
  return xtrPass(e.vectors, e.length, probe, { kPrime: mode.kPrime, topN, explain });
}

const xtrOf = (m: SearchMode): Extract<SearchMode, { name: 'xtr' }> | null =>
  m.name === 'xtr' ? m : m.name === 'hybrid' && m.base === 'xtr' ? { name: 'xtr', kPrime: m.kPrime, nprobe: m.nprobe } : null;

/** Round 1: per query, the shard's BM25 statistics of its terms (indexes alone) and the merge of its segments' XTR lists (one pass over the segments). */
async function statsChild(deps: ShardedDeps, ctx: SearchContext, req: SearchRequest): Promise<StatsPartial> {
  const counters = needsBm25(req.mode) ? ctx.terms.map((t) => new Bm25StatsPass(t)) : null;
  const xtr = xtrOf(req.mode);
  const xtrPasses: (XtrPass | null)[] = [];
  if (xtr) for (let qi = 0; qi < req.queries.length; qi++) xtrPasses.push(await xtrShardPass(deps, ctx, xtr, qi, 1));
  const passes: SegmentPass[] = [...(counters ?? []), ...xtrPasses.filter((x): x is XtrPass => x !== null)];
  await searchSegments(ctx.plan, passes, { predicate: ctx.predicate, yieldEvery: ctx.yieldEvery });
  const S = ctx.plan.parts.length;
  const out: StatsPartial['queries'] = [];
  for (let qi = 0; qi < req.queries.length; qi++) {
    const q: StatsPartial['queries'][number] = {};
    if (counters) {
      const st = counters[qi].stats();
      q.bm25 = { documents: st.documents, totalLength: st.totalLength, terms: Array.from(st.terms), df: Array.from(st.df) };
    }
    if (xtr) {
      const merged = xtrPasses[qi]?.lists(S);
      q.xtr = Array.from({ length: ctx.queries[qi].length }, (_, i) => {
        if (!merged) return { scores: [], keys: [], rows: [] };
        const a = merged.offsets[i], b = merged.offsets[i + 1];
        return { scores: Array.from(merged.scores.subarray(a, b)), keys: Array.from(merged.keys.subarray(a, b)), rows: Array.from(merged.rows.subarray(a, b)) };
      });
    }
    out.push(q);
  }
  return { queries: out };
}

/** One ranked list a shard answers for a query: its pass (null: the query has nothing to search) and how its hits are read at the end. */
interface ShardList {
  pass: SegmentPass | null;
  finish: (segments: number) => Steps<Hit[]>;
  reason?: string;
}

/** Round 2: every query's lists (hybrid: its two) from one pass over the shard's segments, with the global figures of round 1. */
async function hitsChild(deps: ShardedDeps, ctx: SearchContext, req: SearchRequest, input: SearchInput | null, depth: number): Promise<HitsPartial> {
  const tSearch = Date.now();
  const label = req.mode.name;
  const list = async (qi: number, mode: SearchMode, n: number): Promise<ShardList> => {
    const e = ctx.queries[qi];
    const of = (pass: SegmentPass): ShardList => ({ pass, finish: (S) => pass.finish(S) });
    const none = (reason?: string): ShardList => ({ pass: null, finish: function* () { return []; }, ...(reason ? { reason } : {}) });
    switch (mode.name) {
      case 'bm25': {
        if (ctx.terms[qi].length === 0) return none('the query has no searchable terms (only stop words, punctuation or special tokens)');
        const g = input!.queries[qi].bm25!;
        const stats: Bm25Stats = { documents: g.documents, totalLength: g.totalLength, terms: Int32Array.from(g.terms), df: Uint32Array.from(g.df) };
        return of(bm25Pass(ctx.terms[qi], n, { k1: mode.k1, b: mode.b }, ctx.skip, stats));
      }
      case 'dense':
        return of(densePass(ctx.encoder.pool(e), n));
      case 'mebert':
        return of(mebertPass(ctx.encoder.pool(e), mode.m, n));
      case 'exhaustive':
        if (e.length === 0) return none('the query has no tokens');
        return of(exhaustivePass(e.vectors, e.length, n, { explain: req.explain }));
      case 'xtr': {
        if (e.length === 0) return none('the query has no tokens');
        const pass = (await xtrShardPass(deps, ctx, mode, qi, n, req.explain))!;
        const g = input!.queries[qi].xtr!;
        return { pass, finish: (S) => pass.finishCut(S, { imputed: g.imputed, survivors: g.survivors.map((c) => c[0]) }) };
      }
      case 'hybrid':
        throw new Error('hybrid is run as its two lists');
    }
  };
  const lists: ShardList[][] = [];
  for (let qi = 0; qi < req.queries.length; qi++) {
    if (req.mode.name === 'hybrid') {
      const m = req.mode;
      const baseMode: SearchMode = m.base === 'xtr' ? { name: 'xtr', kPrime: m.kPrime, nprobe: m.nprobe } : m.base === 'dense' ? { name: 'dense' } : { name: 'exhaustive' };
      lists.push([await list(qi, baseMode, m.depth), await list(qi, { name: 'bm25', k1: m.k1, b: m.b }, m.depth)]);
    } else lists.push([await list(qi, req.mode, depth)]);
  }
  const report = await searchSegments(ctx.plan, lists.flat().flatMap((l) => (l.pass ? [l.pass] : [])), { predicate: ctx.predicate, yieldEvery: ctx.yieldEvery });
  const S = ctx.plan.parts.length;
  const out: HitsPartial['queries'] = [];
  for (let qi = 0; qi < req.queries.length; qi++) {
    const shardHits = async (l: ShardList): Promise<ShardHit[]> => {
      const hits = await runStepsYielding(l.finish(S), ctx.yieldEvery);
      const segs = await hitSegments(ctx.plan, hits, !!req.explain);
      return hits.map((h) => ({ key: h.key, ...toHit(h, segs, label, req.explain ? { encoder: ctx.encoder, query: ctx.queries[qi] } : null) }));
    };
    const [a, b] = lists[qi];
    if (b) out.push({ hits: await shardHits(a), second: await shardHits(b) });
    else out.push({ hits: await shardHits(a), ...(a.reason ? { reason: a.reason } : {}) });
  }
  return { queries: out, unavailable: ctx.plan.unavailable(report.failed), loadMs: report.loadMs, encodeQueriesMs: ctx.encodeQueriesMs, searchMs: Date.now() - tSearch };
}

/** The parent of a sharded search. */
export async function shardedSearch(
  deps: SearchDeps & { shardCoordinator: ShardCoordinatorDeps },
  p: JobPayload<QueueName.search>,
  req: SearchRequest,
  collection: Collection,
  current: CollectionManifest,
  job: FanoutJob,
  t0: number,
): Promise<JobResults[QueueName.search]> {
  const manifest = await pinnedManifest(deps, job, current);
  const S = collection.shards!;
  const base: RoundBase = { kind: 'search', tenantId: p.tenantId, collectionId: collection.id, parentId: p.searchId, shards: S, generation: manifest.generation };
  const shaping = hitShaping(collection, req, Math.min(10 * MAX_SEARCH_TOP_K, req.topK * GROUP_DEPTH_FACTOR));
  const depth = Math.max(shaping.depth, req.rerank?.depth ?? 0);

  // Round 1: global statistics (BM25) and global top-k' lists (XTR).
  let input: SearchInput = { queries: req.queries.map(() => ({})) };
  if (needsBm25(req.mode) || needsXtr(req.mode)) {
    const stats = await round<StatsPartial>(deps, job, base, 1, () => ({ requestKey: p.requestKey }));
    const kPrime = xtrOf(req.mode)?.kPrime ?? 0;
    input = {
      queries: req.queries.map((_, qi) => {
        const q: SearchInput['queries'][number] = {};
        if (needsBm25(req.mode)) {
          const all = sumBm25Stats(stats.map((s) => {
            const b = s.queries[qi].bm25!;
            return { documents: b.documents, totalLength: b.totalLength, terms: Int32Array.from(b.terms), df: Uint32Array.from(b.df) };
          }));
          q.bm25 = { documents: all.documents, totalLength: all.totalLength, terms: Array.from(all.terms), df: Array.from(all.df) };
        }
        if (needsXtr(req.mode)) {
          const n = stats[0].queries[qi].xtr!.length;
          const imputed: number[] = [];
          const survivors: number[][] = [];
          for (let i = 0; i < n; i++) {
            const cut = xtrGlobalCut(stats.map((s) => s.queries[qi].xtr![i]), kPrime);
            imputed.push(cut.imputed);
            survivors.push(cut.survivors);
          }
          q.xtr = { imputed, survivors };
        }
        return q;
      }),
    };
  }
  // Round 2: each shard ranks its documents with the global figures. Each shard reads only its own survivors.
  const perShardInput = (shard: number): SearchInput => ({
    queries: input.queries.map((q) => (q.xtr ? { ...q, xtr: { imputed: q.xtr.imputed, survivors: q.xtr.survivors.map((c) => [c[shard]]) } } : q)),
  });
  const partials = await round<HitsPartial>(deps, job, base, 2, () => ({ requestKey: p.requestKey, shards: Array.from({ length: S }, (_, i) => perShardInput(i)) }));

  const tMerge = Date.now();
  let results: SearchResult['results'] = req.queries.map((q, qi) => {
    const lists = partials.map((x) => x.queries[qi]);
    let hits: ShardHit[];
    if (req.mode.name === 'hybrid') {
      const m = req.mode;
      const a = mergeShardHits(lists.map((l) => l.hits), m.depth);
      const b = mergeShardHits(lists.map((l) => l.second ?? []), m.depth);
      const byKey = new Map<number, ShardHit>([...a, ...b].map((h) => [h.key, h]));
      const asHit = (h: ShardHit): Hit => ({ segment: 0, doc: 0, key: h.key, score: h.score });
      hits = fuse(a.map(asHit), b.map(asHit), m, depth).map((f) => ({ ...byKey.get(f.key)!, score: f.score, explain: undefined, scoredBy: 'hybrid' }));
    } else hits = mergeShardHits(lists.map((l) => l.hits), depth);
    const reason = lists[0]?.reason;
    return { queryId: q.id, hits: hits.map(({ key: _key, ...h }) => (h.explain === undefined ? { id: h.id, score: h.score, scoredBy: h.scoredBy } : h)), ...(reason ? { reason } : {}) };
  });
  // A second stage re-ranks each query's top hits through the shards (round 3), as one process would.
  if (req.rerank) {
    const cut = results.map((r) => r.hits.slice(0, req.rerank!.depth));
    const queries = req.queries.map((q, qi) => ({ text: q.text, ids: cut[qi].map((h) => h.id), first: cut[qi].map((h) => h.score) }));
    const { scores, found } = await rerankThroughShards(deps, job, base, 3, req.rerank.scorer, queries);
    const scorerName = req.rerank.scorer.name;
    results = results.map((r, qi) => {
      if (cut[qi].length === 0) return r;
      const kept = cut[qi].flatMap((h, j) => (found[qi][j] ? [{ id: h.id, score: scores[qi][j], scoredBy: `rerank:${scorerName}` }] : []));
      kept.sort((a, b) => (Number.isNaN(b.score) ? -1 : b.score - a.score));
      return { ...r, hits: kept };
    });
  }
  results = results.map((r) => ({ ...r, hits: r.hits.slice(0, shaping.depth) }));
  await shaping.finish(deps, manifest, results);
  const max = (f: (x: HitsPartial) => number) => Math.max(0, ...partials.map(f));
  const result: SearchResult = {
    searchId: p.searchId, collection: req.collection, mode: req.mode, generation: manifest.generation, results,
    timings: { totalMs: Date.now() - t0, encodeQueriesMs: max((x) => x.encodeQueriesMs), searchMs: max((x) => x.searchMs) + (Date.now() - tMerge), loadMs: max((x) => x.loadMs) },
    ...degradedFields(partials.flatMap((x) => x.unavailable ?? [])),
  };
  const resultKey = s3Keys.searchResult(p.tenantId, p.searchId);
  await deps.store.putJson(resultKey, result);
  await dropShardWork(deps, 'search', p.tenantId, p.searchId);
  await job.updateProgress(100);
  const hitCount = results.reduce((s, r) => s + r.hits.length, 0);
  logSearchDone(result, hitCount);
  return { resultKey, queries: results.length, hits: hitCount };
}

// ---------------------------------------------------------------- the shard queues' processor

/** A child job on `shard-<i>`: its shard's part of a re-rank or search round, written to S3. */
export async function shardChildProcessor(deps: ShardedDeps, p: ShardJobPayload): Promise<ShardJobResult> {
  const collection = await deps.collections.get(p.tenantId, p.collectionId);
  if (!collection) throw new PermanentJobError(`collection ${p.tenantId}/${p.collectionId} does not exist`);
  const manifest = await deps.generations.manifest(p.tenantId, p.collectionId, p.generation);
  if (!manifest) throw new PermanentJobError(`generation ${p.generation} of ${p.collectionId} is gone`);
  const scope = { shard: p.shard, shards: p.shards };
  let out: unknown;
  if (p.kind === 'rerank' || p.round === 3) {
    const input = await deps.store.getJson<RerankInput>(p.inputKey);
    if (!input) throw new PermanentJobError(`shard input missing from S3: ${p.inputKey}`);
    out = await rerankChild(deps, collection, manifest, scope, input);
  } else {
    const input = await deps.store.getJson<{ requestKey: string; shards?: SearchInput[] }>(p.inputKey);
    if (!input) throw new PermanentJobError(`shard input missing from S3: ${p.inputKey}`);
    const parsed = SearchRequestSchema.safeParse(await deps.store.getJson<unknown>(input.requestKey));
    if (!parsed.success) throw new PermanentJobError(`invalid or missing stored search request ${input.requestKey}`);
    const req = parsed.data;
    const ctx = await searchContext(deps, collection, manifest, scope, req);
    if (p.round === 1) out = await statsChild(deps, ctx, req);
    else {
      const all = { shards: input.shards ?? [] };
      const shaping = hitShaping(collection, req, Math.min(10 * MAX_SEARCH_TOP_K, req.topK * GROUP_DEPTH_FACTOR));
      out = await hitsChild(deps, ctx, req, all.shards[p.shard], Math.max(shaping.depth, req.rerank?.depth ?? 0));
    }
  }
  await deps.store.putJson(p.outputKey, out);
  return { round: p.round, shard: p.shard, outputKey: p.outputKey };
}
