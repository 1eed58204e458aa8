import { codecFromDescriptor, type Codec, type CodecDescriptor } from '@lateral/codec';
import { DEFAULT_WARP_RANGE_GAP_BYTES, DEFAULT_WARP_WHOLE_BYTES, s3Keys, type Collection, type SegmentRef } from '@lateral/shared';
import {
  WARP_HEADER_BYTES,
  WarpLayoutCorruptError,
  openWarpLayout,
  parseWarpDirectory,
  readWarpList,
  warpCoalescedRanges,
  warpDirectoryBytes,
  type WarpDirectory,
  type WarpLayoutExpectations,
  type WarpList,
  type WarpListSource,
} from '@lateral/search';
import { SegmentUnavailableError } from './search-plan';
import type { LoadedSegment, SegmentHead, SegmentStore } from './segment-store';

/**
 * WARP's reads: a segment's search layout (its directory, kept; its probed lists, read whole with
 * the layout when small, else by byte ranges, hot lists kept) and the fp32 rows of the documents a
 * search found (its exact final stage).
 */

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
 * The one number lives in the configuration (SCORER_WARP_WHOLE_BYTES's default), so the two never drift.
 */
export const WARP_WHOLE_READ_BYTES = DEFAULT_WARP_WHOLE_BYTES;

/** Default gap (bytes of other lists) across which two probed lists are read in one range (SCORER_WARP_RANGE_GAP_BYTES's default, 32 KiB). */
export const WARP_RANGE_GAP_BYTES = DEFAULT_WARP_RANGE_GAP_BYTES;

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
 * A segment's WARP search layout directory (`search-layouts/v{n}/{batch}.warp`; its first
 * warpDirectoryBytes(K) bytes: one ranged GET when the source sends them (of the size the
 * expected K gives; a header naming another K is read again at its size), else a positioned read
 * of the local copy, or a slice of the object where there is no disk cache), verified and checked
 * against `expect` (the collection's centroids, codec, the segment's documents), kept in the
 * memory cache: a scorer holds every segment's directory, never its lists. A missing or corrupt
 * layout is unavailable (SegmentUnavailableError, object 'index', naming the segment), like a
 * corrupt segment index.
 */
export async function warpDirectory(store: SegmentStore, collection: Pick<Collection, 'tenantId' | 'id'>, ref: SegmentRef, expect: WarpLayoutExpectations): Promise<WarpDirectory> {
  const key = s3Keys.searchLayout(collection.tenantId, collection.id, ref.batchId, ref.codecVersion, ref.warpEpoch ?? 0);
  return store.guarded(collection, key, 'index', ref.key, async () =>
    (await store.lru.get(`warpdir:${key}`, () =>
      store.limiter.run(async () => {
        try {
          const guess = expect.centroidCount !== undefined && expect.centroidCount >= 1 && expect.centroidCount <= WARP_MAX_CENTROIDS ? warpDirectoryBytes(expect.centroidCount) : WARP_HEADER_BYTES;
          let head = await layoutBytes(store, key, ref, 0, guess);
          const K = new DataView(head.buffer, head.byteOffset, head.byteLength).getUint32(16, true);
          if (!(K >= 1 && K <= WARP_MAX_CENTROIDS)) parseWarpDirectory(head, key, expect); // names the header's fault
          if (head.byteLength !== warpDirectoryBytes(K)) head = await layoutBytes(store, key, ref, 0, warpDirectoryBytes(K));
          const dir = parseWarpDirectory(head, key, expect);
          return { value: dir, bytes: dir.counts.byteLength + dir.checksums.byteLength + dir.offsets.byteLength + 256 };
        } catch (err) {
          throw await layoutUnavailable(store, key, ref, err);
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
export async function warpLists(store: SegmentStore, collection: Pick<Collection, 'tenantId' | 'id'>, ref: SegmentRef, dir: WarpDirectory, centroids: ArrayLike<number>): Promise<WarpListReads> {
  const key = s3Keys.searchLayout(collection.tenantId, collection.id, ref.batchId, ref.codecVersion, ref.warpEpoch ?? 0);
  let bytes = 0;
  for (let k = 0; k < centroids.length; k++) bytes += dir.offsets[centroids[k] + 1] - dir.offsets[centroids[k]];
  const inMemory = store.opts.warpLayoutInMemoryBytes ?? Math.min(WARP_WHOLE_READ_BYTES, store.opts.maxBytes / 16);
  return store.guarded(collection, key, 'index', ref.key, async () => {
    if (bytes > 0 && dir.byteLength <= inMemory) {
      try {
        // A small layout: read whole once (through the disk cache) and kept; every probed list verified (once per list), none read again.
        let fetched = 0;
        const whole = (await store.lru.get(`warplayout:${key}`, () =>
          store.limiter.run(async () => {
            const reader = openWarpLayout(await layoutBytes(store, key, ref, 0, dir.byteLength), key, { centroidsChecksum: dir.centroidsChecksum, codecChecksum: dir.codecChecksum, documents: dir.documents });
            fetched = dir.byteLength;
            return { value: reader, bytes: dir.byteLength };
          }),
        )) as WarpListSource;
        for (let k = 0; k < centroids.length; k++) whole.list(centroids[k]);
        return { lists: whole, bytes, fetched, ranges: 0 };
      } catch (err) {
        store.lru.delete(`warplayout:${key}`);
        throw await layoutUnavailable(store, key, ref, err);
      }
    }
    // Hot lists from memory (touched: kept, moved to the recent end when not already near it); the rest by ranges.
    const held = new Map<number, WarpList>();
    const missing: number[] = [];
    for (let k = 0; k < centroids.length; k++) {
      const c = centroids[k];
      if (dir.counts[c] === 0) continue;
      // one lookup (a hot list was peeked, then kept: its key built twice, three map operations)
      const hot = store.lru.touch(`warplist:${key}#${c}`) as WarpList | undefined;
      if (hot) held.set(c, hot);
      else missing.push(c);
    }
    let fetched = 0;
    let ranges = 0;
    if (missing.length > 0) {
      try {
        const want = warpCoalescedRanges(dir, missing, store.opts.warpRangeGapBytes ?? WARP_RANGE_GAP_BYTES);
        const got = await store.limiter.run(() => layoutRanges(store, key, ref, want.map((r) => [r.offset, r.length] as const)));
        ranges = want.length;
        fetched = want.reduce((n, r) => n + r.length, 0);
        let r = 0;
        for (const c of missing) {
          // the range holding the list (lists and ranges both ascending)
          while (want[r].offset + want[r].length < dir.offsets[c + 1]) r++;
          const start = dir.offsets[c] - want[r].offset;
          const length = dir.offsets[c + 1] - dir.offsets[c];
          // its own buffer (aligned, and holding nothing of its neighbours while it stays in memory):
          // the range's when the range is exactly this list in a buffer of its own, else a copy; verified
          const own = got[r].byteLength === length && got[r].byteOffset === 0 && got[r].buffer.byteLength === length;
          const list = readWarpList(dir, c, own ? got[r] : got[r].slice(start, start + length));
          held.set(c, list);
          store.lru.keep(`warplist:${key}#${c}`, list, dir.offsets[c + 1] - dir.offsets[c] + WARP_LIST_OVERHEAD_BYTES);
        }
      } catch (err) {
        for (const c of missing) store.lru.delete(`warplist:${key}#${c}`);
        throw await layoutUnavailable(store, key, ref, err);
      }
    }
    const empty: WarpList = { count: 0, docs: dir.docIdBytes === 2 ? new Uint16Array(0) : new Uint32Array(0), codes: new Uint8Array(0) };
    const lists: WarpListSource = {
      // the layout's lists are immutable: every query's source over them is the same lists to the resident scan (its slots kept per directory, not per query)
      identity: dir,
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
export async function layoutBytes(store: SegmentStore, key: string, ref: SegmentRef, offset: number, length: number): Promise<Uint8Array> {
  return (await layoutRanges(store, key, ref, [[offset, length]]))[0];
}

/** Byte ranges of a layout object: ranged GETs (through the disk cache) when the source sends them, else positioned reads of the local copy, else slices of the object. */
export async function layoutRanges(store: SegmentStore, key: string, ref: SegmentRef, ranges: readonly (readonly [number, number])[]): Promise<Uint8Array[]> {
  const missing = () => new SegmentUnavailableError(key, 'index', ref.key, `search layout ${key} of a committed segment is missing from S3`);
  if (store.source.ranged && store.source.getRanges) {
    const got = await store.source.getRanges(key, ranges);
    if (!got) throw missing();
    return got;
  }
  const got = await store.source.readRanges?.(key, ranges);
  if (got) return got;
  const whole = await store.source.get(key);
  if (!whole) throw missing();
  return ranges.map(([o, n]) => {
    if (o + n > whole.byteLength) throw new RangeError(`${key}: range [${o}, ${o + n}) is outside the ${whole.byteLength}-byte object`);
    return whole.subarray(o, o + n);
  });
}

/** A layout read that failed as SegmentUnavailableError (a corrupt or short local copy dropped); other errors as they are. */
export async function layoutUnavailable(store: SegmentStore, key: string, ref: SegmentRef, err: unknown): Promise<unknown> {
  if (err instanceof SegmentUnavailableError) return err;
  if (err instanceof WarpLayoutCorruptError || err instanceof RangeError) {
    await store.source.invalidate?.(key); // a corrupt local copy is read from S3 next time
    return new SegmentUnavailableError(key, 'index', ref.key, err instanceof WarpLayoutCorruptError ? err.message : `search layout ${key} is truncated: ${err.message}`);
  }
  return err;
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
export async function documentRows(
  store: SegmentStore,
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
        const got = await segmentDocumentRows(store, collection, ref, at.map((i) => where[i][1]));
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
export async function segmentDocumentRows(store: SegmentStore, collection: Pick<Collection, 'tenantId' | 'id' | 'model'>, ref: SegmentRef, docs: readonly number[]): Promise<{ dims: number; rows: Float32Array[] }> {
  const fromReader = (loaded: LoadedSegment) => {
    const r = loaded.reader;
    for (const d of docs) if (!(Number.isInteger(d) && d >= 0 && d < r.documents)) throw new RangeError(`document ${d} is outside segment ${ref.key} (${r.documents} documents)`);
    const whole = store.lru.peek(`dec:${ref.key}`) as Float32Array | undefined;
    const off = r.tokenOffsets;
    return { dims: r.dims, rows: docs.map((d) => (whole ? whole.subarray(off[d] * r.dims, off[d + 1] * r.dims) : r.decodeDoc(d))) };
  };
  const held = store.lru.peek(`seg:${ref.key}`) as LoadedSegment | undefined;
  if (held) return fromReader(held);
  const read = await documentCodesByRanges(store, collection, ref, docs);
  if (read) {
    const { head: h, codec, codes, norms } = read;
    const off = h.tokenOffsets;
    return { dims: h.dims, rows: docs.map((d, k) => codec.decodeDoc({ codes: codes[k], norms: norms[k] }, off[d + 1] - off[d], h.dims, { docId: h.docIds[d], seed: h.seed })) };
  }
  return fromReader(await store.segment(collection, ref));
}

/**
 * Documents `docs` (indexes) of a segment read by positioned reads of its local copy (documentRows,
 * exact-scores.ts): each one's code bytes and norm bytes (empty where it has none: fp16, fp32),
 * with the segment's checked head and the codec that decodes them. null where the segment is not
 * read so (no ranged reads, side information, or a corrupt copy: the caller's whole read of the
 * segment names it); a RangeError for a document outside the segment. `into`: the buffer the
 * synchronous reads go to (ObjectSource.readRanges), whose bytes the caller owns while it uses
 * the codes.
 */
export async function documentCodesByRanges(
  store: SegmentStore,
  collection: Pick<Collection, 'tenantId' | 'id' | 'model'>,
  ref: SegmentRef,
  docs: readonly number[],
  into?: (bytes: number) => Uint8Array,
): Promise<{ head: SegmentHead; codec: Codec; codes: Uint8Array[]; norms: Uint8Array[] } | null> {
  if (!store.opts.rangeReads || !store.source.readRanges) return null;
  const h = await store.checkedHead(collection, ref);
  if (h.codec.sideInfo) return null;
  for (const d of docs) if (!(Number.isInteger(d) && d >= 0 && d < h.documents)) throw new RangeError(`document ${d} is outside segment ${ref.key} (${h.documents} documents)`);
  // Every document's code bytes, then the norm bytes of those that have any.
  const ranges: (readonly [number, number])[] = [];
  for (const d of docs) ranges.push([h.codeAt + h.codeStart[d], h.codeStart[d + 1] - h.codeStart[d]]);
  for (const d of docs) if (h.normStart[d + 1] > h.normStart[d]) ranges.push([h.normAt + h.normStart[d], h.normStart[d + 1] - h.normStart[d]]);
  // A copy fetched again here is checked first; a corrupt one sends the segment to the caller's whole read, which names it.
  const got = await store.source.readRanges(ref.key, ranges, store.copyCheck(collection, ref), into).catch((err: unknown) => {
    if (err instanceof SegmentUnavailableError) return null;
    throw err;
  });
  if (!got) return null;
  const codec = await decodeCodec(store, collection, ref, h.codec);
  const empty = new Uint8Array(0);
  let next = docs.length;
  return { head: h, codec, codes: got.slice(0, docs.length), norms: docs.map((d) => (h.normStart[d + 1] > h.normStart[d] ? got[next++] : empty)) };
}

/** The codec that decodes a segment's documents (documentRows), made once per collection, codec version and descriptor. */
export async function decodeCodec(store: SegmentStore, collection: Pick<Collection, 'tenantId' | 'id'>, ref: SegmentRef, d: CodecDescriptor): Promise<Codec> {
  const key = `${collection.tenantId}/${collection.id}/${ref.codecVersion}#${JSON.stringify(d)}`;
  let c = store.decodeCodecs.get(key);
  if (!c) {
    c = codecFromDescriptor(d, await store.codecs.get(collection.tenantId, collection.id, ref.codecVersion));
    if (store.decodeCodecs.size >= 64) store.decodeCodecs.delete(store.decodeCodecs.keys().next().value!);
    store.decodeCodecs.set(key, c);
  }
  return c;
}