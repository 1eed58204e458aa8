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
import { jsDots, jsKernels, jsLookupSums, jsLookupSumsMany, jsMaxima, jsRowMaxima, jsScoreRows, jsWarpTables, jsWarpTop, checkRowMaxima } from './js';
import type { ExactLevels, ExactRows, Kernels, PreparedQuery, RowMaximaInput, WarpResidentScan, WarpResidentSource, WarpTablesInput } from './types';
import { Arena, BLOCK_BYTES, MAX_QUERY_BYTES, MAX_RESIDENT_TABLE_BYTES, RESIDENT_LIST_BYTES, align, type Exports, type WasmApi } from './wasm-memory';
import { ResidentLists, ResidentScan } from './wasm-resident';

export { RESIDENT_LIST_BYTES };

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

  /**
   * The warpTop kernel over arrays given here (copied into the module's scratch): jsWarpTop's
   * result, for the load-time self-check and the specs (a resident scan runs it on its own state).
   */
  warpTop(candidates: Uint32Array, count: number, acc: Float64Array, base: number, divide: number, k: number): { scores: Float64Array; ids: Uint32Array } {
    const a = this.a;
    const kk = Math.max(0, Math.min(k, count));
    const cOff = align(a.free);
    const accOff = align(cOff + count * 4);
    const hs = align(accOff + acc.length * 8);
    const hid = align(hs + kk * 8);
    a.ensure(hid + kk * 4);
    a.u32.set(candidates.subarray(0, count), cOff >> 2);
    a.f64.set(acc, accOff >> 3);
    const got = a.x.warpTop(cOff, count, accOff, 3, base, divide, kk, hs, hid);
    return { scores: a.f64.slice(hs >> 3, (hs >> 3) + got), ids: a.u32.slice(hid >> 2, (hid >> 2) + got) };
  }

  warpResident(documents: readonly number[], masks: readonly (Uint8Array | undefined)[], sources: readonly WarpResidentSource[], tables: WarpTablesInput): WarpResidentScan | null {
    if (this.scanOwner) return null;
    const scan = new ResidentScan(this.a, this.lists, documents, masks, sources, tables, () => {
      if (this.scanOwner === scan) this.scanOwner = null;
    });
    this.scanOwner = scan;
    return scan;
  }

  exactMaxsim(q: Float32Array, n: number, w: number, docs: readonly ExactRows[], out: Float64Array, codes?: ExactLevels): void {
    if (docs.length === 0) return;
    if (n === 0) {
      docs.forEach((doc, k) => (out[k] = doc.rows > 0 ? 0 : -Infinity));
      return;
    }
    const a = this.a;
    a.evict(); // the resident query or tables are the scan's; this stage runs after it
    const rowBytes = w * 4;
    const step = Math.max(1, Math.floor(BLOCK_BYTES / rowBytes)); // rows per decode block
    let most = 0;
    for (const doc of docs) most = Math.max(most, doc.rows);
    const block = Math.min(step, most);
    const bOff = align(n * rowBytes);
    const lOff = bOff + align(n * 4);
    const tOff = lOff + 1024; // up to 256 levels
    const sOff = tOff + 2048; // 256 level pairs (4-bit codes)
    const cOff = sOff + align(block * 4);
    const xOff = cOff + align(block * w * 2 + 16); // a half or at most 8 bits a value, + the bit reader's overrun
    a.ensure(xOff + block * rowBytes);
    const { f32, u8 } = a;
    f32.set(q.subarray(0, n * w), 0);
    if (codes) {
      const L = 1 << codes.bits;
      if (codes.levels.length !== L) throw new RangeError(`exactMaxsim: ${codes.bits}-bit codes need ${L} levels, got ${codes.levels.length}`);
      f32.set(codes.levels, lOff >> 2);
      if (codes.bits === 4)
        for (let v = 0; v < 256; v++) {
          f32[(tOff >> 2) + 2 * v] = codes.levels[v & 15];
          f32[(tOff >> 2) + 2 * v + 1] = codes.levels[v >> 4];
        }
    }
    const best = f32.subarray(bOff >> 2, (bOff >> 2) + n);
    for (let k = 0; k < docs.length; k++) {
      const doc = docs[k];
      if (doc.rows === 0) {
        out[k] = -Infinity;
        continue;
      }
      best.fill(-Infinity);
      for (let r0 = 0; r0 < doc.rows; r0 += step) {
        const r = Math.min(step, doc.rows - r0);
        let scales = 0;
        if (doc.kind === 'f32') f32.set(doc.values.subarray(r0 * w, (r0 + r) * w), xOff >> 2);
        else if (doc.kind === 'f16') {
          u8.set(doc.bytes.subarray(r0 * w * 2, (r0 + r) * w * 2), cOff);
          a.x.halfToF32(cOff, r * w, xOff);
        } else {
          if (!codes) throw new Error('exactMaxsim: coded rows need their levels');
          const b = codes.bits;
          if ((w * b) % 8 !== 0) throw new RangeError(`exactMaxsim: rows of ${w} ${b}-bit codes do not end on a byte`);
          u8.set(doc.codes.subarray((r0 * w * b) / 8, ((r0 + r) * w * b) / 8), cOff);
          a.x.codesToF32(cOff, r, w, b, lOff, tOff, xOff);
          f32.set(doc.scales.subarray(r0, r0 + r), sOff >> 2);
          scales = sOff;
        }
        a.x.maxsimF32(0, n, w, xOff, r, scales, bOff);
      }
      let s = 0;
      for (let i = 0; i < n; i++) s += best[i];
      out[k] = s;
    }
  }

  /** Which EDEN query token's table (RowMaximaInput) is resident at offset 0 when the arena's resident is this key. */
  private readonly rowTableKey = { table: null as Float64Array | null, to: -1 };

  rowMaxima(t: RowMaximaInput, from: number, to: number, m: number, best: Float64Array, arg: Int32Array): void {
    checkRowMaxima(t, from, to, m);
    if (to === from) return;
    const { table, bpt, codes, norms, half, start } = t;
    const a = this.a;
    const tBytes = bpt * 256 * 8;
    const key = this.rowTableKey;
    // The query token's table (bpt x 256 f64: 128 KiB at d = 100) is copied in once and kept while the same table is used.
    if (a.resident !== key || key.table !== table || key.to !== t.to) {
      a.evict();
      key.table = table;
      key.to = t.to;
      a.hold(key, tBytes, () => a.f64.set(table.subarray(t.to, t.to + bpt * 256), 0));
    }
    const nb = half ? 2 : 4;
    // Documents in blocks whose rows (codes, norms, scores) take at most BLOCK_BYTES, and at most
    // BLOCK_BYTES / 16 documents (bounds, maxima, places): the scratch stays below LOW_BYTES, so a
    // resident WARP scan's state above it is kept. A document holds a few rows (at most 64).
    const maxRows = Math.max(1, Math.floor(BLOCK_BYTES / (bpt + nb + 8)));
    const maxDocs = BLOCK_BYTES >> 4;
    let k0 = from;
    while (k0 < to) {
      let k1 = k0 + 1;
      while (k1 < to && k1 - k0 < maxDocs && start[k1 + 1] - start[k0] <= maxRows) k1++;
      const docs = k1 - k0;
      const r0 = start[k0];
      const rows = start[k1] - r0;
      const cOff = a.free;
      const nOff = cOff + align(rows * bpt);
      const sOff = nOff + align(rows * nb);
      const bOff = sOff + align((docs + 1) * 4);
      const aOff = bOff + docs * 8;
      const xOff = aOff + align(docs * 4);
      a.ensure(xOff + rows * 8);
      a.u8.set(codes.subarray(r0 * bpt, (r0 + rows) * bpt), cOff);
      a.u8.set(norms.subarray(r0 * nb, (r0 + rows) * nb), nOff);
      const u32 = a.u32;
      const sw = sOff >> 2;
      for (let k = 0; k <= docs; k++) u32[sw + k] = start[k0 + k] - r0;
      a.x.rowMaxima(0, bpt, t.offset, t.inv, cOff, nOff, half ? 1 : 0, sOff, docs, m, bOff, aOff, xOff);
      best.set(a.f64.subarray(bOff >> 3, (bOff >> 3) + docs), k0 - from);
      arg.set(a.i32.subarray(aOff >> 2, (aOff >> 2) + docs), k0 - from);
      k0 = k1;
    }
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
  for (const half of [false, true]) {
    // 3 documents: 6 rows (a run of 4, then 2), none, 3 rows; bpt 6 (a word and a tail); a zero and a non-finite norm.
    const bpt = 6;
    const start = Uint32Array.from([0, 6, 6, 9]);
    const table = Float64Array.from({ length: 3 + bpt * 256 }, rnd);
    const codes = Uint8Array.from({ length: 9 * bpt }, () => Math.floor((rnd() + 0.5) * 256));
    const norms = new Uint8Array(9 * (half ? 2 : 4));
    const nv = new DataView(norms.buffer);
    for (let r = 0; r < 9; r++) {
      if (half) nv.setUint16(2 * r, r === 2 ? 0 : r === 7 ? 0x7c00 : 0x3c00 + r * 97, true);
      else nv.setFloat32(4 * r, r === 2 ? 0 : r === 7 ? NaN : 0.5 + rnd(), true);
    }
    const t: RowMaximaInput = { table, to: 3, bpt, offset: 0.125, inv: 0.25, codes, norms, half, start };
    for (const m of [1, 5, 6]) {
      const b1 = new Float64Array(3), b2 = new Float64Array(3), g1 = new Int32Array(3), g2 = new Int32Array(3);
      k.rowMaxima(t, 0, 3, m, b1, g1);
      jsRowMaxima(t, 0, 3, m, b2, g2);
      if (b1.some((v, i) => !Object.is(v, b2[i])) || g1.some((v, i) => v !== g2[i])) return `rowMaxima (m = ${m}${half ? ', fp16 norms' : ''})`;
    }
  }
  // warpTop: ties on score (broken by the lower id), a NaN, fewer candidates than k, and k = 0
  {
    const acc = Float64Array.from({ length: 40 }, (_, i) => (i % 7 === 3 ? 0.5 : rnd()));
    acc[11] = NaN;
    const cands = Uint32Array.from({ length: 30 }, (_, i) => (i * 17 + 5) % 40);
    for (const [count, top] of [[30, 6], [30, 1], [4, 9], [30, 0], [0, 3], [30, 30]] as const) {
      const w = k.warpTop(cands, count, acc, 0.25, 3, top);
      const j = jsWarpTop(cands, count, acc, 0.25, 3, top);
      if (w.scores.length !== j.scores.length || w.scores.some((v, i) => !Object.is(v, j.scores[i])) || w.ids.some((v, i) => v !== j.ids[i])) return `warpTop (count = ${count}, k = ${top})`;
    }
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
