import { openWarpLayout, WARP_U16_DOCUMENTS, type WarpLayout, type WarpLayoutExpectations } from './layout';

/**
 * Merges of search layouts, for segment merges: with the same centroids and codec a token's
 * list and codes do not change, so a merged segment's layout is its inputs' lists concatenated
 * centroid by centroid, with the document ids renumbered, and no vector is decoded or assigned
 * again. (Refitted centroids or a new codec version change every code: that is a rebuild from
 * the vectors, `buildWarpLayout`.)
 */

/** A serialised layout read whole into memory, every list verified (a merge reads them all). */
export function warpLayoutFromBytes(bytes: Uint8Array, name: string, expect: WarpLayoutExpectations = {}): WarpLayout {
  const reader = openWarpLayout(bytes, name, expect);
  const dir = reader.directory;
  const K = dir.centroidCount;
  const T = dir.tokens;
  const bpt = dir.bytesPerToken;
  const listOffsets = new Uint32Array(K + 1);
  const docs = dir.docIdBytes === 2 ? new Uint16Array(T) : new Uint32Array(T);
  const codes = new Uint8Array(T * bpt);
  for (let c = 0; c < K; c++) {
    const list = reader.list(c);
    listOffsets[c + 1] = listOffsets[c] + list.count;
    docs.set(list.docs.subarray(0, list.count), listOffsets[c]);
    codes.set(list.codes.subarray(0, list.count * bpt), listOffsets[c] * bpt);
  }
  return {
    dims: dir.dims, bits: dir.bits, centroidCount: K, documents: dir.documents, tokens: T, bytesPerToken: bpt, docIdBytes: dir.docIdBytes,
    centroidsChecksum: dir.centroidsChecksum, codecChecksum: dir.codecChecksum, listOffsets, docs, codes,
  };
}

export interface WarpMergePart {
  layout: WarpLayout;
  /**
   * Old local document -> new local document in the merged segment, or -1 when the document is
   * dropped (deleted); increasing over the kept documents, and every kept document of a part
   * after every kept document of the parts before it (the merge keeps the order, so lists stay
   * sorted). Default: the part's documents in order after the previous parts' documents.
   */
  docMap?: Int32Array;
}

/**
 * The layout of a merged segment from its parts' layouts (same centroids and codec, checked by
 * their checksums): per centroid, each part's list in part order, ids mapped by docMap, entries
 * of dropped documents left out. `documents`: the merged segment's document count.
 */
export function mergeWarpLayouts(parts: readonly WarpMergePart[], documents: number): WarpLayout {
  const fn = 'mergeWarpLayouts';
  if (parts.length === 0) throw new RangeError(`${fn}: needs at least one layout`);
  if (!Number.isInteger(documents) || documents < 0) throw new RangeError(`${fn}: documents must be an integer >= 0, got ${documents}`);
  const first = parts[0].layout;
  const K = first.centroidCount;
  const bpt = first.bytesPerToken;
  const maps: Int32Array[] = [];
  let next = 0;
  for (let s = 0; s < parts.length; s++) {
    const l = parts[s].layout;
    if (l.centroidCount !== K || l.dims !== first.dims || l.bits !== first.bits || l.centroidsChecksum !== first.centroidsChecksum || l.codecChecksum !== first.codecChecksum) {
      throw new RangeError(`${fn}: part ${s} was built with other centroids or another codec (K ${l.centroidCount}, d ${l.dims}, b ${l.bits}, checksums ${l.centroidsChecksum}/${l.codecChecksum}; part 0: K ${K}, d ${first.dims}, b ${first.bits}, ${first.centroidsChecksum}/${first.codecChecksum})`);
    }
    let map = parts[s].docMap;
    if (!map) map = Int32Array.from({ length: l.documents }, (_, i) => next + i);
    if (map.length !== l.documents) throw new RangeError(`${fn}: part ${s}'s docMap has ${map.length} entries, the part has ${l.documents} documents`);
    for (let i = 0; i < map.length; i++) {
      const m = map[i];
      if (m === -1) continue;
      if (!(Number.isInteger(m) && m >= next && m < documents)) throw new RangeError(`${fn}: part ${s}'s docMap[${i}] = ${m}: kept documents must be increasing across the parts and < ${documents} (expected >= ${next})`);
      next = m + 1;
    }
    maps.push(map);
  }
  // count the kept entries per centroid
  const listOffsets = new Uint32Array(K + 1);
  for (let s = 0; s < parts.length; s++) {
    const { listOffsets: lo, docs } = parts[s].layout;
    const map = maps[s];
    for (let c = 0; c < K; c++) for (let e = lo[c]; e < lo[c + 1]; e++) if (map[docs[e]] !== -1) listOffsets[c + 1]++;
  }
  for (let c = 0; c < K; c++) listOffsets[c + 1] += listOffsets[c];
  const T = listOffsets[K];
  const docIdBytes = documents <= WARP_U16_DOCUMENTS ? 2 : 4;
  const docs = docIdBytes === 2 ? new Uint16Array(T) : new Uint32Array(T);
  const codes = new Uint8Array(T * bpt);
  const cursor = listOffsets.slice(0, K);
  for (let c = 0; c < K; c++) {
    for (let s = 0; s < parts.length; s++) {
      const l = parts[s].layout;
      const map = maps[s];
      for (let e = l.listOffsets[c]; e < l.listOffsets[c + 1]; e++) {
        const m = map[l.docs[e]];
        if (m === -1) continue;
        const o = cursor[c]++;
        docs[o] = m;
        const from = e * bpt, to = o * bpt;
        for (let b = 0; b < bpt; b++) codes[to + b] = l.codes[from + b];
      }
    }
  }
  return {
    dims: first.dims, bits: first.bits, centroidCount: K, documents, tokens: T, bytesPerToken: bpt, docIdBytes,
    centroidsChecksum: first.centroidsChecksum, codecChecksum: first.codecChecksum, listOffsets, docs, codes,
  };
}
