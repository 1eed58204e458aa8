import * as ort from 'onnxruntime-node';
import { encodeModel, type ModelProto } from './onnx-graph';
import { reportInference } from './inference-observer';

/** ONNX Runtime session config: intra-op threads wait without spinning (onnxruntime_session_options_config_keys.h). */
export const ORT_NO_SPINNING = { 'session.intra_op.allow_spinning': '0' };

export interface SessionOptions {
  /** Intra-op threads; 0 or unset: ONNX Runtime's default (one per core). */
  intraOpThreads?: number;
  /** 'cuda' tries ONNX Runtime's CUDA provider (device `deviceId`) and falls back to the CPU one. Default 'cpu'. */
  executionProvider?: 'cpu' | 'cuda';
  deviceId?: number;
  /** Told why CUDA was not used when it was asked for and the session fell back to the CPU provider. */
  onFallback?: (reason: string) => void;
  /**
   * Report each run's time to the inference observer under this graph name (default: the file
   * name or the graph's name). false: the caller reports its runs itself (the encoder adds the
   * batch and token counts).
   */
  observe?: string | false;
}

export interface OrtSession {
  session: ort.InferenceSession;
  /** The provider the session runs on ('cpu' when CUDA was asked for but unavailable). */
  provider: 'cpu' | 'cuda';
}

const reason = (err: unknown) => (err instanceof Error ? err.message : String(err));

/**
 * The one factory of ONNX Runtime sessions in the service: the kernels' graphs (MaxSim, LITE,
 * K-NRM, IVF) and the model library's encoder. All graph optimisations, sequential execution, an
 * intra-op pool of `intraOpThreads` when > 0 whose threads sleep when a run ends instead of
 * spinning (spinning kept both cores busy for milliseconds after each query encoding, delaying the
 * answer and the next request on the event loop: issue 31), CPU or CUDA with a fallback to CPU.
 * Create once per process and reuse. Throws an Error naming the model when ONNX Runtime cannot
 * load it.
 */
/** The session options createSession (and the session thread, ./session-thread.ts) use, before the execution providers. */
export function baseSessionOptions(opts: Pick<SessionOptions, 'intraOpThreads'>): ort.InferenceSession.SessionOptions {
  return {
    graphOptimizationLevel: 'all',
    executionMode: 'sequential',
    interOpNumThreads: 1,
    ...(opts.intraOpThreads && opts.intraOpThreads > 0 ? { intraOpNumThreads: opts.intraOpThreads } : {}),
    extra: ORT_NO_SPINNING,
  };
}

export async function createSession(model: ModelProto | Uint8Array | string, opts: SessionOptions = {}): Promise<OrtSession> {
  const source = typeof model === 'string' || model instanceof Uint8Array ? model : encodeModel(model);
  const base = baseSessionOptions(opts);
  const graph =
    opts.observe === false
      ? null
      : (opts.observe ?? (typeof model === 'string' ? model.replace(/^.*\//, '').replace(/\.onnx$/, '') : model instanceof Uint8Array ? 'kernel' : model.graph?.name || 'kernel'));
  const create = (options: ort.InferenceSession.SessionOptions) =>
    typeof source === 'string' ? ort.InferenceSession.create(source, options) : ort.InferenceSession.create(source, options);
  const done = (session: ort.InferenceSession, provider: 'cpu' | 'cuda'): OrtSession => ({ session: graph === null ? session : observeRuns(session, graph), provider });
  if (opts.executionProvider === 'cuda') {
    try {
      return done(await create({ ...base, executionProviders: [{ name: 'cuda', deviceId: opts.deviceId ?? 0 }, 'cpu'] }), 'cuda');
    } catch (err) {
      opts.onFallback?.(reason(err));
    }
  }
  try {
    return done(await create({ ...base, executionProviders: ['cpu'] }), 'cpu');
  } catch (err) {
    const what = typeof source === 'string' ? source : `in-memory model (${source.byteLength} bytes)`;
    throw new Error(`kernels: ONNX Runtime cannot load ${what}: ${reason(err)}`, { cause: err });
  }
}

export interface ScorerSessionOptions {
  /** Intra-op threads; 0 or unset: ONNX Runtime's default (one per core). */
  intraOpThreads?: number;
}

/** A CPU session of a kernel graph (MaxSim, LITE, K-NRM, IVF), from `createSession`. */
export async function createScorerSession(model: ModelProto | Uint8Array | string, opts: ScorerSessionOptions = {}): Promise<ort.InferenceSession> {
  return (await createSession(model, { intraOpThreads: opts.intraOpThreads })).session;
}

/** Reports each run's time to the inference observer (setInferenceObserver, ./inference-observer). */
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
