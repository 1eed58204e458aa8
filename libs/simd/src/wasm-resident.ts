/**
 * WARP's resident scan in the WebAssembly module: probed lists kept in the module's memory across
 * queries (ResidentLists) and one search's per-segment state and per-call records (ResidentScan).
 * No I/O.
 */
import type { WarpResidentScan, WarpResidentSource, WarpTablesInput } from './types';
import { align, LOW_BYTES, RESIDENT_LIST_BYTES, type Arena } from './wasm-memory';

/** a cache line's boundary (64 bytes), where each segment's document records start */
const alignLine = (x: number) => (x + 63) & ~63;

/**
 * Per WarpResidentSource: its lists' places in the module by centroid (0: an empty list; -1: not
 * known yet), valid while the store's epoch is `epoch`.
 */
interface SourceSlots {
  epoch: number;
  at: Int32Array;
}

/** Distinct for every reset of any store (a source's slots never outlive the lists they name). */
let epochs = 0;

/**
 * WARP lists kept in the module's memory from LOW_BYTES: per WarpResidentList object, its codes
 * then its ids as u32 (`at`); and per source (or its identity: the same lists read again by another
 * query's source), where its centroids' lists sit (`slots`), so a list probed again is found by one
 * array read, not a list() call and a WeakMap lookup.
 */
export class ResidentLists {
  at = new WeakMap<object, number>();
  slots = new WeakMap<object, SourceSlots>();
  epoch = ++epochs;
  next = LOW_BYTES;
  clobbers = -1;
  /** bytes of lists kept (at most RESIDENT_LIST_BYTES; lowered by tests) */
  budget = RESIDENT_LIST_BYTES;

  reset(clobbers: number): void {
    this.at = new WeakMap();
    this.epoch = ++epochs;
    this.next = LOW_BYTES;
    this.clobbers = clobbers;
  }

  /** The slots of `source` for the current epoch (emptied when the lists were dropped since). */
  slotsOf(source: object, epoch: number): SourceSlots {
    let s = this.slots.get(source);
    if (!s) {
      s = { epoch, at: new Int32Array(1024).fill(-1) };
      this.slots.set(source, s);
    } else if (s.epoch !== epoch) {
      s.epoch = epoch;
      s.at.fill(-1);
    }
    return s;
  }
}

const SEG_RECORD = 32;
/** A document's state in a scan (warpToken's records): best f64, acc f64, both UNSET at first (warpClear). */
const DOC_RECORD = 16;
/**
 * A segment's top-k reads every document's record in order when its candidates are at least
 * 1 / TOP_BY_RECORDS of its documents (a record line holds 4 documents: reading them in order
 * costs less than a miss per candidate at random places), else only the candidates'.
 */
const TOP_BY_RECORDS = 8;
const LIST_RECORD = 24;
/** A kept list: its count (u32), padded to 16 bytes, then its codes and ids. */
const HEAD_BYTES = 16;

function grow(at: Int32Array, size: number): Int32Array {
  const grown = new Int32Array(Math.max(size, 2 * at.length)).fill(-1);
  grown.set(at);
  return grown;
}

export class ResidentScan implements WarpResidentScan {
  /** per segment: [docs (DOC_RECORD bytes each), touched, mask, candidates] offsets */
  private readonly segOff: number[][] = [];
  private readonly segsAt = LOW_BYTES + RESIDENT_LIST_BYTES;
  /** where per-call records (and lists copied for one call) start */
  private readonly callAt: number;
  /** the query's rows, the codec's weights, the table build's scratch, one query token's tables */
  private readonly qAt: number;
  private readonly wAt: number;
  private readonly scratchAt: number;
  private readonly tAt: number;
  private readonly clobbers: number;
  private ended = false;
  /** per segment: entries of the current call's lists */
  private readonly entries: number[];

  constructor(
    private readonly a: Arena,
    private readonly store: ResidentLists,
    private readonly documents: readonly number[],
    masks: readonly (Uint8Array | undefined)[],
    private readonly sources: readonly WarpResidentSource[],
    private readonly t: WarpTablesInput,
    private readonly release: () => void,
  ) {
    let at = align(this.segsAt + documents.length * SEG_RECORD);
    const ns = documents.length;
    this.entries = new Array<number>(ns).fill(0);
    for (let s = 0; s < ns; s++) {
      const D = documents[s];
      const docs = (at = alignLine(at));
      const touched = (at = docs + D * DOC_RECORD);
      const candidates = (at = touched + D * 4);
      const mask = masks[s] ? (at = candidates + D * 4) : 0;
      at = align(mask ? mask + D : candidates + D * 4);
      this.segOff.push([docs, touched, mask, candidates]);
    }
    const { n, dims, weights, bytesPerToken: bpt } = t;
    if (t.q.length < n * dims || weights.length !== dims << t.bits) throw new RangeError(`warpResident: ${t.q.length} query values and ${weights.length} weights for n = ${n}, dims = ${dims}, b = ${t.bits}`);
    this.qAt = at;
    this.wAt = at = align(at + n * dims * 4);
    this.scratchAt = at = align(at + weights.length * 4);
    this.tAt = at = at + 256;
    this.callAt = at = align(at + bpt * 1024);
    a.grow(at);
    const { u8, u32 } = a;
    a.f32.set(t.q.subarray(0, n * dims), this.qAt >> 2);
    a.f32.set(weights, this.wAt >> 2);
    for (let s = 0; s < ns; s++) {
      const [docs, touched, mask, candidates] = this.segOff[s];
      const D = documents[s];
      // every document's best and sum UNSET (no score yet, not reached)
      a.x.warpClear(docs, D * 2);
      if (mask) u8.set(masks[s]!, mask);
      const r = (this.segsAt + s * SEG_RECORD) >> 2;
      u32[r] = docs;
      u32[r + 1] = 0;
      u32[r + 2] = touched;
      u32[r + 3] = mask;
      u32[r + 4] = 0;
      u32[r + 5] = 0;
      u32[r + 6] = candidates;
      u32[r + 7] = 0;
    }
    this.clobbers = a.clobbers;
  }

  token(i: number, probes: ArrayLike<number>, cs: ArrayLike<number>, po: number, np: number, mi: number, scored: number[]): boolean {
    const a = this.a;
    if (this.ended) throw new Error('warpResident: token() after end()');
    if (a.clobbers !== this.clobbers) return false;
    const { n, dims, bits, bytesPerToken: bpt } = this.t;
    if (!Number.isInteger(i) || i < 0 || i >= n) throw new RangeError(`warpResident: token ${i} of a query of ${n}`);
    // Token i's tables, built where the lookups read them (the CPU's cache still holds them).
    a.x.warpTables(this.qAt + i * dims * 4, 1, dims, bits, this.wAt, bpt, this.tAt, this.scratchAt);
    const store = this.store;
    if (store.clobbers !== a.clobbers) store.reset(a.clobbers);
    const ns = this.documents.length;
    const recAt = this.callAt;
    const recEnd = align(recAt + ns * np * LIST_RECORD);
    a.grow(recEnd);
    const entries = this.entries;
    let transient = recEnd;
    let nl = 0;
    let reset = false;
    // Every segment's probed lists, in segment order then probe order: a record per non-empty
    // list. A list probed before is found in its source's slots (one array read); else it is
    // looked up by object (kept for another source) or copied in (kept while the budget allows).
    for (let s = 0; s < ns; s++) {
      const src = this.sources[s];
      const slots = store.slotsOf(src.identity ?? src, store.epoch);
      let at = slots.at;
      entries[s] = 0;
      for (let p = 0; p < np; p++) {
        const c = probes[po + p];
        if (c >= at.length) at = slots.at = grow(at, c + 1);
        let off = at[c];
        if (off === 0) continue;
        if (off < 0) {
          const l = src.list(c);
          const count = l.count;
          if (count === 0) {
            at[c] = 0;
            continue;
          }
          const kept = store.at.get(l);
          if (kept !== undefined) at[c] = off = kept;
          else {
            if (l.docs.length < count || l.codes.length < count * bpt) throw new RangeError(`warpSegmentSearch: list of centroid ${c} has ${l.docs.length} ids and ${l.codes.length} code bytes for ${count} entries`);
            const D = this.documents[s];
            for (let e = 0; e < count; e++) if (l.docs[e] >= D) throw new RangeError(`warpSegmentSearch: list of centroid ${c} names document ${l.docs[e]}, the segment has ${D}`);
            const codesBytes = align(count * bpt);
            const need = HEAD_BYTES + codesBytes + count * 4;
            if (store.next + need <= LOW_BYTES + store.budget) {
              off = store.next;
              store.next = align(off + need);
              a.grow(store.next);
              store.at.set(l, off);
              at[c] = off;
            } else if (!reset && need <= store.budget) {
              // Over the budget: every kept list dropped, this call's lists copied in again from the first.
              store.reset(a.clobbers);
              reset = true;
              nl = 0;
              s = -1;
              break;
            } else {
              // copied after this call's records, for this call only
              off = transient;
              transient = align(off + need);
              a.grow(transient);
            }
            a.u32[off >> 2] = count;
            a.u8.set(l.codes.length === count * bpt ? l.codes : l.codes.subarray(0, count * bpt), off + HEAD_BYTES);
            a.u32.set(l.docs.length === count ? l.docs : l.docs.subarray(0, count), (off + HEAD_BYTES + codesBytes) >> 2);
          }
        }
        const { u32, f64 } = a;
        const count = u32[off >> 2];
        const r = (recAt + nl * LIST_RECORD) >> 2;
        u32[r] = off + HEAD_BYTES;
        u32[r + 1] = off + HEAD_BYTES + align(count * bpt);
        u32[r + 2] = count;
        u32[r + 3] = s;
        f64[(r + 4) >> 1] = cs[po + p];
        nl++;
        entries[s] += count;
      }
    }
    for (let s = 0; s < ns; s++) scored[s] += entries[s];
    a.x.warpToken(this.tAt, bpt, recAt, nl, this.segsAt, ns, mi);
    return true;
  }

  top(s: number, base: number, divide: number, k: number): { scores: Float64Array; ids: Uint32Array; candidates: number } | null {
    if (this.ended) throw new Error('warpResident: top() after end()');
    if (!Number.isInteger(k) || k < 0) throw new RangeError(`warpResident: k must be an integer >= 0, got ${k}`);
    const a = this.a;
    if (a.clobbers !== this.clobbers) return null;
    const [docs, , , candidates] = this.segOff[s];
    const count = a.u32[((this.segsAt + s * SEG_RECORD) >> 2) + 7];
    const kk = Math.min(k, count);
    // the heap where the per-call records were (no token runs after the top-k)
    const hs = this.callAt;
    const hid = align(hs + kk * 8);
    a.grow(hid + kk * 4);
    // The candidates where they lie (few of the documents), else every document's record front to back: the same pairs.
    const D = this.documents[s];
    const got = count * TOP_BY_RECORDS < D ? a.x.warpTop(candidates, count, docs + 8, 4, base, divide, kk, hs, hid) : a.x.warpTopRecords(docs, D, base, divide, kk, hs, hid);
    return { scores: a.f64.slice(hs >> 3, (hs >> 3) + got), ids: a.u32.slice(hid >> 2, (hid >> 2) + got), candidates: count };
  }

  end(): void {
    this.ended = true;
    this.release();
  }
}
