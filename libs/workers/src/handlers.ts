import path from 'node:path';
import { QueueName } from '@lateral/shared';
import { DiskObjectCache, type HandlerRegistry, type Runtime } from '@lateral/infra';
import {
  SegmentIds,
  StaticEmbeddingsCache,
  commitProcessor,
  compressProcessor,
  encodeProcessor,
  indexProcessor,
  encoderProvider,
  rerankProcessor,
  searchProcessor,
  SegmentCache,
} from '@lateral/pipeline';
import { readSegment } from '@lateral/codec';
import { OnnxNearestCentroid, ScorerResources } from '@lateral/kernels';

/** Queues this build has processors for. */
export const HANDLED_QUEUES: QueueName[] = [QueueName.encode, QueueName.compress, QueueName.index, QueueName.commit, QueueName.rerank, QueueName.search];

/**
 * The complete queue -> handler registry; WorkerHost refuses to start a queue without one. Each
 * processor receives only the repositories and settings it uses.
 */
export function pipelineHandlers(rt: Runtime): HandlerRegistry {
  const { config, store, collections, generations, codecs, queues, logger } = rt;
  const encoders = encoderProvider(
    { modelsDir: config.MODELS_DIR, executionProvider: config.ORT_EXECUTION_PROVIDER, deviceId: config.ORT_CUDA_DEVICE_ID, intraOpThreads: config.ORT_INTRA_OP_THREADS },
    logger,
  );
  const staticEmbeddings = new StaticEmbeddingsCache(path.resolve(config.MODELS_DIR));
  const scorers = new ScorerResources(path.resolve(config.SCORERS_DIR), config.ORT_INTRA_OP_THREADS);
  // One byte-bounded cache of segments for re-rank and search, over the local disk cache of S3 objects.
  const objects = new DiskObjectCache(store, path.resolve(config.SCORER_DISK_CACHE_DIR), config.SCORER_DISK_CACHE_BYTES, `${rt.services.s3Endpoint ?? 'embedded'}/${config.S3_BUCKET}`);
  const segments = new SegmentCache(objects, codecs, staticEmbeddings, {
    maxBytes: config.SCORER_CACHE_BYTES,
    loadConcurrency: config.SCORER_LOAD_CONCURRENCY,
    scoreFromCodes: config.COMPRESSED_SCORING === 'int8-image',
  });
  let nearest: Promise<OnnxNearestCentroid> | null = null;
  const assigner = () => (nearest ??= OnnxNearestCentroid.create(config.ORT_INTRA_OP_THREADS));
  const liveIds = new SegmentIds(async (t, c, ref) => {
    const bytes = await store.get(ref.key);
    if (!bytes) throw new Error(`segment ${ref.key} of the current generation is missing from S3`);
    return readSegment(bytes, ref.key, await codecs.get(t, c, ref.codecVersion)).docIds;
  });
  return {
    [QueueName.encode]: (p, job) => encodeProcessor({ store, collections, encoders, queues, tokenBudget: config.ENCODE_TOKEN_BUDGET, logger }, p, job),
    [QueueName.compress]: (p) => compressProcessor({ store, collections, codecs, staticEmbeddings, queues }, p),
    [QueueName.index]: (p) => indexProcessor({ store, collections, codecs, ivf: rt.ivf, encoders, queues, ivfCentroids: config.IVF_CENTROIDS, assigner, staticEmbeddings }, p),
    [QueueName.commit]: (p) => commitProcessor({ store, collections, generations, codecs, liveIds, logger }, p),
    [QueueName.search]: (p, job) => searchProcessor({ store, collections, generations, ivf: rt.ivf, encoders, segments, scorers }, p, job),
    [QueueName.rerank]: (p, job) => rerankProcessor({ store, collections, generations, encoders, views: segments, scorers }, p, job),
  };
}
