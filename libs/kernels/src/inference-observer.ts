/**
 * A process-wide, optional observer of ONNX Runtime runs: the encoder reports each batch (its
 * sequences and padded tokens), the kernels' sessions each run. The worker's composition root
 * points it at its metrics; this library only calls it (no I/O here). Unset: nothing happens.
 */
export interface InferenceEvent {
  /** The encoder model's name, or the kernel graph's name. */
  graph: string;
  ms: number;
  /** Sequences in the batch (encoder). */
  batch?: number;
  /** Padded positions, batch x longest sequence (encoder). */
  tokens?: number;
}

export type InferenceObserver = (e: InferenceEvent) => void;

let observer: InferenceObserver | undefined;

export function setInferenceObserver(fn: InferenceObserver | undefined): void {
  observer = fn;
}

/** Called after a run; an observer that throws never fails the run. */
export function reportInference(e: InferenceEvent): void {
  if (!observer) return;
  try {
    observer(e);
  } catch {
    // metrics must not break inference
  }
}
