import { PermanentJobError, QueueName, refitJobId, warpEpochOf, warpLayoutOf, type Collection, type CollectionManifest, type JobResults, type RefitPayload, type SegmentRef } from '@lateral/shared';
import { LeaseBusyError, type CollectionRepository, type GenerationRepository, type IvfCentroidRepository, type JobQueues, type ObjectStore } from '@lateral/infra';
import { collectGarbage, type GcSettings } from './gc';
import type { CommittedGeneration } from './merge-schedule';
import { liveTokens, warpMaintain, warpRefitCentroids, type WarpRefitDeps } from './warp-refit';

/**
 * WARP refits as their own job (the refit queue; docs/scaling.md, "WARP centroids"). A refit
 * (k-means, codec, every segment's layout rebuilt) took tens of minutes at 171,000 documents; run
 * inside the merge job under the collection's merge lease it stopped every merge meanwhile, and
 * the segments piled up (657 against a bound of 12). Here it holds its own lease (one refit per
 * collection at a time) and none of the merge's:
 * - merges go on meanwhile at the generation's current epoch (the newest epoch its segments name,
 *   `warpEpochOf`: the refit's new epoch is named by no segment until the refit commits), merging
 *   their inputs' layouts list by list as before; a merge whose inputs are at mixed epochs (one
 *   committed before a refit's commit and one after) rebuilds its output's layout at the newest;
 * - the refit's commit is applied to the newest generation (GenerationRepository.commit re-runs it
 *   on a lost race): it moves the segments it rebuilt that are still listed; a segment merged away
 *   meanwhile is left out (its new layout goes to garbage collection), and a merge's output
 *   committed meanwhile (at the older epoch) is moved by the next round;
 * - rounds: after a pass the job looks again and rebuilds what is still at an older epoch and was
 *   not listed when the pass began (segments committed during it, or a merge's output whose inputs
 *   the pass had rebuilt), up to `rounds` passes; what is left is moved by a later refit job.
 */
export interface RefitDeps extends WarpRefitDeps {
  collections: Pick<CollectionRepository, 'get'>;
  generations: Pick<GenerationRepository, 'manifest' | 'commit'>;
  store: Pick<ObjectStore, 'get' | 'put' | 'list' | 'getJson' | 'delete'>;
  /** Garbage collection run at the end of the job (the replaced layouts); absent: none. */
  gc?: GcSettings;
  /** Runs `fn` holding the collection's refit lease (not the merge lease); LeaseBusyError: another refit holds it. */
  exclusive?: <T>(tenantId: string, collectionId: string, fn: () => Promise<T>) => Promise<T>;
  /** Passes one job makes at most (default REFIT_ROUNDS). */
  rounds?: number;
}

/** Passes a refit job makes at most: the first refits and moves the generation, each later one what was listed during the one before. */
export const REFIT_ROUNDS = 4;

type RefitResult = JobResults[QueueName.refit];

const nothing = (status: RefitResult['status'], epoch = 0): RefitResult => ({ status, epoch, centroids: 0, refitted: false, rebuilt: 0, rounds: 0, generation: 0, stale: 0 });

export async function refitProcessor(deps: RefitDeps, p: RefitPayload): Promise<RefitResult> {
  if (!deps.exclusive) return refit(deps, p);
  try {
    return await deps.exclusive(p.tenantId, p.collectionId, () => refit(deps, p));
  } catch (err) {
    // Another refit of the collection holds the lease: it does the same work (its rounds pick up what was committed since it started).
    if (!(err instanceof LeaseBusyError)) throw err;
    deps.logger.info(`WARP refit of ${p.tenantId}/${p.collectionId}: ${err.message}`);
    return nothing('busy', p.epoch);
  }
}

async function refit(deps: RefitDeps, p: RefitPayload): Promise<RefitResult> {
  const collection = await deps.collections.get(p.tenantId, p.collectionId);
  if (!collection) throw new PermanentJobError(`collection ${p.tenantId}/${p.collectionId} no longer exists`);
  // A re-compression rewrites every segment; a re-index builds the layouts itself (warp-reindex.ts, in the merge job).
  if (collection.pending) return nothing('recompressing', p.epoch);
  if (collection.reindex) return nothing('reindexing', p.epoch);
  const out: RefitResult = nothing('nothing-to-do', p.epoch);
  const maxRounds = deps.rounds ?? REFIT_ROUNDS;
  // Segments a round worked from (each was at the epoch or tried): a later round only for segments listed since.
  const tried = new Set<string>();
  let manifest = await deps.generations.manifest(p.tenantId, p.collectionId);
  while (manifest && out.rounds < maxRounds) {
    for (const s of manifest.segments) tried.add(s.key);
    const done = await warpMaintain(deps, collection, manifest);
    if (!done) break;
    out.status = 'done';
    out.rounds++;
    out.epoch = done.epoch;
    out.centroids = done.centroids;
    out.refitted ||= done.refitted;
    out.rebuilt += done.rebuilt;
    if (done.generation > 0) out.generation = done.generation;
    manifest = await deps.generations.manifest(p.tenantId, p.collectionId);
    // Left at an older epoch and new since the round began: committed meanwhile, or a merge's output (its inputs merged away before this round's commit).
    // (against the epoch this pass reached: a pass whose segments were all merged away committed nothing, and no segment names its epoch yet)
    if (!manifest || staleRefs(collection, manifest, out.epoch).every((r) => tried.has(r.key))) break;
  }
  if (manifest) out.stale = staleRefs(collection, manifest, out.epoch).length;
  if (deps.gc) await collectGarbage({ store: deps.store, generations: deps.generations, logger: deps.logger }, p.tenantId, p.collectionId, deps.gc);
  return out;
}

/** Segments of the collection's codec version whose layout is at an older epoch than the generation's newest (or `reached`, when newer). */
function staleRefs(collection: Collection, manifest: CollectionManifest, reached = 0): SegmentRef[] {
  const refs = manifest.segments.filter((s) => s.codecVersion === collection.codecVersion);
  const epoch = Math.max(reached, warpEpochOf(refs));
  return refs.filter((r) => (r.warpEpoch ?? 0) !== epoch);
}

/**
 * The epoch a refit job is due for on `manifest`, or null: the newest epoch + 1 when PLAID's rule
 * on the live tokens asks more centroids than it has, else the newest epoch when segments of an
 * older one are listed (committed during a refit, or a merge's output committed after it), else
 * null. Never for a collection without WARP layouts, being re-compressed or re-indexed.
 */
export async function warpRefitDue(
  deps: { ivf: Pick<IvfCentroidRepository, 'count'>; ivfCentroids: number },
  collection: Collection,
  manifest: CollectionManifest | null,
): Promise<number | null> {
  if (!manifest || !warpLayoutOf(collection) || collection.pending || collection.reindex) return null;
  const refs = manifest.segments.filter((s) => s.codecVersion === collection.codecVersion);
  if (refs.length === 0) return null;
  const epoch = warpEpochOf(refs);
  const k = await deps.ivf.count(collection.tenantId, collection.id, collection.codecVersion, epoch);
  if (k === null) return null;
  if (warpRefitCentroids(refs.reduce((a, r) => a + liveTokens(r), 0), k, deps.ivfCentroids) !== null) return epoch + 1;
  return refs.some((r) => (r.warpEpoch ?? 0) !== epoch) ? epoch : null;
}

/**
 * Queues a refit of the collection when one is due (warpRefitDue), called after committed
 * generations (commits, deletes, merges). The job id names the collection and the target epoch and
 * the job is removed once it ends (completed, or failed after its attempts), so a collection has at most one refit per epoch queued or
 * running, and a later commit can queue the next one. Returns the job id queued, or null.
 * `committed`: the record and the manifest the calling job committed (commit and delete jobs hold
 * both): decided on them, with no read of either; absent, both are read.
 */
export async function enqueueWarpRefit(
  deps: { collections: Pick<CollectionRepository, 'get'>; generations: Pick<GenerationRepository, 'manifest'>; ivf: Pick<IvfCentroidRepository, 'count'>; ivfCentroids: number },
  queues: Pick<JobQueues, 'add'>,
  tenantId: string,
  collectionId: string,
  committed?: CommittedGeneration,
): Promise<string | null> {
  const collection = committed ? committed.collection : await deps.collections.get(tenantId, collectionId);
  if (!collection) return null;
  const epoch = await warpRefitDue(deps, collection, committed ? committed.manifest : await deps.generations.manifest(tenantId, collectionId));
  if (epoch === null) return null;
  const jobId = refitJobId(tenantId, collectionId, epoch);
  // Removed when it ends, failed for good included (the worker logs the failure): a job kept under this id would stop every later one of the epoch.
  await queues.add(QueueName.refit, jobId, { tenantId, collectionId, epoch }, { removeOnComplete: true, removeOnFail: true });
  return jobId;
}
