import type { SegmentRef } from '@lateral/shared';

/**
 * A segment's document ids, sorted (code-unit order), with each one's index in the segment: the
 * compact table a candidate id is found in by binary search (no Map over the collection). An id
 * written twice in one segment keeps its last occurrence, as the segment's readers always did.
 */
export interface SegmentIdTable {
  ids: string[];
  doc: Uint32Array;
}

/**
 * The live documents of one generation, sorted by id: for each, the position of its segment in
 * the manifest and its index there; plus, per segment, which of its documents are live
 * (undefined: all of them). Memory is 16 B per live document plus the shared id strings and one
 * byte per document of the segments that have dead ones.
 */
export interface GenerationTable {
  ids: string[];
  seg: Uint32Array;
  doc: Uint32Array;
  live: (Uint8Array | undefined)[];
  documents: number;
}

const cmp = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);

export function segmentIdTable(docIds: readonly string[]): SegmentIdTable {
  const order = Array.from(docIds.keys()).sort((x, y) => cmp(docIds[x], docIds[y]) || x - y);
  const ids: string[] = [];
  const doc: number[] = [];
  for (const i of order) {
    if (ids.length > 0 && ids[ids.length - 1] === docIds[i]) doc[doc.length - 1] = i; // the later copy wins
    else {
      ids.push(docIds[i]);
      doc.push(i);
    }
  }
  return { ids, doc: Uint32Array.from(doc) };
}

/** Index of `id` in the sorted `ids`, or -1. */
export function findId(ids: readonly string[], id: string): number {
  let lo = 0;
  let hi = ids.length - 1;
  while (lo <= hi) {
    const mid = (lo + hi) >>> 1;
    const v = ids[mid];
    if (v === id) return mid;
    if (v < id) lo = mid + 1;
    else hi = mid - 1;
  }
  return -1;
}

interface Run {
  ids: string[];
  seg: Uint32Array;
  doc: Uint32Array;
}

/** Merges two sorted runs; `b` covers later segments, so on an equal id b's copy wins. */
function mergeRuns(a: Run, b: Run): Run {
  const n = a.ids.length + b.ids.length;
  const ids: string[] = [];
  const seg = new Uint32Array(n);
  const doc = new Uint32Array(n);
  let i = 0;
  let j = 0;
  let k = 0;
  while (i < a.ids.length || j < b.ids.length) {
    let from: Run;
    let at: number;
    if (j >= b.ids.length || (i < a.ids.length && a.ids[i] < b.ids[j])) {
      from = a;
      at = i++;
    } else if (i >= a.ids.length || b.ids[j] < a.ids[i]) {
      from = b;
      at = j++;
    } else {
      i++; // equal: the later segment's copy supersedes
      from = b;
      at = j++;
    }
    ids.push(from.ids[at]);
    seg[k] = from.seg[at];
    doc[k] = from.doc[at];
    k++;
  }
  return { ids, seg: seg.subarray(0, k), doc: doc.subarray(0, k) };
}

/**
 * The generation's live documents from its segments' id tables (in manifest order) and their
 * tombstones: an id's owner is the last segment holding it (a later ingest supersedes), and it is
 * live unless its owner's copy is tombstoned. Pairwise merges of the sorted tables, O(N log S).
 */
export function generationTable(segments: Pick<SegmentRef, 'documents' | 'tombstones'>[], tables: SegmentIdTable[]): GenerationTable {
  let runs: Run[] = tables.map((t, s) => ({ ids: t.ids, seg: new Uint32Array(t.ids.length).fill(s), doc: t.doc }));
  if (runs.length === 0) return { ids: [], seg: new Uint32Array(0), doc: new Uint32Array(0), live: [], documents: 0 };
  while (runs.length > 1) {
    const next: Run[] = [];
    for (let i = 0; i < runs.length; i += 2) next.push(i + 1 < runs.length ? mergeRuns(runs[i], runs[i + 1]) : runs[i]);
    runs = next;
  }
  const all = runs[0];
  const dead = segments.map((s) => (s.tombstones && s.tombstones.length > 0 ? new Set(s.tombstones) : null));
  return withoutDead(segments, all, dead);
}

/**
 * The table of a generation that extends `prev`'s: the same segments first (same keys, same
 * order; their tombstones may have grown, e.g. a delete or an ingest superseding copies), then
 * `added` (the id tables of the segments appended after them). One linear merge of `prev`'s live
 * entries with the new segments' run (a new copy of an id supersedes the old one), then the
 * entries tombstoned in `segments` are dropped: the same table as generationTable over all
 * segments, in O(N + new) instead of O(N log S). null when `segments` does not extend
 * `prevSegments` (a re-compression or a replaced batch): build it whole.
 */
export function extendGenerationTable(
  prev: GenerationTable,
  prevSegments: Pick<SegmentRef, 'key' | 'tombstones'>[],
  segments: Pick<SegmentRef, 'key' | 'documents' | 'tombstones'>[],
  added: SegmentIdTable[],
): GenerationTable | null {
  const base = prevSegments.length;
  if (segments.length !== base + added.length) return null;
  for (let s = 0; s < base; s++) if (segments[s].key !== prevSegments[s].key) return null;
  // The tombstones to apply: every one of the new segments', and those of earlier segments that
  // changed. They only grow in an extension (an entry dropped from prev stays dropped).
  const dead: (Set<number> | null)[] = new Array(segments.length).fill(null);
  for (let s = 0; s < segments.length; s++) {
    const now = segments[s].tombstones ?? [];
    if (s < base) {
      const before = prevSegments[s].tombstones ?? [];
      if (now.length === before.length && now.every((x, i) => x === before[i])) continue;
      const grown = new Set(now);
      if (!before.every((x) => grown.has(x))) return null; // a tombstone went away: not an extension
      dead[s] = grown;
    } else if (now.length > 0) dead[s] = new Set(now);
  }
  let run: Run = { ids: [], seg: new Uint32Array(0), doc: new Uint32Array(0) };
  added.forEach((t, i) => (run = mergeRuns(run, { ids: t.ids, seg: new Uint32Array(t.ids.length).fill(base + i), doc: t.doc })));
  const all = mergeRuns({ ids: prev.ids, seg: prev.seg, doc: prev.doc }, run);
  return withoutDead(segments, all, dead);
}

/** The merged run less its entries tombstoned in `dead` (per segment), with each segment's live documents. */
function withoutDead(segments: Pick<SegmentRef, 'documents'>[], all: Run, dead: (Set<number> | null)[]): GenerationTable {
  const ids: string[] = [];
  const seg = new Uint32Array(all.ids.length);
  const doc = new Uint32Array(all.ids.length);
  let k = 0;
  for (let i = 0; i < all.ids.length; i++) {
    if (dead[all.seg[i]]?.has(all.doc[i])) continue;
    ids.push(all.ids[i]);
    seg[k] = all.seg[i];
    doc[k] = all.doc[i];
    k++;
  }
  // Per segment: live documents; undefined when every document of the segment is live.
  return withLive(segments, ids, seg.slice(0, k), doc.slice(0, k));
}

function withLive(segments: Pick<SegmentRef, 'documents'>[], ids: string[], seg: Uint32Array, doc: Uint32Array): GenerationTable {
  const k = ids.length;
  const liveCount = new Uint32Array(segments.length);
  for (let i = 0; i < k; i++) liveCount[seg[i]]++;
  const live: (Uint8Array | undefined)[] = segments.map((s, i) => (liveCount[i] === s.documents ? undefined : new Uint8Array(s.documents)));
  for (let i = 0; i < k; i++) {
    const m = live[seg[i]];
    if (m) m[doc[i]] = 1;
  }
  return { ids, seg, doc, live, documents: k };
}

/** Bytes a GenerationTable holds beyond the id strings (shared with the segments). */
export function generationTableBytes(t: GenerationTable): number {
  return t.ids.length * 16 + t.live.reduce((s, m) => s + (m?.byteLength ?? 0), 0);
}
