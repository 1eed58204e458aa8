import { s3Keys, type CollectionManifest, type SegmentRef } from '@lateral/shared';
import { adjustBm25Stats, deserializeBm25Stats, deserializeSegmentIndex, documentsBm25Stats, segmentBm25Stats, serializeBm25Stats, type Bm25Stats, type SegmentIndex } from '@lateral/search';
import type { GenerationRepository, Logger, ObjectStore } from '@lateral/infra';

/** What writing a generation's BM25 statistics touches. */
export interface Bm25GenerationStatsDeps {
  store: Pick<ObjectStore, 'get' | 'put' | 'list' | 'delete'>;
  generations: Pick<GenerationRepository, 'manifest'>;
  logger: Logger;
}

/** Statistics objects kept below the newest (a search still on an older generation finds its own). */
export const BM25_STATS_KEPT_BEHIND = 2;

const EMPTY: Bm25Stats = { documents: 0, totalLength: 0, terms: new Int32Array(0), df: new Uint32Array(0) };

/** The generation a statistics key names (`.../g0000000012.lb25` -> 12), or NaN. */
function generationOfKey(key: string): number {
  const m = /\/g(\d+)\.lb25$/.exec(key);
  return m ? Number(m[1]) : NaN;
}

/**
 * Writes the BM25 statistics of `generation` (its live documents' N, total length and df per
 * term: LB25, `s3Keys.bm25Stats`), so its searches read only their own terms' postings (SPEC 3.6).
 * Carried forward from the newest earlier generation that has statistics: segments (by batch: a
 * re-compressed batch holds the same documents) that left the generation are subtracted, new ones
 * added, documents tombstoned since (deletes, later ingests of their ids) subtracted, each from its
 * segment index; a merge's inputs leave and its output (their live documents) comes, so the sums
 * do not change. Without an earlier object (the first commit, or collections from before) they are
 * summed over every segment once. Idempotent and deterministic: two writers of one generation
 * write the same bytes. Statistics more than BM25_STATS_KEPT_BEHIND generations old are removed.
 * Returns false when the generation's manifest is gone (nothing written).
 */
export async function writeBm25GenerationStats(deps: Bm25GenerationStatsDeps, tenantId: string, collectionId: string, generation: number): Promise<boolean> {
  const manifest = await deps.generations.manifest(tenantId, collectionId, generation);
  if (!manifest) return false;
  const listed = (await deps.store.list(s3Keys.bm25StatsPrefix(tenantId, collectionId)))
    .map((o) => ({ key: o.key, generation: generationOfKey(o.key) }))
    .filter((o) => Number.isInteger(o.generation));
  if (listed.some((o) => o.generation === generation)) return true; // written already
  const indexes = new Map<string, Promise<SegmentIndex>>();
  const indexOf = (ref: SegmentRef) => {
    const key = s3Keys.segmentIndex(tenantId, collectionId, ref.batchId, ref.codecVersion);
    let p = indexes.get(key);
    if (!p) {
      p = (async () => {
        const bytes = await deps.store.get(key);
        if (!bytes) throw new Error(`the index of segment ${ref.key} is missing from S3 (${key})`);
        return deserializeSegmentIndex(bytes, key, { documents: ref.documents });
      })();
      indexes.set(key, p);
    }
    return p;
  };
  let stats: Bm25Stats | null = null;
  // The newest earlier generation with statistics and a manifest: carried forward.
  for (const prev of listed.filter((o) => o.generation < generation).sort((a, b) => b.generation - a.generation).slice(0, 1)) {
    try {
      const bytes = await deps.store.get(prev.key);
      const from = bytes ? await deps.generations.manifest(tenantId, collectionId, prev.generation) : null;
      if (!bytes || !from) continue;
      stats = await carryForward(deserializeBm25Stats(bytes, prev.key).stats, from, manifest, indexOf);
    } catch (err) {
      // A corrupt object, counts that do not add up, an input's index already collected: summed afresh below.
      if (!(err instanceof Error)) throw err;
      deps.logger.warn(`BM25 statistics of ${collectionId} g${generation}: generation ${prev.generation}'s cannot be carried forward (${err.message}); summing every segment`);
    }
  }
  stats ??= await carryForward(EMPTY, { segments: [] }, manifest, indexOf);
  await deps.store.put(s3Keys.bm25Stats(tenantId, collectionId, generation), serializeBm25Stats(stats, generation));
  for (const o of listed) if (o.generation < generation - BM25_STATS_KEPT_BEHIND) await deps.store.delete(o.key);
  return true;
}

/** The live documents of a segment (its tombstones left out). */
function liveDocs(ref: SegmentRef): number[] {
  const dead = new Set(ref.tombstones ?? []);
  const out: number[] = [];
  for (let i = 0; i < ref.documents; i++) if (!dead.has(i)) out.push(i);
  return out;
}

/** A segment's live documents' statistics (all of its index when nothing is tombstoned). */
async function liveStats(ref: SegmentRef, indexOf: (ref: SegmentRef) => Promise<SegmentIndex>): Promise<Bm25Stats> {
  const index = await indexOf(ref);
  return ref.tombstones && ref.tombstones.length > 0 ? documentsBm25Stats(index, liveDocs(ref)) : segmentBm25Stats(index);
}

/** `base` (the statistics of `from`) carried to `to`: the segments' changes by batch, each from its index. */
async function carryForward(base: Bm25Stats, from: Pick<CollectionManifest, 'segments'>, to: Pick<CollectionManifest, 'segments'>, indexOf: (ref: SegmentRef) => Promise<SegmentIndex>): Promise<Bm25Stats> {
  const before = new Map(from.segments.map((s) => [s.batchId, s]));
  const after = new Map(to.segments.map((s) => [s.batchId, s]));
  const add: Bm25Stats[] = [];
  const remove: Bm25Stats[] = [];
  for (const [batch, ref] of before) if (!after.has(batch)) remove.push(await liveStats(ref, indexOf));
  for (const [batch, ref] of after) {
    const old = before.get(batch);
    if (!old) {
      add.push(await liveStats(ref, indexOf));
      continue;
    }
    if (old.documents !== ref.documents) {
      // Not the same documents (never written so, but counted exactly): out with the old, in with the new.
      remove.push(await liveStats(old, indexOf));
      add.push(await liveStats(ref, indexOf));
      continue;
    }
    const was = new Set(old.tombstones ?? []);
    const is = new Set(ref.tombstones ?? []);
    const died = [...is].filter((d) => !was.has(d));
    const revived = [...was].filter((d) => !is.has(d));
    if (died.length > 0) remove.push(documentsBm25Stats(await indexOf(ref), died));
    if (revived.length > 0) add.push(documentsBm25Stats(await indexOf(ref), revived));
  }
  return add.length === 0 && remove.length === 0 ? base : adjustBm25Stats(base, add, remove);
}
