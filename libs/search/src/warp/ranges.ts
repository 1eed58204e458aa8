import type { WarpQuery } from './engine';
import { readWarpList, type WarpDirectory, type WarpList, type WarpListSource } from './layout';

/**
 * What a query reads from a segment's search layout, as byte ranges (ARCHITECTURE "Serving v2":
 * ranged GETs, adjacent ranges coalesced), and the list source over the fetched bytes. Pure: the
 * scorer does the fetching.
 */

/** The distinct centroids a query probes (any query token), ascending. */
export function warpProbedCentroids(query: WarpQuery): Uint32Array {
  const seen = new Uint8Array(query.centroidCount);
  let count = 0;
  for (let e = 0; e < query.probes.length; e++) {
    const c = query.probes[e];
    if (seen[c] === 0) {
      seen[c] = 1;
      count++;
    }
  }
  const out = new Uint32Array(count);
  let k = 0;
  for (let c = 0; c < seen.length; c++) if (seen[c]) out[k++] = c;
  return out;
}

/** One ranged read: bytes [offset, offset + length) of the layout object. */
export interface WarpByteRange {
  offset: number;
  length: number;
}

/**
 * The byte ranges holding the lists of `centroids` (ascending, distinct) in one segment: empty
 * lists are skipped, and two lists are read in one range when at most `maxGap` bytes of other
 * lists lie between them (lists are stored in centroid order, back to back, so probed
 * neighbours often touch). maxGap 0: exactly the probed lists' bytes.
 */
export function warpCoalescedRanges(dir: WarpDirectory, centroids: ArrayLike<number>, maxGap = 0): WarpByteRange[] {
  if (!(maxGap >= 0)) throw new RangeError(`warpCoalescedRanges: maxGap must be >= 0, got ${maxGap}`);
  const out: WarpByteRange[] = [];
  let prev = -1;
  for (let k = 0; k < centroids.length; k++) {
    const c = centroids[k];
    if (!(Number.isInteger(c) && c > prev && c < dir.centroidCount)) throw new RangeError(`warpCoalescedRanges: centroids must be ascending, distinct and < K = ${dir.centroidCount}; got ${c} after ${prev}`);
    prev = c;
    const start = dir.offsets[c];
    const end = dir.offsets[c + 1];
    if (end === start) continue;
    const last = out[out.length - 1];
    if (last && start - (last.offset + last.length) <= maxGap) last.length = end - last.offset;
    else out.push({ offset: start, length: end - start });
  }
  return out;
}

/** Fetched bytes of a layout: `bytes` are the object's bytes [offset, offset + bytes.length). */
export interface WarpFetchedRange {
  offset: number;
  bytes: Uint8Array;
}

/**
 * A list source over ranges fetched for one query (warpCoalescedRanges, then ranged GETs): each
 * list is verified against the directory when first read (WarpLayoutCorruptError on a
 * mismatch) and kept for the query's other tokens. Reading an empty list reads nothing; a list
 * no fetched range covers is a caller's bug (RangeError naming the centroid).
 */
export function warpFetchedLists(dir: WarpDirectory, fetched: readonly WarpFetchedRange[]): WarpListSource {
  const ranges = [...fetched].sort((a, b) => a.offset - b.offset);
  const kept = new Map<number, WarpList>();
  const empty: WarpList = { count: 0, docs: dir.docIdBytes === 2 ? new Uint16Array(0) : new Uint32Array(0), codes: new Uint8Array(0) };
  return {
    list(c: number): WarpList {
      const hit = kept.get(c);
      if (hit) return hit;
      if (!(Number.isInteger(c) && c >= 0 && c < dir.centroidCount)) throw new RangeError(`warp lists of "${dir.name}": centroid ${c} is out of range (K = ${dir.centroidCount})`);
      if (dir.counts[c] === 0) return empty;
      const start = dir.offsets[c];
      const end = dir.offsets[c + 1];
      // the last range starting at or before the list
      let lo = 0, hi = ranges.length;
      while (lo < hi) {
        const mid = (lo + hi) >> 1;
        if (ranges[mid].offset <= start) lo = mid + 1;
        else hi = mid;
      }
      const r = ranges[lo - 1];
      if (!r || r.offset + r.bytes.length < end) throw new RangeError(`warp lists of "${dir.name}": list ${c} (bytes ${start}..${end}) was not fetched`);
      const list = readWarpList(dir, c, r.bytes.subarray(start - r.offset, end - r.offset));
      kept.set(c, list);
      return list;
    },
  };
}
