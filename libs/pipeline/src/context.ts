import path from 'node:path';
import type { Redis } from 'ioredis';
import type { Config } from '@lateral/shared';
import type { CollectionRepository, JobQueues, Logger, ObjectStore } from '@lateral/infra';
import { getEncoder, type TokenEncoder } from '@lateral/model';
import type { CodecArtifacts } from './codec-artifacts';
import type { StaticEmbeddingsCache } from './static-embeddings';

/** What the processors receive: only the repositories they use, built once per process. */
export interface PipelineContext {
  config: Config;
  store: ObjectStore;
  redis: Redis;
  queues: JobQueues;
  collections: CollectionRepository;
  encoders: EncoderProvider;
  codecs: CodecArtifacts;
  /** Static input embedding tables of the models, for side-information codecs. */
  staticEmbeddings: StaticEmbeddingsCache;
  logger: Logger;
}

export type EncoderProvider = (model: string) => Promise<TokenEncoder>;

/** One ONNX session per model directory per process, loaded lazily on first use. */
export function encoderProvider(config: Config, logger: Logger): EncoderProvider {
  return (model: string) =>
    getEncoder(path.resolve(config.MODELS_DIR, model), {
      executionProvider: config.ORT_EXECUTION_PROVIDER,
      deviceId: config.ORT_CUDA_DEVICE_ID,
      intraOpThreads: config.ORT_INTRA_OP_THREADS || undefined,
      logger: logger.child('onnx'),
    });
}
