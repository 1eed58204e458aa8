import * as ort from 'onnxruntime-node';
import { encodeModel, type ModelProto } from '@lateral/model';

export interface ScorerSessionOptions {
  /** Intra-op threads; default 2 (the scorer worker's core budget). */
  intraOpThreads?: number;
}

/**
 * One CPU session with the settings measured best for scoring graphs: all graph optimisations,
 * sequential execution, a fixed intra-op pool. Create once per process and reuse.
 */
export async function createScorerSession(model: ModelProto | Uint8Array | string, opts: ScorerSessionOptions = {}): Promise<ort.InferenceSession> {
  const source = typeof model === 'string' || model instanceof Uint8Array ? model : encodeModel(model);
  const options: ort.InferenceSession.SessionOptions = {
    executionProviders: ['cpu'],
    graphOptimizationLevel: 'all',
    executionMode: 'sequential',
    intraOpNumThreads: opts.intraOpThreads ?? 2,
    interOpNumThreads: 1,
  };
  try {
    return typeof source === 'string' ? await ort.InferenceSession.create(source, options) : await ort.InferenceSession.create(source, options);
  } catch (err) {
    const what = typeof source === 'string' ? source : `in-memory model (${source.byteLength} bytes)`;
    throw new Error(`kernels: ONNX Runtime cannot load ${what}: ${err instanceof Error ? err.message : String(err)}`);
  }
}

export { ort };
