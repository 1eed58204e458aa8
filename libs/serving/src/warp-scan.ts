import type { Collection, CollectionManifest, SegmentRef } from '@lateral/shared';
import {
  WARP_DEFAULT_BOUND,
  WarpWorkspace,
  centroidsChecksum,
  mergeHits,
  warpCodeBytes,
  warpCentroidScores,
  warpCodecChecksum,
  warpListSizes,
  warpProbedCentroids,
  warpQuery,
  warpQueryTPrime,
  warpSegmentsSearchSteps,
  warpTopSuffices,
  type DocMask,
  type Hit,
  type SegmentHits,
  type WarpCodec,
  type WarpDirectory,
  type WarpLayoutExpectations,
  type WarpSegment,
} from '@lateral/search';
import { runStepsYielding } from './event-loop';
import { SegmentUnavailableError, type SearchPlan } from './search-plan';
import type { SegmentCache } from './segment-cache';
import type { WarpListReads } from './warp-reads';

/** What a WARP scan reads through (SegmentCache). */
export type WarpReads = Pick<SegmentCache, 'warpDirectory' | 'warpLists'>;

export interface WarpScanOptions {
  /** The collection's IVF centroids (K x dims) and WARP codec for the generation's codec version (centroid epoch 0). */
  centroids: Float32Array;
  codec: WarpCodec;
  /**
   * The centroids and codec of a refit's epoch e > 0 (SegmentRef.warpEpoch; maintenance/warp-refit.ts
   * in libs/pipeline); absent: every segment is taken to be at epoch 0.
   */
  epoch?: (e: number) => Promise<{ centroids: Float32Array; codec: WarpCodec }>;
  /** Lists probed per query token (clamped to K, as XTR's nprobe). */
  nprobe: number;
  /** t' of the imputation (tokens); absent: warpTPrime of the epoch's collection-wide token count. */
  tPrime?: number;
  /**
   * The k best centroids per query token with their scores (n x k, best first; ties: lower index),
   * e.g. ONNX Runtime's GEMM + TopK (OnnxIvfProbe.top); absent: Q C^T in JavaScript (warpQuery).
   */
  centroidTop?: (q: Float32Array, n: number, centroids: Float32Array, d: number, k: number) => Promise<{ ids: Uint32Array; scores: Float32Array }>;
  /** Centroids per query token asked of centroidTop first (FIRST_TOP when absent); all of the imputation's bound when they are not enough. */
  firstTop?: number;
  /**
   * Per plan part, the documents a filter keeps and the segment holds live (andMasks of part.live
   * and the filter's docMask); absent: part.live. A part whose segment could not be read for its
   * metadata is in `failed` instead.
   */
  masks?: readonly (DocMask | undefined)[];
  /** Segments (manifest position) already found unreadable (the filter's metadata reads): named, left out. */
  failed?: ReadonlyMap<number, SegmentUnavailableError>;
  /** Hits per query. */
  topN: number;
  yieldEvery: () => Promise<void>;
  /**
   * The collection-wide list sizes of epoch e (K entries) when the plan holds only part of the
   * generation (a shard's segments: the parent summed every shard's, warpPlanListSizes), so every
   * shard imputes as one process would; absent: summed over the plan's readable directories.
   */
  listSizes?: (epoch: number) => Float64Array | undefined;
}

/** What one query read. */
export interface WarpScanQueryStats {
  /** Bytes of the probed lists scored over every segment (from memory or read). */
  bytesRead: number;
  /** Bytes read from the layout objects for this query (ranged GETs or the local copies; hot lists in memory read nothing). */
  bytesFetched: number;
  /** Ranged reads (coalesced) over every segment. */
  ranges: number;
  /** Distinct centroids probed (any query token; summed over epochs while segments are at several). */
  probed: number;
}

export interface WarpScan {
  /** Per query: its merged hits (`segment` = the part's index in plan.parts), or null (no tokens). */
  hits: (Hit[] | null)[];
  /** Segments (manifest position) whose layout could not be read: named, the rest served. */
  failed: Map<number, SegmentUnavailableError>;
  queries: WarpScanQueryStats[];
  /** nprobe after clamping to K (of the newest epoch). */
  nprobe: number;
  /** Centroids of the newest epoch searched. */
  centroids: number;
  /** Centroid epochs the segments are at (one, except while a refit's rebuild is catching up). */
  epochs: number;
  /** Segments whose directory was read (the scan's segments). */
  segments: number;
  /** Bytes of the scanned segments' layout objects (their directories say). */
  layoutBytes: number;
}

/**
 * Checksums of the centroids and codecs searched, per array / object: the repositories keep one
 * immutable instance per collection, codec version and epoch, so a search computes them once, not
 * once per query (a CRC-32C of 12.6 MB of centroids at K = 8,192, d = 384: the largest cost of a
 * WARP search job before this, measured by a CPU profile of `npm run bench -- peers`).
 */
const centroidSums = new WeakMap<Float32Array, number>();
const codecSums = new WeakMap<WarpCodec, number>();

function memo<K extends object>(cache: WeakMap<K, number>, key: K, f: (k: K) => number): number {
  let v = cache.get(key);
  if (v === undefined) {
    v = f(key);
    cache.set(key, v);
  }
  return v;
}

/**
 * The collection-wide list sizes summed over a set of directories, kept for the last sets seen
 * (keyed by their first directory; the cache keeps one directory object per segment layout, so the
 * same objects mean the same sizes): K x segments additions per search otherwise (82k at K = 8,192
 * over 10 segments), for sums that change only when a commit changes the segments.
 */
const sizeSums = new WeakMap<WarpDirectory, { dirs: readonly WarpDirectory[]; sizes: Float64Array }>();

function listSizesOf(dirs: readonly WarpDirectory[]): Float64Array {
  const kept = sizeSums.get(dirs[0]);
  if (kept && kept.dirs.length === dirs.length && kept.dirs.every((d, i) => d === dirs[i])) return kept.sizes;
  const sizes = warpListSizes(dirs);
  sizeSums.set(dirs[0], { dirs: [...dirs], sizes });
  return sizes;
}

/**
 * Lookup-table buffers of finished scans, taken by the next one (a scan holds its own while it
 * runs): a fresh 2-6 MB Float32Array per search was allocated, zeroed and collected per query.
 * At most KEPT_TABLES of at most KEPT_TABLE_BYTES each (concurrent searches beyond that allocate).
 */
const spareTables: Float32Array[] = [];
const KEPT_TABLES = 2;
const KEPT_TABLE_BYTES = 16 << 20;

/**
 * Centroids per query token asked of `centroidTop` first (at least nprobe, at most the imputation's
 * bound): enough for the imputation's walk of nearly every query (on full Vaswani, t' = 2,000 tokens
 * over lists of ~70, the longest walk of a query's tokens ended at positions 22-43 for all 93
 * queries); the others ask again for the whole bound (a second GEMM). t' and the lists' mean size
 * both grow as the square root of the tokens under PLAID's rule for K, so the walk stays this short.
 */
const FIRST_TOP = 48;

/** One turn of the event loop (timers and I/O due run first). */
function yieldToIo(): Promise<void> {
  return new Promise((r) => setImmediate(r));
}

/**
 * Hands the values of `reads` to `take` in batches as they arrive: each batch is every value
 * arrived since the last one was taken (ascending by index), taken once the previous batch's
 * `take` finished (the first one turn of the event loop after the first arrival, so reads
 * answered from memory make one batch); `pending()` says whether reads are still in flight. A read that rejects
 * rejects this at once (as Promise.all would; the other reads go on, their results unused).
 */
export async function inArrivalBatches<T>(reads: readonly Promise<T>[], take: (ready: number[], values: readonly T[], pending: () => boolean) => Promise<void>): Promise<void> {
  const values = new Array<T>(reads.length);
  let ready: number[] = [];
  let error: { err: unknown } | undefined;
  let wake: (() => void) | undefined;
  let arrived = 0;
  const pending = () => arrived < reads.length;
  reads.forEach((p, k) =>
    p.then(
      (v) => {
        values[k] = v;
        ready.push(k);
        arrived++;
        wake?.();
      },
      (err: unknown) => {
        error ??= { err };
        wake?.();
      },
    ),
  );
  let taken = 0;
  while (taken < reads.length) {
    if (ready.length === 0 && !error) await new Promise<void>((r) => (wake = r));
    wake = undefined;
    // reads still in flight: one turn of the event loop first, so those answered from memory (a warm
    // scorer's hot lists, settled a few promise steps apart) join this batch rather than the next
    if (taken === 0 && pending() && !error) await yieldToIo();
    if (error) throw error.err;
    const batch = ready.sort((a, b) => a - b);
    ready = [];
    taken += batch.length;
    await take(batch, values, pending);
  }
}

/** The imputation's bound: centroids per query token ranked (at least nprobe, at most K). */
function boundOf(nprobe: number, K: number): number {
  return Math.max(nprobe, Math.min(K, WARP_DEFAULT_BOUND));
}

/** Centroids per query token asked of centroidTop first: at least nprobe, at most the bound k. */
function firstTopOf(nprobe: number, k: number, firstTop: number | undefined): number {
  return Math.max(nprobe, Math.min(k, firstTop ?? FIRST_TOP));
}

/** The segments of one centroid epoch, with what their queries need. */
interface EpochGroup {
  epoch: number;
  centroids: Float32Array;
  codec: WarpCodec;
  nprobe: number;
  /** indexes into plan.parts */
  parts: number[];
  listSizes: Float64Array;
  /** t' of the imputation (opts.tPrime, else warpTPrime of the sizes' sum) */
  tPrime: number;
  /** The first query's centroid stage, computed while the directories were read (its index in `queries`). */
  early?: { qi: number; stage: CentroidStage };
}

/** A query's centroid stage for warpQuery: the top centroids per token (opts.centroidTop) or Q C^T. */
type CentroidStage = { centroidTop: { k: number; ids: Uint32Array; scores: Float32Array } } | { centroidScores: Float32Array };

/** Centroids per slice of Q C^T computed between turns of the event loop (earlyCentroidScores). */
const SCORE_SLICE_CENTROIDS = 4096;

/**
 * Q C^T (warpCentroidScores, the same values: each a sum of its own) in slices of centroids, the
 * event loop yielded between slices while `pending()` (the directory reads it overlaps: their GETs
 * complete and are parsed meanwhile, and the next ones go out).
 */
export async function earlyCentroidScores(q: Float32Array, n: number, centroids: Float32Array, d: number, pending: () => boolean): Promise<Float32Array> {
  const K = centroids.length / d;
  if (K <= SCORE_SLICE_CENTROIDS) return warpCentroidScores(q, n, centroids, d);
  const out = new Float32Array(n * K);
  for (let c0 = 0; c0 < K; c0 += SCORE_SLICE_CENTROIDS) {
    const c1 = Math.min(K, c0 + SCORE_SLICE_CENTROIDS);
    const part = warpCentroidScores(q, n, centroids.subarray(c0 * d, c1 * d), d);
    for (let i = 0; i < n; i++) out.set(part.subarray(i * (c1 - c0), (i + 1) * (c1 - c0)), i * K + c0);
    if (pending()) await yieldToIo();
  }
  return out;
}

/**
 * Mode xtr over a generation's WARP search layouts (SPEC 3.5, ARCHITECTURE "Serving v2"): every
 * segment's directory (kept in memory by the cache), the collection-wide list sizes summed once
 * over the generation's segments (so every segment imputes the same m_i), then per query
 * warpQuery once (centroid scores, probes, imputation, tables), each segment's probed lists read
 * by coalesced byte ranges and scored from the packed codes (warpSegmentSearchSteps, the event
 * loop yielded between query tokens), and the exact merge across segments. A segment whose
 * layout is missing or corrupt (directory or a probed range) is named in `failed` and its hits
 * are dropped from every query (the degraded answer).
 *
 * Segments are grouped by centroid epoch (SegmentRef.warpEpoch): normally one group. While a
 * refit's rebuild catches up with a segment committed meanwhile, that segment is searched with its
 * own epoch's centroids, list sizes and imputation, and its hits merged with the rest (scores of
 * one definition, approximated against other centroids).
 */
export async function warpScan(reads: WarpReads, collection: Pick<Collection, 'tenantId' | 'id'>, manifest: CollectionManifest, plan: SearchPlan, queries: readonly { vectors: Float32Array; n: number }[], opts: WarpScanOptions): Promise<WarpScan> {
  const failed = new Map<number, SegmentUnavailableError>(opts.failed ?? []);
  const fail = (position: number, err: unknown) => {
    if (!(err instanceof SegmentUnavailableError)) throw err;
    failed.set(position, err);
  };
  // Each segment's first global key, as searchPlan numbers them (its place in the manifest).
  const bases = new Map<SegmentRef, number>();
  let base = 0;
  for (const ref of manifest.segments) {
    bases.set(ref, base);
    base += ref.documents;
  }
  const byEpoch = new Map<number, number[]>();
  plan.parts.forEach((part, s) => {
    if (failed.has(part.position)) return;
    const e = opts.epoch ? (part.ref.warpEpoch ?? 0) : 0;
    byEpoch.set(e, [...(byEpoch.get(e) ?? []), s]);
  });
  const dirs: (WarpDirectory | null)[] = plan.parts.map(() => null);
  const groups: EpochGroup[] = [];
  for (const [epoch, parts] of [...byEpoch].sort((a, b) => b[0] - a[0])) {
    const { centroids, codec } = epoch === 0 || !opts.epoch ? opts : await opts.epoch(epoch);
    const d = codec.dims;
    const K = centroids.length / d;
    const nprobe = Math.max(1, Math.min(opts.nprobe, K));
    const expect: Omit<WarpLayoutExpectations, 'documents'> = { centroidsChecksum: memo(centroidSums, centroids, centroidsChecksum), codecChecksum: memo(codecSums, codec, warpCodecChecksum), centroidCount: K, dims: d, bits: codec.bits };
    let reading = true;
    const dirsRead = Promise.all(
      parts.map((s) => reads.warpDirectory(collection, plan.parts[s].ref, { ...expect, documents: plan.parts[s].ref.documents }).catch((err: unknown) => (fail(plan.parts[s].position, err), null))),
    ).finally(() => (reading = false));
    // While the directories are read (a cold scorer's first GETs), the first query's centroid stage
    // (Q C^T over every centroid, or the given top-k): it needs no directory, only the imputation does.
    const qi = queries.findIndex((q) => q.n > 0);
    let early: Promise<CentroidStage> | undefined;
    if (qi >= 0) {
      const q = queries[qi];
      // the first TopK's size (the directories' list sizes decide afterwards whether it suffices)
      const first = firstTopOf(nprobe, boundOf(nprobe, K), opts.firstTop);
      early = opts.centroidTop
        ? opts.centroidTop(q.vectors, q.n, centroids, d, first).then((top) => ({ centroidTop: { k: first, ...top } }))
        : earlyCentroidScores(q.vectors, q.n, centroids, d, () => reading).then((centroidScores) => ({ centroidScores }));
      early.catch(() => undefined); // awaited below, after the directories
    }
    const got = await dirsRead;
    const stage = early && (await early);
    got.forEach((dir, k) => (dirs[parts[k]] = dir));
    const readable = got.filter((x): x is WarpDirectory => x !== null);
    // Collection-wide sizes (of the epoch's segments), once per search (not per query, not per segment).
    const listSizes = opts.listSizes?.(epoch) ?? (readable.length > 0 ? listSizesOf(readable) : new Float64Array(K));
    groups.push({ epoch, centroids, codec, nprobe, parts, listSizes, tPrime: warpQueryTPrime(listSizes, opts.tPrime), early: stage ? { qi, stage } : undefined });
  }
  const readable = dirs.filter((x): x is WarpDirectory => x !== null);
  const newest = groups[0];
  const out: WarpScan = {
    hits: [], failed, queries: [], nprobe: newest?.nprobe ?? 0, centroids: newest ? newest.centroids.length / newest.codec.dims : 0, epochs: groups.length,
    segments: readable.length, layoutBytes: readable.reduce((n, x) => n + x.byteLength, 0),
  };
  const workspaces: WarpWorkspace[] = [];
  // A query's lookup tables (n x bytesPerToken x 256 float32: 2.75 MB at n = 14, d = 384, b = 4), kept for the next scan.
  let tables: Float32Array | undefined = spareTables.pop();
  const perQuery: (SegmentHits | null)[][] = [];
  try {
    for (const [qi, q] of queries.entries()) {
      if (q.n === 0) {
        perQuery.push([]);
        out.queries.push({ bytesRead: 0, bytesFetched: 0, ranges: 0, probed: 0 });
        continue;
      }
      const stats: WarpScanQueryStats = { bytesRead: 0, bytesFetched: 0, ranges: 0, probed: 0 };
      const hits: (SegmentHits | null)[] = plan.parts.map(() => null);
      for (const g of groups) {
        const K = g.centroids.length / g.codec.dims;
        const k = boundOf(g.nprobe, K);
        // The best FIRST_TOP centroids first (ONNX Runtime's TopK costs ~0.35 ms more at k = 128 than at 48, n = 14, K = 8,192):
        // when every token's imputation walk ends within them, the query is the same as with all k (warpTopSuffices); else all k.
        const first = firstTopOf(g.nprobe, k, opts.firstTop);
        let stage: CentroidStage | undefined = g.early?.qi === qi ? g.early.stage : opts.centroidTop ? { centroidTop: { k: first, ...(await opts.centroidTop(q.vectors, q.n, g.centroids, g.codec.dims, first)) } } : undefined;
        if (opts.centroidTop && stage && 'centroidTop' in stage && stage.centroidTop.k < k && !warpTopSuffices(stage.centroidTop.ids, q.n, stage.centroidTop.k, g.listSizes, g.tPrime)) {
          stage = { centroidTop: { k, ...(await opts.centroidTop(q.vectors, q.n, g.centroids, g.codec.dims, k)) } };
        }
        // The buffer for the query's tables, grown when too small and kept: the tables are built into it only where the JavaScript path runs (the resident scan builds each token's in the WebAssembly module).
        const need = q.n * warpCodeBytes(g.codec.dims, g.codec.bits) * 256;
        if (!tables || tables.length < need) tables = new Float32Array(need);
        const query = warpQuery(q.vectors, q.n, g.centroids, g.codec, g.listSizes, { nprobe: g.nprobe, tPrime: g.tPrime, tables, ...stage, ...(stage && 'centroidTop' in stage ? { bound: stage.centroidTop.k } : {}) });
        const probed = warpProbedCentroids(query);
        stats.probed += probed.length;
        // The probed ranges of every segment requested at once (reads overlap); each segment scored as
        // soon as its lists have arrived, with whichever others have arrived by then, while the rest
        // are still in flight (a cold scorer's GETs and its scoring overlap).
        const reading = g.parts.map((s): Promise<WarpListReads | null> => {
          const part = plan.parts[s];
          const dir = dirs[s];
          if (!dir || failed.has(part.position)) return Promise.resolve(null);
          return reads.warpLists(collection, part.ref, dir, probed).catch((err: unknown) => (fail(part.position, err), null));
        });
        await inArrivalBatches(reading, async (ready, lists, pending) => {
          // The arrived readable segments of the epoch scored query token by query token (warpSegmentsSearchSteps: a token's
          // tables stay cached over the batch's segments; each segment's hits are its own whatever the batch).
          const read: number[] = [];
          const segs: WarpSegment[] = [];
          for (const k of ready) {
            const got = lists[k];
            if (!got) continue;
            const s = g.parts[k];
            const part = plan.parts[s];
            stats.bytesRead += got.bytes;
            stats.bytesFetched += got.fetched;
            stats.ranges += got.ranges;
            read.push(s);
            segs.push({ documents: dirs[s]!.documents, docBase: bases.get(part.ref)!, lists: got.lists, mask: opts.masks ? opts.masks[s] : part.live });
          }
          if (segs.length === 0) return;
          // While other segments' reads are in flight, the event loop is yielded after every step (a query token) so their GETs complete and the next ones go out.
          const got = await runStepsYielding(warpSegmentsSearchSteps(query, segs, { topN: opts.topN, workspaces }), () => (pending() ? yieldToIo() : opts.yieldEvery()));
          read.forEach((s, k) => (hits[s] = got[k]));
        });
      }
      perQuery.push(hits);
      out.queries.push(stats);
    }
  } finally {
    if (tables && tables.byteLength <= KEPT_TABLE_BYTES && spareTables.length < KEPT_TABLES) spareTables.push(tables);
  }
  // Segments that failed in any query are left out of every query's answer (one degraded answer, one list of unavailable segments).
  queries.forEach((q, qi) => {
    if (q.n === 0) {
      out.hits.push(null);
      return;
    }
    const segs = plan.parts.map((part, s): SegmentHits => {
      const h = perQuery[qi][s];
      return h && !failed.has(part.position) ? h : { docBase: bases.get(part.ref)!, docs: new Uint32Array(0), scores: new Float64Array(0) };
    });
    out.hits.push(mergeHits(segs, opts.topN));
  });
  return out;
}
