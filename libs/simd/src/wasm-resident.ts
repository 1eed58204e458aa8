/**
 * WARP's resident scan in the WebAssembly module: probed lists kept in the module's memory across
 * queries (ResidentLists) and one search's per-segment state and per-call records (ResidentScan).
 * No I/O.
 */
import type { WarpResidentList, WarpResidentScan } from './types';
import { align, LOW_BYTES, RESIDENT_LIST_BYTES, type Arena } from './wasm-memory';

const align8 = (x: number) => (x + 7) & ~7;

/** WARP lists kept in the module's memory from LOW_BYTES: per WarpResidentList object, its codes then its ids as u32. */
export class ResidentLists {
  at = new WeakMap<object, number>();
  next = LOW_BYTES;
  clobbers = -1;
  /** bytes of lists kept (at most RESIDENT_LIST_BYTES; lowered by tests) */
  budget = RESIDENT_LIST_BYTES;

  reset(clobbers: number): void {
    this.at = new WeakMap();
    this.next = LOW_BYTES;
    this.clobbers = clobbers;
  }
}

/** Per token() call: each list's offset in the module (reused; grown as needed). */
let residentOffs = new Uint32Array(1024);

const SEG_RECORD = 32;
const LIST_RECORD = 24;

export class ResidentScan implements WarpResidentScan {
  /** per segment: [best, tag, touched, mask, acc, reached, candidates] offsets */
  private readonly segOff: number[][] = [];
  private readonly segsAt = LOW_BYTES + RESIDENT_LIST_BYTES;
  /** where per-call records (and lists copied for one call) start */
  private readonly callAt: number;
  private readonly clobbers: number;
  private ended = false;

  constructor(
    private readonly a: Arena,
    private readonly store: ResidentLists,
    private readonly documents: readonly number[],
    masks: readonly (Uint8Array | undefined)[],
    private readonly tablesAt: (tables: Float32Array, to: number, bpt: number) => number,
    private readonly release: () => void,
  ) {
    let at = align(this.segsAt + documents.length * SEG_RECORD);
    const ns = documents.length;
    for (let s = 0; s < ns; s++) {
      const D = documents[s];
      const best = at;
      const acc = (at = best + align8(D * 8));
      const tag = (at = acc + align8(D * 8));
      const touched = (at = tag + D * 4);
      const candidates = (at = touched + D * 4);
      const reached = (at = candidates + D * 4);
      const mask = masks[s] ? (at = reached + align8(D)) : 0;
      at = align((mask || reached) + align8(D));
      this.segOff.push([best, tag, touched, mask, acc, reached, candidates]);
    }
    this.callAt = at;
    a.grow(at);
    const { u8, u32 } = a;
    for (let s = 0; s < ns; s++) {
      const [best, tag, touched, mask, acc, reached, candidates] = this.segOff[s];
      const D = documents[s];
      u8.fill(0, acc, acc + D * 8);
      u8.fill(0, tag, tag + D * 4);
      u8.fill(0, reached, reached + D);
      if (mask) u8.set(masks[s]!, mask);
      const r = (this.segsAt + s * SEG_RECORD) >> 2;
      u32[r] = best;
      u32[r + 1] = tag;
      u32[r + 2] = touched;
      u32[r + 3] = mask;
      u32[r + 4] = acc;
      u32[r + 5] = reached;
      u32[r + 6] = candidates;
      u32[r + 7] = 0;
    }
    this.clobbers = a.clobbers;
  }

  token(tables: Float32Array, to: number, bpt: number, lists: readonly WarpResidentList[], segments: ArrayLike<number>, cs: ArrayLike<number>, nl: number, stamp: number, mi: number): boolean {
    const a = this.a;
    if (this.ended) throw new Error('warpResident: token() after end()');
    if (a.clobbers !== this.clobbers) return false;
    const tOff = this.tablesAt(tables, to, bpt);
    if (a.clobbers !== this.clobbers) return false;
    const store = this.store;
    if (store.clobbers !== a.clobbers) store.reset(a.clobbers);
    const recAt = this.callAt;
    let transient = align(recAt + nl * LIST_RECORD);
    a.grow(transient);
    if (residentOffs.length < nl) residentOffs = new Uint32Array(Math.max(nl, 2 * residentOffs.length));
    const offs = residentOffs;
    let reset = false;
    for (let k = 0; k < nl; k++) {
      const l = lists[k];
      let off = store.at.get(l);
      if (off !== undefined) {
        offs[k] = off;
        continue;
      }
      const codesBytes = align(l.count * bpt);
      const need = codesBytes + l.count * 4;
      const D = this.documents[segments[k]];
      for (let e = 0; e < l.count; e++) if (l.docs[e] >= D) throw new RangeError(`warpSegmentSearch: a list names document ${l.docs[e]}, the segment has ${D}`);
      if (store.next + need <= LOW_BYTES + store.budget) {
        off = store.next;
        store.next = align(off + need);
        a.grow(store.next);
        store.at.set(l, off);
      } else if (!reset && need <= store.budget) {
        // Over the budget: every kept list dropped, this call's lists copied in again from the first.
        store.reset(a.clobbers);
        reset = true;
        k = -1;
        continue;
      } else {
        off = transient;
        transient = align(off + need);
        a.grow(transient);
      }
      a.u8.set(l.codes.length === l.count * bpt ? l.codes : l.codes.subarray(0, l.count * bpt), off);
      a.u32.set(l.docs.length === l.count ? l.docs : l.docs.subarray(0, l.count), (off + codesBytes) >> 2);
      offs[k] = off;
    }
    const { u32, f64 } = a;
    for (let k = 0; k < nl; k++) {
      const r = (recAt + k * LIST_RECORD) >> 2;
      const count = lists[k].count;
      u32[r] = offs[k];
      u32[r + 1] = offs[k] + align(count * bpt);
      u32[r + 2] = count;
      u32[r + 3] = segments[k];
      f64[(r + 4) >> 1] = cs[k];
    }
    a.x.warpToken(tOff, bpt, recAt, nl, this.segsAt, this.documents.length, stamp, mi);
    return true;
  }

  result(s: number): { count: number; candidates: Uint32Array; acc: Float64Array } {
    const { u32, f64 } = this.a;
    const [, , , , acc, , candidates] = this.segOff[s];
    const count = u32[((this.segsAt + s * SEG_RECORD) >> 2) + 7];
    const D = this.documents[s];
    return { count, candidates: u32.subarray(candidates >> 2, (candidates >> 2) + count), acc: f64.subarray(acc >> 3, (acc >> 3) + D) };
  }

  end(): void {
    this.ended = true;
    this.release();
  }
}
