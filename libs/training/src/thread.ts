/**
 * Training off the main thread: trainHead and trainAesi run in a Node worker thread
 * (./train-thread-main.ts), so a training job never stalls its process's event loop (BullMQ lock
 * renewal, the other queues, and in the all-in-one process the HTTP API and its Redis health
 * check). TF.js steps are synchronous and take up to seconds each; on the main thread they
 * blocked everything else for that long.
 *
 * The inputs go over packed into a few typed arrays whose buffers are transferred (moved, not
 * copied); progress comes back as messages, passed to `onProgress` one at a time in order; the
 * result's weights are transferred back. An error of the thread is re-created here with its name
 * and message (TrainingDivergedError with its epoch and last finite loss, TooFewQueriesError,
 * RangeError), so callers handle it as they would the direct call's. When `onProgress` throws
 * (a cancellation), the thread is terminated and the promise rejects with that error.
 */
import path from 'node:path';
import { Worker } from 'node:worker_threads';
import { type AesiProgress, type AesiTrainOptions, type AesiTrainResult } from './aesi';
import { TooFewQueriesError, TrainingDivergedError, type TokenSource, type TrainOptions, type TrainProgress, type TrainResult, type TrainingQuery } from './trainer';

type HeadOptions = Omit<TrainOptions, 'onProgress'>;
type AesiOptions = Omit<AesiTrainOptions, 'onProgress'>;

/** Head training inputs, packed: the candidates' token vectors (CSR over `rows`) and the queries' vectors (CSR over the queries). */
export interface HeadThreadInput {
  kind: 'head';
  dims: number;
  /** the TokenSource indices of the packed documents, ascending */
  rows: Int32Array;
  docOffsets: Uint32Array;
  docVectors: Float32Array;
  queryOffsets: Uint32Array;
  queryVectors: Float32Array;
  queries: Omit<TrainingQuery, 'vectors'>[];
  options: HeadOptions;
}
export interface AesiThreadInput {
  kind: 'aesi';
  vectors: Float32Array;
  side: Float32Array;
  dims: number;
  sideDims: number;
  options: AesiOptions;
}
export type ThreadInput = HeadThreadInput | AesiThreadInput;
export type ThreadMessage =
  | { type: 'progress'; progress: TrainProgress | AesiProgress }
  | { type: 'result'; result: TrainResult | AesiTrainResult }
  | { type: 'error'; name: string; message: string; stack?: string; epoch?: number; lastFiniteLoss?: number | null };

/** The distinct ArrayBuffers under the typed arrays of `value` (own enumerable properties, one level of nesting and arrays). */
export function transferablesOf(value: unknown): ArrayBuffer[] {
  const out = new Set<ArrayBuffer>();
  const visit = (v: unknown, depth: number) => {
    if (ArrayBuffer.isView(v)) {
      if (v.buffer instanceof ArrayBuffer) out.add(v.buffer);
    } else if (v && typeof v === 'object' && depth < 3) {
      for (const x of Array.isArray(v) ? v : Object.values(v)) visit(x, depth + 1);
    }
  };
  visit(value, 0);
  return [...out];
}

/** Packs the inputs of trainHead: every candidate document's tokens once (copied into one block), the query vectors into another. */
export function packHeadInput(src: TokenSource, queries: TrainingQuery[], options: HeadOptions): HeadThreadInput {
  const d = src.dims;
  const rows = Int32Array.from(new Set(queries.flatMap((q) => q.candidates))).sort();
  const docOffsets = new Uint32Array(rows.length + 1);
  rows.forEach((r, i) => (docOffsets[i + 1] = docOffsets[i] + src.doc(r).length));
  const docVectors = new Float32Array(docOffsets[rows.length] * d);
  rows.forEach((r, i) => {
    const t = src.doc(r);
    docVectors.set(t.vectors.subarray(0, t.length * d), docOffsets[i] * d);
  });
  const queryOffsets = new Uint32Array(queries.length + 1);
  queries.forEach((q, i) => (queryOffsets[i + 1] = queryOffsets[i] + q.length));
  const queryVectors = new Float32Array(queryOffsets[queries.length] * d);
  queries.forEach((q, i) => queryVectors.set(q.vectors.subarray(0, q.length * d), queryOffsets[i] * d));
  return {
    kind: 'head', dims: d, rows, docOffsets, docVectors, queryOffsets, queryVectors,
    queries: queries.map(({ vectors: _v, ...q }) => q),
    options,
  };
}

/** The TokenSource and queries of a packed input (views over its blocks). */
export function unpackHeadInput(input: HeadThreadInput): { src: TokenSource; queries: TrainingQuery[] } {
  const d = input.dims;
  const at = new Map<number, number>();
  input.rows.forEach((r, i) => at.set(r, i));
  const src: TokenSource = {
    dims: d,
    doc: (row) => {
      const i = at.get(row);
      if (i === undefined) throw new RangeError(`document ${row} was not packed for training`);
      return { vectors: input.docVectors.subarray(input.docOffsets[i] * d, input.docOffsets[i + 1] * d), length: input.docOffsets[i + 1] - input.docOffsets[i] };
    },
  };
  const queries = input.queries.map((q, i) => ({ ...q, vectors: input.queryVectors.subarray(input.queryOffsets[i] * d, input.queryOffsets[i + 1] * d) }));
  return { src, queries };
}

function errorFrom(m: Extract<ThreadMessage, { type: 'error' }>): Error {
  let err: Error;
  if (m.name === 'TrainingDivergedError') err = new TrainingDivergedError(m.epoch ?? 0, m.lastFiniteLoss ?? null);
  else if (m.name === 'TooFewQueriesError') err = new TooFewQueriesError(m.message);
  else if (m.name === 'RangeError') err = new RangeError(m.message);
  else {
    err = new Error(m.message);
    err.name = m.name;
  }
  if (m.stack) err.stack = `${err.name}: ${err.message}\n    (in the training thread)\n${m.stack.split('\n').slice(1).join('\n')}`;
  return err;
}

/** Runs `input` in a fresh worker thread; resolves with the trainer's result. */
function runThread<R, P>(input: ThreadInput, transfer: ArrayBuffer[], onProgress?: (p: P) => Promise<void> | void): Promise<R> {
  return new Promise<R>((resolve, reject) => {
    const worker = new Worker(path.join(__dirname, 'train-thread.cjs'), { workerData: input, transferList: transfer });
    let settled = false;
    const finish = (f: () => void) => {
      if (settled) return;
      settled = true;
      f();
      void worker.terminate();
    };
    // progress callbacks one at a time, in order; the result waits for the ones before it
    let chain = Promise.resolve();
    worker.on('message', (m: ThreadMessage) => {
      chain = chain.then(async () => {
        if (settled) return;
        if (m.type === 'progress') await onProgress?.(m.progress as P);
        else if (m.type === 'result') finish(() => resolve(m.result as R));
        else finish(() => reject(errorFrom(m)));
      }).catch((err: unknown) => finish(() => reject(err)));
    });
    worker.on('error', (err) => finish(() => reject(err)));
    worker.on('exit', (code) => {
      // messages posted before the exit are still being handled on the chain
      void chain.then(() => finish(() => reject(new Error(`the training thread exited (code ${code}) without a result`))));
    });
  });
}

/** trainHead in a worker thread (see the module comment). */
export function trainHeadInThread(src: TokenSource, queries: TrainingQuery[], options: TrainOptions): Promise<TrainResult> {
  const { onProgress, ...rest } = options;
  const input = packHeadInput(src, queries, rest);
  return runThread<TrainResult, TrainProgress>(input, transferablesOf([input.rows, input.docOffsets, input.docVectors, input.queryOffsets, input.queryVectors]), onProgress);
}

/**
 * trainAesi in a worker thread (see the module comment). `vectors` and `side` are transferred:
 * they are unusable here afterwards, so pass arrays of their own buffers (not views of a cache).
 */
export function trainAesiInThread(vectors: Float32Array, side: Float32Array, dims: number, sideDims: number, options: AesiTrainOptions): Promise<AesiTrainResult> {
  const { onProgress, ...rest } = options;
  const own = (a: Float32Array) => (a.byteOffset === 0 && a.byteLength === a.buffer.byteLength && a.buffer instanceof ArrayBuffer ? [a.buffer] : []);
  const input: AesiThreadInput = { kind: 'aesi', vectors, side, dims, sideDims, options: rest };
  return runThread<AesiTrainResult, AesiProgress>(input, [...own(vectors), ...(side.buffer === vectors.buffer ? [] : own(side))], onProgress);
}
