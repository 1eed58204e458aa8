import * as ort from 'onnxruntime-node';
import { encodeModel, type ModelProto } from '@lateral/model';

export interface ScorerSessionOptions {
  /** Intra-op threads; 0 or unset: ONNX Runtime's default (one per core). */
  intraOpThreads?: number;
}

/**
 * The one factory of the kernels' sessions (MaxSim, LITE, K-NRM): CPU execution provider, all
 * graph optimisations, sequential execution, and an intra-op pool of `intraOpThreads` when > 0.
 * Create once per process and reuse.
 */
export async function createScorerSession(model: ModelProto | Uint8Array | string, opts: ScorerSessionOptions = {}): Promise<ort.InferenceSession> {
  const source = typeof model === 'string' || model instanceof Uint8Array ? model : encodeModel(model);
  const options: ort.InferenceSession.SessionOptions = {
    executionProviders: ['cpu'],
    graphOptimizationLevel: 'all',
    executionMode: 'sequential',
    interOpNumThreads: 1,
    ...(opts.intraOpThreads && opts.intraOpThreads > 0 ? { intraOpNumThreads: opts.intraOpThreads } : {}),
  };
  try {
    return typeof source === 'string' ? await ort.InferenceSession.create(source, options) : await ort.InferenceSession.create(source, options);
  } catch (err) {
    const what = typeof source === 'string' ? source : `in-memory model (${source.byteLength} bytes)`;
    throw new Error(`kernels: ONNX Runtime cannot load ${what}: ${err instanceof Error ? err.message : String(err)}`);
  }
}

export { ort };
