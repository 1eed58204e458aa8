import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { beforeAll, describe, expect, it } from 'vitest';
import { mulberry32 } from '@lateral/shared';
import { jsKernels, jsDots, jsLookupSums, jsLookupSumsMany, jsMaxima, jsScoreRows, jsWarpTables, jsWarpTop, kernels, simdModulePath, simdStatus, wasmKernels, type WarpTablesInput, type WasmKernels } from './index';

/**
 * Every WebAssembly kernel against the JavaScript reference, on odd shapes (d = 1, 5, 7, 128;
 * query and row counts that are not multiples of 2 or 4; empty inputs): equal bit for bit, since
 * both keep the same float64 operations in the same order. The float32-accumulating scoreRows
 * variant, measured by the score bench but not used, is held to a stated bound instead. The
 * module is built first when missing (as `npm test` does through scripts/ensure-deps.cjs), and
 * must load: a machine where it fails its load-time self-check fails here.
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

const r = mulberry32(7);
const rand = (len: number) => Float32Array.from({ length: len }, () => r() * 2 - 1);
const DIMS = [1, 5, 7, 128];
const NS = [1, 2, 3, 5, 32];
const ROWS = [0, 1, 3, 4, 5, 17];

describe('@lateral/simd WebAssembly kernels', () => {
  it('load here and are the kernels in use', () => {
    expect(simdStatus()).toMatchObject({ kind: 'wasm' });
    expect(kernels().kind).toBe('wasm');
  });

  it('maxima equals the JavaScript kernel bit for bit (values and rows), updating given maxima', () => {
    for (const d of DIMS) for (const n of NS) for (const rows of ROWS) {
      const q = rand(n * d);
      const xo = 3 * d + 1;
      const x = rand(xo + rows * d + 2);
      // half the maxima already set: only strictly greater rows replace them
      const init = Float64Array.from({ length: n }, (_, i) => (i % 2 ? 0.1 : -Infinity));
      const b1 = init.slice(), b2 = init.slice();
      const g1 = new Int32Array(n).fill(-7), g2 = new Int32Array(n).fill(-7);
      w.prepare(q, n, d).maxima(x, xo, rows, b1, g1, 1000);
      jsMaxima(q, n, x, xo, rows, d, b2, g2, 1000);
      expect(Array.from(b1), `maxima d=${d} n=${n} rows=${rows}`).toEqual(Array.from(b2));
      expect(Array.from(g1), `rows d=${d} n=${n} rows=${rows}`).toEqual(Array.from(g2));
      const b3 = init.slice();
      w.prepare(q, n, d).maxima(x, xo, rows, b3, null, 0);
      expect(Array.from(b3)).toEqual(Array.from(b2));
    }
  });

  it('maxima keeps the first of tied rows, like the reference', () => {
    const d = 5, n = 3;
    const q = rand(n * d);
    const row = rand(d);
    const x = new Float32Array(6 * d);
    for (let j = 0; j < 6; j++) x.set(row, j * d);
    const b1 = new Float64Array(n).fill(-Infinity), b2 = b1.slice();
    const g1 = new Int32Array(n), g2 = new Int32Array(n);
    w.prepare(q, n, d).maxima(x, 0, 6, b1, g1, 40);
    jsMaxima(q, n, x, 0, 6, d, b2, g2, 40);
    expect(Array.from(g1)).toEqual([40, 40, 40]);
    expect(Array.from(g1)).toEqual(Array.from(g2));
    expect(Array.from(b1)).toEqual(Array.from(b2));
  });

  it('one prepared query stays right when another query or kernel used the module in between', () => {
    const d = 7, n = 5, rows = 9;
    const qa = rand(n * d), qb = rand(n * d);
    const x = rand(rows * d);
    const pa = w.prepare(qa, n, d), pb = w.prepare(qb, n, d);
    const run = (p: typeof pa) => {
      const b = new Float64Array(n).fill(-Infinity);
      p.maxima(x, 0, rows, b, null, 0);
      return Array.from(b);
    };
    const ref = (q: Float32Array) => {
      const b = new Float64Array(n).fill(-Infinity);
      jsMaxima(q, n, x, 0, rows, d, b, null, 0);
      return Array.from(b);
    };
    expect(run(pa)).toEqual(ref(qa));
    expect(run(pb)).toEqual(ref(qb));
    w.scoreRows(qa, 0, x, 0, d, Uint32Array.from([1, 2]), 0, 2, new Float64Array(2));
    expect(run(pa)).toEqual(ref(qa));
    expect(run(pa)).toEqual(ref(qa));
  });

  it('dots equals the JavaScript kernel bit for bit', () => {
    for (const d of DIMS) for (const n of NS) for (const rows of ROWS) {
      const q = rand(n * d);
      const x = rand(2 * d + rows * d);
      const o1 = new Float32Array(n * rows), o2 = new Float32Array(n * rows);
      w.prepare(q, n, d).dots(x, 2 * d, rows, o1);
      jsDots(q, n, x, 2 * d, rows, d, o2);
      expect(Array.from(o1), `dots d=${d} n=${n} rows=${rows}`).toEqual(Array.from(o2));
    }
  });

  it('scoreRows (scalar and pairs variants) equals the JavaScript kernel bit for bit; the float32 variant stays within its bound', () => {
    for (const d of DIMS) for (const count of ROWS) {
      const T = 40;
      const tokens = rand(T * d);
      const q = rand(3 * d);
      const base = 10;
      const list = Uint32Array.from({ length: count + 3 }, () => base + Math.floor(r() * (T - 1)));
      const ref = new Float64Array(count);
      jsScoreRows(q, d, tokens, base, d, list, 2, 2 + count, ref);
      // rows relative to base: tokens holds rows from `base` on
      for (const variant of ['scalar', 'pairs'] as const) {
        const out = new Float64Array(count);
        w.scoreRowsWith(variant, q, d, tokens, base, d, list, 2, 2 + count, out);
        expect(Array.from(out), `scoreRows ${variant} d=${d} count=${count}`).toEqual(Array.from(ref));
      }
      const f = new Float64Array(count);
      w.scoreRowsWith('f32', q, d, tokens, base, d, list, 2, 2 + count, f);
      for (let p = 0; p < count; p++) {
        const row = (list[2 + p] - base) * d;
        let mag = 0;
        for (let k = 0; k < d; k++) mag += Math.abs(q[d + k] * tokens[row + k]);
        // float32 products and sums: at most (d + 2) unit roundoffs of the sum of |products|
        expect(Math.abs(f[p] - ref[p]), `scoreRows f32 d=${d}`).toBeLessThanOrEqual((d + 2) * 2 ** -24 * mag);
      }
    }
  });

  it('warpTables equals the JavaScript kernel bit for bit (b = 2 and 4, partial last bytes)', () => {
    for (const bits of [2, 4] as const) for (const dims of DIMS) for (const n of [1, 3]) {
      const bpt = Math.ceil((dims * bits) / 8);
      const t: WarpTablesInput = { q: rand(n * dims), n, dims, bits, weights: rand(dims << bits), bytesPerToken: bpt };
      const a = new Float32Array(n * bpt * 256), b = new Float32Array(n * bpt * 256);
      w.warpTables(t, a);
      jsWarpTables(t, b);
      expect(a.every((v, i) => Object.is(v, b[i])), `warpTables b=${bits} dims=${dims} n=${n}`).toBe(true);
    }
  });

  it('lookupSums equals the JavaScript kernel bit for bit (bytes and words, offsets, reused table arrays)', () => {
    for (const bits of [2, 4] as const) for (const dims of DIMS) {
      const n = 3;
      const bpt = Math.ceil((dims * bits) / 8);
      const tables = new Float32Array(n * bpt * 256);
      for (let round = 0; round < 2; round++) {
        // the same array rebuilt for another query: the module must not keep the old tables
        jsKernels.warpTables({ q: rand(n * dims), n, dims, bits, weights: rand(dims << bits), bytesPerToken: bpt }, tables);
        for (const count of ROWS) {
          const co = bpt * 2; // a multiple of 4 when bpt is
          const codes = Uint8Array.from({ length: co + count * bpt + 4 }, () => Math.floor(r() * 256));
          const words = (bpt & 3) === 0 ? new Uint32Array(codes.buffer, 0, codes.length >> 2) : null;
          for (let i = 0; i < n; i++) {
            const out = new Float64Array(count), ref = new Float64Array(count);
            w.lookupSums(tables, i * bpt * 256, codes, words, co, count, bpt, 0.125 * i, out);
            jsLookupSums(tables, i * bpt * 256, codes, null, co, count, bpt, 0.125 * i, ref);
            expect(Array.from(out), `lookupSums b=${bits} dims=${dims} count=${count} i=${i}`).toEqual(Array.from(ref));
            if (words) {
              const viaWords = new Float64Array(count);
              jsLookupSums(tables, i * bpt * 256, codes, words, co, count, bpt, 0.125 * i, viaWords);
              expect(Array.from(viaWords)).toEqual(Array.from(ref));
            }
          }
        }
      }
    }
  });

  it('lookupSums (one byte load per code byte) equals the JavaScript kernel bit for bit over random widths: b = 2 and 4, bytes per token not a multiple of 4, any count', () => {
    const rr = mulberry32(91);
    for (let trial = 0; trial < 40; trial++) {
      const bits = trial % 2 === 0 ? 4 : 2;
      const dims = 1 + Math.floor(rr() * 400);
      const bpt = Math.ceil((dims * bits) / 8);
      const n = 1 + Math.floor(rr() * 3);
      const tables = new Float32Array(n * bpt * 256);
      jsWarpTables({ q: rand(n * dims), n, dims, bits, weights: rand(dims << bits), bytesPerToken: bpt }, tables);
      const count = Math.floor(rr() * 40);
      const co = Math.floor(rr() * 7);
      const codes = Uint8Array.from({ length: co + count * bpt }, () => Math.floor(rr() * 256));
      const i = Math.floor(rr() * n);
      const out = new Float64Array(count), ref = new Float64Array(count);
      const cs = rr() - 0.5;
      w.lookupSums(tables, i * bpt * 256, codes, null, co, count, bpt, cs, out);
      jsLookupSums(tables, i * bpt * 256, codes, null, co, count, bpt, cs, ref);
      expect(out.every((v, k) => Object.is(v, ref[k])), `b=${bits} dims=${dims} bpt=${bpt} count=${count} co=${co}`).toBe(true);
    }
  });

  it('lookupSums gives the same bits whether a query\'s tables are resident whole (<= 16 MiB) or one token at a time (larger), tokens interleaved', () => {
    const dims = 128, bpt = 64;
    for (const tn of [5, 300]) { // 5 x 64 KiB: resident whole; 300 x 64 KiB = 19.7 MB: one token at a time
      const t: WarpTablesInput = { q: rand(tn * dims), n: tn, dims, bits: 4, weights: rand(dims * 16), bytesPerToken: bpt };
      const tables = new Float32Array(tn * bpt * 256);
      jsWarpTables(t, tables);
      const codes = Uint8Array.from({ length: 33 * bpt }, () => Math.floor(r() * 256));
      for (const i of [0, tn - 1, 1, 0, tn - 1]) {
        const out = new Float64Array(33), ref = new Float64Array(33);
        w.lookupSums(tables, i * bpt * 256, codes, null, 0, 33, bpt, 0.25, out);
        jsLookupSums(tables, i * bpt * 256, codes, null, 0, 33, bpt, 0.25, ref);
        expect(out.every((v, k) => Object.is(v, ref[k])), `tn=${tn} i=${i}`).toBe(true);
      }
    }
  });

  it('lookupSumsMany equals lookupSums per part (cs = -0, outputs consecutive) and the JavaScript kernel bit for bit, across copy blocks', () => {
    for (const bits of [2, 4] as const) for (const dims of [...DIMS, 384]) {
      const n = 2;
      const bpt = Math.ceil((dims * bits) / 8);
      const tables = new Float32Array(n * bpt * 256);
      jsWarpTables({ q: rand(n * dims), n, dims, bits, weights: rand(dims << bits), bytesPerToken: bpt }, tables);
      const counts = [3, 0, 1, 17, 2];
      const parts = counts.map((c) => Uint8Array.from({ length: c * bpt }, () => Math.floor(r() * 256)));
      const total = counts.reduce((a, c) => a + c, 0);
      for (const i of [1, 0]) {
        const many = new Float64Array(total), js = new Float64Array(total), one = new Float64Array(total);
        w.lookupSumsMany(tables, i * bpt * 256, parts, bpt, many);
        jsLookupSumsMany(tables, i * bpt * 256, parts, bpt, js);
        let at = 0;
        parts.forEach((p, k) => {
          const o = new Float64Array(counts[k]);
          w.lookupSums(tables, i * bpt * 256, p, null, 0, counts[k], bpt, -0, o);
          one.set(o, at);
          at += counts[k];
        });
        expect(many.every((v, k) => Object.is(v, js[k])), `b=${bits} dims=${dims}`).toBe(true);
        expect(many.every((v, k) => Object.is(v, one[k])), `b=${bits} dims=${dims}`).toBe(true);
      }
    }
    // parts larger than a 4 MiB copy block, split across calls
    const bpt = 192, tn = 1;
    const tables = new Float32Array(tn * bpt * 256);
    jsWarpTables({ q: rand(384), n: 1, dims: 384, bits: 4, weights: rand(384 * 16), bytesPerToken: bpt }, tables);
    const parts = [15_000, 9, 12_345].map((c) => Uint8Array.from({ length: c * bpt }, () => Math.floor(r() * 256)));
    const total = 15_000 + 9 + 12_345;
    const many = new Float64Array(total), js = new Float64Array(total);
    w.lookupSumsMany(tables, 0, parts, bpt, many);
    jsLookupSumsMany(tables, 0, parts, bpt, js);
    expect(many.every((v, k) => Object.is(v, js[k]))).toBe(true);
  });

  it('inputs larger than one copy block (4 MiB) and queries past the module size cap give the same bits', () => {
    const d = 7, n = 3, rows = 200_003; // 5.6 MB of rows: several blocks
    const q = rand(n * d);
    const x = rand(rows * d);
    const b1 = new Float64Array(n).fill(-Infinity), b2 = b1.slice();
    const g1 = new Int32Array(n).fill(-1), g2 = g1.slice();
    w.prepare(q, n, d).maxima(x, 0, rows, b1, g1, 5);
    jsMaxima(q, n, x, 0, rows, d, b2, g2, 5);
    expect(Array.from(b1)).toEqual(Array.from(b2));
    expect(Array.from(g1)).toEqual(Array.from(g2));

    const dn = 5, dd = 128, drows = 10_001;
    const dq = rand(dn * dd), dx = rand(drows * dd);
    const o1 = new Float32Array(dn * drows), o2 = new Float32Array(dn * drows);
    w.prepare(dq, dn, dd).dots(dx, 0, drows, o1);
    jsDots(dq, dn, dx, 0, drows, dd, o2);
    expect(o1.every((v, i) => Object.is(v, o2[i]))).toBe(true);

    const tn = 70, dims = 128, bpt = 64; // 70 x 64 KiB of tables: two calls
    const t: WarpTablesInput = { q: rand(tn * dims), n: tn, dims, bits: 4, weights: rand(dims * 16), bytesPerToken: bpt };
    const t1 = new Float32Array(tn * bpt * 256), t2 = new Float32Array(tn * bpt * 256);
    w.warpTables(t, t1);
    jsWarpTables(t, t2);
    expect(t1.every((v, i) => Object.is(v, t2[i]))).toBe(true);

    const count = 70_001; // 5 MB of codes
    const codes = Uint8Array.from({ length: count * bpt }, () => Math.floor(r() * 256));
    const l1 = new Float64Array(count), l2 = new Float64Array(count);
    w.lookupSums(t1, 69 * bpt * 256, codes, null, 0, count, bpt, 0.5, l1);
    jsLookupSums(t2, 69 * bpt * 256, codes, null, 0, count, bpt, 0.5, l2);
    expect(l1.every((v, i) => Object.is(v, l2[i]))).toBe(true);

    const bn = 20_001, bd = 128; // float64 pairs of 20 MB: past the cap, the JavaScript kernel
    const bq = rand(bn * bd), bx = rand(9 * bd);
    const c1 = new Float64Array(bn).fill(-Infinity), c2 = c1.slice();
    w.prepare(bq, bn, bd).maxima(bx, 0, 9, c1, null, 0);
    jsMaxima(bq, bn, bx, 0, 9, bd, c2, null, 0);
    expect(c1.every((v, i) => Object.is(v, c2[i]))).toBe(true);
  });

  it('warpTop (a segment\'s top k in the module) equals jsWarpTop bit for bit, and both a full sort: ties to the lower document, NaN never kept, k past the candidates', () => {
    /** The reference: every candidate's score, sorted by score (descending) then document (ascending), NaN left out, the first k. */
    const sorted = (cands: Uint32Array, count: number, acc: Float64Array, base: number, divide: number, k: number) => {
      const all: [number, number][] = [];
      for (let e = 0; e < count; e++) {
        const s = (base + acc[cands[e]]) / divide;
        if (s === s) all.push([s, cands[e]]);
      }
      all.sort((a, b) => (a[0] !== b[0] ? b[0] - a[0] : a[1] - b[1]));
      return all.slice(0, k);
    };
    for (const D of [1, 7, 100, 5_000]) {
      for (const ties of [false, true]) {
        // sums: coarse values when ties, else random; a few NaN and infinite sums
        const acc = Float64Array.from({ length: D }, () => (ties ? Math.floor(r() * 8) / 4 : r() * 10 - 5));
        if (D > 10) {
          acc[3] = NaN;
          acc[5] = -Infinity;
          acc[9] = Infinity;
        }
        // the candidates: a random order of a random subset of the documents (as first reached)
        const order = Uint32Array.from({ length: D }, (_, i) => i);
        for (let i = D - 1; i > 0; i--) {
          const j = Math.floor(r() * (i + 1));
          [order[i], order[j]] = [order[j], order[i]];
        }
        for (const count of [0, 1, Math.ceil(D / 3), D]) {
          for (const k of [0, 1, 2, 10, 100, count, count + 3]) {
            const base = ties ? 1.5 : r();
            const divide = 32;
            const got = w.warpTop(order, count, acc, base, divide, k);
            const js = jsWarpTop(order, count, acc, base, divide, k);
            const want = sorted(order, count, acc, base, divide, k);
            const what = `D=${D} ties=${ties} count=${count} k=${k}`;
            expect(Array.from(got.ids), what).toEqual(Array.from(js.ids));
            expect(got.scores.every((v, i) => Object.is(v, js.scores[i])) && got.scores.length === js.scores.length, what).toBe(true);
            expect(Array.from(js.ids), what).toEqual(want.map((x) => x[1]));
            expect(Array.from(js.scores), what).toEqual(want.map((x) => x[0]));
          }
        }
      }
    }
  });
});
