import { IMAGE_MAX_BITS, SegmentCorruptError, codecFromDescriptor, readSegment, type Codec, type CodecArtifact, type CodecDescriptor, type EdenCodec, type EdenQueryLut, type PrefixSection, type SegmentReader } from '@lateral/codec';
import { parseSegmentHead, segmentHeadData, serializeSegmentHead, type SegmentHeadData } from './segment-head';
import { s3Keys, type Collection, type SegmentRef } from '@lateral/shared';
import type { CodecArtifactRepository, DiskCacheStats } from '@lateral/infra';
import { deserializeSegmentIndex, type SegmentIndex, type WarpDirectory, type WarpLayoutReader, type WarpList } from '@lateral/search';
import { type GenerationTable, type SegmentIdTable } from './id-table';
import { segmentReadOptions, type StaticEmbeddingsCache } from './static-embeddings';
import { eventLoopYielder } from './event-loop';
import { ByteLru, type ByteLruStats } from './byte-lru';
import { Limiter } from './limiter';
import { SegmentUnavailableError, type SearchNeeds, type SegmentHealthListener } from './search-plan';

/** What the segment cache reads objects through: S3, normally behind the local disk cache. */
export interface ObjectSource {
  get(key: string): Promise<Uint8Array | null>;
  invalidate?(key: string): Promise<void>;
  stats?(): DiskCacheStats;
  /**
   * Byte ranges [offset, offset + length) of an object, read from its local copy (positioned
   * reads: the object is not held in memory); null when the source keeps no local copy. When the
   * copy has to be fetched for this read, the whole object goes to `check` first (a throw
   * propagates and no copy is kept). `into`: where ranges read synchronously from the local copy
   * go (given the bytes needed, a buffer of at least that many starting on a multiple of 8 that the
   * caller owns until it is done with the result, e.g. a scratch reused across searches); absent,
   * or for other reads, a new buffer.
   */
  readRanges?(key: string, ranges: readonly (readonly [number, number])[], check?: (bytes: Uint8Array) => Promise<void>, into?: (bytes: number) => Uint8Array): Promise<Uint8Array[] | null>;
  /**
   * true: `getRanges` reads byte ranges of an object by ranged GETs (the disk cache keeps what they
   * fetched), never fetching it whole; absent or false: ranges come from `readRanges` or `get`.
   */
  ranged?: boolean;
  /** Byte ranges of an object, each from a local copy or one ranged GET; null when the object is missing (DiskObjectCache.getRanges). */
  getRanges?(key: string, ranges: readonly (readonly [number, number])[]): Promise<Uint8Array[] | null>;
  /** An object this process derived and kept locally (a segment's head), or null; never read from S3. */
  getLocal?(key: string): Promise<Uint8Array | null>;
  /** Keeps a derived object locally, beside the copies (best effort). */
  putLocal?(key: string, bytes: Uint8Array): Promise<void>;
}

/** The local key of a segment's head, beside its copy (segment-head.ts). */
export const HEAD_SUFFIX = '#head-v1';

export interface SegmentCacheOptions {
  /** Bytes of segments, indexes and derived arrays kept in memory (SCORER_CACHE_BYTES). */
  maxBytes: number;
  /** Segment and index loads at once (SCORER_LOAD_CONCURRENCY). */
  loadConcurrency: number;
  /** false: EDEN token-layout segments are decoded to fp32 too (COMPRESSED_SCORING=decode). */
  scoreFromCodes: boolean;
  /**
   * true (SCORER_RERANK_READS=ranges, with a disk cache): a re-rank reads its candidates' code and
   * norm bytes with positioned reads of the segments' local copies, and the memory cache keeps of
   * a segment only its head (ids, token offsets, where each document's codes start); false: a
   * re-rank loads whole segments into the memory cache.
   */
  rangeReads?: boolean;
  /**
   * true (SCORER_SCAN_ORDER=alternate): search walks go through a generation's segments in manifest
   * order and in reverse by turns (SearchPlan.reversed), so each walk begins with what the one
   * before left in the cache; false or absent: manifest order always.
   */
  alternateScans?: boolean;
  /**
   * WARP search layouts no larger than this many bytes are read whole (one read) and kept whole in
   * the memory cache (a fresh small segment: later queries slice their probed lists from memory,
   * each list verified once); larger ones are read by their probed lists' byte ranges, and each
   * list read is kept in the memory cache (hot lists). Default min(WARP_WHOLE_READ_BYTES,
   * maxBytes / 16); 0: always by ranges.
   */
  warpLayoutInMemoryBytes?: number;
  /**
   * Two probed lists of a segment are read in one range when at most this many bytes of other
   * lists lie between them (the bytes between are read and dropped). Default
   * WARP_RANGE_GAP_BYTES (32 KiB; SCORER_WARP_RANGE_GAP_BYTES).
   */
  warpRangeGapBytes?: number;
  /**
   * The ids of a segment in its document order, read from elsewhere than the segment (the
   * batch's info.json), for a segment that cannot be read: its candidates are then named as
   * unavailable, and older copies of its ids are not served in its place. null: not known.
   */
  segmentIds?: (tenantId: string, collectionId: string, ref: SegmentRef) => Promise<readonly string[] | null>;
  /** Told once when an object turns unavailable, and when it reads again. */
  health?: SegmentHealthListener;
  /** How long an unreadable object is answered from memory before S3 is read again (ms, default UNAVAILABLE_RECHECK_MS). */
  recheckMs?: number;
}

/** Stored segment heads read at once, per segment load allowed at once (SCORER_LOAD_CONCURRENCY). */
export const HEAD_READS_PER_LOAD = 4;

/** An unreadable object is read again from S3 after this long (a rewrite, e.g. a restore from backup, is then picked up). */
export const UNAVAILABLE_RECHECK_MS = 30_000;

export interface SegmentCacheStats extends ByteLruStats {
  /** Most segment / index loads that ran at once. */
  loadPeak: number;
  /** Segment heads read from S3 (the index stage's), instead of made from a whole read. */
  storedHeads: number;
  disk?: DiskCacheStats;
}

export interface LoadedSegment {
  reader: SegmentReader;
  artifact: CodecArtifact;
}

/**
 * What a re-rank (or a search that needs no whole segment) keeps of a segment when reading ranges
 * (SegmentCacheOptions.rangeReads): its head (segment-head.ts), made from one checked read of the
 * whole object and kept beside the local copy, and the EDEN image codec when the segment can be
 * scored from its codes (else null: re-rank then loads the segment).
 */
export type SegmentHead = SegmentHeadData & { image: ImageCodec | null };

/** A generation's id table; `unknown`: segments that could not be read and whose ids are not known either (not kept). */
export type GenTable = GenerationTable & { unknown?: number[] };

export interface BadObject {
  object: 'segment' | 'index';
  segment: string;
  reason: string;
  /** Read S3 again after this time. */
  until: number;
  /** The health listener heard of it. */
  reported: boolean;
}

export interface ImageCodec {
  codec: EdenCodec;
  descriptor: string;
  p: number;
}

export type Cached = LoadedSegment | SegmentHead | SegmentIdTable | GenerationTable | SegmentIndex | WarpDirectory | WarpLayoutReader | WarpList | Float32Array | PrefixSection | { codes: Uint8Array; norms: Uint8Array } | null;

/**
 * What the segment cache's parts share (SegmentCache coordinates them): the byte-bounded memory
 * cache, the load limiters, the objects known unreadable, and the loads every part reads through:
 * a segment whole and checked, its head, its search index, its codecs. Internal to this library:
 * warp-reads.ts, head-sections.ts, decode-keeping.ts, candidate-view.ts and generation-tables.ts
 * are functions over one store.
 */
export class SegmentStore {
  readonly lru: ByteLru<Cached>;
  readonly limiter: Limiter;
  /** Stored heads (~30 B per document) are read more at once than segments: their GETs are latency, not bytes. */
  readonly headLimiter: Limiter;
  /** Per collection, the last generation whose table was built (its cache key and segments), to extend it. */
  readonly lastTable = new Map<string, { key: string; segments: SegmentRef[] }>();
  /** Objects that could not be read, by S3 key: answered from here until their recheck time. */
  readonly bad = new Map<string, BadObject>();
  /** Awaited before each decode: a cold generation of hundreds of segments decodes them in turn, not in one hold of the event loop. */
  readonly yieldTurn = eventLoopYielder();
  /** Per query (its vectors' array, held by the search while it runs), the EDEN query tables by codec descriptor and seed (rowScorer). */
  readonly queryLuts = new WeakMap<Float32Array, Map<string, EdenQueryLut>>();
  /** Segments whose head came from S3 and whose bytes this process has not checked yet (verifiedCopy). */
  readonly unverified = new Set<string>();
  readonly verifying = new Map<string, Promise<void>>();
  /** Heads read from S3 (stats: a cold scorer reading heads, not objects). */
  storedHeadReads = 0;
  /** EDEN codecs of the rotated images, by descriptor and seed (imageCodec). */
  readonly imageCodecs = new Map<string, ImageCodec>();
  /** Codecs that decode documents read by ranges (documentRows), by collection, codec version and descriptor. */
  readonly decodeCodecs = new Map<string, Codec>();

  constructor(
    readonly source: ObjectSource,
    readonly codecs: Pick<CodecArtifactRepository, 'get'>,
    readonly staticEmbeddings: Pick<StaticEmbeddingsCache, 'forCollection'>,
    readonly opts: SegmentCacheOptions,
  ) {
    this.lru = new ByteLru(opts.maxBytes);
    this.limiter = new Limiter(opts.loadConcurrency);
    this.headLimiter = new Limiter(HEAD_READS_PER_LOAD * opts.loadConcurrency);
  }

  /** The segment's head (SegmentHead), from the segment already held or from one checked read of its object. */
  async head(collection: Pick<Collection, 'tenantId' | 'id' | 'model'>, ref: SegmentRef): Promise<SegmentHead> {
    return this.guarded(collection, ref.key, 'segment', ref.key, async () =>
      (await this.lru.get(`head:${ref.key}`, async () => {
        const value = await this.headOf(collection, ref);
        return { value, bytes: stringBytes(value.docIds) + value.tokenOffsets.byteLength + value.codeStart.byteLength + value.normStart.byteLength + 256 };
      })) as SegmentHead,
    );
  }

  /**
   * A segment's head: the one kept beside its local copy when there is one for this object (a
   * scorer started again reads heads, not every object); else, when the manifest says there is
   * one (`SegmentRef.head`), the one the index stage stored in S3 beside the segment (a scorer with an empty disk reads ~30 B per document, not every object
   * whole; the segment's bytes are then checked once before anything reads ranges of them,
   * `verifiedCopy`); else from the segment held or one checked read of its object. A head kept
   * beside a local copy always comes from a checked read of that copy.
   */
  async headOf(collection: Pick<Collection, 'tenantId' | 'id' | 'model'>, ref: SegmentRef): Promise<SegmentHead> {
    const localKey = `${ref.key}${HEAD_SUFFIX}`;
    const held = this.lru.peek(`seg:${ref.key}`) as LoadedSegment | undefined;
    if (!held && this.source.getLocal) {
      const bytes = await this.source.getLocal(localKey);
      const data = bytes && parseSegmentHead(bytes);
      if (data && data.objectBytes === ref.bytes && data.documents === ref.documents) {
        const artifact = await this.codecs.get(collection.tenantId, collection.id, ref.codecVersion);
        return { ...data, image: this.imageCodecFor(data.codec, data.seed, data.dims, artifact) };
      }
      if (bytes) await this.source.invalidate?.(localKey); // not this object's head: made again
      const stored = ref.head ? await this.storedHead(collection, ref) : null;
      if (stored) return stored;
    }
    const { loaded, objectBytes } = held ? { loaded: held, objectBytes: ref.bytes } : await this.limiter.run(() => this.readObject(collection, ref));
    return { ...(await this.keepHead(ref, loaded, objectBytes)), image: this.imageCodec(loaded) };
  }

  /** The head of a segment just read and checked, kept beside its local copy; its bytes count as checked from now on. */
  async keepHead(ref: SegmentRef, loaded: LoadedSegment, objectBytes: number): Promise<SegmentHeadData> {
    const data = segmentHeadData(loaded.reader, objectBytes);
    await this.source.putLocal?.(`${ref.key}${HEAD_SUFFIX}`, serializeSegmentHead(data));
    this.unverified.delete(ref.key);
    return data;
  }

  /** The head stored in S3 for this object (index stage, merge), or null: none (a segment written before heads were stored), or not this object's. */
  async storedHead(collection: Pick<Collection, 'tenantId' | 'id' | 'model'>, ref: SegmentRef): Promise<SegmentHead | null> {
    const key = s3Keys.segmentHead(collection.tenantId, collection.id, ref.batchId, ref.codecVersion);
    const bytes = await this.headLimiter.run(() => this.source.get(key));
    const data = bytes && parseSegmentHead(bytes);
    if (!data || data.objectBytes !== ref.bytes || data.documents !== ref.documents) {
      if (bytes) await this.source.invalidate?.(key);
      return null;
    }
    this.storedHeadReads++;
    this.unverified.add(ref.key);
    const artifact = await this.codecs.get(collection.tenantId, collection.id, ref.codecVersion);
    return { ...data, image: this.imageCodecFor(data.codec, data.seed, data.dims, artifact) };
  }

  /**
   * Before ranges of a segment's local copy are read: when its head came from S3 and this process
   * has not checked the segment's bytes, one checked read of the whole object (a corrupt segment is
   * named unavailable here, as a whole read would name it), after which its head is kept beside
   * the local copy. Concurrent callers share the read.
   */
  async verifiedCopy(collection: Pick<Collection, 'tenantId' | 'id' | 'model'>, ref: SegmentRef): Promise<void> {
    if (!this.unverified.has(ref.key)) return;
    let check = this.verifying.get(ref.key);
    if (!check) {
      check = this.guarded(collection, ref.key, 'segment', ref.key, async () => {
        const { loaded, objectBytes } = await this.limiter.run(() => this.readObject(collection, ref));
        await this.keepHead(ref, loaded, objectBytes);
      }).finally(() => this.verifying.delete(ref.key));
      this.verifying.set(ref.key, check);
    }
    await check;
  }

  /** A segment's head, its bytes checked when they are to be read by ranges (verifiedCopy). */
  async checkedHead(collection: Pick<Collection, 'tenantId' | 'id' | 'model'>, ref: SegmentRef): Promise<SegmentHead> {
    const head = await this.head(collection, ref);
    await this.verifiedCopy(collection, ref);
    return head;
  }
  /** A segment's ids in order: from its head when `viaHead` and the segment is not held whole, else from the segment. */
  async docIdsOf(collection: Pick<Collection, 'tenantId' | 'id' | 'model'>, ref: SegmentRef, viaHead: boolean): Promise<readonly string[]> {
    return viaHead && !this.lru.has(`seg:${ref.key}`) ? (await this.head(collection, ref)).docIds : (await this.segment(collection, ref)).reader.docIds;
  }

  /** Whether a search with these needs reads segments' heads rather than whole segments (where it can). */
  readsHeads(needs: SearchNeeds): boolean {
    return needs.rows !== 'vectors' && !needs.tokenIds && !needs.metadata && !!this.opts.rangeReads && !!this.source.readRanges;
  }
  /**
   * Runs `load` for an object unless it is known unreadable (then throws at once, until its
   * recheck time), and remembers an object that turns out unreadable. A corrupt or missing
   * object is not retried by the job: its bytes will not get better by themselves.
   */
  async guarded<T>(collection: Pick<Collection, 'tenantId' | 'id'>, key: string, object: 'segment' | 'index', segment: string, load: () => Promise<T>): Promise<T> {
    const b = this.bad.get(key);
    if (b && Date.now() < b.until) throw new SegmentUnavailableError(key, b.object, b.segment, b.reason);
    try {
      const value = await load();
      if (b && this.bad.delete(key) && b.reported) this.opts.health?.recovered({ tenantId: collection.tenantId, collectionId: collection.id, key, object: b.object });
      return value;
    } catch (err) {
      if (!(err instanceof SegmentUnavailableError)) throw err;
      const until = Date.now() + (this.opts.recheckMs ?? UNAVAILABLE_RECHECK_MS);
      // Concurrent requests share one failed load: the entry another one made is kept (reported once).
      const now = this.bad.get(key);
      if (now && now.reason === err.reason) now.until = until;
      else this.bad.set(key, { object, segment, reason: err.reason, until, reported: false });
      throw err;
    }
  }

  /** Keys of the objects known unreadable now (for tests and stats). */
  unavailableKeys(): string[] {
    return [...this.bad.keys()];
  }

  async segment(collection: Pick<Collection, 'tenantId' | 'id' | 'model'>, ref: SegmentRef): Promise<LoadedSegment> {
    return this.guarded(collection, ref.key, 'segment', ref.key, async () =>
      (await this.lru.get(`seg:${ref.key}`, () =>
        this.limiter.run(async () => {
          const { loaded, objectBytes } = await this.readObject(collection, ref);
          const { reader } = loaded;
          const own = reader.docVectors ? reader.docVectors.byteLength : 0;
          // The object's bytes (the reader's copies of its sections), fp32 doc vectors made from fp16, the ids' strings and the per-document code and norm starts (2 x float64; and prefix row starts, uint32, where there is a prefix section).
          return { value: loaded, bytes: objectBytes + own + stringBytes(reader.docIds) + (reader.prefixRows > 0 ? 20 : 16) * (reader.documents + 1) };
        }),
      )) as LoadedSegment,
    );
  }

  /** Reads and checks a segment's object (every section's CRC); a corrupt local copy is dropped, and the segment named unavailable. */
  async readObject(collection: Pick<Collection, 'tenantId' | 'id' | 'model'>, ref: SegmentRef): Promise<{ loaded: LoadedSegment; objectBytes: number }> {
    const [bytes, artifact] = await Promise.all([this.source.get(ref.key), this.codecs.get(collection.tenantId, collection.id, ref.codecVersion)]);
    if (!bytes) throw new SegmentUnavailableError(ref.key, 'segment', ref.key, `segment ${ref.key} of the current generation is missing from S3`);
    return { loaded: await this.parseObject(collection, ref, bytes, artifact), objectBytes: bytes.byteLength };
  }

  /**
   * The check given to `readRanges`: a segment's copy fetched again for a range read (evicted from
   * the disk cache since it was first checked) is parsed and checked whole before its ranges are
   * used; a corrupt one is named unavailable as a whole read would name it.
   */
  copyCheck(collection: Pick<Collection, 'tenantId' | 'id' | 'model'>, ref: SegmentRef): (bytes: Uint8Array) => Promise<void> {
    return (bytes) =>
      this.guarded(collection, ref.key, 'segment', ref.key, async () => {
        await this.parseObject(collection, ref, bytes, await this.codecs.get(collection.tenantId, collection.id, ref.codecVersion));
      });
  }

  /** A segment's object bytes read and checked (every section's CRC32C); a corrupt object is dropped from the local cache and named unavailable. */
  async parseObject(collection: Pick<Collection, 'tenantId' | 'id' | 'model'>, ref: SegmentRef, bytes: Uint8Array, artifact: CodecArtifact): Promise<LoadedSegment> {
    await this.yieldTurn();
    try {
      const reader = readSegment(bytes, ref.key, artifact, await segmentReadOptions(artifact, collection, this.staticEmbeddings));
      return { reader, artifact };
    } catch (err) {
      if (err instanceof SegmentCorruptError) {
        await this.source.invalidate?.(ref.key); // a corrupt local copy is read from S3 next time
        throw new SegmentUnavailableError(ref.key, 'segment', ref.key, err.message);
      }
      throw err;
    }
  }

  async index(collection: Pick<Collection, 'tenantId' | 'id'>, ref: SegmentRef): Promise<SegmentIndex> {
    const indexKey = s3Keys.segmentIndex(collection.tenantId, collection.id, ref.batchId, ref.codecVersion);
    return this.guarded(collection, indexKey, 'index', ref.key, async () =>
      (await this.lru.get(`idx:${indexKey}`, () =>
        this.limiter.run(async () => {
          const bytes = await this.source.get(indexKey);
          if (!bytes)
            throw new SegmentUnavailableError(indexKey, 'index', ref.key, `search index ${indexKey} of a committed segment is missing from S3 (segments committed before 0.2 have none: re-compress the collection to index it)`);
          await this.yieldTurn();
          try {
            return { value: deserializeSegmentIndex(bytes, indexKey), bytes: bytes.byteLength };
          } catch (err) {
            await this.source.invalidate?.(indexKey);
            if (err instanceof SegmentCorruptError) throw new SegmentUnavailableError(indexKey, 'index', ref.key, err.message);
            throw err;
          }
        }),
      )) as SegmentIndex,
    );
  }
  /**
   * The codec that makes the segment's int8 rotated image when it is EDEN token layout
   * (bits <= IMAGE_MAX_BITS, no side information), else null. Segments share one codec (and one
   * rotation) when their descriptor and seed are the same; codecs are few (one per codec version
   * and seed) and small, so they are kept outside the byte-bounded cache.
   */
  imageCodec(loaded: LoadedSegment): ImageCodec | null {
    return this.imageCodecFor(loaded.reader.codec, loaded.reader.seed, loaded.reader.dims, loaded.artifact);
  }

  imageCodecFor(d: CodecDescriptor, seed: bigint, dims: number, artifact: CodecArtifact): ImageCodec | null {
    if (!(d.kind === 'eden' && d.layout === 'token' && !d.sideInfo && (d.bits ?? 8) <= IMAGE_MAX_BITS && d.artifact)) return null;
    const descriptor = `${JSON.stringify(d)}#${seed}`;
    let c = this.imageCodecs.get(descriptor);
    if (!c) {
      const codec = codecFromDescriptor(d, artifact) as EdenCodec;
      c = { codec, descriptor, p: codec.paddedDims(dims) };
      if (this.imageCodecs.size >= 64) this.imageCodecs.delete(this.imageCodecs.keys().next().value!);
      this.imageCodecs.set(descriptor, c);
    }
    return c;
  }}

/** Approximate heap bytes of strings (UTF-16 plus the string header). */
export function stringBytes(ids: readonly string[]): number {
  let n = 0;
  for (const s of ids) n += 2 * s.length + 24;
  return n;
}
