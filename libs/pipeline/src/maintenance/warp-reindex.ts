import { s3Keys, warpLayoutOf, type Collection, type CollectionManifest, type PendingReindex, type SegmentRef } from '@lateral/shared';
import { ivfCentroidCount } from '@lateral/search';
import type { CollectionRepository, GenerationRepository, ObjectStore } from '@lateral/infra';
import { warpLayoutObject } from '../ingest/segment-indexer';
import { decoded, fitEpoch, liveTokens, type WarpRefitDeps } from './warp-refit';

/**
 * Re-indexing an IVF collection to WARP search layouts (POST /v1/collections/{id}/reindex sets
 * `Collection.reindex` and queues a merge job; the merge job runs this first, under the
 * collection's merge lease, so no merge or refit runs beside it):
 * 1. fits a centroid epoch for the layouts (`epoch` = the generation's newest + 1, so 1 for a
 *    collection that never had layouts): PLAID's rule on the live tokens of every segment (or
 *    IVF_CENTROIDS), and its residual codec at the asked bits, on a seeded sample of every
 *    segment, as a refit does (warp-refit.ts `fitEpoch`; conditional writes, so a replay reuses
 *    them), and a residual codec for epoch 0 (the segment index's centroids), which WARP's search
 *    reads whatever the segments' epochs. The epoch is recorded in `reindex.epoch`: from then on index jobs write the layouts
 *    of new segments at it and commits name it (`warpLayoutToWrite`);
 * 2. builds every live segment's layout at that epoch from its codes (decoded, assigned to the
 *    epoch's centroids, residuals packed: `warpLayoutObject`), skipping those already written,
 *    and commits generations moving the segments to the epoch (`SegmentRef.warpEpoch`), until
 *    every segment of the codec version is there (segments committed meanwhile are picked up);
 * 3. only then sets `search` to the WARP layout and drops `reindex`: searches read the segment
 *    index's IVF until this write, WARP's layouts after it.
 * A segment that cannot be read (missing or corrupt) leaves the re-index incomplete: `search` is
 * not set, and the next merge job (which may repair the segment) resumes where this one stopped.
 */
export interface WarpReindexDeps extends WarpRefitDeps {
  store: Pick<ObjectStore, 'get' | 'put' | 'exists'>;
  collections: Pick<CollectionRepository, 'get' | 'update'>;
  generations: Pick<GenerationRepository, 'commit' | 'manifest'>;
}

export interface WarpReindexOutcome {
  /** done: `search` is now the WARP layout; incomplete: some segments could not be read (named in `unreadable`), `reindex` stays. */
  status: 'done' | 'incomplete';
  bits: 2 | 4;
  /** The centroid epoch of the layouts (0: nothing was committed, the index jobs write them from now on). */
  epoch: number;
  centroids: number;
  /** Layouts this job built (others were there already: written by index jobs, or by an earlier try). */
  built: number;
  /** Segments moved to the epoch. */
  segments: number;
  /** Segment keys that could not be read. */
  unreadable: string[];
  /** The last generation this job committed (0: none). */
  generation: number;
}

/** Passes over the newest generation for segments committed while the layouts were being built. */
const PASSES = 4;

/**
 * Runs the re-index `collection.reindex` asks for (see the file comment); null when none is
 * pending. Returns what it did; the collection record is updated in S3 (re-read it).
 */
export async function warpReindex(deps: WarpReindexDeps, collection: Collection, manifest: CollectionManifest): Promise<WarpReindexOutcome | null> {
  const asked = collection.reindex;
  if (!asked) return null;
  const tenantId = collection.tenantId;
  const collectionId = collection.id;
  if (warpLayoutOf(collection)) {
    // Already WARP (a replayed job after the switch): nothing left but the marker.
    await update(deps, collection, (c) => ({ ...c, reindex: undefined }));
    return null;
  }
  if (!deps.warpCodecs) throw new Error(`re-index of ${collectionId}: this merge worker was given no WARP codec repository`);
  const cv = collection.codecVersion;
  // A re-compression moved the collection to another codec version since the request: the layouts are built for the current one.
  let pending: PendingReindex = asked.codecVersion === cv ? asked : { search: asked.search, codecVersion: cv, startedAt: asked.startedAt };
  const target: Collection = { ...collection, search: pending.search };
  const bits = pending.search.bits;
  const refs = manifest.segments.filter((s) => s.codecVersion === cv);
  if (refs.length === 0) {
    // Nothing committed at this codec version: the index jobs write the layouts from the switch on.
    await update(deps, collection, (c) => ({ ...c, search: pending.search, reindex: undefined }));
    deps.logger.info(`re-index of ${collectionId}: no segments yet; WARP search layouts (${bits} bits) from now on`);
    return { status: 'done', bits, epoch: 0, centroids: 0, built: 0, segments: 0, unreadable: [], generation: 0 };
  }
  const t0 = performance.now();
  let epoch = pending.epoch;
  if (epoch === undefined) {
    epoch = refs.reduce((e, s) => Math.max(e, s.warpEpoch ?? 0), 0) + 1;
    const tokens = refs.reduce((a, r) => a + liveTokens(r), 0);
    const k = Math.max(1, Math.min(tokens, deps.ivfCentroids > 0 ? deps.ivfCentroids : ivfCentroidCount(tokens)));
    await fitEpoch(deps, target, refs, k, epoch, bits);
    // Epoch 0's residual codec too, against the segment index's own centroids: WARP's search reads
    // epoch 0's centroids and codec whatever the segments' epochs (search.processor.ts), and a
    // segment committed without a layout (an index job that missed the re-index) is then named
    // unavailable, the rest served, until the next merge job builds its layout.
    const first = await deps.ivf.get(tenantId, collectionId, cv, 0);
    if (first && epoch > 0) await fitEpoch(deps, target, refs, Math.min(first.k, refs.reduce((a, r) => a + liveTokens(r), 0)), 0, bits);
    pending = { ...pending, epoch };
    const e = epoch;
    // From here on index jobs write new segments' layouts at the epoch (warpLayoutToWrite).
    await update(deps, collection, (c) => ({ ...c, reindex: { ...pending, epoch: e } }));
  }
  const centroids = (await deps.ivf.get(tenantId, collectionId, cv, epoch))!.k;
  let built = 0;
  let moved = 0;
  let generation = 0;
  const unreadable = new Set<string>();
  let current = manifest;
  for (let pass = 0; pass < PASSES; pass++) {
    const todo = current.segments.filter((s) => s.codecVersion === cv && (s.warpEpoch ?? 0) !== epoch && !unreadable.has(s.key));
    if (todo.length === 0) break;
    const ready = new Map<string, SegmentRef>();
    for (const ref of todo) {
      const key = s3Keys.searchLayout(tenantId, collectionId, ref.batchId, cv, epoch);
      if (!(await deps.store.exists(key))) {
        const seg = await decoded(deps, target, ref);
        if (!seg) {
          unreadable.add(ref.key);
          continue;
        }
        await deps.store.put(key, await warpLayoutObject(deps, target, seg, cv, epoch));
        built++;
      }
      ready.set(ref.key, ref);
    }
    const e = epoch;
    const result = await deps.generations.commit(tenantId, collectionId, (segments, now) => {
      let changed = 0;
      const next = segments.map((s) => {
        const r = ready.get(s.key);
        if (!r || r.checksum !== s.checksum || (s.warpEpoch ?? 0) === e) return s;
        changed++;
        return { ...s, warpEpoch: e };
      });
      return changed ? { segments: next, codecVersion: now?.codecVersion ?? cv, documents: now?.documents } : null;
    });
    if (result.committed) {
      generation = result.manifest.generation;
      moved += ready.size;
    }
    current = result.manifest;
  }
  const left = current.segments.filter((s) => s.codecVersion === cv && (s.warpEpoch ?? 0) !== epoch);
  const seconds = ((performance.now() - t0) / 1000).toFixed(1);
  if (left.length > 0) {
    deps.logger.warn(
      `re-index of ${collectionId}: ${left.length} segment(s) without a layout at epoch ${epoch} (${[...unreadable].join(', ') || 'committed while it ran'}); searches stay on the IVF, the next merge job resumes`,
    );
    return { status: 'incomplete', bits, epoch, centroids, built, segments: moved, unreadable: [...unreadable], generation };
  }
  // Every live segment has its layout: XTR searches read them from this write on.
  await update(deps, collection, (c) => ({ ...c, search: pending.search, reindex: undefined }));
  deps.logger.info(`re-index of ${collectionId}: ${built} WARP layouts built at epoch ${epoch} (${centroids} centroids, ${bits} bits) in ${seconds} s; searches read them now`);
  return { status: 'done', bits, epoch, centroids, built, segments: moved, unreadable: [], generation };
}

/** Re-reads the record and writes `change` of it (the record may have changed since the job read it). */
async function update(deps: Pick<WarpReindexDeps, 'collections'>, collection: Collection, change: (c: Collection) => Collection): Promise<void> {
  const latest = (await deps.collections.get(collection.tenantId, collection.id)) ?? collection;
  await deps.collections.update(change(latest));
}
