import { WaitingChildrenError } from 'bullmq';
import {
  WARP_DEFAULT_EXACT,
  MAX_SEARCH_TOP_K,
  PermanentJobError,
  QueueName,
  s3Keys,
  shardWorkKey,
  type Collection,
  type CollectionManifest,
  type JobPayload,
  type JobResults,
  type RerankRequest,
  type RerankResult,
  type ScorerSpec,
  type SearchRequest,
  type SearchResult,
  type ShardJobPayload,
  type ShardJobResult,
  type WarpSearchStats,
} from '@lateral/shared';
import { topK } from '@lateral/scoring';
import {
  mergeShardHits,
  sumBm25Stats,
  xtrGlobalCut,
  type Hit,
} from '@lateral/search';
import { logRerankDone, logSearchDone } from '../job-logs';
import { fuseHybrid, hybridBase, GROUP_DEPTH_FACTOR, hitShaping, fuse, degradedFields, splitUnavailable, needsBm25, needsXtr, xtrOf } from '@lateral/serving';

import type { RerankDeps, SearchDeps } from './query-deps';
import { dropShardWork, type FanoutJob, type HitsPartial, type RerankInput, type RerankPartial, type RoundBase, type SearchInput, type ShardCoordinatorDeps, type ShardHit, type StatsPartial } from './shard-rounds';
import { distinctCandidates } from './rerank-candidates';
import { exactHead, sumWarpListSizes, usesWarp } from './warp-search';

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
 * This file is the parent's side (shard-child.processor.ts the children's, shard-rounds.ts what they share).
 * Rounds are idempotent: child job ids derive from the parent's, and a parent that runs again
 * reads what its children left in S3. Once the parent has written its result, the rounds' inputs
 * and partial results (shardWorkPrefix) are removed.
 */

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
    const distinct = distinctCandidates(q.candidates);
    return { text: q.text, ids: distinct.map((c) => c.id), first: distinct.map((c) => (Number.isNaN(c.firstStage) ? null : c.firstStage)) };
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

// ---------------------------------------------------------------- search

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

  // Round 1: global statistics (BM25) and global top-k' lists (XTR over the IVF), or (WARP) every shard's list sizes.
  const warp = usesWarp(collection, req);
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
        if (needsXtr(req.mode) && !warp) {
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
      // WARP: the collection-wide list sizes, so every shard imputes as one process over the whole generation would.
      ...(warp ? { warp: sumWarpListSizes(stats.map((s) => s.warp ?? [])) } : {}),
    };
  }
  // Round 2: each shard ranks its documents with the global figures. Each shard reads only its own survivors.
  const perShardInput = (shard: number): SearchInput => ({
    queries: input.queries.map((q) => (q.xtr ? { ...q, xtr: { imputed: q.xtr.imputed, survivors: q.xtr.survivors.map((c) => [c[shard]]) } } : q)),
  });
  // The WARP list sizes are the same for every shard: written once beside the per-shard inputs.
  const partials = await round<HitsPartial>(deps, job, base, 2, () => ({ requestKey: p.requestKey, shards: Array.from({ length: S }, (_, i) => perShardInput(i)), ...(input.warp ? { warp: input.warp } : {}) }));

  const tMerge = Date.now();
  // WARP's exact final stage: the merged token list's first `exact` hits ordered by the exact scores their shards sent (exactHead).
  const exact = warp && (req.mode.name === 'xtr' || req.mode.name === 'hybrid') ? (req.mode.exact ?? WARP_DEFAULT_EXACT) : 0;
  let results: SearchResult['results'] = req.queries.map((q, qi) => {
    const lists = partials.map((x) => x.queries[qi]);
    let hits: ShardHit[];
    if (req.mode.name === 'hybrid') {
      const m = req.mode;
      const a = exact > 0 ? exactHead(mergeShardHits(lists.map((l) => l.hits), Math.max(m.depth, exact)), exact).slice(0, m.depth) : mergeShardHits(lists.map((l) => l.hits), m.depth);
      const b = mergeShardHits(lists.map((l) => l.second ?? []), m.depth);
      const byKey = new Map<number, ShardHit>([...a, ...b].map((h) => [h.key, h]));
      const asHit = (h: ShardHit): Hit => ({ segment: 0, doc: 0, key: h.key, score: h.score });
      hits = fuse(a.map(asHit), b.map(asHit), m, depth).map((f) => ({ ...byKey.get(f.key)!, score: f.score, explain: undefined, scoredBy: 'hybrid' }));
    } else hits = exact > 0 ? exactHead(mergeShardHits(lists.map((l) => l.hits), Math.max(depth, exact)), exact) : mergeShardHits(lists.map((l) => l.hits), depth);
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
  // WARP: what every shard's scan read, summed (segments, layout bytes, per query bytes and ranged reads; probed: the most of any shard).
  const warpParts = partials.flatMap((x) => (x.warp ? [x.warp] : []));
  const sum = (f: (w: WarpSearchStats) => number) => warpParts.reduce((a, w) => a + f(w), 0);
  const warpStats: WarpSearchStats | undefined = warpParts.length
    ? {
        nprobe: warpParts[0].nprobe, centroids: warpParts[0].centroids, epochs: Math.max(...warpParts.map((w) => w.epochs)), segments: sum((w) => w.segments), layoutBytes: sum((w) => w.layoutBytes),
        queries: req.queries.map((q, qi) => ({ queryId: q.id, bytesRead: sum((w) => w.queries[qi].bytesRead), bytesFetched: sum((w) => w.queries[qi].bytesFetched), ranges: sum((w) => w.queries[qi].ranges), probed: Math.max(...warpParts.map((w) => w.queries[qi].probed)) })),
      }
    : undefined;
  const result: SearchResult = {
    searchId: p.searchId, collection: req.collection, mode: req.mode, generation: manifest.generation, results,
    ...(warpStats ? { stats: { warp: warpStats } } : {}),
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
