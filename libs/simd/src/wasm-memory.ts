/**
 * The WebAssembly module's memory as the kernels (wasm.ts) use it: the exports' signatures, the
 * regions (scratch and the resident query or tables below LOW_BYTES, kept WARP lists above it) and
 * the Arena of typed views over it. No I/O.
 */

/** The parts of the WebAssembly API used here (the project's TypeScript lib has no DOM types). */
export interface WasmMemory {
  readonly buffer: ArrayBuffer;
  grow(pages: number): number;
}
export interface WasmApi {
  Module: new (bytes: Uint8Array) => object;
  Instance: new (module: object, imports: object) => { exports: unknown };
}

export interface Exports {
  memory: WasmMemory;
  maxima(qp: number, n: number, x: number, rows: number, d: number, best: number, arg: number, rowBase: number): void;
  dots(qp: number, n: number, x: number, rows: number, d: number, out: number): void;
  scoreRows(q: number, x: number, base: number, d: number, list: number, count: number, out: number): void;
  scoreRowsPairs(qd: number, x: number, base: number, d: number, list: number, count: number, out: number): void;
  scoreRowsF32(q: number, x: number, base: number, d: number, list: number, count: number, out: number): void;
  warpTables(q: number, n: number, dims: number, bits: number, weights: number, bpt: number, out: number, scratch: number): void;
  lookupSums(tables: number, codes: number, count: number, bpt: number, cs: number, out: number): void;
  warpClear(at: number, count: number): void;
  warpToken(tables: number, bpt: number, lists: number, nl: number, segs: number, ns: number, mi: number): void;
  warpTop(candidates: number, count: number, acc: number, shift: number, base: number, divide: number, k: number, hs: number, hid: number): number;
  warpTopRecords(recs: number, D: number, base: number, divide: number, k: number, hs: number, hid: number): number;
  halfToF32(h: number, count: number, out: number): void;
  codesToF32(codes: number, rows: number, p: number, bits: number, levels: number, lut: number, out: number): void;
  maxsimF32(q: number, n: number, w: number, x: number, rows: number, scales: number, best: number): void;
  rowMaxima(table: number, bpt: number, offset: number, inv: number, codes: number, norms: number, half: number, start: number, docs: number, m: number, best: number, arg: number, scratch: number): void;
}

export const align = (x: number) => (x + 15) & ~15;
/**
 * The module's memory never shrinks, so no call may grow it much: rows, codes and tables are
 * copied in blocks of at most this many bytes, and a query whose float64 pairs would take more
 * than MAX_QUERY_BYTES runs on the JavaScript kernel (the same results).
 */
export const BLOCK_BYTES = 4 << 20;
export const MAX_QUERY_BYTES = 16 << 20;
/** A WARP query's tables up to this size are copied in once (n = 32, d = 384, b = 4: 6.3 MB). */
export const MAX_RESIDENT_TABLE_BYTES = 16 << 20;

/**
 * The kernels' own scratch and resident query / tables stay below LOW_BYTES (each call copies in
 * at most a few blocks of BLOCK_BYTES and 16 MiB of query or tables). Above it: the resident WARP
 * lists (RESIDENT_LIST_BYTES), then a resident scan's per-document state and per-call records.
 */
export const LOW_BYTES = 64 << 20;
/**
 * Budget of WARP lists kept in the module's memory (codes and u32 ids): 256 MiB holds every list
 * of full Vaswani at d = 384, b = 4 (571k tokens x 196 B = 112 MB). Over it the kept lists are
 * dropped and copied in again as queries probe them. The memory never shrinks: a scorer's RSS
 * carries this beside SCORER_CACHE_BYTES (docs/scaling.md).
 */
export const RESIDENT_LIST_BYTES = 256 << 20;

/** The module's memory grows in steps of this many bytes (at most this much unused; Arena.grow). */
export const GROW_STEP_BYTES = 16 << 20;

/** The module's memory as typed views, grown on demand, and which owner's data sits at offset 0. */
export class Arena {
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

  /**
   * Grows the memory to at least `bytes` (the resident WARP regions above LOW_BYTES: not a
   * clobber), in steps of GROW_STEP_BYTES: each grow may move the whole memory, and a cold WARP
   * query copying its lists in grew it a few pages at a time (448 ms of a 7.4 s first query at
   * 1,000,000 documents in a CPU profile; growing 300 MiB 4 pages at a time takes seconds, in
   * 16 MiB steps milliseconds). Where a step past `bytes` is refused, exactly `bytes`.
   */
  grow(bytes: number): void {
    const have = this.x.memory.buffer.byteLength;
    if (bytes <= have) return;
    const pages = Math.ceil((bytes - have) / 65536);
    try {
      this.x.memory.grow(Math.ceil((bytes - have) / GROW_STEP_BYTES) * (GROW_STEP_BYTES / 65536));
    } catch {
      this.x.memory.grow(pages);
    }
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
