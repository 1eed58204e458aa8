import type { Job } from 'bullmq';
import { QueueName, shardWorkPrefix, type ScorerSpec, type SearchHit, type UnavailableSegment, type WarpSearchStats } from '@lateral/shared';
import { jobLogger, type ObjectStore, type ShardQueues } from '@lateral/infra';

/*
 * What the parent of a sharded re-rank or search (shard-fanout.ts) and its shard children
 * (shard-child.processor.ts) share: the job and coordinator shapes, each round's input and partial
 * result as they lie in S3, and the removal of a parent's shard work.
 */

/** List sizes of one centroid epoch: K counts (JSON numbers between a shard and the parent). */
export interface WarpEpochSizes {
  epoch: number;
  sizes: number[];
}

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
export async function dropShardWork(deps: { shardCoordinator: ShardCoordinatorDeps }, kind: RoundBase['kind'], tenantId: string, parentId: string): Promise<void> {
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

export interface RoundBase {
  kind: 'rerank' | 'search';
  tenantId: string;
  collectionId: string;
  parentId: string;
  shards: number;
  generation: number;
}

/** The re-rank round's input: the (expanded) queries with their distinct candidates, and the scorer each shard runs. */
export interface RerankInput {
  scorer: ScorerSpec;
  queries: { text: string; ids: string[]; first: (number | null)[] }[];
}

/** A shard's scores: per query, the candidates it holds (index into the query's ids) and their scores. */
export interface RerankPartial {
  found: { at: number[]; scores: number[] }[];
  /** Segments of the shard that could not be read, and the candidate ids they hold (not scored). */
  unavailable?: UnavailableSegment[];
  unavailableIds?: string[];
  rotated: boolean;
  loadMs: number;
  encodeQueriesMs: number;
  scoreMs: number;
}

/** Round 1 of a search, per query: the shard's BM25 statistics of the query terms and its merged XTR top-k' lists. */
export interface StatsPartial {
  queries: {
    bm25?: { documents: number; totalLength: number; terms: number[]; df: number[] };
    /** per query token: (score, global key, row) of the shard's top-k' entries, best first */
    xtr?: { scores: number[]; keys: number[]; rows: number[] }[];
  }[];
  /** WARP collections (usesWarp): the list sizes of the shard's segments per centroid epoch (warpPlanListSizes). */
  warp?: WarpEpochSizes[];
}

/** Round 2's input, per query: the global BM25 statistics and, for XTR, the imputation scores and each shard's surviving entries per query token. */
export interface SearchInput {
  queries: {
    bm25?: { documents: number; totalLength: number; terms: number[]; df: number[] };
    xtr?: { imputed: number[]; survivors: number[][] };
  }[];
  /** WARP collections: the collection-wide list sizes per centroid epoch (every shard's summed), which every shard's imputation reads. */
  warp?: WarpEpochSizes[];
}

export interface ShardHit extends SearchHit {
  key: number;
  /** WARP's exact final stage: this hit's exact MaxSim / query tokens, when it is among its shard's first `exact` (the parent orders by it: exactHead). */
  exactScore?: number;
}

/** Round 2: per query, the shard's ranked hits (hybrid: its two lists) and the reason a query has none. */
export interface HitsPartial {
  queries: { hits: ShardHit[]; second?: ShardHit[]; reason?: string }[];
  /** WARP searches: what the shard's scan read (the parent sums the shards' into the result's stats.warp). */
  warp?: WarpSearchStats;
  unavailable?: UnavailableSegment[];
  loadMs: number;
  encodeQueriesMs: number;
  searchMs: number;
}
