/**
 * The JavaScript kernels: the reference every compiled kernel is tested against (bit for bit),
 * and the fallback where the WebAssembly module is missing or cannot run. Every dot product is a
 * float64 sum in dimension order of products of float32 values (exact in float64), so any two
 * implementations that keep that order agree bit for bit.
 */
import { noteTableBuild } from './builds';
import { TopK } from './top-k';
import type { Kernels, PreparedQuery, RowMaximaInput, WarpTablesInput } from './types';

/** A query for maxima / dots: the rows of q (n x d) as given. */
class JsQuery implements PreparedQuery {
  constructor(readonly q: Float32Array, readonly n: number, readonly d: number) {}

  maxima(x: Float32Array, xo: number, rows: number, best: Float64Array, arg: Int32Array | null, rowBase: number): void {
    jsMaxima(this.q, this.n, x, xo, rows, this.d, best, arg, rowBase);
  }

  dots(x: Float32Array, xo: number, rows: number, out: Float32Array): void {
    jsDots(this.q, this.n, x, xo, rows, this.d, out);
  }
}

/**
 * Per query token i, the running max over rows x[xo + j d ..] (j < rows) and its row:
 * best[i] and arg[i] = rowBase + j are replaced where the dot product is strictly greater (ties
 * keep the earlier row). Register-blocked: 2 query rows x 4 document rows.
 */
export function jsMaxima(q: Float32Array, n: number, x: Float32Array, xo: number, rows: number, d: number, best: Float64Array, arg: Int32Array | null, rowBase: number): void {
  const n2 = n - (n % 2);
  let j = 0;
  for (; j + 4 <= rows; j += 4) {
    const b0 = xo + j * d, b1 = b0 + d, b2 = b1 + d, b3 = b2 + d;
    const r = rowBase + j;
    let i = 0;
    for (; i < n2; i += 2) {
      const a0 = i * d, a1 = a0 + d;
      let s00 = 0, s01 = 0, s02 = 0, s03 = 0, s10 = 0, s11 = 0, s12 = 0, s13 = 0;
      for (let k = 0; k < d; k++) {
        const x0 = q[a0 + k], x1 = q[a1 + k];
        const y0 = x[b0 + k], y1 = x[b1 + k], y2 = x[b2 + k], y3 = x[b3 + k];
        s00 += x0 * y0; s01 += x0 * y1; s02 += x0 * y2; s03 += x0 * y3;
        s10 += x1 * y0; s11 += x1 * y1; s12 += x1 * y2; s13 += x1 * y3;
      }
      let m0 = best[i], m1 = best[i + 1];
      let g0 = -1, g1 = -1;
      if (s00 > m0) { m0 = s00; g0 = r; }
      if (s01 > m0) { m0 = s01; g0 = r + 1; }
      if (s02 > m0) { m0 = s02; g0 = r + 2; }
      if (s03 > m0) { m0 = s03; g0 = r + 3; }
      if (s10 > m1) { m1 = s10; g1 = r; }
      if (s11 > m1) { m1 = s11; g1 = r + 1; }
      if (s12 > m1) { m1 = s12; g1 = r + 2; }
      if (s13 > m1) { m1 = s13; g1 = r + 3; }
      best[i] = m0; best[i + 1] = m1;
      if (arg) {
        if (g0 >= 0) arg[i] = g0;
        if (g1 >= 0) arg[i + 1] = g1;
      }
    }
    if (i < n) {
      const a0 = i * d;
      let s0 = 0, s1 = 0, s2 = 0, s3 = 0;
      for (let k = 0; k < d; k++) {
        const x0 = q[a0 + k];
        s0 += x0 * x[b0 + k]; s1 += x0 * x[b1 + k]; s2 += x0 * x[b2 + k]; s3 += x0 * x[b3 + k];
      }
      let m0 = best[i];
      let g0 = -1;
      if (s0 > m0) { m0 = s0; g0 = r; }
      if (s1 > m0) { m0 = s1; g0 = r + 1; }
      if (s2 > m0) { m0 = s2; g0 = r + 2; }
      if (s3 > m0) { m0 = s3; g0 = r + 3; }
      best[i] = m0;
      if (arg && g0 >= 0) arg[i] = g0;
    }
  }
  for (; j < rows; j++) {
    const b0 = xo + j * d;
    for (let i = 0; i < n; i++) {
      const a0 = i * d;
      let s = 0;
      for (let k = 0; k < d; k++) s += q[a0 + k] * x[b0 + k];
      if (s > best[i]) {
        best[i] = s;
        if (arg) arg[i] = rowBase + j;
      }
    }
  }
}

/** out[i rows + j] = q_i . x_j (float32; a float64 sum in dimension order, rounded once). 2 query rows x 4 rows per pass. */
export function jsDots(q: Float32Array, n: number, x: Float32Array, xo: number, rows: number, d: number, out: Float32Array): void {
  const R4 = rows & ~3;
  let i = 0;
  for (; i + 2 <= n; i += 2) {
    const a0 = i * d, a1 = a0 + d;
    const o0 = i * rows, o1 = o0 + rows;
    let c = 0;
    for (; c < R4; c += 4) {
      const b0 = xo + c * d, b1 = b0 + d, b2 = b1 + d, b3 = b2 + d;
      let s00 = 0, s01 = 0, s02 = 0, s03 = 0, s10 = 0, s11 = 0, s12 = 0, s13 = 0;
      for (let t = 0; t < d; t++) {
        const x0 = q[a0 + t], x1 = q[a1 + t];
        const y0 = x[b0 + t], y1 = x[b1 + t], y2 = x[b2 + t], y3 = x[b3 + t];
        s00 += x0 * y0; s01 += x0 * y1; s02 += x0 * y2; s03 += x0 * y3;
        s10 += x1 * y0; s11 += x1 * y1; s12 += x1 * y2; s13 += x1 * y3;
      }
      out[o0 + c] = s00; out[o0 + c + 1] = s01; out[o0 + c + 2] = s02; out[o0 + c + 3] = s03;
      out[o1 + c] = s10; out[o1 + c + 1] = s11; out[o1 + c + 2] = s12; out[o1 + c + 3] = s13;
    }
    for (; c < rows; c++) {
      out[o0 + c] = rowDot(q, a0, x, xo + c * d, d);
      out[o1 + c] = rowDot(q, a1, x, xo + c * d, d);
    }
  }
  for (; i < n; i++) for (let c = 0; c < rows; c++) out[i * rows + c] = rowDot(q, i * d, x, xo + c * d, d);
}

function rowDot(a: Float32Array, ao: number, b: Float32Array, bo: number, d: number): number {
  let s = 0;
  for (let t = 0; t < d; t++) s += a[ao + t] * b[bo + t];
  return s;
}

/**
 * Rows of one query token: out[p - lo] = q[qo ..] . tokens[(list[p] - base) d ..] for p in
 * [lo, hi), float64. 4 rows at a time.
 */
export function jsScoreRows(q: Float32Array, qo: number, tokens: Float32Array, base: number, d: number, list: Uint32Array, lo: number, hi: number, out: Float64Array): void {
  let p = lo;
  let w = 0;
  for (; p + 4 <= hi; p += 4, w += 4) {
    const b0 = (list[p] - base) * d, b1 = (list[p + 1] - base) * d, b2 = (list[p + 2] - base) * d, b3 = (list[p + 3] - base) * d;
    let s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    for (let t = 0; t < d; t++) {
      const x = q[qo + t];
      s0 += x * tokens[b0 + t];
      s1 += x * tokens[b1 + t];
      s2 += x * tokens[b2 + t];
      s3 += x * tokens[b3 + t];
    }
    out[w] = s0; out[w + 1] = s1; out[w + 2] = s2; out[w + 3] = s3;
  }
  for (; p < hi; p++, w++) {
    const b = (list[p] - base) * d;
    let s = 0;
    for (let t = 0; t < d; t++) s += q[qo + t] * tokens[b + t];
    out[w] = s;
  }
}

/**
 * WARP's lookup tables (SPEC 3.5): n x bpt x 256 float32, table (i, p) at (i bpt + p) 256, entry
 * v = f32(lo[v & 15] + hi[v >> 4]) with lo / hi the float64 partial dot products of the byte's
 * low and high nibble (one dimension each for b = 4, two for b = 2, low bits first; a dimension
 * past `dims` contributes 0).
 */
export function jsWarpTables(t: WarpTablesInput, out: Float32Array): void {
  const { q, n, dims, bits, weights, bytesPerToken: bpt } = t;
  const lo = new Float64Array(16);
  const hi = new Float64Array(16);
  const perNibble = 4 / bits;
  for (let i = 0; i < n; i++) {
    const qo = i * dims;
    for (let p = 0; p < bpt; p++) {
      const j0 = p * 2 * perNibble;
      nibbleTable(q, qo, weights, dims, bits, j0, lo);
      nibbleTable(q, qo, weights, dims, bits, j0 + perNibble, hi);
      const o = (i * bpt + p) * 256;
      for (let h = 0; h < 16; h++) {
        const x = hi[h];
        const oh = o + (h << 4);
        for (let l = 0; l < 16; l++) out[oh + l] = lo[l] + x;
      }
    }
  }
}

function nibbleTable(q: Float32Array, qo: number, weights: Float32Array, dims: number, bits: number, j: number, out: Float64Array): void {
  if (bits === 4) {
    if (j >= dims) out.fill(0);
    else {
      const x = q[qo + j];
      for (let k = 0; k < 16; k++) out[k] = x * weights[j * 16 + k];
    }
    return;
  }
  const x0 = j < dims ? q[qo + j] : 0;
  const x1 = j + 1 < dims ? q[qo + j + 1] : 0;
  const w0 = Math.min(j, dims - 1) * 4;
  const w1 = Math.min(j + 1, dims - 1) * 4;
  for (let v = 0; v < 16; v++) out[v] = x0 * weights[w0 + (v & 3)] + x1 * weights[w1 + (v >> 2)];
}

/**
 * Table sums: out[e] = cs + ((s0 + s1) + (s2 + s3)) for the `count` tokens of bpt code bytes from
 * codes[co], against the tables at tables[to ..] (bpt x 256); s_r sums the lookups of bytes
 * p = r (mod 4) in byte order, bytes past the last whole group of 4 going to s0. Words: when given
 * (bpt a multiple of 4, the same bytes as little-endian u32 words from word co / 4), one load per
 * 4 bytes.
 */
export function jsLookupSums(tables: Float32Array, to: number, codes: Uint8Array, words: Uint32Array | null, co: number, count: number, bpt: number, cs: number, out: Float64Array): void {
  if (words && (bpt & 3) === 0 && (co & 3) === 0) {
    const w4 = bpt >> 2;
    let o = co >> 2;
    for (let e = 0; e < count; e++, o += w4) {
      let s0 = 0, s1 = 0, s2 = 0, s3 = 0;
      let t = to;
      for (let k = 0; k < w4; k++, t += 1024) {
        const w = words[o + k];
        s0 += tables[t + (w & 255)];
        s1 += tables[t + 256 + ((w >>> 8) & 255)];
        s2 += tables[t + 512 + ((w >>> 16) & 255)];
        s3 += tables[t + 768 + (w >>> 24)];
      }
      out[e] = cs + (s0 + s1 + (s2 + s3));
    }
    return;
  }
  let o = co;
  for (let e = 0; e < count; e++, o += bpt) {
    let s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    let t = to;
    let p = 0;
    for (; p + 4 <= bpt; p += 4, t += 1024) {
      s0 += tables[t + codes[o + p]];
      s1 += tables[t + 256 + codes[o + p + 1]];
      s2 += tables[t + 512 + codes[o + p + 2]];
      s3 += tables[t + 768 + codes[o + p + 3]];
    }
    for (; p < bpt; p++, t += 256) s0 += tables[t + codes[o + p]];
    out[e] = cs + (s0 + s1 + (s2 + s3));
  }
}

/** lookupSumsMany (types.ts) in JavaScript: jsLookupSums per part with cs = -0, outputs consecutive. */
export function jsLookupSumsMany(tables: Float32Array, to: number, parts: readonly Uint8Array[], bpt: number, out: Float64Array): void {
  let at = 0;
  for (const codes of parts) {
    const count = (codes.length / bpt) | 0;
    if (count === 0) continue;
    jsLookupSums(tables, to, codes, null, 0, count, bpt, -0, at === 0 ? out : out.subarray(at));
    at += count;
  }
}

/** Row r's norm (RowMaximaInput.norms), exact. */
function normOf(norms: Uint8Array, half: boolean, r: number): number {
  if (half) return fromHalfBits(norms[2 * r] | (norms[2 * r + 1] << 8));
  f32Bytes[0] = norms[4 * r];
  f32Bytes[1] = norms[4 * r + 1];
  f32Bytes[2] = norms[4 * r + 2];
  f32Bytes[3] = norms[4 * r + 3];
  return f32Word[0];
}
const f32Word = new Float32Array(1);
const f32Bytes = new Uint8Array(f32Word.buffer);

/** The float16 with bits `h` as a number (exact); @lateral/codec re-exports it with its float16 conversions. */
export function fromHalfBits(h: number): number {
  const sign = h & 0x8000 ? -1 : 1;
  const exp = (h >>> 10) & 0x1f;
  const mant = h & 0x3ff;
  if (exp === 0) return sign * mant * 2 ** -24;
  if (exp === 0x1f) return mant !== 0 ? NaN : sign * Infinity;
  return sign * (1 + mant / 1024) * 2 ** (exp - 15);
}

/** RangeError naming what is short when rowMaxima's input does not hold documents [from, to). */
export function checkRowMaxima(t: RowMaximaInput, from: number, to: number, m: number): void {
  const { table, bpt, codes, norms, half, start } = t;
  if (!(Number.isInteger(from) && Number.isInteger(to) && 0 <= from && from <= to && to < start.length)) throw new RangeError(`rowMaxima: documents [${from}, ${to}) are out of range (start has ${start.length} entries)`);
  if (!Number.isInteger(m) || m < 1) throw new RangeError(`rowMaxima: m must be an integer >= 1, got ${m}`);
  if (!Number.isInteger(bpt) || bpt < 1) throw new RangeError(`rowMaxima: bpt must be an integer >= 1, got ${bpt}`);
  if (!Number.isInteger(t.to) || t.to < 0 || t.to + bpt * 256 > table.length) throw new RangeError(`rowMaxima: the table has ${table.length} entries, ${bpt * 256} needed from ${t.to}`);
  const rows = start[to];
  if (codes.length < rows * bpt) throw new RangeError(`rowMaxima: codes has ${codes.length} bytes, ${rows} rows of ${bpt} needed`);
  if (norms.length < rows * (half ? 2 : 4)) throw new RangeError(`rowMaxima: norms has ${norms.length} bytes, ${rows} rows of ${half ? 2 : 4} needed`);
}

/**
 * rowMaxima (types.ts) in JavaScript: a document's rows four at a time (four independent float64
 * sums, each in byte order), then one at a time.
 */
export function jsRowMaxima(t: RowMaximaInput, from: number, to: number, m: number, best: Float64Array, arg: Int32Array): void {
  checkRowMaxima(t, from, to, m);
  const { table, bpt, offset, inv, codes, norms, half, start } = t;
  const t0 = t.to;
  const score = (r: number, s: number) => {
    const norm = normOf(norms, half, r);
    return norm === 0 || !Number.isFinite(norm) ? offset : offset + norm * inv * s;
  };
  for (let k = from; k < to; k++) {
    const r0 = start[k];
    const rows = Math.min(m, start[k + 1] - r0);
    let b = -Infinity;
    let a = 0;
    let j = 0;
    for (; j + 4 <= rows; j += 4) {
      const c0 = (r0 + j) * bpt, c1 = c0 + bpt, c2 = c1 + bpt, c3 = c2 + bpt;
      let s0 = 0, s1 = 0, s2 = 0, s3 = 0;
      for (let p = 0, o = t0; p < bpt; p++, o += 256) {
        s0 += table[o + codes[c0 + p]];
        s1 += table[o + codes[c1 + p]];
        s2 += table[o + codes[c2 + p]];
        s3 += table[o + codes[c3 + p]];
      }
      const x0 = score(r0 + j, s0), x1 = score(r0 + j + 1, s1), x2 = score(r0 + j + 2, s2), x3 = score(r0 + j + 3, s3);
      if (x0 > b) { b = x0; a = j; }
      if (x1 > b) { b = x1; a = j + 1; }
      if (x2 > b) { b = x2; a = j + 2; }
      if (x3 > b) { b = x3; a = j + 3; }
    }
    for (; j < rows; j++) {
      const c = (r0 + j) * bpt;
      let s = 0;
      for (let p = 0, o = t0; p < bpt; p++, o += 256) s += table[o + codes[c + p]];
      const x = score(r0 + j, s);
      if (x > b) { b = x; a = j; }
    }
    best[k - from] = b;
    arg[k - from] = a;
  }
}

/**
 * One segment's top k of WARP's scan from its candidates and document sums: candidate doc
 * (candidates[e], e < count, in order) scores (base + acc[doc]) / divide; the k best by score,
 * then by lower id (NaN never kept), best first (k <= 0: none). TopK's pushes then its drain (the
 * heap search selects with): the reference of the WebAssembly warpTop kernel
 * (WarpResidentScan.top), which ports them, so both give the same pairs in the same order.
 */
export function jsWarpTop(candidates: ArrayLike<number>, count: number, acc: ArrayLike<number>, base: number, divide: number, k: number): { scores: Float64Array; ids: Uint32Array } {
  const top = new TopK(Math.max(0, k), count);
  for (let e = 0; e < count; e++) {
    const doc = candidates[e];
    top.push((base + acc[doc]) / divide, doc);
  }
  return top.drain();
}

export const jsKernels: Kernels = {
  kind: 'js',
  prepare: (q, n, d) => new JsQuery(q, n, d),
  scoreRows: jsScoreRows,
  warpTables: (t, out) => {
    noteTableBuild();
    jsWarpTables(t, out);
  },
  lookupSums: jsLookupSums,
  lookupSumsMany: jsLookupSumsMany,
  rowMaxima: jsRowMaxima,
};
