/**
 * The WebAssembly SIMD kernels (libs/simd/assembly/kernels.ts, compiled at install time by
 * scripts/build-simd.cjs into .cache/simd/kernels-<key>.wasm). This file's only I/O: reading that
 * module, once per process (per worker thread). Inputs are copied into the module's memory and
 * results copied out; a query's float64 pairs and a WARP query's tables stay resident while
 * the same query or tables are used (one resident owner at a time).
 */
import { createHash } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { noteTableBuild, tableBuilds } from './builds';
import { jsDots, jsKernels, jsLookupSums, jsLookupSumsMany, jsMaxima, jsScoreRows, jsWarpTables } from './js';
import type { Kernels, PreparedQuery, WarpResidentList, WarpResidentScan, WarpTablesInput } from './types';

/** The parts of the WebAssembly API used here (the project's TypeScript lib has no DOM types). */
interface WasmMemory {
  readonly buffer: ArrayBuffer;
  grow(pages: number): number;
}
interface WasmApi {
  Module: new (bytes: Uint8Array) => object;
  Instance: new (module: object, imports: object) => { exports: unknown };
}

interface Exports {
  memory: WasmMemory;
  maxima(qp: number, n: number, x: number, rows: number, d: number, best: number, arg: number, rowBase: number): void;
  dots(qp: number, n: number, x: number, rows: number, d: number, out: number): void;
  scoreRows(q: number, x: number, base: number, d: number, list: number, count: number, out: number): void;
  scoreRowsPairs(qd: number, x: number, base: number, d: number, list: number, count: number, out: number): void;
  scoreRowsF32(q: number, x: number, base: number, d: number, list: number, count: number, out: number): void;
  warpTables(q: number, n: number, dims: number, bits: number, weights: number, bpt: number, out: number, scratch: number): void;
  lookupSums(tables: number, codes: number, count: number, bpt: number, cs: number, out: number): void;
  warpToken(tables: number, bpt: number, lists: number, nl: number, segs: number, ns: number, stamp: number, mi: number): void;
}

const ROOT = path.resolve(__dirname, '..', '..', '..');

/** Where the compiled module for this source and these flags lives (scripts/build-simd.cjs computes the same). */
export function simdModulePath(): string {
  const key = createHash('sha256')
    .update(readFileSync(path.join(ROOT, 'libs', 'simd', 'assembly', 'kernels.ts')))
    .update('\0')
    .update(readFileSync(path.join(ROOT, 'libs', 'simd', 'assembly', 'asc.json')))
    .digest('hex')
    .slice(0, 16);
  return path.join(ROOT, '.cache', 'simd', `kernels-${key}.wasm`);
}

const align = (x: number) => (x + 15) & ~15;
/**
 * The module's memory never shrinks, so no call may grow it much: rows, codes and tables are
 * copied in blocks of at most this many bytes, and a query whose float64 pairs would take more
 * than MAX_QUERY_BYTES runs on the JavaScript kernel (the same results).
 */
const BLOCK_BYTES = 4 << 20;
const MAX_QUERY_BYTES = 16 << 20;
/** A WARP query's tables up to this size are copied in once (n = 32, d = 384, b = 4: 6.3 MB). */
const MAX_RESIDENT_TABLE_BYTES = 16 << 20;

/**
 * The kernels' own scratch and resident query / tables stay below LOW_BYTES (each call copies in
 * at most a few blocks of BLOCK_BYTES and 16 MiB of query or tables). Above it: the resident WARP
 * lists (RESIDENT_LIST_BYTES), then a resident scan's per-document state and per-call records.
 */
const LOW_BYTES = 64 << 20;
/**
 * Budget of WARP lists kept in the module's memory (codes and u32 ids): 256 MiB holds every list
 * of full Vaswani at d = 384, b = 4 (571k tokens x 196 B = 112 MB). Over it the kept lists are
 * dropped and copied in again as queries probe them. The memory never shrinks: a scorer's RSS
 * carries this beside SCORER_CACHE_BYTES (docs/scaling.md).
 */
export const RESIDENT_LIST_BYTES = 256 << 20;

/** The module's memory as typed views, grown on demand, and which owner's data sits at offset 0. */
class Arena {
  f32!: Float32Array;
  f64!: Float64Array;
  u8!: Uint8Array;
  u32!: Uint32Array;
  i32!: Int32Array;
  /** what occupies [0, residentBytes): a WasmQuery, or a table slice key */
  resident: unknown = null;
  residentBytes = 0;
  tableKey = { tables: null as Float32Array | null, to: -1, build: -1 };

  constructor(readonly x: Exports) {
    this.views();
  }

  private views(): void {
    const b = this.x.memory.buffer;
    this.f32 = new Float32Array(b);
    this.f64 = new Float64Array(b);
    this.u8 = new Uint8Array(b);
    this.u32 = new Uint32Array(b);
    this.i32 = new Int32Array(b);
  }

  /** Calls whose scratch reached past LOW_BYTES (into the resident WARP regions, which are then stale). */
  clobbers = 0;

  ensure(bytes: number): void {
    if (bytes > LOW_BYTES) this.clobbers++;
    this.grow(bytes);
  }

  /** Grows the memory to `bytes` (the resident WARP regions above LOW_BYTES: not a clobber). */
  grow(bytes: number): void {
    const have = this.x.memory.buffer.byteLength;
    if (bytes <= have) return;
    this.x.memory.grow(Math.ceil((bytes - have) / 65536));
    this.views();
  }

  /** Makes [0, bytes) the resident data of owner (written by fill when it is not already there). */
  hold(owner: unknown, bytes: number, fill: () => void): void {
    if (this.resident === owner) return;
    this.ensure(bytes);
    this.resident = owner;
    this.residentBytes = align(bytes);
    fill();
  }

  /** Scratch from here on: keeps the resident data. */
  get free(): number {
    return this.residentBytes;
  }

  /** Claims offset 0 for scratch: nothing resident any more. */
  evict(): void {
    this.resident = null;
    this.residentBytes = 0;
  }
}

class WasmQuery implements PreparedQuery {
  /** pair P, dimension k at 2 (P d + k): [q(2P, k), q(2P + 1, k)] */
  private readonly pairs: Float64Array;

  constructor(private readonly a: Arena, readonly q: Float32Array, readonly n: number, readonly d: number) {
    const P = (n + 1) >> 1;
    const pairs = new Float64Array(P * d * 2);
    for (let i = 0; i < n; i++) {
      const o = (i >> 1) * d * 2 + (i & 1);
      for (let k = 0; k < d; k++) pairs[o + 2 * k] = q[i * d + k];
    }
    this.pairs = pairs;
  }

  private load(extra: number): number {
    const a = this.a;
    a.hold(this, this.pairs.byteLength, () => a.f64.set(this.pairs, 0));
    a.ensure(a.free + extra);
    return a.free;
  }

  maxima(x: Float32Array, xo: number, rows: number, best: Float64Array, arg: Int32Array | null, rowBase: number): void {
    const { n, d } = this;
    if (n === 0 || rows === 0) return;
    // rows in blocks of at most BLOCK_BYTES: the running maxima make blocks in order equal to one pass
    const step = Math.max(1, Math.floor(BLOCK_BYTES / (d * 4)));
    const block = Math.min(rows, step);
    const xBytes = align(block * d * 4);
    const base = this.load(xBytes + n * 12 + 16);
    const a = this.a;
    const bo = base + xBytes;
    const ao = bo + n * 8;
    a.f64.set(best.subarray(0, n), bo >> 3);
    if (arg) a.i32.set(arg.subarray(0, n), ao >> 2);
    for (let j = 0; j < rows; j += step) {
      const r = Math.min(step, rows - j);
      a.f32.set(x.subarray(xo + j * d, xo + (j + r) * d), base >> 2);
      a.x.maxima(0, n, base, r, d, bo, ao, rowBase + j);
    }
    best.set(a.f64.subarray(bo >> 3, (bo >> 3) + n));
    if (arg) arg.set(a.i32.subarray(ao >> 2, (ao >> 2) + n));
  }

  dots(x: Float32Array, xo: number, rows: number, out: Float32Array): void {
    const { n, d } = this;
    if (n === 0 || rows === 0) return;
    const step = Math.max(1, Math.floor(BLOCK_BYTES / ((d + n) * 4)));
    const block = Math.min(rows, step);
    const xBytes = align(block * d * 4);
    const base = this.load(xBytes + n * block * 4);
    const a = this.a;
    const oo = (base + xBytes) >> 2;
    for (let j = 0; j < rows; j += step) {
      const r = Math.min(step, rows - j);
      a.f32.set(x.subarray(xo + j * d, xo + (j + r) * d), base >> 2);
      a.x.dots(0, n, base, r, d, base + xBytes);
      if (r === rows) out.set(a.f32.subarray(oo, oo + n * rows));
      else for (let i = 0; i < n; i++) out.set(a.f32.subarray(oo + i * r, oo + (i + 1) * r), i * rows + j);
    }
  }
}

/**
 * scoreRows variants: 'js' (the JavaScript kernel), or the module's 'scalar' and 'pairs' (equal
 * to it bit for bit) and 'f32' (float32 accumulation, within a bound), each after gathering the
 * listed rows into the module's memory. The score bench compares them (docs/benchmarks.md).
 */
export type ScoreRowsVariant = 'js' | 'scalar' | 'pairs' | 'f32';

class WasmKernels implements Kernels {
  readonly kind = 'wasm' as const;
  private readonly a: Arena;
  /**
   * The scoreRows variant in use, chosen by the score bench (docs/benchmarks.md): the rows XTR
   * scores sit in a JavaScript array, so the module would first copy each one in, which costs more
   * than its faster arithmetic saves; the JavaScript kernel is used.
   */
  rowsVariant: ScoreRowsVariant = 'js';

  constructor(x: Exports) {
    this.a = new Arena(x);
  }

  prepare(q: Float32Array, n: number, d: number): PreparedQuery {
    if (((n + 1) >> 1) * d * 16 > MAX_QUERY_BYTES) return jsKernels.prepare(q, n, d);
    return new WasmQuery(this.a, q, n, d);
  }

  scoreRows(q: Float32Array, qo: number, tokens: Float32Array, base: number, d: number, list: Uint32Array, lo: number, hi: number, out: Float64Array): void {
    this.scoreRowsWith(this.rowsVariant, q, qo, tokens, base, d, list, lo, hi, out);
  }

  /** scoreRows by one variant: the listed rows are gathered into the module's memory, then scored. */
  scoreRowsWith(variant: ScoreRowsVariant, q: Float32Array, qo: number, tokens: Float32Array, base: number, d: number, list: Uint32Array, lo: number, hi: number, out: Float64Array): void {
    const count = hi - lo;
    if (count <= 0) return;
    if (variant === 'js') {
      jsScoreRows(q, qo, tokens, base, d, list, lo, hi, out);
      return;
    }
    const a = this.a;
    a.evict();
    const qBytes = align(d * 8);
    const lOff = qBytes;
    const xOff = lOff + align(count * 4);
    const oOff = xOff + align(count * d * 4);
    a.ensure(oOff + count * 8);
    if (variant === 'pairs') for (let k = 0; k < d; k++) a.f64[k] = q[qo + k];
    else a.f32.set(q.subarray(qo, qo + d), 0);
    const f32 = a.f32;
    const u32 = a.u32;
    const lw = lOff >> 2;
    let xw = xOff >> 2;
    for (let p = lo; p < hi; p++, xw += d) {
      const r = (list[p] - base) * d;
      f32.set(tokens.subarray(r, r + d), xw);
      u32[lw + p - lo] = p - lo;
    }
    const fn = variant === 'pairs' ? a.x.scoreRowsPairs : variant === 'f32' ? a.x.scoreRowsF32 : a.x.scoreRows;
    fn(0, xOff, 0, d, lOff, count, oOff);
    out.set(a.f64.subarray(oOff >> 3, (oOff >> 3) + count));
  }

  warpTables(t: WarpTablesInput, out: Float32Array): void {
    noteTableBuild();
    const { q, n, dims, bits, weights, bytesPerToken: bpt } = t;
    if (n === 0) return;
    const a = this.a;
    a.evict();
    const tableBytes = n * bpt * 1024;
    if (tableBytes <= MAX_RESIDENT_TABLE_BYTES && out.length === n * bpt * 256) {
      // Built where lookupSums reads them (offset 0), and left resident: one copy out, none back in.
      const qOff = align(tableBytes);
      const wOff = qOff + align(n * dims * 4);
      const sOff = wOff + align(weights.length * 4);
      a.ensure(sOff + 256);
      a.f32.set(q.subarray(0, n * dims), qOff >> 2);
      a.f32.set(weights, wOff >> 2);
      a.x.warpTables(qOff, n, dims, bits, wOff, bpt, 0, sOff);
      out.set(a.f32.subarray(0, n * bpt * 256));
      const key = a.tableKey;
      key.tables = out;
      key.to = 0;
      key.build = tableBuilds();
      a.hold(key, tableBytes, () => undefined);
      return;
    }
    const step = Math.max(1, Math.floor(BLOCK_BYTES / (bpt * 1024))); // query tokens per call
    const block = Math.min(n, step);
    const wOff = align(block * dims * 4);
    const sOff = wOff + align(weights.length * 4);
    const oOff = sOff + 256;
    a.ensure(oOff + block * bpt * 1024);
    a.f32.set(weights, wOff >> 2);
    for (let i = 0; i < n; i += step) {
      const m = Math.min(step, n - i);
      a.f32.set(q.subarray(i * dims, (i + m) * dims), 0);
      a.x.warpTables(0, m, dims, bits, wOff, bpt, oOff, sOff);
      out.set(a.f32.subarray(oOff >> 2, (oOff >> 2) + m * bpt * 256), i * bpt * 256);
    }
  }

  lookupSums(tables: Float32Array, to: number, codes: Uint8Array, _words: Uint32Array | null, co: number, count: number, bpt: number, cs: number, out: Float64Array): void {
    if (count <= 0) return;
    const tOff = this.residentTables(tables, to, bpt);
    const a = this.a;
    const step = Math.max(1, Math.floor(BLOCK_BYTES / (bpt + 8))); // tokens per call
    const block = Math.min(count, step);
    const cOff = a.free;
    const oOff = cOff + align(block * bpt);
    a.ensure(oOff + block * 8);
    for (let e = 0; e < count; e += step) {
      const m = Math.min(step, count - e);
      a.u8.set(codes.subarray(co + e * bpt, co + (e + m) * bpt), cOff);
      a.x.lookupSums(tOff, cOff, m, bpt, cs, oOff);
      out.set(a.f64.subarray(oOff >> 3, (oOff >> 3) + m), e);
    }
  }

  lookupSumsMany(tables: Float32Array, to: number, parts: readonly Uint8Array[], bpt: number, out: Float64Array): void {
    let total = 0;
    for (const p of parts) total += (p.length / bpt) | 0;
    if (total === 0) return;
    const tOff = this.residentTables(tables, to, bpt);
    const a = this.a;
    const step = Math.max(1, Math.floor(BLOCK_BYTES / (bpt + 8))); // tokens per call
    const block = Math.min(total, step);
    const cOff = a.free;
    const oOff = cOff + align(block * bpt);
    a.ensure(oOff + block * 8);
    const u8 = a.u8;
    let filled = 0; // entries gathered for the next call
    let done = 0; // entries written to out
    const flush = () => {
      a.x.lookupSums(tOff, cOff, filled, bpt, -0, oOff);
      out.set(a.f64.subarray(oOff >> 3, (oOff >> 3) + filled), done);
      done += filled;
      filled = 0;
    };
    for (const p of parts) {
      const count = (p.length / bpt) | 0;
      let e = 0;
      while (e < count) {
        const m = Math.min(count - e, step - filled);
        u8.set(e === 0 && m === count ? p : p.subarray(e * bpt, (e + m) * bpt), cOff + filled * bpt);
        filled += m;
        e += m;
        if (filled === step) flush();
      }
    }
    if (filled > 0) flush();
  }

  private readonly lists = new ResidentLists();
  private scanOwner: ResidentScan | null = null;

  /** The budget of WARP lists kept in the module (RESIDENT_LIST_BYTES; tests lower it to reach the drop path). Setting it drops the kept lists. */
  get residentListBytes(): number {
    return this.lists.budget;
  }

  set residentListBytes(bytes: number) {
    if (!Number.isInteger(bytes) || bytes < 0 || bytes > RESIDENT_LIST_BYTES) throw new RangeError(`residentListBytes must be an integer in [0, ${RESIDENT_LIST_BYTES}], got ${bytes}`);
    this.lists.reset(this.a.clobbers);
    this.lists.budget = bytes;
  }

  warpResident(documents: readonly number[], masks: readonly (Uint8Array | undefined)[]): WarpResidentScan | null {
    if (this.scanOwner) return null;
    const scan = new ResidentScan(this.a, this.lists, documents, masks, (tables, to, bpt) => this.residentTables(tables, to, bpt), () => {
      if (this.scanOwner === scan) this.scanOwner = null;
    });
    this.scanOwner = scan;
    return scan;
  }

  /** The module offset of tables[to]: the query's tables made resident (whole when they fit, else token to's). */
  private residentTables(tables: Float32Array, to: number, bpt: number): number {
    const a = this.a;
    const tLen = bpt * 256;
    const key = a.tableKey;
    // The whole query's tables stay resident when they fit (every query token, every segment, one
    // copy per query); else one query token's tables at a time.
    const whole = tables.length * 4 <= MAX_RESIDENT_TABLE_BYTES;
    if (a.resident !== key || key.tables !== tables || (!whole && key.to !== to) || key.build !== tableBuilds()) {
      a.evict();
      key.tables = tables;
      key.to = whole ? 0 : to;
      key.build = tableBuilds();
      if (whole) a.hold(key, tables.length * 4, () => a.f32.set(tables, 0));
      else a.hold(key, tLen * 4, () => a.f32.set(tables.subarray(to, to + tLen), 0));
    }
    return (to - key.to) * 4;
  }
}

const align8 = (x: number) => (x + 7) & ~7;

/** WARP lists kept in the module's memory from LOW_BYTES: per WarpResidentList object, its codes then its ids as u32. */
class ResidentLists {
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

class ResidentScan implements WarpResidentScan {
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

/** Runs every kernel on small odd shapes against the JavaScript kernels; the first difference, or null. */
function selfCheck(k: WasmKernels): string | null {
  let seed = 12345;
  const rnd = () => ((seed = (seed * 1103515245 + 12345) >>> 0) / 2 ** 32) - 0.5;
  const n = 5, d = 7, rows = 9;
  const q = Float32Array.from({ length: n * d }, rnd);
  const x = Float32Array.from({ length: rows * d + 3 }, rnd);
  const b1 = new Float64Array(n).fill(-Infinity), b2 = new Float64Array(n).fill(-Infinity);
  const g1 = new Int32Array(n).fill(-1), g2 = new Int32Array(n).fill(-1);
  k.prepare(q, n, d).maxima(x, 3, rows, b1, g1, 10);
  jsMaxima(q, n, x, 3, rows, d, b2, g2, 10);
  if (b1.some((v, i) => v !== b2[i]) || g1.some((v, i) => v !== g2[i])) return 'maxima';
  const o1 = new Float32Array(n * rows), o2 = new Float32Array(n * rows);
  k.prepare(q, n, d).dots(x, 3, rows, o1);
  jsDots(q, n, x, 3, rows, d, o2);
  if (o1.some((v, i) => v !== o2[i])) return 'dots';
  const list = Uint32Array.from([2, 5, 6, 7, 9, 10]);
  const r1 = new Float64Array(6), r2 = new Float64Array(6);
  for (const v of ['scalar', 'pairs'] as const) {
    k.scoreRowsWith(v, q, d, x, 2, d, list, 0, 6, r1);
    jsScoreRows(q, d, x, 2, d, list, 0, 6, r2);
    if (r1.some((s, i) => s !== r2[i])) return `scoreRows (${v})`;
  }
  for (const bits of [2, 4] as const) {
    const dims = 7, bpt = Math.ceil((dims * bits) / 8);
    const t: WarpTablesInput = { q: Float32Array.from({ length: 2 * dims }, rnd), n: 2, dims, bits, weights: Float32Array.from({ length: dims << bits }, rnd), bytesPerToken: bpt };
    const t1 = new Float32Array(2 * bpt * 256), t2 = new Float32Array(2 * bpt * 256);
    k.warpTables(t, t1);
    jsWarpTables(t, t2);
    if (t1.some((v, i) => v !== t2[i])) return `warpTables (b = ${bits})`;
    const codes = Uint8Array.from({ length: 3 * bpt + 1 }, () => Math.floor((rnd() + 0.5) * 256));
    const s1 = new Float64Array(3), s2 = new Float64Array(3);
    k.lookupSums(t1, bpt * 256, codes, null, 1, 3, bpt, 0.25, s1);
    jsLookupSums(t2, bpt * 256, codes, null, 1, 3, bpt, 0.25, s2);
    if (s1.some((v, i) => v !== s2[i])) return `lookupSums (b = ${bits})`;
    const parts = [codes.subarray(bpt, 3 * bpt), codes.subarray(0, 0), codes.subarray(2 * bpt, 4 * bpt)];
    const m1 = new Float64Array(4), m2 = new Float64Array(4);
    k.lookupSumsMany(t1, bpt * 256, parts, bpt, m1);
    jsLookupSumsMany(t2, bpt * 256, parts, bpt, m2);
    if (m1.some((v, i) => !Object.is(v, m2[i]))) return `lookupSumsMany (b = ${bits})`;
  }
  return null;
}

export interface SimdStatus {
  kind: 'wasm' | 'js';
  /** why the JavaScript kernels are used, when they are */
  reason?: string;
  /** the compiled module's path */
  module: string;
}

let loaded: { kernels: WasmKernels | null; status: SimdStatus } | null = null;

/** The WebAssembly kernels, loaded and self-checked once per process; null where they cannot be used (see simdStatus). */
export function wasmKernels(): WasmKernels | null {
  if (!loaded) loaded = load();
  return loaded.kernels;
}

export function simdStatus(): SimdStatus {
  if (!loaded) loaded = load();
  return loaded.status;
}

function load(): { kernels: WasmKernels | null; status: SimdStatus } {
  let file = '';
  try {
    file = simdModulePath();
    if (!existsSync(file)) return { kernels: null, status: { kind: 'js', reason: 'not built (node scripts/build-simd.cjs)', module: file } };
    const wa = (globalThis as unknown as { WebAssembly?: WasmApi }).WebAssembly;
    if (!wa) return { kernels: null, status: { kind: 'js', reason: 'no WebAssembly in this runtime', module: file } };
    const mod = new wa.Module(readFileSync(file));
    const inst = new wa.Instance(mod, { env: { abort: () => { throw new Error('simd: abort'); } } });
    const k = new WasmKernels(inst.exports as unknown as Exports);
    const bad = selfCheck(k);
    if (bad) return { kernels: null, status: { kind: 'js', reason: `self-check failed: ${bad} differs from the JavaScript kernel`, module: file } };
    return { kernels: k, status: { kind: 'wasm', module: file } };
  } catch (err) {
    return { kernels: null, status: { kind: 'js', reason: `cannot load: ${err instanceof Error ? err.message : String(err)}`, module: file } };
  }
}

export type { WasmKernels };
