import path from 'node:path';
import { readSegment } from '@lateral/codec';
import type { Runtime } from '@lateral/infra';
import { OnnxNearestCentroid } from '@lateral/kernels';
import { DEFAULT_MERGE_POLICY, SegmentIds, encoderProvider, type MergeDeps } from '@lateral/pipeline';
import { StaticEmbeddingsCache } from '@lateral/serving';
import type { Config } from '@lateral/shared';

/**
 * The merge job's dependencies as the worker's handlers build them (libs/workers/src/handlers.ts),
 * for specs that run the merge processor themselves on a started server's S3 and Redis. `over`
 * replaces any of them (a merge policy, a store that fails, a lease).
 */
export function mergeDepsFor(rt: Runtime, config: Config, over: Partial<MergeDeps> = {}): MergeDeps {
  let nearest: Promise<OnnxNearestCentroid> | null = null;
  const store = over.store ?? rt.store;
  return {
    store,
    collections: rt.collections,
    generations: rt.generations,
    codecs: rt.codecs,
    ivf: rt.ivf,
    // collections get WARP search layouts by default: the merge keeps them
    warpCodecs: rt.warpCodecs,
    encoders: encoderProvider({ modelsDir: config.MODELS_DIR, executionProvider: config.ORT_EXECUTION_PROVIDER, deviceId: config.ORT_CUDA_DEVICE_ID, intraOpThreads: config.ORT_INTRA_OP_THREADS }, rt.logger),
    staticEmbeddings: new StaticEmbeddingsCache(path.resolve(config.MODELS_DIR)),
    assigner: () => (nearest ??= OnnxNearestCentroid.create(config.ORT_INTRA_OP_THREADS)),
    ivfCentroids: config.IVF_CENTROIDS,
    liveIds: new SegmentIds(async (tenantId, collectionId, ref) => readSegment((await store.get(ref.key))!, ref.key, await rt.codecs.get(tenantId, collectionId, ref.codecVersion)).docIds),
    policy: DEFAULT_MERGE_POLICY,
    logger: rt.logger,
    ...over,
  };
}
