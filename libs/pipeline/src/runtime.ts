import path from 'node:path';
import { QueueName, type Config } from '@lateral/shared';
import {
  CollectionRepository,
  JobQueues,
  ObjectStore,
  WorkerHost,
  createLogger,
  createRedis,
  redisReachable,
  startEmbeddedRedis,
  startEmbeddedS3,
  waitReady,
  type HandlerRegistry,
  type Logger,
} from '@lateral/infra';
import { encoderProvider, type PipelineContext } from './context';
import { encodeProcessor } from './encode.processor';
import { compressProcessor } from './compress.processor';
import { indexProcessor } from './index.processor';
import { rerankProcessor } from './rerank.processor';
import { CollectionViewCache } from './collection-view';
import { ScorerResources } from './scorers';
import { CodecArtifacts } from './codec-artifacts';
import { StaticEmbeddingsCache, generationSideInfo } from './static-embeddings';

export interface ResolvedServices {
  redisUrl: string;
  s3Endpoint: string | undefined;
  stop(): Promise<void>;
}

/**
 * The embedded defaults: start `redis-server` from PATH when REDIS_URL is unset or unreachable,
 * and the in-process S3 server when S3_ENDPOINT is unset. Used by the demo, the tests and the
 * all-in-one entry; the standalone apps require both to be configured.
 */
export async function resolveServices(config: Config, logger: Logger): Promise<ResolvedServices> {
  const stops: (() => Promise<void>)[] = [];
  let redisUrl = config.REDIS_URL;
  if (!redisUrl || !(await redisReachable(redisUrl))) {
    if (redisUrl) logger.warn(`REDIS_URL ${redisUrl} is not reachable; starting an embedded redis-server instead`);
    const redis = await startEmbeddedRedis({ dir: path.join(config.DATA_DIR, 'redis'), logger });
    redisUrl = redis.url;
    stops.push(redis.stop);
  }
  let s3Endpoint = config.S3_ENDPOINT;
  if (!s3Endpoint) {
    const s3 = await startEmbeddedS3({
      dir: path.join(config.DATA_DIR, 's3'),
      bucket: config.S3_BUCKET,
      accessKeyId: config.S3_ACCESS_KEY_ID,
      secretAccessKey: config.S3_SECRET_ACCESS_KEY,
      logger,
    });
    s3Endpoint = s3.endpoint;
    stops.push(s3.stop);
  }
  return {
    redisUrl,
    s3Endpoint,
    stop: async () => {
      for (const s of stops.reverse()) await s();
    },
  };
}

export function requireServices(config: Config): ResolvedServices {
  if (!config.REDIS_URL) throw new Error('REDIS_URL is required for a standalone app (use `npm start` for the all-in-one process with embedded services)');
  if (!config.S3_ENDPOINT && !process.env.AWS_REGION && config.S3_REGION === 'us-east-1' && config.S3_ACCESS_KEY_ID === 'S3RVER') {
    throw new Error('S3_ENDPOINT (or real AWS credentials via S3_ACCESS_KEY_ID / S3_SECRET_ACCESS_KEY) is required for a standalone app');
  }
  return { redisUrl: config.REDIS_URL, s3Endpoint: config.S3_ENDPOINT, stop: async () => undefined };
}

export interface Runtime extends PipelineContext {
  services: ResolvedServices;
  close(): Promise<void>;
}

/** Connects the shared resources of a process once. */
export async function createRuntime(config: Config, services: ResolvedServices, logger: Logger = createLogger(config.LOG_LEVEL)): Promise<Runtime> {
  const store = ObjectStore.fromConfig(config, services.s3Endpoint);
  await store.ensureBucket();
  const redis = createRedis(services.redisUrl, 'producer', logger);
  await waitReady(redis);
  const queues = new JobQueues(redis, config.REDIS_PREFIX, config.JOB_ATTEMPTS);
  const collections = new CollectionRepository(store, redis, config.REDIS_PREFIX);
  return {
    config,
    store,
    redis,
    queues,
    collections,
    encoders: encoderProvider(config, logger),
    codecs: new CodecArtifacts(store, redis, config.REDIS_PREFIX),
    staticEmbeddings: new StaticEmbeddingsCache(path.resolve(config.MODELS_DIR)),
    logger,
    services,
    close: async () => {
      await queues.close();
      redis.disconnect();
      store.destroy();
    },
  };
}

/** Queues this build has processors for (`search` arrives with the retrieval issue). */
export const HANDLED_QUEUES: QueueName[] = [QueueName.encode, QueueName.compress, QueueName.index, QueueName.rerank];

/** The complete queue -> handler registry; WorkerHost refuses to start a queue without one. */
export function pipelineHandlers(ctx: PipelineContext): HandlerRegistry {
  const views = new CollectionViewCache(ctx.store, ctx.codecs, undefined, generationSideInfo(ctx), ctx.config.COMPRESSED_SCORING === 'int8-image');
  const scorers = new ScorerResources(path.resolve(ctx.config.SCORERS_DIR), ctx.config.ORT_INTRA_OP_THREADS);
  return {
    [QueueName.encode]: (p) => encodeProcessor(ctx, p),
    [QueueName.compress]: (p) => compressProcessor(ctx, p),
    [QueueName.index]: (p) => indexProcessor(ctx, p),
    [QueueName.rerank]: (p, job) => rerankProcessor(ctx, views, scorers, p, job),
  };
}

export function startWorkers(ctx: Runtime, queues: QueueName[]): WorkerHost {
  const host = new WorkerHost({
    redisUrl: ctx.services.redisUrl,
    prefix: ctx.config.REDIS_PREFIX,
    logger: ctx.logger.child('worker'),
    concurrency: {
      encode: ctx.config.ENCODE_CONCURRENCY,
      compress: ctx.config.COMPRESS_CONCURRENCY,
      index: ctx.config.INDEX_CONCURRENCY,
      rerank: ctx.config.RERANK_CONCURRENCY,
      search: ctx.config.SEARCH_CONCURRENCY,
    },
    onFinalFailure: async (queue, job) => {
      // Documents whose batch failed for good are counted, so an ingestion never looks stuck.
      const d = job.data as { tenantId?: string; collectionId?: string; ingestionId?: string | null; documents?: number };
      if ((queue === QueueName.encode || queue === QueueName.compress || queue === QueueName.index) && d.tenantId && d.collectionId) {
        await ctx.collections.count(d.tenantId, d.collectionId, d.ingestionId ?? null, 'failed', d.documents ?? 0);
      }
    },
  });
  host.start(queues, pipelineHandlers(ctx));
  return host;
}
