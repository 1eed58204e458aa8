import type { EncodedText } from '@lateral/model';
import type { EncoderProvider } from '../encoders';

/**
 * A search job's query encoding started before the job knows for sure which model the collection
 * uses (issue 32: the encoding runs in the encoder's session thread, so the job's own reads of the
 * collection record, the manifest, the centroids and the plan overlap it instead of preceding it).
 *
 * The model is the one this process last saw the collection searched with (`remember`); a job
 * for a collection not seen yet starts nothing early. When the record read afterwards names
 * another model (a collection deleted and created again under the same id), `take` answers
 * undefined and the job encodes as before; the early encoding's result, or its error, is dropped.
 */
export class EarlyQueryEncodings {
  private readonly models = new Map<string, string>();

  constructor(private readonly maxCollections = 1024) {}

  private static key(tenantId: string, collectionId: string): string {
    return `${tenantId}\u0000${collectionId}`;
  }

  /** Records the model a single-process search of the collection encoded its queries with. */
  remember(tenantId: string, collectionId: string, model: string): void {
    const key = EarlyQueryEncodings.key(tenantId, collectionId);
    if (this.models.get(key) === model) return;
    this.models.delete(key);
    this.models.set(key, model);
    if (this.models.size > this.maxCollections) this.models.delete(this.models.keys().next().value!);
  }

  /** Forgets a collection (its record named another model than the one remembered). */
  forget(tenantId: string, collectionId: string): void {
    this.models.delete(EarlyQueryEncodings.key(tenantId, collectionId));
  }

  /** The model remembered for a collection, if any. */
  modelOf(tenantId: string, collectionId: string): string | undefined {
    return this.models.get(EarlyQueryEncodings.key(tenantId, collectionId));
  }

  /**
   * Starts encoding `texts` with `model`'s encoder now. The returned handle's `take(model)` gives
   * the encoding (with the time it took, from this call to its end) when the job's collection
   * does use `model`, else undefined (the encoding is then left to finish unused, never an
   * unhandled rejection).
   */
  static start(encoders: EncoderProvider, model: string, texts: string[]): EarlyEncoding {
    const t0 = performance.now();
    const done = encoders(model).then((enc) => enc.encodeQueries(texts));
    const timed = done.then((queries) => ({ queries, ms: performance.now() - t0 }));
    timed.catch(() => undefined); // awaited by take(); dropped when not taken
    return { model, encoding: timed, take: (m: string) => (m === model ? timed : undefined) };
  }
}

export interface EarlyEncoding {
  /** The model the encoding was started with. */
  readonly model: string;
  /** The encoding and its own wall time in ms (from start() to its end). */
  readonly encoding: Promise<{ queries: EncodedText[]; ms: number }>;
  /** The encoding and its own wall time in ms, when `model` is the one it was started with; else undefined. */
  take(model: string): Promise<{ queries: EncodedText[]; ms: number }> | undefined;
}
