import { ort, SessionThread, createSession, type ThreadRunResult, type ThreadTensor } from '@lateral/kernels';
import type { ModelManifest } from '@lateral/shared';
import { ModelLoadError, ModelShapeError } from './errors';
import { readEmbeddingTable } from './model-dir';
import type { TextTokenizer } from './text-tokenizer';

/** The encoder's ONNX session: where it runs (its own thread or the caller's), how it is opened, and the load-time check of graph, manifest and tokenizer. */

export interface EncoderLogger {
  info(msg: string): void;
  warn(msg: string): void;
}

export interface EncoderOptions {
  executionProvider: 'cpu' | 'cuda';
  deviceId?: number;
  intraOpThreads?: number;
  logger?: EncoderLogger;
  /**
   * Run the ONNX session in a thread of its own (SessionThread, @lateral/kernels), so that the
   * calling thread tokenizes, packs and copies out the batches around the one that runs (default
   * true). false: the session runs on the calling thread, one batch after the other, as before.
   */
  inferenceThread?: boolean;
  /**
   * Sessions of the model, each in a thread of its own, that the encoder's batches are spread over
   * (default 1; needs the session thread). On a GPU several sessions run their batches at once, on
   * streams of their own, so one batch's copies and launch overhead overlap another's kernels:
   * `ENCODER_SESSIONS` (docs/models.md, "Encoder processes per GPU"). On a CPU one session already
   * uses every core through its intra-op threads: leave it at 1 there.
   */
  sessions?: number;
}

/** Where the session runs: in its own thread (SessionThread) or on the calling thread. */
export interface SessionRunner {
  readonly provider: 'cpu' | 'cuda';
  readonly inputNames: readonly string[];
  readonly outputNames: readonly string[];
  /** True when run() returns while other JavaScript of the caller may go on (the session thread). */
  readonly offThread: boolean;
  /** Batches that run at the same time (the number of sessions). */
  readonly parallel: number;
  run(feeds: Record<string, ThreadTensor>, fetches: readonly string[]): Promise<ThreadRunResult>;
  release(): Promise<void>;
}

/** The session on the calling thread (EncoderOptions.inferenceThread false). */
class InlineRunner implements SessionRunner {
  readonly offThread = false;
  readonly parallel = 1;
  constructor(
    private readonly session: ort.InferenceSession,
    readonly provider: 'cpu' | 'cuda',
  ) {}
  get inputNames(): readonly string[] {
    return this.session.inputNames;
  }
  get outputNames(): readonly string[] {
    return this.session.outputNames;
  }
  async run(feeds: Record<string, ThreadTensor>, fetches: readonly string[]): Promise<ThreadRunResult> {
    const tensors: Record<string, ort.Tensor> = {};
    for (const [name, f] of Object.entries(feeds)) tensors[name] = new ort.Tensor(f.type, f.data as never, f.dims);
    const start = performance.now();
    const out = await this.session.run(tensors, [...fetches]);
    const end = performance.now();
    const outputs: Record<string, ThreadTensor> = {};
    for (const name of fetches) {
      const t = out[name]!;
      outputs[name] = { type: t.type, dims: t.dims, data: t.data as ThreadTensor['data'] };
    }
    return { outputs, feeds, start, end };
  }
  release(): Promise<void> {
    return this.session.release();
  }
}

class ThreadRunner implements SessionRunner {
  readonly offThread = true;
  readonly parallel = 1;
  constructor(private readonly thread: SessionThread) {}
  get provider(): 'cpu' | 'cuda' {
    return this.thread.provider;
  }
  get inputNames(): readonly string[] {
    return this.thread.inputNames;
  }
  get outputNames(): readonly string[] {
    return this.thread.outputNames;
  }
  run(feeds: Record<string, ThreadTensor>, fetches: readonly string[]): Promise<ThreadRunResult> {
    return this.thread.run(feeds, fetches);
  }
  release(): Promise<void> {
    return this.thread.release();
  }
}

/**
 * Several sessions of one model, each in its own thread (EncoderOptions.sessions): a run goes to
 * the session with the fewest runs in flight (the first of them on a tie), so batches posted
 * together run side by side. Every session is the same graph on the same provider, so which one
 * runs a batch does not change its vectors.
 */
class PooledRunner implements SessionRunner {
  readonly offThread = true;
  private readonly inFlight: number[];
  constructor(private readonly runners: ThreadRunner[]) {
    this.inFlight = runners.map(() => 0);
  }
  get parallel(): number {
    return this.runners.length;
  }
  get provider(): 'cpu' | 'cuda' {
    return this.runners[0]!.provider;
  }
  get inputNames(): readonly string[] {
    return this.runners[0]!.inputNames;
  }
  get outputNames(): readonly string[] {
    return this.runners[0]!.outputNames;
  }
  /** Runs in flight per session (tests). */
  get load(): readonly number[] {
    return this.inFlight;
  }
  async run(feeds: Record<string, ThreadTensor>, fetches: readonly string[]): Promise<ThreadRunResult> {
    let k = 0;
    for (let i = 1; i < this.inFlight.length; i++) if (this.inFlight[i]! < this.inFlight[k]!) k = i;
    this.inFlight[k]!++;
    try {
      return await this.runners[k]!.run(feeds, fetches);
    } finally {
      this.inFlight[k]!--;
    }
  }
  async release(): Promise<void> {
    await Promise.all(this.runners.map((r) => r.release()));
  }
}

export async function openSession(model: string | Uint8Array, modelPath: string, opts: EncoderOptions): Promise<SessionRunner> {
  const sessionOpts = {
    executionProvider: opts.executionProvider,
    deviceId: opts.deviceId,
    intraOpThreads: opts.intraOpThreads,
    onFallback: (why: string) => opts.logger?.warn(`CUDA execution provider unavailable for ${modelPath} (${why}); falling back to CPU`),
  };
  const sessions = opts.sessions ?? 1;
  if (!Number.isInteger(sessions) || sessions < 1) throw new RangeError(`encoder sessions must be a whole number >= 1, got ${sessions}`);
  if (sessions > 1 && opts.inferenceThread === false) throw new RangeError(`encoder sessions ${sessions} need the session thread (inferenceThread true)`);
  try {
    if (sessions > 1) {
      // SessionThread.start moves an in-memory model's bytes to its thread: each session gets its own copy
      const bytesFor = (i: number) => (typeof model === 'string' || i === sessions - 1 ? model : model.slice());
      // one after the other: the first one's provider (CUDA, or the fallback) is every one's
      const first = await SessionThread.start(bytesFor(0), sessionOpts);
      const runners = [new ThreadRunner(first)];
      try {
        while (runners.length < sessions) runners.push(new ThreadRunner(await SessionThread.start(bytesFor(runners.length), { ...sessionOpts, executionProvider: first.provider })));
      } catch (err) {
        await Promise.allSettled(runners.map((r) => r.release()));
        throw err;
      }
      return new PooledRunner(runners);
    }
    if (opts.inferenceThread !== false) return new ThreadRunner(await SessionThread.start(model, sessionOpts));
    // runBatch reports each run with its batch and token counts
    const { session, provider } = await createSession(model, { ...sessionOpts, observe: false });
    return new InlineRunner(session, provider);
  } catch (err) {
    throw new ModelLoadError(`${modelPath}: ONNX Runtime cannot load the model (${err instanceof Error && err.cause instanceof Error ? err.cause.message : err instanceof Error ? err.message : String(err)})`);
  }
}

/** Inputs the encoder feeds: manifest field -> graph input name (null = not fed). */
const INPUT_FIELDS = ['inputIds', 'attentionMask', 'tokenTypeIds'] as const;

/**
 * Load-time agreement of manifest, tokenizer and graph (ModelLoadError otherwise): every input and
 * output the manifest names exists; every input the graph requires is one the manifest names (the
 * encoder feeds nothing else); the tokenizer's ids fit the graph's token embedding table when that
 * table can be read from model.onnx (skipped when it cannot).
 */
export function checkGraph(dir: string, m: ModelManifest, tokenizer: TextTokenizer, session: Pick<SessionRunner, 'inputNames' | 'outputNames'>, modelPath: string): void {
  const list = (names: readonly string[]) => `[${names.join(', ')}]`;
  const need = (names: readonly string[], name: string | null, field: string, kind: string) => {
    if (name !== null && !names.includes(name)) {
      throw new ModelLoadError(`${dir}/manifest.json: field '${field}' names ${kind} '${name}', but model.onnx has ${kind}s ${list(names)}`);
    }
  };
  for (const f of INPUT_FIELDS) need(session.inputNames, m.inputs[f], `inputs.${f}`, 'input');
  need(session.outputNames, m.outputs.tokenEmbeddings, 'outputs.tokenEmbeddings', 'output');
  need(session.outputNames, m.outputs.tokenWeights, 'outputs.tokenWeights', 'output');

  const fed = INPUT_FIELDS.filter((f) => m.inputs[f] !== null);
  for (const name of session.inputNames) {
    if (fed.some((f) => m.inputs[f] === name)) continue;
    const field = /type|segment/i.test(name) ? 'tokenTypeIds' : /mask/i.test(name) ? 'attentionMask' : null;
    const fix =
      field && m.inputs[field] === null
        ? `set inputs.${field} to "${name}"${field === 'tokenTypeIds' ? ' (BERT segment ids: the encoder feeds zeros)' : ''}`
        : `name it in inputs.attentionMask or inputs.tokenTypeIds if it is one of those, else export the graph without it`;
    throw new ModelLoadError(
      `${dir}/manifest.json: model.onnx takes inputs ${list(session.inputNames)} but the manifest feeds only ` +
        `${list(fed.map((f) => `${m.inputs[f]} (inputs.${f})`))}; input '${name}' is not accounted for: ${fix}`,
    );
  }

  const table = readEmbeddingTable(modelPath, m.inputs.inputIds);
  if (table && tokenizer.vocabSize > table.rows) {
    throw new ModelLoadError(
      `${dir}: tokenizer.json has ${tokenizer.vocabSize} token ids (0..${tokenizer.vocabSize - 1}) but model.onnx's token embedding ` +
        `'${table.name}' has ${table.rows} rows: the tokenizer does not belong to this graph`,
    );
  }
}

const shapeOf = (dims: readonly number[]) => `[${dims.join(',')}]`;

/** What checkedOutputs reads of a run's output tensor (an ort.Tensor or a ThreadTensor). */
interface OutputTensor {
  readonly dims: readonly number[];
  readonly type: string;
  readonly data: unknown;
}

/**
 * A run's outputs checked against the manifest (ModelShapeError otherwise): the token embeddings
 * (read from output `embName`: the manifest's, or the graph's normalised copy of it) float32
 * [batch, seq, dims], and the token weights, when the manifest names them, float32 [batch, seq].
 */
export function checkedOutputs(out: Record<string, OutputTensor>, embName: string, m: ModelManifest, batch: number, seqLen: number, dir: string): { data: Float32Array; weights: Float32Array | null } {
  const emb = out[embName]!;
  const expected = [batch, seqLen, m.dims];
  if (emb.dims.length !== 3 || emb.dims.some((d, i) => d !== expected[i]) || emb.type !== 'float32') {
    throw new ModelShapeError(
      `model output '${m.outputs.tokenEmbeddings}' has shape ${shapeOf(emb.dims)} (${emb.type}) but manifest.json declares dims ${m.dims} ` +
        `(expected float32 [batch, seq, ${m.dims}] = ${shapeOf(expected)}) in ${dir}`,
    );
  }
  let weights: Float32Array | null = null;
  if (m.outputs.tokenWeights) {
    const w = out[m.outputs.tokenWeights]!;
    if (w.dims.length !== 2 || w.dims[0] !== batch || w.dims[1] !== seqLen || w.type !== 'float32') {
      throw new ModelShapeError(
        `model output '${m.outputs.tokenWeights}' has shape ${shapeOf(w.dims)} (${w.type}) but the token weights must be float32 [batch, seq] = ${shapeOf([batch, seqLen])} in ${dir}`,
      );
    }
    weights = w.data as Float32Array;
  }
  return { data: emb.data as Float32Array, weights };
}
