import { warpLayoutOf, type Collection, type SearchRequest } from '@lateral/shared';
import { andMasks, centroidsChecksum, docMask, warpCodecChecksum, warpListSizes, type DocMask, type DocPredicate, type Hit, type WarpCodec, type WarpDirectory } from '@lateral/search';
import { SegmentUnavailableError, needsXtr, type SearchPlan } from '@lateral/serving';
import type { SearchDeps } from './query-deps';
import type { WarpEpochSizes } from './shard-rounds';

export type { WarpEpochSizes };

/*
 * What the single-process WARP search (search.processor.ts) and the sharded one (shard-fanout.ts,
 * shard-child.processor.ts) share: when a search runs WARP's engine, the centroids and codec of a
 * centroid epoch, the filter's masks, and the list sizes of a plan's segments (a shard's part of
 * the collection-wide sizes that WARP's imputation reads).
 */

/**
 * Whether a search runs WARP's engine: mode xtr, or hybrid over xtr, on a collection with a WARP
 * search layout, without explain (explain names the document token behind each query token's
 * score, which the packed lists do not hold: it keeps the IVF path over the segments' tokens).
 */
export function usesWarp(collection: Pick<Collection, 'search'>, req: Pick<SearchRequest, 'mode' | 'explain'>): boolean {
  return needsXtr(req.mode) && !!warpLayoutOf(collection) && !req.explain;
}

export interface WarpEpoch {
  centroids: Float32Array;
  codec: WarpCodec;
}

/** The centroids and codec of the generation's codec version at centroid epoch `e` (0: the first fit; SegmentRef.warpEpoch). */
export async function warpEpoch(deps: Pick<SearchDeps, 'ivf' | 'warpCodecs'>, tenantId: string, collectionId: string, cv: number, e: number): Promise<WarpEpoch> {
  const [c, k] = await Promise.all([deps.ivf.get(tenantId, collectionId, cv, e), deps.warpCodecs?.get(tenantId, collectionId, cv, e)]);
  if (!c) throw new Error(`the WARP centroids of ${collectionId} v${cv}${e > 0 ? ` epoch ${e}` : ''} are missing from S3`);
  if (!k) throw new Error(`the WARP codec of ${collectionId} v${cv}${e > 0 ? ` epoch ${e}` : ''} is missing from S3`);
  return { centroids: c.centroids, codec: k };
}

/**
 * A filter's masks per plan part (its documents' metadata, the segment opened without its rows,
 * one at a time, and its live documents), and the segments that could not be read for them.
 */
export async function warpFilterMasks(plan: SearchPlan, predicate: DocPredicate | undefined): Promise<{ masks: (DocMask | undefined)[] | undefined; failed: Map<number, SegmentUnavailableError> }> {
  const failed = new Map<number, SegmentUnavailableError>();
  if (!predicate) return { masks: undefined, failed };
  const masks: (DocMask | undefined)[] = [];
  for (const part of plan.parts) {
    try {
      masks.push(andMasks(part.live, docMask((await part.open()).segment, predicate)));
    } catch (err) {
      if (!(err instanceof SegmentUnavailableError)) throw err;
      failed.set(part.position, err);
      masks.push(undefined);
    }
  }
  return { masks, failed };
}


/**
 * The list sizes of a plan's segments per centroid epoch (their directories, which the scorer
 * keeps in memory and warpScan reads anyway), summed. A shard sends its own to the parent, which
 * sums every shard's (sumWarpListSizes) for the ranking round: WARP's imputation reads the
 * collection-wide sizes, so a shard scoring with its own would not rank as one process does. A
 * segment whose directory cannot be read counts nothing here; the ranking round names it.
 */
export async function warpPlanListSizes(deps: Pick<SearchDeps, 'ivf' | 'warpCodecs' | 'segments'>, collection: Pick<Collection, 'tenantId' | 'id'>, cv: number, plan: SearchPlan): Promise<WarpEpochSizes[]> {
  const byEpoch = new Map<number, SearchPlan['parts'][number][]>();
  for (const part of plan.parts) byEpoch.set(part.ref.warpEpoch ?? 0, [...(byEpoch.get(part.ref.warpEpoch ?? 0) ?? []), part]);
  const out: WarpEpochSizes[] = [];
  for (const [epoch, parts] of [...byEpoch].sort((a, b) => a[0] - b[0])) {
    const { centroids, codec } = await warpEpoch(deps, collection.tenantId, collection.id, cv, epoch);
    const expect = { centroidsChecksum: centroidsChecksum(centroids), codecChecksum: warpCodecChecksum(codec), centroidCount: centroids.length / codec.dims, dims: codec.dims, bits: codec.bits };
    const dirs = await Promise.all(
      parts.map((part) =>
        deps.segments.warpDirectory(collection, part.ref, { ...expect, documents: part.ref.documents }).catch((err: unknown) => {
          if (err instanceof SegmentUnavailableError) return null;
          throw err;
        }),
      ),
    );
    const readable = dirs.filter((d): d is WarpDirectory => d !== null);
    out.push({ epoch, sizes: Array.from(readable.length > 0 ? warpListSizes(readable) : new Float64Array(expect.centroidCount)) });
  }
  return out;
}

/** Every shard's list sizes summed per epoch (an epoch some shard lacks adds nothing from it). */
export function sumWarpListSizes(shards: readonly (readonly WarpEpochSizes[])[]): WarpEpochSizes[] {
  const sum = new Map<number, number[]>();
  for (const shard of shards)
    for (const { epoch, sizes } of shard) {
      const acc = sum.get(epoch);
      if (!acc) sum.set(epoch, [...sizes]);
      else {
        if (acc.length !== sizes.length) throw new Error(`WARP epoch ${epoch}: shards disagree on its centroid count (${acc.length} and ${sizes.length})`);
        for (let c = 0; c < sizes.length; c++) acc[c] += sizes[c];
      }
    }
  return [...sum].sort((a, b) => a[0] - b[0]).map(([epoch, sizes]) => ({ epoch, sizes }));
}

/**
 * WARP's exact final stage (PLAID-style): the first `n` hits re-scored with exact MaxSim divided by
 * the query's tokens (XTR's scale) and ranked by it (ties keep WARP's order); the hits after them
 * follow in WARP's order with WARP's scores. WARP's imputed scores order the top of its list below
 * exhaustive MaxSim although its candidates hold exhaustive's best documents (docs/benchmarks.md,
 * "WARP"). A hit whose segment cannot be read is left out and its segment returned in `failed`
 * (manifest position), to be named as the scan names one.
 */
export async function warpExactStage(
  deps: Pick<SearchDeps, 'segments' | 'scorers'>,
  collection: Pick<Collection, 'tenantId' | 'id' | 'model'>,
  plan: SearchPlan,
  query: { vectors: Float32Array; length: number },
  hits: readonly Hit[],
  n: number,
): Promise<{ hits: Hit[]; failed: Map<number, SegmentUnavailableError> }> {
  const head = hits.slice(0, n);
  const { scores, failed } = await warpExactScores(deps, collection, plan, query, head);
  const rescored = head.flatMap((h, i) => (failed.has(plan.parts[h.segment].position) ? [] : [{ ...h, score: scores[i] }]));
  return { hits: [...byScore(rescored), ...hits.slice(n)], failed };
}

/**
 * Exact MaxSim / query tokens of each of `hits` (NaN where its segment cannot be read; those
 * segments in `failed`, by manifest position). The candidates' codes come straight from where the
 * scan found them (plan part and document: no id lookup, no view): each document's codes alone,
 * from the segment held in memory or by positioned reads of its local copy, decoded and scored in
 * the resident WebAssembly module (SegmentCache.documentScores: fp16 converted there, EDEN token
 * codes scored against the query rotated once). Without the module: the rows decoded
 * (SegmentCache.documentRows) and scored in one ONNX Runtime GEMM MaxSim (GemmMaxsim), the same
 * scores within float32 rounding.
 */
export async function warpExactScores(
  deps: Pick<SearchDeps, 'segments' | 'scorers'>,
  collection: Pick<Collection, 'tenantId' | 'id' | 'model'>,
  plan: SearchPlan,
  query: { vectors: Float32Array; length: number },
  hits: readonly Hit[],
): Promise<{ scores: Float32Array; failed: Map<number, SegmentUnavailableError> }> {
  const failed = new Map<number, SegmentUnavailableError>();
  if (hits.length === 0 || query.length === 0) return { scores: new Float32Array(hits.length).fill(NaN), failed };
  const where = hits.map((h) => [plan.parts[h.segment].ref, h.doc] as const);
  const fast = await deps.segments.documentScores(collection, where, query);
  if (fast) {
    hits.forEach((h) => {
      const err = fast.failed.get(plan.parts[h.segment].ref.key);
      if (err) failed.set(plan.parts[h.segment].position, err);
    });
    return { scores: fast.scores, failed };
  }
  return warpExactScoresGemm(deps, collection, plan, query, hits);
}

/** warpExactScores by decoded rows and one ONNX Runtime GEMM MaxSim: where the WebAssembly module is not in use (and the reference its specs compare with). */
export async function warpExactScoresGemm(
  deps: Pick<SearchDeps, 'segments' | 'scorers'>,
  collection: Pick<Collection, 'tenantId' | 'id' | 'model'>,
  plan: SearchPlan,
  query: { vectors: Float32Array; length: number },
  hits: readonly Hit[],
): Promise<{ scores: Float32Array; failed: Map<number, SegmentUnavailableError> }> {
  const failed = new Map<number, SegmentUnavailableError>();
  const scores = new Float32Array(hits.length).fill(NaN);
  if (hits.length === 0 || query.length === 0) return { scores, failed };
  const rows = await deps.segments.documentRows(
    collection,
    hits.map((h) => [plan.parts[h.segment].ref, h.doc] as const),
  );
  const kept = hits.flatMap((h, i) => {
    const err = rows.failed.get(plan.parts[h.segment].ref.key);
    if (err) failed.set(plan.parts[h.segment].position, err);
    return err ? [] : [i];
  });
  if (kept.length === 0) return { scores, failed };
  const d = rows.dims;
  if (query.vectors.length !== query.length * d) throw new Error(`WARP exact stage: query rows of ${query.vectors.length / query.length} dimensions against documents of ${d}`);
  // A failed segment's documents got no rows, so the kept candidates' rows are rows.docs as they are.
  const offsets = Uint32Array.from([...kept.map((i) => rows.offsets[i]), rows.offsets[hits.length]]);
  const [got] = await (await deps.scorers.gemm()).score([query], rows.docs, offsets, d, { normalize: true });
  kept.forEach((i, k) => (scores[i] = got[k]));
  return { scores, failed };
}

/**
 * The parent of a sharded WARP search: the merged list's first `n` hits (merged by WARP's scores,
 * as one process ranks them) ordered by the exact scores their shards computed (`exactScore`),
 * which become their scores; the rest as merged. The same list one process's warpExactStage gives.
 */
export function exactHead<H extends { score: number; exactScore?: number }>(hits: readonly H[], n: number): H[] {
  const head = hits.slice(0, n).flatMap((h) => (h.exactScore === undefined ? [] : [{ ...h, score: h.exactScore, exactScore: undefined }]));
  return [...byScore(head), ...hits.slice(n)];
}

/** Best first (stable: ties keep their order; NaN last). */
function byScore<H extends { score: number }>(hits: H[]): H[] {
  return hits.sort((a, b) => (Number.isNaN(b.score) ? -1 : b.score - a.score));
}
