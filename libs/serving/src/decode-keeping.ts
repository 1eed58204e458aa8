import type { EdenQueryLut, SegmentReader } from '@lateral/codec';
import { concatDocPrefixes, docPrefixesOf, type RowScorer } from '@lateral/search';
import type { ImageCodec, LoadedSegment, SegmentStore } from './segment-store';

/**
 * Decode keeping: what search reads of a segment held whole as fp32 rows (its whole decode kept in
 * the memory cache when small beside the bound, else ranges decoded at each search), and the rows
 * it scores from their codes instead (EDEN query tables, one per query and codec).
 */

/**
 * A segment's whole fp32 decode is kept for search only when it is at most this fraction of the
 * cache bound; larger segments are decoded range by range at each search (decodedDocs).
 */
export const WHOLE_DECODE_FRACTION = 16;

/**
 * Documents [from, to) of the segment decoded to fp32, as search reads them: a view of the
 * segment's kept whole decode when that decode is small beside the bound (at most
 * 1 / WHOLE_DECODE_FRACTION of it: a batch's segment, read again by every search), else the
 * range alone, decoded now and not kept. A merged segment's whole decode (over 1.5 GB of fp32
 * for 256 MiB of 4-bit codes) is thus never made: a search's working memory is one range.
 */
export function decodedDocs(store: SegmentStore, key: string, reader: SegmentReader, from: number, to: number): Float32Array {
  const off = reader.tokenOffsets;
  const d = reader.dims;
  if (keepsWholeDecode(store, key, reader)) return decoded(store, key, reader).subarray(off[from] * d, off[to] * d);
  const out = new Float32Array((off[to] - off[from]) * d);
  for (let i = from; i < to; i++) out.set(reader.decodeDoc(i), (off[i] - off[from]) * d);
  return out;
}

/**
 * The first min(m, tokens_i) rows of each document in [from, to), concatenated (ME-BERT): copied
 * from the kept whole decode as decodedDocs would read it, else decoded document by document
 * (only the prefix, for codecs that code tokens on their own).
 */
export function decodedPrefixes(store: SegmentStore, key: string, reader: SegmentReader, from: number, to: number, m: number): Float32Array {
  const off = reader.tokenOffsets;
  const d = reader.dims;
  if (keepsWholeDecode(store, key, reader)) return docPrefixesOf(decoded(store, key, reader), 0, off, d, from, to, m);
  return concatDocPrefixes(off, d, from, to, m, (i, k) => reader.decodeDocPrefix(i, k));
}

/** Whether search reads the segment from its kept whole decode: already cached, or small beside the bound (at most 1 / WHOLE_DECODE_FRACTION of it). */
export function keepsWholeDecode(store: SegmentStore, key: string, reader: SegmentReader): boolean {
  return store.lru.peek(`dec:${key}`) !== undefined || reader.tokenIds.length * reader.dims * 4 <= store.opts.maxBytes / WHOLE_DECODE_FRACTION;
}

/**
 * Scores the segment's token rows from their codes (XTR's probed rows), when it is EDEN token
 * layout without side information and scoring from codes is on (COMPRESSED_SCORING=int8-image);
 * null: search decodes. The query's table is made once per query and codec (segments of one
 * codec version share it), not per segment.
 */
export function rowScorer(store: SegmentStore, loaded: LoadedSegment, q: Float32Array, n: number): RowScorer | null {
  if (!store.opts.scoreFromCodes || n === 0) return null;
  const image = store.imageCodec(loaded);
  const rows = loaded.reader.rowCodes();
  if (!image || !rows) return null;
  return queryLut(store, image, q, loaded.reader.dims, loaded.reader.seed).rows(rows);
}

/** The query's EDEN table for segments of one codec and seed, made once per query. */
export function queryLut(store: SegmentStore, image: ImageCodec, q: Float32Array, dims: number, seed: bigint): EdenQueryLut {
  let perQuery = store.queryLuts.get(q);
  if (!perQuery) store.queryLuts.set(q, (perQuery = new Map()));
  let lut = perQuery.get(image.descriptor);
  if (!lut) perQuery.set(image.descriptor, (lut = image.codec.queryLut(q, dims, seed)));
  return lut;
}

/** The segment's tokens decoded to fp32 (T x dims), kept in the cache. */
export function decoded(store: SegmentStore, key: string, reader: SegmentReader): Float32Array {
  return store.lru.getSync(`dec:${key}`, () => {
    const value = reader.decodeAll();
    return { value, bytes: value.byteLength };
  }) as Float32Array;
}
