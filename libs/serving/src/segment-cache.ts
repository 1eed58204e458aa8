import { IMAGE_MAX_BITS, SegmentCorruptError, codecFromDescriptor, decodeHalf, prefixRowBytes, prefixSectionBytes, readSegment, splitPrefixSection, type Codec, type CodecArtifact, type CodecDescriptor, type EdenCodec, type EdenQueryLut, type PrefixSection, type SegmentReader } from '@lateral/codec';
import { parseSegmentHead, segmentHeadData, serializeSegmentHead, type SegmentHeadData } from './segment-head';
import { s3Keys, type Collection, type CollectionManifest, type SegmentRef, type UnavailableSegment } from '@lateral/shared';
import type { CodecArtifactRepository, DiskCacheStats } from '@lateral/infra';
import {
  WARP_HEADER_BYTES,
  WarpLayoutCorruptError,
  concatDocPrefixes,
  deserializeSegmentIndex,
  docPrefixesOf,
  parseWarpDirectory,
  prefixScanOf,
  searchSegment,
  warpCoalescedRanges,
  warpDirectoryBytes,
  readWarpList,
  openWarpLayout,
  type RowScorer,
  type SegmentIndex,
  type SegmentSource,
  type WarpDirectory,
  type WarpLayoutExpectations,
  type WarpListSource,
  type WarpLayoutReader,
  type WarpList,
} from '@lateral/search';
import type { RotatedImageSet } from '@lateral/kernels';
import type { CollectionView } from './collection-view';
import { extendGenerationTable, findId, generationTable, generationTableBytes, segmentIdTable, type GenerationTable, type SegmentIdTable } from './id-table';
import { segmentReadOptions, type StaticEmbeddingsCache } from './static-embeddings';
import { eventLoopYielder } from './event-loop';
import { ByteLru, type ByteLruStats } from './byte-lru';
import { Limiter } from './limiter';
import { ALL_SEARCH_NEEDS, SegmentUnavailableError, type LazySearchPart, type SearchGeneration, type SearchNeeds, type SearchPart, type SearchPlan, type SegmentHealthListener } from './search-plan';

/** What the segment cache reads objects through: S3, normally behind the local disk cache. */
export interface ObjectSource {
  get(key: string): Promise<Uint8Array | null>;
  invalidate?(key: string): Promise<void>;
  stats?(): DiskCacheStats;
  /**
   * Byte ranges [offset, offset + length) of an object, read from its local copy (positioned
   * reads: the object is not held in memory); null when the source keeps no local copy. When the
   * copy has to be fetched for this read, the whole object goes to `check` first (a throw
   * propagates and no copy is kept).
   */
  readRanges?(key: string, ranges: readonly (readonly [number, number])[], check?: (bytes: Uint8Array) => Promise<void>): Promise<Uint8Array[] | null>;
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
   * WARP_RANGE_GAP_BYTES.
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

/**
 * A segment's whole fp32 decode is kept for search only when it is at most this fraction of the
 * cache bound; larger segments are decoded range by range at each search (decodedDocs).
 */
export const WHOLE_DECODE_FRACTION = 16;

/**
 * WARP layouts up to this size are read whole by default (SegmentCacheOptions.warpLayoutInMemoryBytes):
 * a fresh batch's segment (1,024 documents of ~55 tokens: ~3.7 MB at 4 bits) has lists of a few
 * hundred bytes, and a query probes ~1,000 of them: one GET of 4 MiB (~50 ms at 10 ms + 100 MB/s)
 * costs less than ~1,000 ranged GETs (~160 ms at 64 in flight), and the merge policy keeps such
 * segments few (docs/segment-format.md, "Reading a layout by ranges"). Merged layouts of a few tens
 * of MB are read whole too: a scorer that keeps answering queries pays one GET of such a layout
 * (~0.7 s for 64 MiB at 100 MB/s) once, against ~100 ranged reads every query while its lists are
 * not yet hot (full Vaswani: search job p50 172 ms by ranges, 25 ms with the layouts whole;
 * docs/benchmarks.md, "WARP"). Layouts larger than this (a large collection's merged segments)
 * keep the ranged path, so a cold scorer's first query still fetches only its probed lists there.
 */
export const WARP_WHOLE_READ_BYTES = 64 << 20;

/** Default gap (bytes of other lists) across which two probed lists are read in one range. */
export const WARP_RANGE_GAP_BYTES = 0;

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

interface LoadedSegment {
  reader: SegmentReader;
  artifact: CodecArtifact;
}

/**
 * What a re-rank (or a search that needs no whole segment) keeps of a segment when reading ranges
 * (SegmentCacheOptions.rangeReads): its head (segment-head.ts), made from one checked read of the
 * whole object and kept beside the local copy, and the EDEN image codec when the segment can be
 * scored from its codes (else null: re-rank then loads the segment).
 */
type SegmentHead = SegmentHeadData & { image: ImageCodec | null };

/** A generation's id table; `unknown`: segments that could not be read and whose ids are not known either (not kept). */
type GenTable = GenerationTable & { unknown?: number[] };

interface BadObject {
  object: 'segment' | 'index';
  segment: string;
  reason: string;
  /** Read S3 again after this time. */
  until: number;
  /** The health listener heard of it. */
  reported: boolean;
}

interface ImageCodec {
  codec: EdenCodec;
  descriptor: string;
  p: number;
}

type Cached = LoadedSegment | SegmentHead | SegmentIdTable | GenerationTable | SegmentIndex | WarpDirectory | WarpLayoutReader | WarpList | Float32Array | PrefixSection | { codes: Uint8Array; norms: Uint8Array } | null;

/** Memory a kept WARP list costs beyond its bytes (its object and typed-array views), for the cache bound. */
const WARP_LIST_OVERHEAD_BYTES = 256;

/** Most centroids a WARP layout header may name before its directory is read (a corrupt header is refused, not allocated). */
const WARP_MAX_CENTROIDS = 1 << 24;

/** What one segment's probed WARP lists cost to read (WarpLists). */
export interface WarpListReads {
  /** The probed lists, verified against the directory (each list's CRC-32) as they were read. */
  lists: WarpListSource;
  /** Bytes of the probed lists (from memory or read now). */
  bytes: number;
  /** Bytes read now from the layout object (its local copy or ranged GETs: the coalesced ranges; 0 when every list was in memory). */
  fetched: number;
  /** Ranged reads issued (0 when every list was in memory, or the layout was read whole). */
  ranges: number;
}

/**
 * A scorer's memory: segments, not generations. One byte-bounded LRU (SCORER_CACHE_BYTES) holds,
 * by S3 key, each segment's reader, its sorted id table, its search index and its decoded fp32
 * vectors (each made when first needed), plus one id table per
 * generation. Segments are immutable, so a new generation reuses everything already loaded and
 * committing a batch costs loading that batch; a re-rank finds its candidates in the
 * generation's sorted id table and builds the int8 image (or vectors) of those documents only. Objects
 * are read through the local disk cache, at most `loadConcurrency` at a time (a generation of
 * hundreds of segments queues behind the limiter, never issues every read at once), and the
 * event loop is yielded between decodes.
 */
export class SegmentCache {
  private readonly lru: ByteLru<Cached>;
  private readonly limiter: Limiter;
  /** Stored heads (~30 B per document) are read more at once than segments: their GETs are latency, not bytes. */
  private readonly headLimiter: Limiter;
  /** Per collection, the last generation whose table was built (its cache key and segments), to extend it. */
  private readonly lastTable = new Map<string, { key: string; segments: SegmentRef[] }>();
  /** Objects that could not be read, by S3 key: answered from here until their recheck time. */
  private readonly bad = new Map<string, BadObject>();
  /** Awaited before each decode: a cold generation of hundreds of segments decodes them in turn, not in one hold of the event loop. */
  private readonly yieldTurn = eventLoopYielder();
  /** Per query (its vectors' array, held by the search while it runs), the EDEN query tables by codec descriptor and seed (rowScorer). */
  private readonly queryLuts = new WeakMap<Float32Array, Map<string, EdenQueryLut>>();
  /** Segments whose head came from S3 and whose bytes this process has not checked yet (verifiedCopy). */
  private readonly unverified = new Set<string>();
  /** Search walks begun (alternateScans: odd ones go in reverse). */
  private walks = 0;
  private readonly verifying = new Map<string, Promise<void>>();
  /** Heads read from S3 (stats: a cold scorer reading heads, not objects). */
  private storedHeadReads = 0;
  /** EDEN codecs of the rotated images, by descriptor and seed (imageCodec). */
  private readonly imageCodecs = new Map<string, ImageCodec>();
  /** Codecs that decode documents read by ranges (documentRows), by collection, codec version and descriptor. */
  private readonly decodeCodecs = new Map<string, Codec>();

  constructor(
    private readonly source: ObjectSource,
    private readonly codecs: Pick<CodecArtifactRepository, 'get'>,
    private readonly staticEmbeddings: Pick<StaticEmbeddingsCache, 'forCollection'>,
    private readonly opts: SegmentCacheOptions,
  ) {
    this.lru = new ByteLru(opts.maxBytes);
    this.limiter = new Limiter(opts.loadConcurrency);
    this.headLimiter = new Limiter(HEAD_READS_PER_LOAD * opts.loadConcurrency);
  }

  stats(): SegmentCacheStats {
    const disk = this.source.stats?.();
    return { ...this.lru.stats(), loadPeak: this.limiter.peak, storedHeads: this.storedHeadReads, ...(disk ? { disk } : {}) };
  }

  /** Keys held now, least recently used first (for tests and debugging). */
  heldKeys(): string[] {
    return this.lru.keys();
  }

  /**
   * The fp32 token rows of documents named by where they lie (`where`: [segment, document] pairs,
   * e.g. a search's hits), in that order, without finding ids or building a view: WARP's exact
   * final stage. Per segment: from its reader when the memory cache holds it (that document
   * decoded alone, or sliced from a kept whole decode); else, with range reads on, its head
   * (cached) and one positioned read of each document's codes and norms from the local copy,
   * decoded here as the segment's reader decodes them; else the segment loaded as re-rank loads
   * it. A segment is never decoded whole for a few of its documents. A segment that cannot be read
   * goes to `failed` (its documents get no rows); other errors throw.
   */
  async documentRows(
    collection: Pick<Collection, 'tenantId' | 'id' | 'model'>,
    where: readonly (readonly [SegmentRef, number])[],
  ): Promise<{ dims: number; docs: Float32Array; offsets: Uint32Array; failed: Map<string, SegmentUnavailableError> }> {
    const bySegment = new Map<string, { ref: SegmentRef; at: number[] }>();
    where.forEach(([ref], i) => (bySegment.get(ref.key) ?? bySegment.set(ref.key, { ref, at: [] }).get(ref.key)!).at.push(i));
    const rows: (Float32Array | null)[] = new Array(where.length).fill(null);
    const failed = new Map<string, SegmentUnavailableError>();
    let dims = 0;
    await Promise.all(
      [...bySegment.values()].map(async ({ ref, at }) => {
        try {
          const got = await this.segmentDocumentRows(collection, ref, at.map((i) => where[i][1]));
          dims = got.dims;
          at.forEach((i, k) => (rows[i] = got.rows[k]));
        } catch (err) {
          if (!(err instanceof SegmentUnavailableError)) throw err;
          failed.set(ref.key, err);
        }
      }),
    );
    const offsets = new Uint32Array(where.length + 1);
    rows.forEach((r, i) => (offsets[i + 1] = offsets[i] + (r && dims > 0 ? r.length / dims : 0)));
    const docs = new Float32Array(offsets[where.length] * dims);
    rows.forEach((r, i) => r && docs.set(r, offsets[i] * dims));
    return { dims, docs, offsets, failed };
  }

  /** documentRows for one segment's documents `docs` (indexes into it). */
  private async segmentDocumentRows(collection: Pick<Collection, 'tenantId' | 'id' | 'model'>, ref: SegmentRef, docs: readonly number[]): Promise<{ dims: number; rows: Float32Array[] }> {
    const fromReader = (loaded: LoadedSegment) => {
      const r = loaded.reader;
      for (const d of docs) if (!(Number.isInteger(d) && d >= 0 && d < r.documents)) throw new RangeError(`document ${d} is outside segment ${ref.key} (${r.documents} documents)`);
      const whole = this.lru.peek(`dec:${ref.key}`) as Float32Array | undefined;
      const off = r.tokenOffsets;
      return { dims: r.dims, rows: docs.map((d) => (whole ? whole.subarray(off[d] * r.dims, off[d + 1] * r.dims) : r.decodeDoc(d))) };
    };
    const held = this.lru.peek(`seg:${ref.key}`) as LoadedSegment | undefined;
    if (held) return fromReader(held);
    if (this.opts.rangeReads && this.source.readRanges) {
      const h = await this.checkedHead(collection, ref);
      if (!h.codec.sideInfo) {
        for (const d of docs) if (!(Number.isInteger(d) && d >= 0 && d < h.documents)) throw new RangeError(`document ${d} is outside segment ${ref.key} (${h.documents} documents)`);
        const ranges = docs.flatMap((d) => [
          [h.codeAt + h.codeStart[d], h.codeStart[d + 1] - h.codeStart[d]] as const,
          [h.normAt + h.normStart[d], h.normStart[d + 1] - h.normStart[d]] as const,
        ]);
        // A copy fetched again here is checked first; a corrupt one sends the segment to the whole read below, which names it.
        const got = await this.source.readRanges(ref.key, ranges, this.copyCheck(collection, ref)).catch((err: unknown) => {
          if (err instanceof SegmentUnavailableError) return null;
          throw err;
        });
        if (got) {
          const codec = await this.decodeCodec(collection, ref, h.codec);
          const off = h.tokenOffsets;
          return { dims: h.dims, rows: docs.map((d, k) => codec.decodeDoc({ codes: got[2 * k], norms: got[2 * k + 1] }, off[d + 1] - off[d], h.dims, { docId: h.docIds[d], seed: h.seed })) };
        }
      }
    }
    return fromReader(await this.segment(collection, ref));
  }

  /** The codec that decodes a segment's documents (documentRows), made once per collection, codec version and descriptor. */
  private async decodeCodec(collection: Pick<Collection, 'tenantId' | 'id'>, ref: SegmentRef, d: CodecDescriptor): Promise<Codec> {
    const key = `${collection.tenantId}/${collection.id}/${ref.codecVersion}#${JSON.stringify(d)}`;
    let c = this.decodeCodecs.get(key);
    if (!c) {
      c = codecFromDescriptor(d, await this.codecs.get(collection.tenantId, collection.id, ref.codecVersion));
      if (this.decodeCodecs.size >= 64) this.decodeCodecs.delete(this.decodeCodecs.keys().next().value!);
      this.decodeCodecs.set(key, c);
    }
    return c;
  }

  /**
   * The generation's live documents among `ids` as a CollectionView over those documents only
   * (rows in the order of `ids`, unknown and deleted ids left out). Only the segments holding
   * them are loaded beyond their id tables.
   */
  async view(collection: Pick<Collection, 'tenantId' | 'id' | 'model'>, manifest: CollectionManifest, ids: readonly string[]): Promise<CollectionView> {
    const table = await this.table(collection, manifest);
    const found: [string, number, number][] = [];
    const seen = new Set<string>();
    for (const id of ids) {
      if (seen.has(id)) continue;
      seen.add(id);
      const at = findId(table.ids, id);
      if (at >= 0) found.push([id, table.seg[at], table.doc[at]]);
    }
    if (this.opts.rangeReads && this.opts.scoreFromCodes && this.source.readRanges && found.length > 0) {
      const fromRanges = await this.viewFromRanges(collection, manifest, table, found);
      if (fromRanges) return fromRanges;
    }
    const { got: loaded, failed } = await eachSegment(found, (s) => this.segment(collection, manifest.segments[s]));
    const { rowOf, docIds, where, unavailableIds } = splitCandidates(found, failed);
    const unavailable = this.unavailableOf(collection, manifest, table, [...failed.entries()]);
    const touched = [...new Set(where.map(([s]) => s))];
    const dims = loaded.size > 0 ? loaded.get(touched[0])!.reader.dims : 0;
    const offsets = new Uint32Array(docIds.length + 1);
    where.forEach(([s, d], row) => {
      const r = loaded.get(s)!.reader;
      offsets[row + 1] = offsets[row] + (r.tokenOffsets[d + 1] - r.tokenOffsets[d]);
    });
    const tokens = offsets[docIds.length];
    const docVectors = new Float32Array(docIds.length * dims);
    where.forEach(([s, d], row) => {
      const r = loaded.get(s)!.reader;
      if (r.docVectors) docVectors.set(r.docVectors.subarray(d * dims, (d + 1) * dims), row * dims);
    });

    // The int8 rotated image of the candidates' tokens only, made from their codes at each request:
    // caching whole segments' images (128+ B per token against ~80 B of codes) made a re-rank's
    // working set the images of every segment it touches, and thrashed once that passed the bound.
    let rotated: RotatedImageSet | null = null;
    const codecs = this.opts.scoreFromCodes ? touched.map((s) => this.imageCodec(loaded.get(s)!)) : [];
    if (codecs.length > 0 && codecs.every((c) => c !== null && c.descriptor === codecs[0]!.descriptor)) {
      const { codec, p } = codecs[0]!;
      const image = new Uint8Array(tokens * p);
      const scales = new Float32Array(tokens);
      where.forEach(([s, d], row) => {
        const r = loaded.get(s)!.reader;
        codec.rotatedImage(r.encodedDoc(d), r.tokenOffsets[d + 1] - r.tokenOffsets[d], dims, image, scales, offsets[row]);
      });
      rotated = { codec, seed: loaded.get(touched[0])!.reader.seed, dims, p, image, scales, offsets };
    }
    // The candidates' rows only (decodedDocs: from the kept whole decode when there is one, else
    // document by document): decoding every touched segment whole for a few of its documents was
    // most of WARP's exact stage (fp16 segments, a profile of `npm run bench -- peers --exact 64`).
    const rowBlock = (row: number) => {
      const [s, d] = where[row];
      return this.decodedDocs(manifest.segments[s].key, loaded.get(s)!.reader, d, d + 1);
    };
    // Every touched segment's whole decode kept: MaxSim reads each candidate's rows where they
    // are (rowBlocks, GemmMaxsim.scoreBlocks) and the contiguous copy of them all is made only when
    // something asks for `vectors` (issue 31: a re-rank of 100 Cranfield ids allocated and filled
    // ~5.6 MB per request at d = 100, most of the compute thread's garbage under re-rank load).
    const inPlace = !rotated && touched.every((s) => this.keepsWholeDecode(manifest.segments[s].key, loaded.get(s)!.reader));
    let copied: Float32Array | null = null;
    const contiguous = () => {
      if (!copied) {
        copied = new Float32Array(tokens * dims);
        for (let row = 0; row < where.length; row++) copied.set(rowBlock(row), offsets[row] * dims);
      }
      return copied;
    };
    if (!rotated && !inPlace) contiguous();
    const rowVectors = (rows: number[]) => {
      const vectors = rotated ? null : copied;
      if (vectors && rows.length === docIds.length && rows.every((r, i) => r === i)) return { docs: vectors, offsets };
      const out = new Uint32Array(rows.length + 1);
      rows.forEach((r, i) => (out[i + 1] = out[i] + (offsets[r + 1] - offsets[r])));
      const docs = new Float32Array(out[rows.length] * dims);
      rows.forEach((r, i) => {
        if (vectors) docs.set(vectors.subarray(offsets[r] * dims, offsets[r + 1] * dims), out[i] * dims);
        else if (!rotated) docs.set(rowBlock(r), out[i] * dims);
        else docs.set(loaded.get(where[r][0])!.reader.decodeDoc(where[r][1]), out[i] * dims);
      });
      return { docs, offsets: out };
    };
    return {
      generation: manifest.generation,
      dims,
      get vectors() {
        return rotated ? null : contiguous();
      },
      rotated,
      offsets,
      docVectors,
      rowOf,
      docIds,
      tokens,
      rowVectors,
      ...(inPlace ? { rowBlocks: (rows: number[]) => rows.map(rowBlock) } : {}),
      unavailable,
      unavailableIds,
    };
  }

  /**
   * view() from the candidates' bytes alone: each touched segment's head (cached), then one
   * positioned read per candidate's codes, norms and pooled vector from the segment's local copy,
   * expanded to the int8 image as the segment path does. The memory cache then holds heads (~30 B
   * per document plus its id), not codes, so a collection whose codes pass the bound does not
   * thrash; the OS page cache keeps the hot bytes. null: some segment cannot be read this way (not
   * EDEN token layout, other codec, no local copy), and the caller loads whole segments.
   */
  private async viewFromRanges(collection: Pick<Collection, 'tenantId' | 'id' | 'model'>, manifest: CollectionManifest, table: GenTable, found: [string, number, number][]): Promise<CollectionView | null> {
    // Checked heads: the candidates' bytes are read by ranges next (a head from S3 gets its segment checked first).
    const { got: heads, failed } = await eachSegment(found, (s) => this.checkedHead(collection, manifest.segments[s]));
    const image = [...heads.values()][0]?.image;
    if (!image || [...heads.values()].some((h) => h.image?.descriptor !== image.descriptor)) return null;
    const { rowOf, docIds, where, unavailableIds } = splitCandidates(found, failed);
    const dims = heads.get(where[0][0])!.dims;
    const rowsBySegment = new Map<number, number[]>();
    where.forEach(([s], row) => (rowsBySegment.get(s) ?? rowsBySegment.set(s, []).get(s)!).push(row));
    const encoded: { codes: Uint8Array; norms: Uint8Array }[] = new Array(docIds.length);
    const pooled: (Uint8Array | null)[] = new Array(docIds.length).fill(null);
    const read = await Promise.all(
      [...rowsBySegment].map(async ([s, rows]) => {
        const h = heads.get(s)!;
        const ranges: [number, number][] = [];
        for (const row of rows) {
          const d = where[row][1];
          ranges.push([h.codeAt + h.codeStart[d], h.codeStart[d + 1] - h.codeStart[d]], [h.normAt + h.normStart[d], h.normStart[d + 1] - h.normStart[d]]);
          if (h.dvWidth > 0) ranges.push([h.dvecAt + d * h.dvWidth, h.dvWidth]);
        }
        const ref = manifest.segments[s];
        // A copy fetched again here is checked first; a corrupt one sends the request to whole reads, which name it.
        const got = await this.source.readRanges!(ref.key, ranges, this.copyCheck(collection, ref)).catch((err: unknown) => {
          if (err instanceof SegmentUnavailableError) return null;
          throw err;
        });
        if (!got) return false;
        const per = h.dvWidth > 0 ? 3 : 2;
        rows.forEach((row, k) => {
          encoded[row] = { codes: got[k * per], norms: got[k * per + 1] };
          if (h.dvWidth > 0) pooled[row] = got[k * per + 2];
        });
        return true;
      }),
    );
    if (!read.every(Boolean)) return null;
    const offsets = new Uint32Array(docIds.length + 1);
    where.forEach(([s, d], row) => {
      const off = heads.get(s)!.tokenOffsets;
      offsets[row + 1] = offsets[row] + (off[d + 1] - off[d]);
    });
    const tokens = offsets[docIds.length];
    const docVectors = new Float32Array(docIds.length * dims);
    where.forEach(([s], row) => {
      const b = pooled[row];
      if (!b) return;
      docVectors.set(pooledFrom(b, heads.get(s)!.dvFormat, dims), row * dims);
    });
    const { codec, p } = image;
    const imageBytes = new Uint8Array(tokens * p);
    const scales = new Float32Array(tokens);
    for (let row = 0; row < docIds.length; row++) codec.rotatedImage(encoded[row], offsets[row + 1] - offsets[row], dims, imageBytes, scales, offsets[row]);
    const seed = heads.get(where[0][0])!.seed;
    const rotated: RotatedImageSet = { codec, seed, dims, p, image: imageBytes, scales, offsets };
    // fp32 vectors of some rows (scorers that need them): decoded from the bytes read, as the segment's reader decodes them.
    const rowVectors = (rows: number[]) => {
      const out = new Uint32Array(rows.length + 1);
      rows.forEach((r, i) => (out[i + 1] = out[i] + (offsets[r + 1] - offsets[r])));
      const docs = new Float32Array(out[rows.length] * dims);
      rows.forEach((r, i) => docs.set(codec.decodeDoc(encoded[r], offsets[r + 1] - offsets[r], dims, { docId: docIds[r], seed: heads.get(where[r][0])!.seed }), out[i] * dims));
      return { docs, offsets: out };
    };
    const unavailable = this.unavailableOf(collection, manifest, table, [...failed.entries()]);
    return { generation: manifest.generation, dims, vectors: null, rotated, offsets, docVectors, rowOf, docIds, tokens, rowVectors, unavailable, unavailableIds };
  }

  /** The segment's head (SegmentHead), from the segment already held or from one checked read of its object. */
  private async head(collection: Pick<Collection, 'tenantId' | 'id' | 'model'>, ref: SegmentRef): Promise<SegmentHead> {
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
  private async headOf(collection: Pick<Collection, 'tenantId' | 'id' | 'model'>, ref: SegmentRef): Promise<SegmentHead> {
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
  private async keepHead(ref: SegmentRef, loaded: LoadedSegment, objectBytes: number): Promise<SegmentHeadData> {
    const data = segmentHeadData(loaded.reader, objectBytes);
    await this.source.putLocal?.(`${ref.key}${HEAD_SUFFIX}`, serializeSegmentHead(data));
    this.unverified.delete(ref.key);
    return data;
  }

  /** The head stored in S3 for this object (index stage, merge), or null: none (a segment written before heads were stored), or not this object's. */
  private async storedHead(collection: Pick<Collection, 'tenantId' | 'id' | 'model'>, ref: SegmentRef): Promise<SegmentHead | null> {
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
  private async verifiedCopy(collection: Pick<Collection, 'tenantId' | 'id' | 'model'>, ref: SegmentRef): Promise<void> {
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
  private async checkedHead(collection: Pick<Collection, 'tenantId' | 'id' | 'model'>, ref: SegmentRef): Promise<SegmentHead> {
    const head = await this.head(collection, ref);
    await this.verifiedCopy(collection, ref);
    return head;
  }

  /**
   * A segment's WARP search layout directory (`search-layouts/v{n}/{batch}.warp`; its first
   * warpDirectoryBytes(K) bytes: one ranged GET when the source sends them (of the size the
   * expected K gives; a header naming another K is read again at its size), else a positioned read
   * of the local copy, or a slice of the object where there is no disk cache), verified and checked
   * against `expect` (the collection's centroids, codec, the segment's documents), kept in the
   * memory cache: a scorer holds every segment's directory, never its lists. A missing or corrupt
   * layout is unavailable (SegmentUnavailableError, object 'index', naming the segment), like a
   * corrupt segment index.
   */
  async warpDirectory(collection: Pick<Collection, 'tenantId' | 'id'>, ref: SegmentRef, expect: WarpLayoutExpectations): Promise<WarpDirectory> {
    const key = s3Keys.searchLayout(collection.tenantId, collection.id, ref.batchId, ref.codecVersion, ref.warpEpoch ?? 0);
    return this.guarded(collection, key, 'index', ref.key, async () =>
      (await this.lru.get(`warpdir:${key}`, () =>
        this.limiter.run(async () => {
          try {
            const guess = expect.centroidCount !== undefined && expect.centroidCount >= 1 && expect.centroidCount <= WARP_MAX_CENTROIDS ? warpDirectoryBytes(expect.centroidCount) : WARP_HEADER_BYTES;
            let head = await this.layoutBytes(key, ref, 0, guess);
            const K = new DataView(head.buffer, head.byteOffset, head.byteLength).getUint32(16, true);
            if (!(K >= 1 && K <= WARP_MAX_CENTROIDS)) parseWarpDirectory(head, key, expect); // names the header's fault
            if (head.byteLength !== warpDirectoryBytes(K)) head = await this.layoutBytes(key, ref, 0, warpDirectoryBytes(K));
            const dir = parseWarpDirectory(head, key, expect);
            return { value: dir, bytes: dir.counts.byteLength + dir.checksums.byteLength + dir.offsets.byteLength + 256 };
          } catch (err) {
            throw await this.layoutUnavailable(key, ref, err);
          }
        }),
      )) as WarpDirectory,
    );
  }

  /**
   * The lists of the probed `centroids` (ascending, distinct) of a segment's WARP layout. A layout
   * of at most `warpLayoutInMemoryBytes` is read whole once and kept whole. A larger one: the lists
   * held in the memory cache (hot lists, `warplist:` keys) are used as they are; the others are
   * read by their byte ranges only (coalesced across gaps of at most `warpRangeGapBytes`; ranged
   * GETs through the disk cache, or positioned reads of a whole local copy), each list verified
   * against its directory entry (CRC-32 of exactly its range) and then kept in the memory cache.
   * What a query allocates is its probed lists' bytes, never the object's. A corrupt or missing
   * range makes the layout unavailable as warpDirectory does; the search answers from the other
   * segments and names this one.
   */
  async warpLists(collection: Pick<Collection, 'tenantId' | 'id'>, ref: SegmentRef, dir: WarpDirectory, centroids: ArrayLike<number>): Promise<WarpListReads> {
    const key = s3Keys.searchLayout(collection.tenantId, collection.id, ref.batchId, ref.codecVersion, ref.warpEpoch ?? 0);
    let bytes = 0;
    for (let k = 0; k < centroids.length; k++) bytes += dir.offsets[centroids[k] + 1] - dir.offsets[centroids[k]];
    const inMemory = this.opts.warpLayoutInMemoryBytes ?? Math.min(WARP_WHOLE_READ_BYTES, this.opts.maxBytes / 16);
    return this.guarded(collection, key, 'index', ref.key, async () => {
      if (bytes > 0 && dir.byteLength <= inMemory) {
        try {
          // A small layout: read whole once (through the disk cache) and kept; every probed list verified (once per list), none read again.
          let fetched = 0;
          const whole = (await this.lru.get(`warplayout:${key}`, () =>
            this.limiter.run(async () => {
              const reader = openWarpLayout(await this.layoutBytes(key, ref, 0, dir.byteLength), key, { centroidsChecksum: dir.centroidsChecksum, codecChecksum: dir.codecChecksum, documents: dir.documents });
              fetched = dir.byteLength;
              return { value: reader, bytes: dir.byteLength };
            }),
          )) as WarpListSource;
          for (let k = 0; k < centroids.length; k++) whole.list(centroids[k]);
          return { lists: whole, bytes, fetched, ranges: 0 };
        } catch (err) {
          this.lru.delete(`warplayout:${key}`);
          throw await this.layoutUnavailable(key, ref, err);
        }
      }
      // Hot lists from memory; the rest by ranges.
      const held = new Map<number, WarpList>();
      const missing: number[] = [];
      for (let k = 0; k < centroids.length; k++) {
        const c = centroids[k];
        if (dir.counts[c] === 0) continue;
        const hot = this.lru.peek(`warplist:${key}#${c}`) as WarpList | undefined;
        if (hot) {
          this.lru.keep(`warplist:${key}#${c}`, hot, 0);
          held.set(c, hot);
        } else missing.push(c);
      }
      let fetched = 0;
      let ranges = 0;
      if (missing.length > 0) {
        try {
          const want = warpCoalescedRanges(dir, missing, this.opts.warpRangeGapBytes ?? WARP_RANGE_GAP_BYTES);
          const got = await this.limiter.run(() => this.layoutRanges(key, ref, want.map((r) => [r.offset, r.length] as const)));
          ranges = want.length;
          fetched = want.reduce((n, r) => n + r.length, 0);
          let r = 0;
          for (const c of missing) {
            // the range holding the list (lists and ranges both ascending)
            while (want[r].offset + want[r].length < dir.offsets[c + 1]) r++;
            const start = dir.offsets[c] - want[r].offset;
            // its own copy (aligned, and holding nothing of its neighbours while it stays in memory), verified
            const list = readWarpList(dir, c, got[r].slice(start, start + dir.offsets[c + 1] - dir.offsets[c]));
            held.set(c, list);
            this.lru.keep(`warplist:${key}#${c}`, list, dir.offsets[c + 1] - dir.offsets[c] + WARP_LIST_OVERHEAD_BYTES);
          }
        } catch (err) {
          for (const c of missing) this.lru.delete(`warplist:${key}#${c}`);
          throw await this.layoutUnavailable(key, ref, err);
        }
      }
      const empty: WarpList = { count: 0, docs: dir.docIdBytes === 2 ? new Uint16Array(0) : new Uint32Array(0), codes: new Uint8Array(0) };
      const lists: WarpListSource = {
        list(c: number): WarpList {
          if (dir.counts[c] === 0) return empty;
          const l = held.get(c);
          if (!l) throw new RangeError(`warp lists of "${key}": list ${c} was not probed`);
          return l;
        },
      };
      return { lists, bytes, fetched, ranges };
    });
  }

  /** Bytes [offset, offset + length) of a layout object (layoutRanges). */
  private async layoutBytes(key: string, ref: SegmentRef, offset: number, length: number): Promise<Uint8Array> {
    return (await this.layoutRanges(key, ref, [[offset, length]]))[0];
  }

  /** Byte ranges of a layout object: ranged GETs (through the disk cache) when the source sends them, else positioned reads of the local copy, else slices of the object. */
  private async layoutRanges(key: string, ref: SegmentRef, ranges: readonly (readonly [number, number])[]): Promise<Uint8Array[]> {
    const missing = () => new SegmentUnavailableError(key, 'index', ref.key, `search layout ${key} of a committed segment is missing from S3`);
    if (this.source.ranged && this.source.getRanges) {
      const got = await this.source.getRanges(key, ranges);
      if (!got) throw missing();
      return got;
    }
    const got = await this.source.readRanges?.(key, ranges);
    if (got) return got;
    const whole = await this.source.get(key);
    if (!whole) throw missing();
    return ranges.map(([o, n]) => {
      if (o + n > whole.byteLength) throw new RangeError(`${key}: range [${o}, ${o + n}) is outside the ${whole.byteLength}-byte object`);
      return whole.subarray(o, o + n);
    });
  }

  /** A layout read that failed as SegmentUnavailableError (a corrupt or short local copy dropped); other errors as they are. */
  private async layoutUnavailable(key: string, ref: SegmentRef, err: unknown): Promise<unknown> {
    if (err instanceof SegmentUnavailableError) return err;
    if (err instanceof WarpLayoutCorruptError || err instanceof RangeError) {
      await this.source.invalidate?.(key); // a corrupt local copy is read from S3 next time
      return new SegmentUnavailableError(key, 'index', ref.key, err instanceof WarpLayoutCorruptError ? err.message : `search layout ${key} is truncated: ${err.message}`);
    }
    return err;
  }

  /** Every segment of the generation with its search index and live documents; throws SegmentUnavailableError when one cannot be read. */
  async searchParts(collection: Pick<Collection, 'tenantId' | 'id' | 'model'>, manifest: CollectionManifest, needs: SearchNeeds = ALL_SEARCH_NEEDS): Promise<SearchPart[]> {
    const { parts, unavailable } = await this.searchGeneration(collection, manifest, needs);
    if (unavailable.length > 0) {
      const u = unavailable[0];
      throw new SegmentUnavailableError(u.key, u.object, u.segment, u.reason);
    }
    return parts;
  }

  /**
   * The generation's segments that can be read, with their search indexes and live documents,
   * in manifest order, and those that cannot (a segment or index that failed its checksum or
   * decoding, or is missing): search answers from the first and names the second.
   */
  async searchGeneration(collection: Pick<Collection, 'tenantId' | 'id' | 'model'>, manifest: CollectionManifest, needs: SearchNeeds = ALL_SEARCH_NEEDS): Promise<SearchGeneration> {
    const plan = await this.searchPlan(collection, manifest, needs);
    const failed: [number, SegmentUnavailableError][] = [];
    const all = await Promise.all(
      plan.parts.map((part) =>
        part.open().catch((err: unknown) => {
          if (!(err instanceof SegmentUnavailableError)) throw err;
          failed.push([part.position, err]);
          return null;
        }),
      ),
    );
    return { parts: all.filter((p): p is SearchPart => p !== null), unavailable: plan.unavailable(failed) };
  }

  /**
   * The generation's segments for a segment-major search (@lateral/search's passes): nothing is
   * read here beyond the generation's id table; each part is opened when the search reaches it
   * (its source as `searchSource` reads it, and its index, under the load limiter) and is let go
   * by the search after, so what a search holds beyond the memory cache is the few segments it
   * has open, not the generation (searchGeneration opened every segment before scoring and held
   * them all to the end: a search's memory grew with the collection). Segments with no live
   * document are left out, as in searchGeneration. A part that cannot be read throws
   * SegmentUnavailableError from `open` or `index`; `unavailable` names those the search
   * recorded, with the segments whose ids are not known. `docBaseOf`: each segment's first global
   * document key (a shard's plan over its scoped manifest); default its place in this manifest.
   */
  async searchPlan(
    collection: Pick<Collection, 'tenantId' | 'id' | 'model'>,
    manifest: CollectionManifest,
    needs: SearchNeeds = ALL_SEARCH_NEEDS,
    docBaseOf?: (ref: SegmentRef) => number,
  ): Promise<SearchPlan> {
    const table = await this.table(collection, manifest);
    const parts: LazySearchPart[] = [];
    let docBase = 0;
    manifest.segments.forEach((ref, position) => {
      // A shard's segments keep the global document keys of the whole generation.
      const base = docBaseOf ? docBaseOf(ref) : docBase;
      docBase += ref.documents;
      const live = table.live[position];
      if (live && !live.includes(1)) return;
      parts.push({
        position,
        ref,
        live,
        index: () => this.index(collection, ref),
        open: async () => {
          const [src, idx] = await Promise.allSettled([this.searchSource(collection, ref, needs), this.index(collection, ref)]);
          if (src.status === 'rejected') throw src.reason;
          if (idx.status === 'rejected') throw idx.reason;
          return { ref, segment: searchSegment(src.value, base), index: idx.value, live };
        },
        docIds: () => this.docIdsOf(collection, ref, this.readsHeads(needs)),
      });
    });
    return {
      parts,
      openAhead: Math.max(2, this.opts.loadConcurrency),
      reversed: () => !!this.opts.alternateScans && (this.walks++ & 1) === 1,
      keep: () => {
        if (!table.unknown) this.lru.keep(tableKey(manifest), table, generationTableBytes(table));
      },
      unavailable: (failed) => this.unavailableOf(collection, manifest, table, [...failed].sort((a, b) => a[0] - b[0])),
    };
  }

  /** A segment's ids in order: from its head when `viaHead` and the segment is not held whole, else from the segment. */
  private async docIdsOf(collection: Pick<Collection, 'tenantId' | 'id' | 'model'>, ref: SegmentRef, viaHead: boolean): Promise<readonly string[]> {
    return viaHead && !this.lru.has(`seg:${ref.key}`) ? (await this.head(collection, ref)).docIds : (await this.segment(collection, ref)).reader.docIds;
  }

  /** Whether a search with these needs reads segments' heads rather than whole segments (where it can). */
  private readsHeads(needs: SearchNeeds): boolean {
    return needs.rows !== 'vectors' && !needs.tokenIds && !needs.metadata && !!this.opts.rangeReads && !!this.source.readRanges;
  }

  /**
   * A segment as search reads it (SearchNeeds): from its head and pooled vectors, from its head and
   * code sections, or whole. A segment held whole already, one with no local copy, and one whose
   * codes cannot be scored are read whole.
   */
  private async searchSource(collection: Pick<Collection, 'tenantId' | 'id' | 'model'>, ref: SegmentRef, needs: SearchNeeds): Promise<SegmentSource> {
    if (this.readsHeads(needs) && !this.lru.has(`seg:${ref.key}`)) {
      // BM25 reads the head alone; modes that read ranges of the segment's bytes get them checked first.
      const head = needs.rows === 'scores' || needs.pooled ? await this.checkedHead(collection, ref) : await this.head(collection, ref);
      // ME-BERT: the prefix section where it holds m rows per document, else the code sections.
      const prefix = needs.prefixRows && head.pfxRows >= needs.prefixRows ? await this.prefixSource(collection, ref, head) : null;
      const part = prefix
        ? prefix
        : needs.rows === 'scores'
          ? await this.codesSource(collection, ref, head)
          : needs.pooled
            ? await this.pooledSource(collection, ref, head)
            : this.headSource(ref, head, null);
      if (part) return part;
    }
    const loaded = await this.segment(collection, ref);
    const r = loaded.reader;
    // Decoded vectors are kept in the cache (shared with re-rank), not in the wrapper.
    return {
      name: r.name,
      documents: r.documents,
      dims: r.dims,
      docIds: r.docIds,
      tokenOffsets: r.tokenOffsets,
      tokenIds: r.tokenIds,
      docVectors: r.docVectors,
      metadata: (d: number) => r.metadata(d),
      decodeAll: () => this.decoded(ref.key, r),
      decodeDocs: (from: number, to: number) => this.decodedDocs(ref.key, r, from, to),
      decodeDocPrefixes: (from: number, to: number, m: number) => this.decodedPrefixes(ref.key, r, from, to, m),
      rowScorer: (q: Float32Array, n: number) => this.rowScorer(loaded, q, n),
    };
  }

  /** A segment's head, with what a search that reads neither token ids nor metadata never touches made to fail loudly. */
  private headSource(ref: SegmentRef, head: SegmentHead, docVectors: Float32Array | null, rows: Partial<Pick<SegmentSource, 'decodeAll' | 'decodeDocs' | 'decodeDocPrefixes' | 'rowScorer' | 'prefixScan'>> = {}): SegmentSource {
    const absent = (what: string) => () => {
      throw new Error(`segment ${ref.key} was opened for a search that reads no ${what} (SearchNeeds)`);
    };
    return {
      name: ref.key,
      documents: head.documents,
      dims: head.dims,
      docIds: head.docIds as string[],
      tokenOffsets: head.tokenOffsets,
      get tokenIds(): Int32Array {
        return absent('token ids')();
      },
      docVectors,
      metadata: absent('metadata'),
      decodeAll: absent('token vectors'),
      ...rows,
    };
  }

  /**
   * ME-BERT: the head and the prefix section (the first rows' codes and norms, kept in the cache
   * as `pfx:`: about m / tokens_i of the code sections' bytes), scored from the codes as
   * codesSource scores the code sections (EDEN token layout), else decoded with the segment's
   * codec (fp32, fp16, int8). The code sections are not read. null when there is no local copy,
   * or the codec needs an artifact the head does not bring or side information: the code
   * sections then, as for a segment written before the section.
   */
  private async prefixSource(collection: Pick<Collection, 'tenantId' | 'id' | 'model'>, ref: SegmentRef, head: SegmentHead): Promise<SegmentSource | null> {
    const image = this.opts.scoreFromCodes ? head.image : null;
    const { poolFactor: _pool, ...descriptor } = head.codec;
    const codec = image?.codec ?? (descriptor.artifact || descriptor.sideInfo ? null : codecFromDescriptor(descriptor));
    const rowBytes = codec ? prefixRowBytes(codec, head.dims) : null;
    if (!codec || !rowBytes) return null;
    const bytes = prefixSectionBytes(head.tokenOffsets, head.pfxRows, rowBytes);
    // A section shorter than the head says throws RangeError in split: the copy is dropped and the segment read whole.
    const section = await this.keptRanges(`pfx:${ref.key}`, collection, ref, [[head.pfxAt, bytes]], ([b]) => ({ value: splitPrefixSection(b, head.tokenOffsets, head.pfxRows, rowBytes), bytes }));
    if (!section) return null;
    const d = head.dims;
    const prefixScan = prefixScanOf(section, codec, d, (i) => ({ docId: head.docIds[i], seed: head.seed }), image ? (q, _n, rows) => this.queryLut(image, q, d, head.seed).rows(rows) : undefined);
    return this.headSource(ref, head, null, { prefixScan });
  }

  /** BM25 and dense: the head and the pooled vectors; null when there is no local copy. */
  private async pooledSource(collection: Pick<Collection, 'tenantId' | 'id' | 'model'>, ref: SegmentRef, head: SegmentHead): Promise<SegmentSource | null> {
    const docVectors = await this.pooledVectors(collection, ref, head);
    return docVectors === undefined ? null : this.headSource(ref, head, docVectors);
  }

  /**
   * XTR and ME-BERT: the head and the code and norm sections (kept in the cache as `rows:`), rows
   * scored from the codes as a whole segment's would be; documents decode from the same bytes.
   * null when the segment cannot be scored from its codes or has no local copy.
   */
  private async codesSource(collection: Pick<Collection, 'tenantId' | 'id' | 'model'>, ref: SegmentRef, head: SegmentHead): Promise<SegmentSource | null> {
    const image = head.image;
    if (!this.opts.scoreFromCodes || !image) return null;
    const rows = await this.sectionCodes(collection, ref, head);
    if (!rows) return null;
    const off = head.tokenOffsets;
    const d = head.dims;
    const decodeDoc = (i: number) =>
      image.codec.decodeDoc(
        { codes: rows.codes.subarray(head.codeStart[i], head.codeStart[i + 1]), norms: rows.norms.subarray(head.normStart[i], head.normStart[i + 1]) },
        off[i + 1] - off[i],
        d,
        { docId: head.docIds[i], seed: head.seed },
      );
    const decodeDocs = (from: number, to: number) => {
      const out = new Float32Array((off[to] - off[from]) * d);
      for (let i = from; i < to; i++) out.set(decodeDoc(i), (off[i] - off[from]) * d);
      return out;
    };
    // Pooled vectors are not read: no mode that scores token rows uses them.
    return this.headSource(ref, head, null, {
      decodeAll: () => decodeDocs(0, head.documents),
      decodeDocs,
      decodeDocPrefixes: (from: number, to: number, m: number) => concatDocPrefixes(off, d, from, to, m, (i, k) => decodeDoc(i).subarray(0, k * d)),
      rowScorer: (q: Float32Array, n: number) => (n === 0 ? null : this.queryLut(image, q, d, head.seed).rows(rows)),
    });
  }

  /** The code and norm sections of a segment (every row's), from two positioned reads of its local copy, kept; null when there is no local copy. */
  private sectionCodes(collection: Pick<Collection, 'tenantId' | 'id' | 'model'>, ref: SegmentRef, head: SegmentHead): Promise<{ codes: Uint8Array; norms: Uint8Array } | null> {
    const D = head.documents;
    return this.keptRanges(`rows:${ref.key}`, collection, ref, [[head.codeAt, head.codeStart[D]], [head.normAt, head.normStart[D]]], ([codes, norms]) => ({ value: { codes, norms }, bytes: codes.byteLength + norms.byteLength }));
  }

  /**
   * A segment's pooled vectors (documents x dims, fp32) from one positioned read of its local copy,
   * kept in the cache; null when the segment has none; undefined when there is no local copy to read.
   */
  private async pooledVectors(collection: Pick<Collection, 'tenantId' | 'id' | 'model'>, ref: SegmentRef, head: SegmentHead): Promise<Float32Array | null | undefined> {
    if (head.dvWidth === 0) return null;
    const value = await this.keptRanges(`dvec:${ref.key}`, collection, ref, [[head.dvecAt, head.documents * head.dvWidth]], ([b]) => {
      const v = pooledFrom(b, head.dvFormat, head.documents * head.dims);
      return { value: v, bytes: v.byteLength };
    });
    return value ?? undefined;
  }

  /**
   * Byte ranges of a segment's local copy made into a value kept in the cache under `key`, read
   * under the load limiter; null when there is no local copy, or when the copy is shorter than the
   * ranges (dropped, so the segment is read whole, and checked, from S3). A failed read is not kept.
   */
  private async keptRanges<T>(key: string, collection: Pick<Collection, 'tenantId' | 'id' | 'model'>, ref: SegmentRef, ranges: [number, number][], make: (got: Uint8Array[]) => { value: T; bytes: number }): Promise<T | null> {
    const noCopy = new Error('no local copy');
    try {
      return (await this.lru.get(key, async () => {
        const got = await this.limiter.run(() => this.source.readRanges!(ref.key, ranges, this.copyCheck(collection, ref)));
        if (!got) throw noCopy;
        return make(got) as { value: Cached; bytes: number };
      })) as T;
    } catch (err) {
      if (err === noCopy) return null;
      if (err instanceof RangeError) {
        await this.source.invalidate?.(ref.key);
        return null;
      }
      throw err;
    }
  }

  /**
   * The unavailable segments of a request (those it needed that failed, and those whose ids are
   * not known, which any candidate may live in), with their live documents; tells the health
   * listener of each object once.
   */
  private unavailableOf(collection: Pick<Collection, 'tenantId' | 'id'>, manifest: CollectionManifest, table: GenTable, failed: [number, SegmentUnavailableError][]): UnavailableSegment[] {
    const bySeg = new Map(failed);
    for (const s of table.unknown ?? []) {
      if (bySeg.has(s)) continue;
      const key = manifest.segments[s].key;
      const b = this.bad.get(key);
      bySeg.set(s, new SegmentUnavailableError(key, 'segment', key, b?.reason ?? `segment ${key} could not be read`));
    }
    const out = [...bySeg.entries()]
      .sort((a, b) => a[0] - b[0])
      .map(([s, err]): UnavailableSegment => {
        const ref = manifest.segments[s];
        const live = table.live[s];
        const documents = table.unknown?.includes(s) ? Math.max(0, ref.documents - (ref.tombstones?.length ?? 0)) : live ? live.reduce((n, x) => n + x, 0) : ref.documents;
        return { key: err.key, object: err.object, segment: ref.key, reason: err.reason, documents };
      });
    for (const u of out) {
      const b = this.bad.get(u.key);
      if (!b || b.reported) continue;
      b.reported = true;
      this.opts.health?.unavailable({ ...u, tenantId: collection.tenantId, collectionId: collection.id, generation: manifest.generation });
    }
    return out;
  }

  /** The generation's sorted table of live ids (built from the segments' id tables, kept per generation). */
  async table(collection: Pick<Collection, 'tenantId' | 'id' | 'model'>, manifest: CollectionManifest): Promise<GenTable> {
    const key = tableKey(manifest);
    const coll = `${manifest.tenantId}/${manifest.collectionId}`;
    const table = (await this.lru.get(key, async () => {
      let unknown: number[] = [];
      // A generation that appends segments to (or adds tombstones to) the last one built extends
      // its table with one linear merge; anything else is built from every segment's id table.
      const last = this.lastTable.get(coll);
      const prev = last ? (this.lru.peek(last.key) as GenerationTable | undefined) : undefined;
      let value: GenerationTable | null = null;
      if (last && prev && last.segments.length <= manifest.segments.length && last.segments.every((s, i) => s.key === manifest.segments[i].key)) {
        const added = await Promise.all(manifest.segments.slice(last.segments.length).map((ref) => this.idTable(collection, ref)));
        if (added.every((t) => t !== null)) value = extendGenerationTable(prev, last.segments, manifest.segments, added as SegmentIdTable[]);
      }
      if (!value) {
        const tables = await Promise.all(manifest.segments.map((ref) => this.idTable(collection, ref)));
        // A segment whose ids cannot be known holds none here; the table is not kept (built again, and the segment read again, next time).
        unknown = tables.flatMap((t, i) => (t === null ? [i] : []));
        value = generationTable(manifest.segments, tables.map((t) => t ?? { ids: [], doc: new Uint32Array(0) }));
      }
      if (unknown.length === 0) this.lastTable.set(coll, { key, segments: manifest.segments });
      const out: GenTable = unknown.length > 0 ? { ...value, unknown } : value;
      return { value: out, bytes: generationTableBytes(value) };
    })) as GenTable;
    if (table.unknown) this.lru.delete(key);
    return table;
  }

  /** The segment's sorted id table: from the segment, or (unreadable) from `segmentIds`; null when neither can tell. */
  private async idTable(collection: Pick<Collection, 'tenantId' | 'id' | 'model'>, ref: SegmentRef): Promise<SegmentIdTable | null> {
    try {
      return (await this.lru.get(`ids:${ref.key}`, async () => {
        let docIds: readonly string[];
        try {
          // Reading ranges, a segment's ids come with its head: building a generation's table does not load every segment's codes.
          docIds = await this.docIdsOf(collection, ref, !!this.opts.rangeReads && !!this.source.readRanges);
        } catch (err) {
          if (!(err instanceof SegmentUnavailableError)) throw err;
          const ids = (await this.opts.segmentIds?.(collection.tenantId, collection.id, ref).catch(() => null)) ?? null;
          if (!ids || ids.length !== ref.documents) throw err;
          docIds = ids;
        }
        const value = segmentIdTable(docIds);
        return { value, bytes: value.ids.length * 12 + stringBytes(value.ids) };
      })) as SegmentIdTable;
    } catch (err) {
      if (err instanceof SegmentUnavailableError) return null;
      throw err;
    }
  }

  /**
   * Runs `load` for an object unless it is known unreadable (then throws at once, until its
   * recheck time), and remembers an object that turns out unreadable. A corrupt or missing
   * object is not retried by the job: its bytes will not get better by themselves.
   */
  private async guarded<T>(collection: Pick<Collection, 'tenantId' | 'id'>, key: string, object: 'segment' | 'index', segment: string, load: () => Promise<T>): Promise<T> {
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

  private async segment(collection: Pick<Collection, 'tenantId' | 'id' | 'model'>, ref: SegmentRef): Promise<LoadedSegment> {
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
  private async readObject(collection: Pick<Collection, 'tenantId' | 'id' | 'model'>, ref: SegmentRef): Promise<{ loaded: LoadedSegment; objectBytes: number }> {
    const [bytes, artifact] = await Promise.all([this.source.get(ref.key), this.codecs.get(collection.tenantId, collection.id, ref.codecVersion)]);
    if (!bytes) throw new SegmentUnavailableError(ref.key, 'segment', ref.key, `segment ${ref.key} of the current generation is missing from S3`);
    return { loaded: await this.parseObject(collection, ref, bytes, artifact), objectBytes: bytes.byteLength };
  }

  /**
   * The check given to `readRanges`: a segment's copy fetched again for a range read (evicted from
   * the disk cache since it was first checked) is parsed and checked whole before its ranges are
   * used; a corrupt one is named unavailable as a whole read would name it.
   */
  private copyCheck(collection: Pick<Collection, 'tenantId' | 'id' | 'model'>, ref: SegmentRef): (bytes: Uint8Array) => Promise<void> {
    return (bytes) =>
      this.guarded(collection, ref.key, 'segment', ref.key, async () => {
        await this.parseObject(collection, ref, bytes, await this.codecs.get(collection.tenantId, collection.id, ref.codecVersion));
      });
  }

  /** A segment's object bytes read and checked (every section's CRC32C); a corrupt object is dropped from the local cache and named unavailable. */
  private async parseObject(collection: Pick<Collection, 'tenantId' | 'id' | 'model'>, ref: SegmentRef, bytes: Uint8Array, artifact: CodecArtifact): Promise<LoadedSegment> {
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

  private async index(collection: Pick<Collection, 'tenantId' | 'id'>, ref: SegmentRef): Promise<SegmentIndex> {
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
   * Documents [from, to) of the segment decoded to fp32, as search reads them: a view of the
   * segment's kept whole decode when that decode is small beside the bound (at most
   * 1 / WHOLE_DECODE_FRACTION of it: a batch's segment, read again by every search), else the
   * range alone, decoded now and not kept. A merged segment's whole decode (over 1.5 GB of fp32
   * for 256 MiB of 4-bit codes) is thus never made: a search's working memory is one range.
   */
  private decodedDocs(key: string, reader: SegmentReader, from: number, to: number): Float32Array {
    const off = reader.tokenOffsets;
    const d = reader.dims;
    if (this.keepsWholeDecode(key, reader)) return this.decoded(key, reader).subarray(off[from] * d, off[to] * d);
    const out = new Float32Array((off[to] - off[from]) * d);
    for (let i = from; i < to; i++) out.set(reader.decodeDoc(i), (off[i] - off[from]) * d);
    return out;
  }

  /**
   * The first min(m, tokens_i) rows of each document in [from, to), concatenated (ME-BERT): copied
   * from the kept whole decode as decodedDocs would read it, else decoded document by document
   * (only the prefix, for codecs that code tokens on their own).
   */
  private decodedPrefixes(key: string, reader: SegmentReader, from: number, to: number, m: number): Float32Array {
    const off = reader.tokenOffsets;
    const d = reader.dims;
    if (this.keepsWholeDecode(key, reader)) return docPrefixesOf(this.decoded(key, reader), 0, off, d, from, to, m);
    return concatDocPrefixes(off, d, from, to, m, (i, k) => reader.decodeDocPrefix(i, k));
  }

  /** Whether search reads the segment from its kept whole decode: already cached, or small beside the bound (at most 1 / WHOLE_DECODE_FRACTION of it). */
  private keepsWholeDecode(key: string, reader: SegmentReader): boolean {
    return this.lru.peek(`dec:${key}`) !== undefined || reader.tokenIds.length * reader.dims * 4 <= this.opts.maxBytes / WHOLE_DECODE_FRACTION;
  }

  /**
   * Scores the segment's token rows from their codes (XTR's probed rows), when it is EDEN token
   * layout without side information and scoring from codes is on (COMPRESSED_SCORING=int8-image);
   * null: search decodes. The query's table is made once per query and codec (segments of one
   * codec version share it), not per segment.
   */
  private rowScorer(loaded: LoadedSegment, q: Float32Array, n: number): RowScorer | null {
    if (!this.opts.scoreFromCodes || n === 0) return null;
    const image = this.imageCodec(loaded);
    const rows = loaded.reader.rowCodes();
    if (!image || !rows) return null;
    return this.queryLut(image, q, loaded.reader.dims, loaded.reader.seed).rows(rows);
  }

  /** The query's EDEN table for segments of one codec and seed, made once per query. */
  private queryLut(image: ImageCodec, q: Float32Array, dims: number, seed: bigint): EdenQueryLut {
    let perQuery = this.queryLuts.get(q);
    if (!perQuery) this.queryLuts.set(q, (perQuery = new Map()));
    let lut = perQuery.get(image.descriptor);
    if (!lut) perQuery.set(image.descriptor, (lut = image.codec.queryLut(q, dims, seed)));
    return lut;
  }

  /** The segment's tokens decoded to fp32 (T x dims), kept in the cache. */
  private decoded(key: string, reader: SegmentReader): Float32Array {
    return this.lru.getSync(`dec:${key}`, () => {
      const value = reader.decodeAll();
      return { value, bytes: value.byteLength };
    }) as Float32Array;
  }

  /**
   * The codec that makes the segment's int8 rotated image when it is EDEN token layout
   * (bits <= IMAGE_MAX_BITS, no side information), else null. Segments share one codec (and one
   * rotation) when their descriptor and seed are the same; codecs are few (one per codec version
   * and seed) and small, so they are kept outside the byte-bounded cache.
   */
  private imageCodec(loaded: LoadedSegment): ImageCodec | null {
    return this.imageCodecFor(loaded.reader.codec, loaded.reader.seed, loaded.reader.dims, loaded.artifact);
  }

  private imageCodecFor(d: CodecDescriptor, seed: bigint, dims: number, artifact: CodecArtifact): ImageCodec | null {
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
  }

}

/** `n` pooled-vector values as stored in a segment (fp32, or fp16 widened), from bytes read out of it. */
function pooledFrom(b: Uint8Array, format: SegmentHead['dvFormat'], n: number): Float32Array {
  return format === 'fp32' ? new Float32Array(b.buffer, b.byteOffset, n) : decodeHalf(new Uint16Array(b.buffer, b.byteOffset, n));
}

/** Approximate heap bytes of strings (UTF-16 plus the string header). */
function stringBytes(ids: readonly string[]): number {
  let n = 0;
  for (const s of ids) n += 2 * s.length + 24;
  return n;
}

/** `load` for each segment holding a found candidate, at once; a segment that cannot be read goes to `failed` (other errors throw). */
async function eachSegment<T>(found: readonly [string, number, number][], load: (s: number) => Promise<T>): Promise<{ got: Map<number, T>; failed: Map<number, SegmentUnavailableError> }> {
  const got = new Map<number, T>();
  const failed = new Map<number, SegmentUnavailableError>();
  await Promise.all(
    [...new Set(found.map(([, s]) => s))].map(async (s) => {
      try {
        got.set(s, await load(s));
      } catch (err) {
        if (!(err instanceof SegmentUnavailableError)) throw err;
        failed.set(s, err);
      }
    }),
  );
  return { got, failed };
}

/**
 * The found candidates (id, segment, document) as a view's rows, in request order, and the ids
 * held by a segment that cannot be read: those are named, not scored (nor silently dropped).
 */
function splitCandidates(found: readonly [string, number, number][], failed: ReadonlyMap<number, unknown>): { rowOf: Map<string, number>; docIds: string[]; where: [number, number][]; unavailableIds: string[] } {
  const rowOf = new Map<string, number>();
  const docIds: string[] = [];
  const where: [number, number][] = [];
  const unavailableIds: string[] = [];
  for (const [id, s, d] of found) {
    if (failed.has(s)) {
      unavailableIds.push(id);
      continue;
    }
    rowOf.set(id, docIds.length);
    docIds.push(id);
    where.push([s, d]);
  }
  return { rowOf, docIds, where, unavailableIds };
}

/** The memory cache's key of a generation's id table. */
function tableKey(manifest: CollectionManifest): string {
  return `gen:${manifest.tenantId}/${manifest.collectionId}/${manifest.generation}/${manifest.committedAt}`;
}
