import type { ObjectStore } from '@lateral/infra';

type GetPut = Pick<ObjectStore, 'get' | 'put'>;

/** Whether `key` is a batch's raw vectors (s3Keys.rawVectors: `tenants/{t}/collections/{c}/raw/{batch}.seg`). */
export function isRawVectorsKey(key: string): boolean {
  return /^tenants\/[^/]+\/collections\/[^/]+\/raw\/[^/]+\.seg$/.test(key);
}

/** Most raw-batch bytes a process holds for its compress jobs (a raw batch of 256 documents of ~180 tokens at 384 dims is ~35 MB). */
export const RAW_HANDOFF_BYTES = 128 * 1024 * 1024;
/** A held raw batch no compress job of this process took within this long is dropped (its compress job ran elsewhere, or failed). */
export const RAW_HANDOFF_MAX_AGE_MS = 5 * 60_000;

/**
 * A batch's raw vectors handed from its encode job to its compress job when both run in the same
 * process (the compute thread runs every ingest stage): the encode job writes the raw segment to S3
 * as before and keeps its bytes here, and the compress job takes them (once) instead of reading the
 * object it was just written back from S3 (a GET of ~35 MB per 250 documents: the S3 server's read,
 * the transfer, the SDK's concatenation; issue 29's ingest profile). The compress job still checks
 * every section's checksum on the bytes it codes (readSegment), and the raw object in S3 is the one
 * merges and re-compressions read (and verify) later; a compress job that runs in another process,
 * or again after a failure, reads S3 as before. Bounded: at most `maxBytes` held (oldest dropped
 * first; a larger batch is not held), each for at most `maxAgeMs`.
 */
export class RawHandoff {
  private readonly held = new Map<string, { bytes: Uint8Array; at: number }>();
  private heldBytes = 0;

  constructor(
    private readonly maxBytes = RAW_HANDOFF_BYTES,
    private readonly maxAgeMs = RAW_HANDOFF_MAX_AGE_MS,
    private readonly now: () => number = Date.now,
  ) {}

  /** `store` as the encode and compress jobs see it: a raw batch's put keeps its bytes, its get takes them when held. */
  view(store: GetPut): GetPut {
    return {
      put: async (key, body, contentType) => {
        await store.put(key, body, contentType);
        if (typeof body !== 'string' && isRawVectorsKey(key)) this.keep(key, body);
      },
      get: async (key) => this.take(key) ?? store.get(key),
    };
  }

  /** Bytes held now (tests, metrics). */
  get bytes(): number {
    return this.heldBytes;
  }

  private keep(key: string, bytes: Uint8Array): void {
    this.drop(key);
    this.expire();
    if (bytes.byteLength > this.maxBytes) return;
    while (this.heldBytes + bytes.byteLength > this.maxBytes) this.drop(this.held.keys().next().value!);
    this.held.set(key, { bytes, at: this.now() });
    this.heldBytes += bytes.byteLength;
  }

  private take(key: string): Uint8Array | undefined {
    this.expire();
    const e = this.held.get(key);
    if (!e) return undefined;
    this.drop(key);
    return e.bytes;
  }

  private drop(key: string): void {
    const e = this.held.get(key);
    if (!e) return;
    this.held.delete(key);
    this.heldBytes -= e.bytes.byteLength;
  }

  /** Drops what was held longer than maxAgeMs (insertion order is age order). */
  private expire(): void {
    const t = this.now();
    for (const [key, e] of this.held) {
      if (t - e.at <= this.maxAgeMs) break;
      this.drop(key);
    }
  }
}
