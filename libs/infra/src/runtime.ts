import path from 'node:path';
import type { Redis } from 'ioredis';
import { shardQueueName, type Config } from '@lateral/shared';
import { startEmbeddedRedis, redisReachable } from './embedded-services';
import { startEmbeddedS3Thread } from './s3-thread';
import { createLogger, type Logger } from './logger';
import { ObjectStore } from './object-store';
import { JobQueues, createRedis, waitReady } from './queues';
import { CollectionRepository } from './collection.repository';
import { GenerationRepository } from './generations.repository';
import { IngestionRepository } from './ingestions.repository';
import { IngestBacklogRepository } from './ingest-backlog.repository';
import { CodecArtifactRepository } from './codec-artifacts.repository';
import { IvfCentroidRepository } from './ivf-centroids.repository';
import { WarpCodecRepository } from './warp-codec.repository';
import { ServingCache } from './serving-cache';

export interface ResolvedServices {
  redisUrl: string;
  s3Endpoint: string | undefined;
  /** What this process started itself (empty when REDIS_URL and S3_ENDPOINT are used), e.g. "embedded redis-server redis://127.0.0.1:40123". */
  embedded: string[];
  /** Stops the embedded services this process started (S3 first, Redis last), logging each. */
  stop(): Promise<void>;
}

/**
 * The embedded defaults: start `redis-server` from PATH when REDIS_URL is unset or unreachable,
 * and the embedded S3 server (in a thread of its own) when S3_ENDPOINT is unset. Used by the demo, the tests and the
 * all-in-one entry; the standalone apps require both to be configured.
 *
 * Both keep their data under DATA_DIR, so `npm start` survives a restart: S3 objects (collections,
 * generations, segments, ingestions) in DATA_DIR/s3, Redis (queues, jobs, caches) as an
 * append-only file in DATA_DIR/redis.
 */
export async function resolveServices(config: Config, logger: Logger): Promise<ResolvedServices> {
  const started: { name: string; stop: () => Promise<void> }[] = [];
  try {
    let redisUrl = config.REDIS_URL;
    if (!redisUrl || !(await redisReachable(redisUrl))) {
      if (redisUrl) logger.warn(`REDIS_URL ${redisUrl} is not reachable; starting an embedded redis-server instead`);
      const redis = await startEmbeddedRedis({ dir: path.join(config.DATA_DIR, 'redis'), logger, persistent: true });
      redisUrl = redis.url;
      started.push({ name: `embedded redis-server ${redis.url} (pid ${redis.pid}, append-only file under ${redis.dir})`, stop: redis.stop });
    }
    let s3Endpoint = config.S3_ENDPOINT;
    if (!s3Endpoint) {
      const dir = path.join(config.DATA_DIR, 's3');
      // In a thread of its own, off the event loop of the API and the workers (s3-thread.ts).
      const s3 = await startEmbeddedS3Thread({
        dir,
        bucket: config.S3_BUCKET,
        accessKeyId: config.S3_ACCESS_KEY_ID,
        secretAccessKey: config.S3_SECRET_ACCESS_KEY,
        logger,
      });
      s3Endpoint = s3.endpoint;
      started.push({ name: `in-process S3 server ${s3.endpoint} (its own thread; folder ${path.resolve(dir)})`, stop: s3.stop });
    }
    let stopping: Promise<void> | undefined;
    return {
      redisUrl,
      s3Endpoint,
      embedded: started.map((s) => s.name),
      stop: () =>
        (stopping ??= (async () => {
          for (const s of [...started].reverse()) {
            logger.info(`stopping ${s.name}`);
            await s.stop();
          }
        })()),
    };
  } catch (err) {
    // Redis started but S3 did not: do not leave Redis behind.
    for (const s of started.reverse()) await s.stop().catch(() => undefined);
    throw err;
  }
}

export function requireServices(config: Config): ResolvedServices {
  if (!config.REDIS_URL) throw new Error('REDIS_URL is required for a standalone app (use `npm start` for the all-in-one process with embedded services)');
  if (!config.S3_ENDPOINT && !process.env.AWS_REGION && config.S3_REGION === 'us-east-1' && config.S3_ACCESS_KEY_ID === 'S3RVER') {
    throw new Error('S3_ENDPOINT (or real AWS credentials via S3_ACCESS_KEY_ID / S3_SECRET_ACCESS_KEY) is required for a standalone app');
  }
  return { redisUrl: config.REDIS_URL, s3Endpoint: config.S3_ENDPOINT, embedded: [], stop: async () => undefined };
}

/**
 * A process's connections and repositories, built once. S3 holds every collection, generation
 * and ingestion; Redis (`redis`, `queues`) holds the job queues and caches only.
 */
export interface Runtime {
  config: Config;
  services: ResolvedServices;
  logger: Logger;
  store: ObjectStore;
  /** The producer connection: queues and the health check. */
  redis: Redis;
  queues: JobQueues;
  collections: CollectionRepository;
  generations: GenerationRepository;
  /** Collection records and current manifests for search and re-rank, kept fresh by the repositories' writes (serving-cache.ts). */
  serving: ServingCache;
  ingestions: IngestionRepository;
  /** Ingest batches accepted and not yet committed, per collection (ingest back-pressure: ingest-backlog.repository.ts). */
  ingestBacklog: IngestBacklogRepository;
  codecs: CodecArtifactRepository;
  ivf: IvfCentroidRepository;
  /** WARP residual codecs (collections with `search.layout` 'warp'). */
  warpCodecs: WarpCodecRepository;
  close(): Promise<void>;
}

/** Connects the shared resources of a process once. */
export async function createRuntime(config: Config, services: ResolvedServices, logger: Logger = createLogger(config.LOG_LEVEL)): Promise<Runtime> {
  const store = ObjectStore.fromConfig(config, services.s3Endpoint, logger.child('s3'));
  await store.ensureBucket();
  const redis = createRedis(services.redisUrl, 'producer', logger, { commandTimeoutMs: config.REDIS_COMMAND_TIMEOUT_MS, connectTimeoutMs: config.REDIS_CONNECT_TIMEOUT_MS });
  await waitReady(redis);
  // The shard queues' counts too (health, admin, lateral_queue_jobs), as far as collections may have shards.
  const queues = new JobQueues(redis, config.REDIS_PREFIX, config.JOB_ATTEMPTS, Array.from({ length: config.COLLECTION_MAX_SHARDS }, (_, i) => shardQueueName(i)));
  // Every change of a record or a generation replaces the collection's serving token (ServingCache).
  const bump = (tenantId: string, collectionId: string) => ServingCache.bump(redis, config.REDIS_PREFIX, tenantId, collectionId);
  const collections = new CollectionRepository(store, bump);
  const generations = new GenerationRepository(store, { onCommit: bump });
  return {
    config,
    services,
    logger,
    store,
    redis,
    queues,
    collections,
    generations,
    serving: new ServingCache(redis, config.REDIS_PREFIX, collections, generations),
    ingestions: new IngestionRepository(store),
    ingestBacklog: new IngestBacklogRepository(redis, config.REDIS_PREFIX),
    codecs: new CodecArtifactRepository(store, redis, config.REDIS_PREFIX),
    ivf: new IvfCentroidRepository(store),
    warpCodecs: new WarpCodecRepository(store),
    close: async () => {
      await queues.close();
      redis.disconnect();
      store.destroy();
    },
  };
}
