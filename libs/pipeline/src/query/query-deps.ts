import type { CollectionRepository, GenerationRepository, IvfCentroidRepository, ObjectStore, WarpCodecRepository } from '@lateral/infra';
import type { ScorerResources } from '@lateral/kernels';
import type { Bm25StatsCache, HitDocumentDeps, SegmentCache } from '@lateral/serving';
import type { EncoderProvider } from '../encoders';
import type { ShardCoordinatorDeps } from './shard-rounds';

/*
 * What the query handlers touch, in one place: re-rank and search run in one process or as the
 * parent and children of a fan-out over shard queues (shard-fanout.ts, shard-child.processor.ts), and
 * every one of those reads the same repositories.
 */

/** What a re-rank touches (rerank-ids.ts, rerank-texts.ts, the shard children). */
export interface RerankDeps extends HitDocumentDeps {
  store: Pick<ObjectStore, 'getJson' | 'putJson'>;
  collections: Pick<CollectionRepository, 'get'>;
  generations: Pick<GenerationRepository, 'manifest'>;
  encoders: EncoderProvider;
  /** Builds the view over the request's candidates from the cached segments holding them. */
  views: Pick<SegmentCache, 'view'>;
  scorers: ScorerResources;
  /** Fans re-ranks of collections with several shards out to the shard queues (absent: every segment is scored here). */
  shardCoordinator?: ShardCoordinatorDeps;
}

/** What a search touches (search.processor.ts, the shard children). */
export interface SearchDeps extends HitDocumentDeps {
  store: Pick<ObjectStore, 'getJson' | 'putJson'>;
  collections: Pick<CollectionRepository, 'get'>;
  generations: Pick<GenerationRepository, 'manifest'>;
  ivf: Pick<IvfCentroidRepository, 'get'>;
  /** WARP residual codecs (mode xtr on collections with `search.layout` 'warp'). */
  warpCodecs?: Pick<WarpCodecRepository, 'get'>;
  encoders: EncoderProvider;
  /** Segments with their indexes and live documents, WARP layouts' directories and lists, WARP's exact stage's document rows, and (second stage) views over candidates: one cache. */
  segments: Pick<SegmentCache, 'searchPlan' | 'view' | 'warpDirectory' | 'warpLists' | 'documentRows' | 'documentScores'>;
  scorers: ScorerResources;
  /** Fans searches of collections with several shards out to the shard queues (absent: every segment is searched here). */
  shardCoordinator?: ShardCoordinatorDeps;
  /** Generations' BM25 statistics (absent, or none for a generation: counted in a first walk over the indexes). */
  bm25Stats?: Pick<Bm25StatsCache, 'get'>;
}

/** What a shard child and the parent of a sharded job touch: both of the above, and the shard queues. */
export type ShardedDeps = RerankDeps & SearchDeps & { shardCoordinator: ShardCoordinatorDeps };
