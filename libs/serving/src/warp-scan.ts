import type { Collection, CollectionManifest, SegmentRef } from '@lateral/shared';
import {
  WarpWorkspace,
  centroidsChecksum,
  mergeHits,
  warpCodecChecksum,
  warpListSizes,
  warpProbedCentroids,
  warpQuery,
  warpSegmentSearchSteps,
  type Hit,
  type SegmentHits,
  type WarpCodec,
  type WarpDirectory,
  type WarpLayoutExpectations,
} from '@lateral/search';
import { runStepsYielding } from './event-loop';
import { SegmentUnavailableError, type SearchPlan } from './search-plan';
import type { SegmentCache } from './segment-cache';

/** What a WARP scan reads through (SegmentCache). */
export type WarpReads = Pick<SegmentCache, 'warpDirectory' | 'warpLists'>;

export interface WarpScanOptions {
  /** The collection's IVF centroids (K x dims) and WARP codec for the generation's codec version. */
  centroids: Float32Array;
  codec: WarpCodec;
  /** Lists probed per query token (clamped to K, as XTR's nprobe). */
  nprobe: number;
  /** Hits per query. */
  topN: number;
  yieldEvery: () => Promise<void>;
}

/** What one query read. */
export interface WarpScanQueryStats {
  /** Bytes of list ranges read over every segment. */
  bytesRead: number;
  /** Ranged reads (coalesced) over every segment. */
  ranges: number;
  /** Distinct centroids probed (any query token). */
  probed: number;
}

export interface WarpScan {
  /** Per query: its merged hits (`segment` = the part's index in plan.parts), or null (no tokens). */
  hits: (Hit[] | null)[];
  /** Segments (manifest position) whose layout could not be read: named, the rest served. */
  failed: Map<number, SegmentUnavailableError>;
  queries: WarpScanQueryStats[];
  /** nprobe after clamping to K. */
  nprobe: number;
  /** Segments whose directory was read (the scan's segments). */
  segments: number;
  /** Bytes of the scanned segments' layout objects (their directories say). */
  layoutBytes: number;
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
 */
export async function warpScan(reads: WarpReads, collection: Pick<Collection, 'tenantId' | 'id'>, manifest: CollectionManifest, plan: SearchPlan, queries: readonly { vectors: Float32Array; n: number }[], opts: WarpScanOptions): Promise<WarpScan> {
  const { centroids, codec } = opts;
  const d = codec.dims;
  const K = centroids.length / d;
  const nprobe = Math.max(1, Math.min(opts.nprobe, K));
  const failed = new Map<number, SegmentUnavailableError>();
  const fail = (position: number, err: unknown) => {
    if (!(err instanceof SegmentUnavailableError)) throw err;
    failed.set(position, err);
  };
  const expect: Omit<WarpLayoutExpectations, 'documents'> = { centroidsChecksum: centroidsChecksum(centroids), codecChecksum: warpCodecChecksum(codec), centroidCount: K, dims: d, bits: codec.bits };
  // Each segment's first global key, as searchPlan numbers them (its place in the manifest).
  const bases = new Map<SegmentRef, number>();
  let base = 0;
  for (const ref of manifest.segments) {
    bases.set(ref, base);
    base += ref.documents;
  }
  const dirs: (WarpDirectory | null)[] = await Promise.all(
    plan.parts.map((part) => reads.warpDirectory(collection, part.ref, { ...expect, documents: part.ref.documents }).catch((err: unknown) => (fail(part.position, err), null))),
  );
  const readable = dirs.filter((x): x is WarpDirectory => x !== null);
  // Collection-wide sizes, once per search (not per query, not per segment).
  const listSizes = readable.length > 0 ? warpListSizes(readable) : new Float64Array(K);
  const out: WarpScan = { hits: [], failed, queries: [], nprobe, segments: readable.length, layoutBytes: readable.reduce((n, x) => n + x.byteLength, 0) };
  const workspace = new WarpWorkspace();
  let tables: Float32Array | undefined;
  const perQuery: (SegmentHits | null)[][] = [];
  for (const q of queries) {
    if (q.n === 0) {
      perQuery.push([]);
      out.queries.push({ bytesRead: 0, ranges: 0, probed: 0 });
      continue;
    }
    const query = warpQuery(q.vectors, q.n, centroids, codec, listSizes, { nprobe, tables });
    tables = query.tables;
    const probed = warpProbedCentroids(query);
    const stats: WarpScanQueryStats = { bytesRead: 0, ranges: 0, probed: probed.length };
    // The probed ranges of every segment at once (reads overlap), then the segments scored in turn.
    const lists = await Promise.all(
      plan.parts.map((part, s) => {
        const dir = dirs[s];
        if (!dir || failed.has(part.position)) return null;
        return reads.warpLists(collection, part.ref, dir, probed).catch((err: unknown) => (fail(part.position, err), null));
      }),
    );
    const hits: (SegmentHits | null)[] = [];
    for (const [s, part] of plan.parts.entries()) {
      const got = lists[s];
      if (!got) {
        hits.push(null);
        continue;
      }
      stats.bytesRead += got.bytes;
      stats.ranges += got.ranges;
      hits.push(await runStepsYielding(warpSegmentSearchSteps(query, { documents: dirs[s]!.documents, docBase: bases.get(part.ref)!, lists: got.lists, mask: part.live }, { topN: opts.topN, workspace }), opts.yieldEvery));
    }
    perQuery.push(hits);
    out.queries.push(stats);
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
