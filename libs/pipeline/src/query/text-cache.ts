import { createHash } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { createCodec, readSegment, writeSegment, type CodecArtifact } from '@lateral/codec';
import { textCodecTag, textKeys } from '@lateral/shared';
import { listWithDates, type CodecArtifactRepository, type ObjectStore } from '@lateral/infra';
import type { EncodedText, TokenEncoder } from '@lateral/model';
import { RAW_CODEC, assembleSegmentDocs } from '@lateral/serving';

const DAY_MS = 24 * 3600 * 1000;

/** sha256 of a candidate text: its name in the cache (defined with the batch rows, whose chunk files name texts by it). */
export { textHash } from '@lateral/shared';

const versions = new Map<string, Promise<string>>();
/**
 * A model's version: the first 16 hex digits of the sha256 of its manifest.json, tokenizer.json
 * and model.onnx. Rebuilding a model with other weights or another tokenizer changes every key.
 */
export function modelVersion(modelsDir: string, model: string): Promise<string> {
  const dir = path.resolve(modelsDir, model);
  let v = versions.get(dir);
  if (!v) {
    v = (async () => {
      const h = createHash('sha256');
      for (const f of ['manifest.json', 'tokenizer.json', 'model.onnx']) {
        h.update(f);
        h.update(await readFile(path.join(dir, f)));
      }
      return h.digest('hex').slice(0, 16);
    })();
    v.catch(() => versions.delete(dir));
    versions.set(dir, v);
  }
  return v;
}

/** Where the texts of one (model, token cap, codec) live; `key(hash)` names one text. */
export interface TextSpace {
  tenantId: string;
  model: string;
  modelVersion: string;
  maxTokens: number;
  codec: { collectionId: string; codecVersion: number } | null;
}

const HEX64 = /^[0-9a-f]{64}$/;
const ZERO_TAIL = `00/${'0'.repeat(64)}.seg`;
const spacePrefixes = new WeakMap<TextSpace, string>();
/** Keys built lately, by space prefix and hash (up to MAX_BUILT_KEYS, then forgotten all at once). */
const builtKeys = new Map<string, Map<string, string>>();
let builtCount = 0;
const MAX_BUILT_KEYS = 100_000;
/**
 * An entry's S3 key (textKeys.vectors); the space's part is built and checked once per space
 * object. A key built lately is returned again, the same string: the chunks of a batch name the
 * same texts again and again, and the caches keyed by it (KnownTexts, TextMemoryCache) then find
 * it without checking, building and hashing a new string each time.
 */
export const textKey = (s: TextSpace, hash: string): string => {
  let prefix = spacePrefixes.get(s);
  if (prefix === undefined) {
    prefix = textKeys.vectors(s.tenantId, s.model, s.modelVersion, s.maxTokens, textCodecTag(s.codec), '0'.repeat(64)).slice(0, -ZERO_TAIL.length);
    spacePrefixes.set(s, prefix);
  }
  let built = builtKeys.get(prefix);
  const known = built?.get(hash);
  if (known !== undefined) return known;
  if (!HEX64.test(hash)) throw new Error('text hash must be a sha256 in hex');
  const key = `${prefix}${hash.slice(0, 2)}/${hash}.seg`;
  if (builtCount >= MAX_BUILT_KEYS) {
    builtKeys.clear();
    builtCount = 0;
    built = undefined;
  }
  if (!built) builtKeys.set(prefix, (built = new Map()));
  built.set(hash, key);
  builtCount++;
  return key;
};

/** One decoded cached text. */
export interface CachedText {
  /** tokens x dims fp32. */
  vectors: Float32Array;
  length: number;
  /** The pooled (dense) vector. */
  docVector: Float32Array;
  tokenIds: Int32Array;
  encodedAt: number;
}

/**
 * Writes one encoded text as a one-document segment: first at the raw fp16 precision (as ingest
 * keeps raw vectors), then, for a collection codec, re-coded from those raw vectors exactly as the
 * compress step does, so a text scores as the same document ingested into that collection.
 */
export function encodeTextEntry(encoder: TokenEncoder, e: EncodedText, encodedAt: number, artifact: CodecArtifact | null, settings: Parameters<typeof createCodec>[0] | null): Uint8Array {
  const raw = writeSegment(assembleSegmentDocs(['t'], [e], encoder.dims, [{ encodedAt }], (x) => encoder.pool(x)), RAW_CODEC);
  if (!settings) return raw;
  const r = readSegment(raw, 'text');
  const codec = createCodec(settings, artifact ?? undefined);
  return writeSegment(
    { docIds: r.docIds, tokenOffsets: r.tokenOffsets, tokenIds: r.tokenIds, vectors: r.decodeAll(), dims: r.dims, docVectors: r.docVectors ?? undefined, metadata: [{ encodedAt }] },
    codec,
    artifact ? { seed: artifact.seed } : {},
  );
}

/** Decodes a cached entry; null when it is older than the TTL (expired: encode again). */
export function decodeTextEntry(bytes: Uint8Array, key: string, artifact: CodecArtifact | undefined, ttlMs: number, now = Date.now()): CachedText | null {
  const r = readSegment(bytes, key, artifact);
  const encodedAt = Number(r.metadata(0)?.encodedAt ?? 0);
  if (!(now - encodedAt <= ttlMs)) return null;
  const dims = r.dims;
  return {
    vectors: r.decodeDoc(0),
    length: r.tokenOffsets[1],
    docVector: r.docVectors ? r.docVectors.slice(0, dims) : new Float32Array(dims),
    tokenIds: r.tokenIds.slice(0, r.tokenOffsets[1]),
    encodedAt,
  };
}

/**
 * Decoded texts kept in a process, least recently used first out, bounded by bytes. Keys are S3
 * keys, so entries of different models, codecs and tenants never mix. Token vectors are counted by
 * the memory they hold: entries whose vectors share one buffer (texts read together,
 * TextCacheReader) count it once, from the first entry set to the last one dropped.
 */
export class TextMemoryCache {
  private readonly entries = new Map<string, CachedText>();
  /** Entries held per vectors buffer. */
  private readonly holders = new Map<ArrayBufferLike, number>();
  private bytes = 0;

  constructor(readonly maxBytes: number) {}

  /** Bytes the cache holds (what maxBytes bounds). */
  get heldBytes(): number {
    return this.bytes;
  }

  get(key: string, ttlMs: number, now = Date.now()): CachedText | undefined {
    const e = this.entries.get(key);
    if (!e) return undefined;
    if (now - e.encodedAt > ttlMs) {
      this.delete(key);
      return undefined;
    }
    this.entries.delete(key);
    this.entries.set(key, e);
    return e;
  }

  set(key: string, e: CachedText): void {
    if (e.vectors.buffer.byteLength + e.docVector.byteLength + e.tokenIds.byteLength + key.length * 2 > this.maxBytes) return;
    this.delete(key);
    this.entries.set(key, e);
    const held = this.holders.get(e.vectors.buffer) ?? 0;
    this.holders.set(e.vectors.buffer, held + 1);
    this.bytes += (held === 0 ? e.vectors.buffer.byteLength : 0) + e.docVector.byteLength + e.tokenIds.byteLength + key.length * 2;
    while (this.bytes > this.maxBytes) this.delete(this.entries.keys().next().value as string);
  }

  private delete(key: string): void {
    const e = this.entries.get(key);
    if (!e) return;
    this.entries.delete(key);
    const held = this.holders.get(e.vectors.buffer)! - 1;
    if (held === 0) this.holders.delete(e.vectors.buffer);
    else this.holders.set(e.vectors.buffer, held);
    this.bytes -= (held === 0 ? e.vectors.buffer.byteLength : 0) + e.docVector.byteLength + e.tokenIds.byteLength + key.length * 2;
  }
}

/** Runs `fn` over items with at most `limit` in flight. */
export async function mapLimit<T, R>(items: T[], limit: number, fn: (item: T, i: number) => Promise<R>): Promise<R[]> {
  const out: R[] = new Array(items.length);
  let next = 0;
  const worker = async () => {
    while (next < items.length) {
      const i = next++;
      out[i] = await fn(items[i], i);
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
  return out;
}

/** Largest buffer texts read together share (TextCacheReader.read). */
const PACKED_BYTES = 16 << 20;

/** The entries with their token vectors copied one after another into shared buffers of at most `maxBytes` (an entry larger than that keeps its own). */
export function packVectors(entries: (CachedText | null)[], maxBytes: number): (CachedText | null)[] {
  const out = entries.slice();
  let i = 0;
  while (i < entries.length) {
    let j = i;
    let bytes = 0;
    while (j < entries.length && bytes + (entries[j]?.vectors.byteLength ?? 0) <= maxBytes) bytes += entries[j++]?.vectors.byteLength ?? 0;
    if (j === i) {
      i++; // larger than a buffer: kept as it is
      continue;
    }
    if (j - i > 1) {
      const buf = new Float32Array(bytes / 4);
      let off = 0;
      for (let k = i; k < j; k++) {
        const e = entries[k];
        if (!e) continue;
        buf.set(e.vectors, off);
        out[k] = { ...e, vectors: buf.subarray(off, off + e.vectors.length) };
        off += e.vectors.length;
      }
    }
    i = j;
  }
  return out;
}

/** Reads cached texts (memory first, then S3), decoded; a missing or expired text is null. */
export class TextCacheReader {
  constructor(
    private readonly deps: { store: Pick<ObjectStore, 'get'>; codecs: Pick<CodecArtifactRepository, 'get'>; memory: TextMemoryCache; ttlDays: number },
  ) {}

  get ttlMs(): number {
    return this.deps.ttlDays * DAY_MS;
  }

  /**
   * The texts, in order (null: missing or expired). Texts read from S3 together get their token
   * vectors packed one after another in shared buffers (in the order asked, up to
   * PACKED_BYTES each, at most an eighth of the memory cache): a batch chunk asks for its lists'
   * texts in list order, so a list read together is one run of rows that MaxSim takes as it lies
   * (GemmMaxsim.scoreBlocks), with no copy per scoring.
   */
  async read(space: TextSpace, hashes: string[]): Promise<(CachedText | null)[]> {
    // Memory first, in one pass (a batch chunk finds thousands of texts there); S3 for the rest.
    const out: (CachedText | null)[] = new Array(hashes.length).fill(null);
    const misses: { at: number; key: string }[] = [];
    hashes.forEach((h, at) => {
      const key = textKey(space, h);
      const hit = this.deps.memory.get(key, this.ttlMs);
      if (hit) out[at] = hit;
      else misses.push({ at, key });
    });
    if (misses.length === 0) return out;
    const artifact = space.codec ? await this.deps.codecs.get(space.tenantId, space.codec.collectionId, space.codec.codecVersion).catch(() => undefined) : undefined;
    const decoded = await mapLimit(misses, 16, async ({ key }) => {
      const bytes = await this.deps.store.get(key);
      return bytes ? decodeTextEntry(bytes, key, artifact ?? undefined, this.ttlMs) : null;
    });
    const packed = packVectors(decoded, Math.min(PACKED_BYTES, Math.floor(this.deps.memory.maxBytes / 8)));
    misses.forEach(({ at, key }, i) => {
      const e = packed[i];
      if (e) this.deps.memory.set(key, e);
      out[at] = e;
    });
    return out;
  }
}

/**
 * Deletes every tenant's cached texts older than the TTL (by their S3 last-modified time; reads also
 * refuse expired entries, so a late cleanup never serves stale vectors). Returns how many it deleted.
 */
export async function cleanupTextCache(store: Pick<ObjectStore, 'delete' | 's3' | 'bucket'>, ttlDays: number, now = Date.now()): Promise<number> {
  let deleted = 0;
  for await (const o of listWithDates(store, textKeys.cacheRoot)) {
    if (o.lastModified && now - o.lastModified.getTime() > ttlDays * DAY_MS) {
      await store.delete(o.key);
      deleted++;
    }
  }
  return deleted;
}

