import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { beforeAll, describe, expect, it } from 'vitest';
import { mulberry32 } from '@lateral/shared';
import { jsLookupSums, jsRowMaxima, jsWarpTables, simdModulePath, simdStatus, wasmKernels, type RowMaximaInput, type WarpTablesInput, type WasmKernels } from './index';

/**
 * rowMaxima (ME-BERT's prefix scan from EDEN 4-bit codes): the JavaScript kernel against a plain
 * reference written from the contract (one row at a time, the float64 sum in byte order), and the
 * WebAssembly kernel against the JavaScript one, bit for bit (values and rows): code widths that
 * are not multiples of 4 (the word loop's tail), documents of 0 to 11 rows (the eight-row and the
 * per-document paths, m above and below a document's rows), fp32 and fp16 norms with zero, -0,
 * non-finite and subnormal values, inputs over several copy blocks, and a table kept in the module
 * while other kernels use its memory. Fails where the module does not load.
 */
let w: WasmKernels;

beforeAll(() => {
  if (!existsSync(simdModulePath())) {
    const r = spawnSync(process.execPath, ['scripts/build-simd.cjs', '--quiet'], { encoding: 'utf8' });
    if (r.status !== 0) throw new Error(`build-simd failed: ${r.stderr}`);
  }
  const k = wasmKernels();
  if (!k) throw new Error(`the WebAssembly kernels did not load: ${simdStatus().reason}`);
  w = k;
}, 120_000);

const r = mulberry32(11);

/** A random input: `docs` documents of 0..maxRows rows, bpt code bytes a row, special norms sprinkled in. */
function input(docs: number, bpt: number, half: boolean, maxRows = 11, to = 256 * 3): RowMaximaInput {
  const start = new Uint32Array(docs + 1);
  for (let k = 0; k < docs; k++) start[k + 1] = start[k] + Math.floor(r() * (maxRows + 1));
  const rows = start[docs];
  const table = Float64Array.from({ length: to + bpt * 256 + 5 }, () => r() * 2 - 1);
  const codes = Uint8Array.from({ length: rows * bpt }, () => Math.floor(r() * 256));
  const norms = new Uint8Array(rows * (half ? 2 : 4));
  const v = new DataView(norms.buffer);
  const specials = half ? [0, 0x8000, 0x7c00, 0xfc00, 0x7e00, 0x0001, 0x03ff] : [0, -0, Infinity, -Infinity, NaN, 1e-40];
  for (let j = 0; j < rows; j++) {
    const special = r() < 0.05 ? specials[Math.floor(r() * specials.length)] : null;
    if (half) v.setUint16(2 * j, special ?? 0x3000 + Math.floor(r() * 0x1400), true);
    else v.setFloat32(4 * j, special ?? 0.1 + r() * 3, true);
  }
  return { table, to, bpt, offset: r() - 0.5, inv: 1 / Math.sqrt(8 * bpt), codes, norms, half, start };
}

/** The contract, one row at a time. */
function reference(t: RowMaximaInput, from: number, to: number, m: number, best: Float64Array, arg: Int32Array): void {
  const v = new DataView(t.norms.buffer, t.norms.byteOffset, t.norms.byteLength);
  for (let k = from; k < to; k++) {
    let b = -Infinity;
    let a = 0;
    for (let j = 0; j < Math.min(m, t.start[k + 1] - t.start[k]); j++) {
      const row = t.start[k] + j;
      let s = 0;
      for (let p = 0; p < t.bpt; p++) s += t.table[t.to + 256 * p + t.codes[row * t.bpt + p]];
      const norm = t.half ? half(v.getUint16(2 * row, true)) : v.getFloat32(4 * row, true);
      const score = norm === 0 || !Number.isFinite(norm) ? t.offset : t.offset + norm * t.inv * s;
      if (score > b) {
        b = score;
        a = j;
      }
    }
    best[k - from] = b;
    arg[k - from] = a;
  }
}

function half(h: number): number {
  const f = new Float32Array(1);
  const u = new Uint32Array(f.buffer);
  const exp = (h >> 10) & 0x1f;
  const mant = h & 0x3ff;
  if (exp === 0) return (h & 0x8000 ? -1 : 1) * mant * 2 ** -24;
  u[0] = ((h & 0x8000) << 16) | (exp === 0x1f ? 0x7f800000 | (mant << 13) : ((exp + 112) << 23) | (mant << 13));
  return f[0];
}

const same = (a: ArrayLike<number>, b: ArrayLike<number>) => a.length === b.length && Array.prototype.every.call(a, (x: number, i: number) => Object.is(x, b[i]));

function run(f: typeof jsRowMaxima, t: RowMaximaInput, from: number, to: number, m: number) {
  const best = new Float64Array(to - from).fill(7);
  const arg = new Int32Array(to - from).fill(-7);
  f(t, from, to, m, best, arg);
  return { best, arg };
}

describe('rowMaxima (ME-BERT from EDEN 4-bit codes)', () => {
  it('JavaScript equals the plain reference, and WebAssembly the JavaScript, bit for bit: code widths 1..65, 0..11 rows a document, m = 1..12, fp32 and fp16 norms', () => {
    for (const bpt of [1, 3, 4, 5, 6, 8, 13, 64, 65])
      for (const h of [false, true]) {
        const t = input(61, bpt, h);
        for (const m of [1, 2, 3, 4, 5, 8, 11, 12])
          for (const [from, to] of [[0, 61], [0, 1], [5, 40], [60, 61], [7, 7]]) {
            const ref = run(reference, t, from, to, m);
            const js = run(jsRowMaxima, t, from, to, m);
            const wa = run((...a) => w.rowMaxima(...a), t, from, to, m);
            const at = `bpt ${bpt}, ${h ? 'fp16' : 'fp32'} norms, m ${m}, [${from}, ${to})`;
            expect(same(js.best, ref.best), at).toBe(true);
            expect(Array.from(js.arg), at).toEqual(Array.from(ref.arg));
            expect(same(wa.best, js.best), at).toBe(true);
            expect(Array.from(wa.arg), at).toEqual(Array.from(js.arg));
          }
      }
  });

  it('every document within m rows (the eight-row path) and documents of exactly m rows, as ME-BERT reads a prefix section', () => {
    for (const h of [false, true]) {
      const t = input(1001, 64, h, 4);
      for (const m of [4, 5, 64]) {
        const js = run(jsRowMaxima, t, 0, 1001, m);
        expect(same(js.best, run(reference, t, 0, 1001, m).best)).toBe(true);
        const wa = run((...a) => w.rowMaxima(...a), t, 0, 1001, m);
        expect(same(wa.best, js.best)).toBe(true);
        expect(Array.from(wa.arg)).toEqual(Array.from(js.arg));
      }
    }
  });

  it('ties keep the first row; a document without rows is -Infinity at place 0', () => {
    const t = input(3, 4, false, 0);
    t.start = Uint32Array.of(0, 3, 3, 5);
    t.codes = new Uint8Array(5 * 4).fill(9); // every row the same codes
    const v = new DataView((t.norms = new Uint8Array(5 * 4)).buffer);
    for (let j = 0; j < 5; j++) v.setFloat32(4 * j, 2, true);
    for (const f of [jsRowMaxima, (...a: Parameters<typeof jsRowMaxima>) => w.rowMaxima(...a)]) {
      const { best, arg } = run(f, t, 0, 3, 4);
      expect(Array.from(arg)).toEqual([0, 0, 0]);
      expect(best[1]).toBe(-Infinity);
      expect(best[0]).toBe(best[2]);
    }
  });

  it('many documents without rows: blocks bounded by documents too, the same bits, and the module\'s resident regions untouched', () => {
    const D = 4_300_000; // 16 B of scratch a document: past LOW_BYTES (64 MiB) in one block
    const t = input(10, 8, false, 0); // every document empty but a few
    t.start = new Uint32Array(D + 1);
    for (let k = 0; k < D; k++) t.start[k + 1] = t.start[k] + (k % 500_000 === 0 ? 3 : 0);
    const rows = t.start[D];
    t.codes = Uint8Array.from({ length: rows * 8 }, () => Math.floor(r() * 256));
    t.norms = new Uint8Array(new Float32Array(rows).fill(1.5).buffer);
    const clobbers = (w as unknown as { a: { clobbers: number } }).a.clobbers;
    const js = run(jsRowMaxima, t, 0, D, 4);
    const wa = run((...a) => w.rowMaxima(...a), t, 0, D, 4);
    expect(same(wa.best, js.best)).toBe(true);
    expect(wa.arg.every((v, k) => v === js.arg[k])).toBe(true);
    expect((w as unknown as { a: { clobbers: number } }).a.clobbers).toBe(clobbers);
  });

  it('inputs over several copy blocks (4 MiB) give the same bits', () => {
    const t = input(30_001, 64, false, 8); // ~120k rows x 72 B: about 9 MB
    for (const m of [3, 8]) {
      const js = run(jsRowMaxima, t, 0, 30_001, m);
      const wa = run((...a) => w.rowMaxima(...a), t, 0, 30_001, m);
      expect(same(wa.best, js.best)).toBe(true);
      expect(Array.from(wa.arg)).toEqual(Array.from(js.arg));
    }
  });

  it('a table kept in the module stays right when tables alternate and other kernels use the memory in between', () => {
    const a = input(40, 16, false), b = input(40, 16, true);
    const bpt = 8, dims = 16;
    const wt: WarpTablesInput = { q: Float32Array.from({ length: 2 * dims }, () => r() - 0.5), n: 2, dims, bits: 4, weights: Float32Array.from({ length: dims * 16 }, () => r() - 0.5), bytesPerToken: bpt };
    const tables = new Float32Array(2 * bpt * 256);
    jsWarpTables(wt, tables);
    const codes = Uint8Array.from({ length: 10 * bpt }, () => Math.floor(r() * 256));
    for (let round = 0; round < 3; round++)
      for (const t of [a, b, a]) {
        const js = run(jsRowMaxima, t, 0, 40, 6);
        const wa = run((...x) => w.rowMaxima(...x), t, 0, 40, 6);
        expect(same(wa.best, js.best)).toBe(true);
        // another kernel's data where the table sat
        const l1 = new Float64Array(10), l2 = new Float64Array(10);
        w.lookupSums(tables, bpt * 256, codes, null, 0, 10, bpt, 0, l1);
        jsLookupSums(tables, bpt * 256, codes, null, 0, 10, bpt, 0, l2);
        expect(same(l1, l2)).toBe(true);
        w.prepare(Float32Array.from({ length: 3 * 5 }, () => r()), 3, 5).maxima(Float32Array.from({ length: 50 }, () => r()), 0, 10, new Float64Array(3).fill(-Infinity), null, 0);
      }
    // the same table array at another query token's offset
    const moved = { ...a, to: a.to - 256 };
    expect(same(run((...x) => w.rowMaxima(...x), moved, 0, 40, 6).best, run(jsRowMaxima, moved, 0, 40, 6).best)).toBe(true);
  });

  it('an input too short for the documents asked is a RangeError naming what is short, on both kernels', () => {
    const t = input(10, 8, false);
    for (const f of [jsRowMaxima, (...a: Parameters<typeof jsRowMaxima>) => w.rowMaxima(...a)]) {
      const b = new Float64Array(10), g = new Int32Array(10);
      expect(() => f({ ...t, to: t.table.length - 8 * 256 + 1 }, 0, 10, 4, b, g)).toThrow(/the table has \d+ entries, 2048 needed/);
      expect(() => f({ ...t, codes: t.codes.subarray(1) }, 0, 10, 4, b, g)).toThrow(/codes has \d+ bytes/);
      expect(() => f({ ...t, norms: t.norms.subarray(4) }, 0, 10, 4, b, g)).toThrow(/norms has \d+ bytes/);
      expect(() => f(t, 0, 11, 4, b, g)).toThrow('documents [0, 11) are out of range');
      expect(() => f(t, 0, 10, 0, b, g)).toThrow('m must be an integer >= 1');
    }
  });
});
