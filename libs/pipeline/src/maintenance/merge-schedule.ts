import { QueueName, collectionShards, mergeDedupId, mergeJobId, warpLayoutOf, type Collection, type CollectionManifest, type MergePayload } from '@lateral/shared';
import type { JobQueues } from '@lateral/infra';
import type { JobsOptions } from 'bullmq';
import { chooseMerge, type MergePolicySettings } from './merge-policy';

/**
 * How background merges are scheduled: one pending merge per collection.
 *
 * Before, every committed generation queued a merge job of its own (job id per generation), and
 * one merge runs per collection at a time (the merge lease): behind a long merge the jobs piled up
 * (110 waiting at the end of a 30,000-document run, 682 in a 171,000-document one), each to run
 * later on a generation long gone, most of them finding nothing to merge. Now every background
 * merge request (after a commit, a delete, a merge) is added with BullMQ's deduplication keyed by
 * the collection (`mergeDedupId`) in its `keepLastIfActive` mode:
 * - while a merge of the collection waits (or is delayed), a later request is absorbed by it: it
 *   reads the newest generation when it starts, so it serves every request made before;
 * - while one runs, a request is kept aside (one per collection, the latest) and becomes a job when
 *   the running one completes or fails for good: a commit that lands during a merge, after the
 *   merge read the generation, still leads to a merge after it;
 * - so a collection has at most one merge running and one waiting (the lease still guards merges
 *   asked through the API, re-indexes, and jobs of earlier versions).
 * A merge job that finishes asks again only when the policy still wants a merge on the newest
 * generation it saw (`mergeDue`; its result's `again`), e.g. its output filled the next tier.
 * Job ids stay one per generation asked on (`mergeJobId`): a deduplicated request creates no job,
 * so an id is never added twice.
 */
export function mergeJobOptions(tenantId: string, collectionId: string, delayMs = 0): JobsOptions {
  return { deduplication: { id: mergeDedupId(tenantId, collectionId), keepLastIfActive: true }, ...(delayMs > 0 ? { delay: delayMs } : {}) };
}

/**
 * Asks for a background merge of a collection (a commit's, a delete's or a merge's follow-up),
 * deduplicated per collection (see above). `generation`: the generation the request was made on
 * (its job id, when it becomes a job). Returns the id of the job that will serve it: the new one,
 * the waiting one that absorbed it, or the running one after which it will run.
 */
export async function enqueueMerge(
  queues: Pick<JobQueues, 'add'>,
  tenantId: string,
  collectionId: string,
  trigger: MergePayload['trigger'],
  generation: number,
  opts: { delayMs?: number; suffix?: string } = {},
): Promise<string | undefined> {
  const job = await queues.add(QueueName.merge, `${mergeJobId(tenantId, collectionId, trigger, generation)}${opts.suffix ?? ''}`, { op: 'merge', tenantId, collectionId, trigger }, mergeJobOptions(tenantId, collectionId, opts.delayMs));
  return job.id;
}

/** The policy a collection's merges run with: the segment bound (maxSegments) only for WARP layouts, whose ranged reads grow with the segment count. */
export function mergePolicyFor(collection: Collection, policy: MergePolicySettings): MergePolicySettings {
  return warpLayoutOf(collection) ? policy : { ...policy, maxSegments: 0 };
}

/**
 * Whether the policy asks a merge on `manifest` (what the next merge job would find to do):
 * never while a re-compression is pending (it rewrites every segment; the merge job would answer
 * 'recompressing').
 */
export function mergeDue(collection: Collection, manifest: CollectionManifest | null, policy: MergePolicySettings): boolean {
  if (!manifest || collection.pending) return false;
  return chooseMerge(manifest.segments, collection.codecVersion, mergePolicyFor(collection, policy), collectionShards(collection)) !== null;
}

/**
 * What a job that committed a generation holds when it is done: the collection record it worked
 * from and the manifest it committed. The maintenance it schedules (merge and refit checks,
 * handlers.ts) decides on these instead of reading the record and the manifest again.
 */
export interface CommittedGeneration {
  collection: Collection;
  manifest: CollectionManifest;
}

/** A job's result (its return value, stored in Redis) beside what it committed (kept in the process). */
export interface CommitOutcome<R> {
  result: R;
  /** Null when the job committed nothing. */
  committed: CommittedGeneration | null;
}
