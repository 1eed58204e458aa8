import * as ort from 'onnxruntime-node';
import { encodeModel, reportInference, type ModelProto } from '@lateral/model';

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
    // Threads that finished a run sleep instead of spinning (CPU the event loop and other processes need).
    extra: { 'session.intra_op.allow_spinning': '0' },
  };
  const graph = typeof model === 'string' ? model.replace(/^.*\//, '').replace(/\.onnx$/, '') : model instanceof Uint8Array ? 'kernel' : model.graph?.name || 'kernel';
  try {
    const session = typeof source === 'string' ? await ort.InferenceSession.create(source, options) : await ort.InferenceSession.create(source, options);
    return observeRuns(session, graph);
  } catch (err) {
    const what = typeof source === 'string' ? source : `in-memory model (${source.byteLength} bytes)`;
    throw new Error(`kernels: ONNX Runtime cannot load ${what}: ${err instanceof Error ? err.message : String(err)}`);
  }
}

/** Reports each run's time to the inference observer (see @lateral/model's setInferenceObserver). */
function observeRuns(session: ort.InferenceSession, graph: string): ort.InferenceSession {
  // The class's run, looked up at each call (not bound once here), so anything that wraps the
  // prototype later, such as the operand-range checks in maxsim-kernels.spec.ts, still sees every run.
  const proto = Object.getPrototypeOf(session) as { run: (...args: unknown[]) => Promise<ort.InferenceSession.ReturnType> };
  (session as unknown as { run: (...args: unknown[]) => Promise<ort.InferenceSession.ReturnType> }).run = async (...args: unknown[]) => {
    const t = performance.now();
    try {
      return await proto.run.apply(session, args);
    } finally {
      reportInference({ graph, ms: performance.now() - t });
    }
  };
  return session;
}

export { ort };
