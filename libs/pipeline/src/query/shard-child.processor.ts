import {
  MAX_SEARCH_TOP_K,
  PermanentJobError,
  SearchRequestSchema,
  ValidationError,
  WARP_DEFAULT_EXACT,
  type Collection,
  type CollectionManifest,
  type SearchMode,
  type SearchRequest,
  type ShardJobPayload,
  type ShardJobResult,
} from '@lateral/shared';
import { ShapeError } from '@lateral/scoring';
import {
  Bm25StatsPass,
  bm25Pass,
  densePass,
  exhaustivePass,
  mebertPass,
  xtrPass,
  type Bm25Stats,
  type Hit,
  type SegmentPass,
  type Steps,
  type XtrPass,
} from '@lateral/search';
import type { EncodedText } from '@lateral/model';
import { hitSegments, searchSegments, bm25QueryTerms, scoreGroup, GROUP_DEPTH_FACTOR, hitShaping, groupIndicesByKey, eventLoopYielder, runStepsYielding, searchNeeds, toHit, needsBm25, needsXtr, xtrOf, scopedManifest, warpScan, type ShardScope, type SegmentUnavailableError } from '@lateral/serving';
import { permanentModelErrors } from '../model-errors';
import { storedFilterPredicate } from '../stored-filter';
import { usesWarp, warpEpoch, warpExactScores, warpFilterMasks, warpPlanListSizes, type WarpEpochSizes } from './warp-search';
import type { ShardedDeps } from './query-deps';
import { type HitsPartial, type RerankInput, type RerankPartial, type SearchInput, type ShardHit, type StatsPartial } from './shard-rounds';

/*
 * The shard queues' processor: a child job on `shard-<i>` runs its shard's part of one round of a
 * sharded re-rank or search (shard-fanout.ts, the parent's side) over the generation's segments of
 * that shard only, and writes its partial result to S3.
 */

/** A shard's part of a re-rank: the candidates its segments hold, scored. */
async function rerankChild(deps: ShardedDeps, collection: Collection, manifest: CollectionManifest, scope: ShardScope, input: RerankInput): Promise<RerankPartial> {
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

/**
 * What every search child prepares: the request, the shard's segments as a plan (opened one
 * window at a time by the pass, searchSegments; global document keys), the encoded queries.
 */
async function searchContext(deps: ShardedDeps, collection: Collection, manifest: CollectionManifest, scope: ShardScope, req: SearchRequest) {
  const predicate = storedFilterPredicate(req.filter);
  const bases = new Map<string, number>();
  let docBase = 0;
  for (const s of manifest.segments) {
    bases.set(s.key, docBase);
    docBase += s.documents;
  }
  // WARP (usesWarp): the token part reads the layouts' lists, not the segments' rows; hits name documents from the heads.
  const warp = usesWarp(collection, req);
  const plan = await deps.segments.searchPlan(collection, scopedManifest(manifest, scope), warp ? { ...searchNeeds(req), rows: 'none' } : searchNeeds(req), (ref) => bases.get(ref.key)!);
  const yieldEvery = eventLoopYielder();
  const encoder = await deps.encoders(collection.model).catch(permanentModelErrors);
  const tEnc = Date.now();
  const vectorsNeeded = req.mode.name !== 'bm25' || !!req.explain;
  const queries = vectorsNeeded
    ? await encoder.encodeQueries(req.queries.map((q) => q.text)).catch(permanentModelErrors)
    : req.queries.map((): EncodedText => ({ tokenIds: new Int32Array(0), vectors: new Float32Array(0), weights: null, length: 0, truncated: false }));
  const encodeQueriesMs = Date.now() - tEnc;
  // BM25's terms under the collection's analyser (analysed words, or the encoder's pieces).
  const { terms, skip } = bm25QueryTerms(collection, encoder, req.queries.map((q) => q.text));
  const ivf = needsXtr(req.mode) ? await deps.ivf.get(collection.tenantId, collection.id, manifest.codecVersion) : null;
  if (needsXtr(req.mode) && !ivf) throw new Error(`IVF centroids of ${collection.id} v${manifest.codecVersion} are missing from S3`);
  return { collection, manifest, warp, plan, predicate, encoder, queries, skip, ivf, terms, encodeQueriesMs, yieldEvery };
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

/** Round 1: per query, the shard's BM25 statistics of its terms (indexes alone) and the merge of its segments' XTR lists (one pass over the segments). */
async function statsChild(deps: ShardedDeps, ctx: SearchContext, req: SearchRequest): Promise<StatsPartial> {
  const counters = needsBm25(req.mode) ? ctx.terms.map((t) => new Bm25StatsPass(t)) : null;
  // WARP: no top-k' lists (it imputes from list sizes): the shard's list sizes instead, from its directories alone.
  const xtr = ctx.warp ? null : xtrOf(req.mode);
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
  return { queries: out, ...(ctx.warp ? { warp: await warpPlanListSizes(deps, ctx.collection, ctx.manifest.codecVersion, ctx.plan) } : {}) };
}

/**
 * Round 2 of a WARP search on a shard: every query's token list from WARP's engine over the shard's
 * segments (warpScan, its filter masks as in one process), imputing with the collection-wide list
 * sizes of round 1 (`sizes`), so its scores are those one process over the whole generation gives.
 */
async function warpShardScan(deps: ShardedDeps, ctx: SearchContext, req: SearchRequest, sizes: readonly WarpEpochSizes[], topN: number) {
  const xtr = xtrOf(req.mode)!;
  const cv = ctx.manifest.codecVersion;
  const bySize = new Map(sizes.map((e) => [e.epoch, Float64Array.from(e.sizes)]));
  const { centroids, codec } = await warpEpoch(deps, ctx.collection.tenantId, ctx.collection.id, cv, 0);
  const { masks, failed } = await warpFilterMasks(ctx.plan, ctx.predicate);
  // The full manifest: warpScan numbers documents by the generation's segment order, as the plan's global keys do.
  return warpScan(deps.segments, ctx.collection, ctx.manifest, ctx.plan, ctx.queries.map((e) => ({ vectors: e.vectors, n: e.length })), {
    centroids,
    codec,
    epoch: (e) => warpEpoch(deps, ctx.collection.tenantId, ctx.collection.id, cv, e),
    nprobe: xtr.nprobe,
    tPrime: xtr.tPrime,
    centroidTop: async (q, n, c, d, k) => (await deps.scorers.ivfProbe()).top(q, n, c, d, k),
    masks,
    failed,
    topN,
    yieldEvery: ctx.yieldEvery,
    listSizes: (e) => bySize.get(e),
  });
}

/** One ranked list a shard answers for a query: its pass (null: the query has nothing to search) and how its hits are read at the end. */
interface ShardList {
  pass: SegmentPass | null;
  finish: (segments: number) => Steps<Hit[]>;
  reason?: string;
}

/** Round 2: every query's lists (hybrid: its two) from one pass over the shard's segments, with the global figures of round 1. */
async function hitsChild(deps: ShardedDeps, ctx: SearchContext, req: SearchRequest, input: SearchInput | null, depth: number, warpSizes?: readonly WarpEpochSizes[]): Promise<HitsPartial> {
  const tSearch = Date.now();
  const label = req.mode.name;
  // WARP: the token lists of every query from one scan of the shard's layouts, before the segment pass (BM25's part of hybrid).
  if (ctx.warp && !warpSizes) throw new Error('a sharded WARP search reached its ranking round without the collection-wide list sizes');
  // WARP's exact final stage: the exact scores of the shard's first `exact` hits, sent beside WARP's (the parent merges by
  // WARP's scores, as one process ranks, then orders the merged list's first `exact` by these: exactHead).
  const exact = ctx.warp && (req.mode.name === 'xtr' || req.mode.name === 'hybrid') ? (req.mode.exact ?? WARP_DEFAULT_EXACT) : 0;
  const scan = ctx.warp ? await warpShardScan(deps, ctx, req, warpSizes!, Math.max(req.mode.name === 'hybrid' ? req.mode.depth : depth, exact)) : null;
  const exactFailed = new Map<number, SegmentUnavailableError>();
  const exactScores: Map<number, number>[] = [];
  for (const [qi, hits] of (scan?.hits ?? []).entries()) {
    const head = exact > 0 && hits ? hits.slice(0, exact) : [];
    const ex = await warpExactScores(deps, ctx.collection, ctx.plan, ctx.queries[qi], head);
    for (const [position, err] of ex.failed) exactFailed.set(position, err);
    exactScores.push(new Map(head.flatMap((h, i) => (Number.isNaN(ex.scores[i]) ? [] : [[h.key, ex.scores[i]] as const]))));
  }
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
        if (scan) {
          const hits = (scan.hits[qi] ?? []).slice(0, Math.max(n, exact));
          return { pass: null, finish: function* () { return hits; } };
        }
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
  // A segment unreadable for WARP's lists or for the pass is left out of every list and named (one degraded answer).
  const failed = new Map<number, SegmentUnavailableError>([...(scan?.failed ?? []), ...exactFailed, ...report.failed]);
  const S = ctx.plan.parts.length;
  const out: HitsPartial['queries'] = [];
  for (let qi = 0; qi < req.queries.length; qi++) {
    const shardHits = async (l: ShardList, exactOf?: Map<number, number>): Promise<ShardHit[]> => {
      const hits = (await runStepsYielding(l.finish(S), ctx.yieldEvery)).filter((h) => !failed.has(ctx.plan.parts[h.segment].position));
      const segs = await hitSegments(ctx.plan, hits, !!req.explain);
      return hits.map((h) => ({ key: h.key, ...toHit(h, segs, label, req.explain ? { encoder: ctx.encoder, query: ctx.queries[qi] } : null), ...(exactOf?.has(h.key) ? { exactScore: exactOf.get(h.key)! } : {}) }));
    };
    const [a, b] = lists[qi];
    // The token list (mode xtr, hybrid's first) carries the exact scores of its first `exact` hits.
    if (b) out.push({ hits: await shardHits(a, exactScores[qi]), second: await shardHits(b) });
    else out.push({ hits: await shardHits(a, exactScores[qi]), ...(a.reason ? { reason: a.reason } : {}) });
  }
  const warp = scan
    ? { nprobe: scan.nprobe, centroids: scan.centroids, epochs: scan.epochs, segments: scan.segments, layoutBytes: scan.layoutBytes, queries: req.queries.map((q, qi) => ({ queryId: q.id, ...scan.queries[qi] })) }
    : undefined;
  return { queries: out, ...(warp ? { warp } : {}), unavailable: ctx.plan.unavailable(failed), loadMs: report.loadMs, encodeQueriesMs: ctx.encodeQueriesMs, searchMs: Date.now() - tSearch };
}

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
    const input = await deps.store.getJson<{ requestKey: string; shards?: SearchInput[]; warp?: WarpEpochSizes[] }>(p.inputKey);
    if (!input) throw new PermanentJobError(`shard input missing from S3: ${p.inputKey}`);
    const parsed = SearchRequestSchema.safeParse(await deps.store.getJson<unknown>(input.requestKey));
    if (!parsed.success) throw new PermanentJobError(`invalid or missing stored search request ${input.requestKey}`);
    const req = parsed.data;
    const ctx = await searchContext(deps, collection, manifest, scope, req);
    if (p.round === 1) out = await statsChild(deps, ctx, req);
    else {
      const all = { shards: input.shards ?? [] };
      const shaping = hitShaping(collection, req, Math.min(10 * MAX_SEARCH_TOP_K, req.topK * GROUP_DEPTH_FACTOR));
      out = await hitsChild(deps, ctx, req, all.shards[p.shard], Math.max(shaping.depth, req.rerank?.depth ?? 0), input.warp);
    }
  }
  await deps.store.putJson(p.outputKey, out);
  return { round: p.round, shard: p.shard, outputKey: p.outputKey };
}
