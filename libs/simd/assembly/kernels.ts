// lateral's WebAssembly kernels (AssemblyScript, 128-bit SIMD). Compiled at install time by
// scripts/build-simd.cjs into .cache/simd/; never committed. Every buffer is a byte offset into
// this module's memory, laid out by the JavaScript side (libs/simd/src/wasm.ts); no allocator,
// no runtime. Each kernel computes exactly what its JavaScript twin in libs/simd/src/js.ts
// computes, in the same order of float64 operations, so the results are equal bit for bit
// (products of two float32 values are exact in float64; no fused multiply-add is used).

// ---------------------------------------------------------------------------------------------
// MaxSim maxima. The query is stored as float64 pairs: for pair P (tokens 2P, 2P + 1) and
// dimension k, at qp + 16 (P d + k): [q(2P, k), q(2P + 1, k)] (an odd n pads the last pair with
// 0). Each SIMD lane is one query token's dot product, summed in dimension order.

/**
 * Per query token, the running max over float32 rows x[0 .. rows) (row-major, d) and its row:
 * best[i] (f64), arg[i] (i32) updated where a row's dot product is strictly greater (ties keep
 * the earlier row); rows are numbered rowBase + j.
 */
export function maxima(qp: usize, n: i32, x: usize, rows: i32, d: i32, best: usize, arg: usize, rowBase: i32): void {
  const pairs = (n + 1) >> 1;
  const rowBytes = <usize>d << 2;
  const pairBytes = <usize>d << 4;
  let j = 0;
  for (; j + 4 <= rows; j += 4) {
    const x0 = x + <usize>j * rowBytes, x1 = x0 + rowBytes, x2 = x1 + rowBytes, x3 = x2 + rowBytes;
    let P = 0;
    for (; P + 2 <= pairs; P += 2) {
      const qa = qp + <usize>P * pairBytes, qb = qa + pairBytes;
      let a0 = f64x2.splat(0), a1 = f64x2.splat(0), a2 = f64x2.splat(0), a3 = f64x2.splat(0);
      let b0 = f64x2.splat(0), b1 = f64x2.splat(0), b2 = f64x2.splat(0), b3 = f64x2.splat(0);
      for (let k = 0; k < d; k++) {
        const o = <usize>k << 2;
        const va = v128.load(qa + (<usize>k << 4));
        const vb = v128.load(qb + (<usize>k << 4));
        const y0 = f64x2.splat(<f64>load<f32>(x0 + o));
        const y1 = f64x2.splat(<f64>load<f32>(x1 + o));
        const y2 = f64x2.splat(<f64>load<f32>(x2 + o));
        const y3 = f64x2.splat(<f64>load<f32>(x3 + o));
        a0 = f64x2.add(a0, f64x2.mul(va, y0)); a1 = f64x2.add(a1, f64x2.mul(va, y1));
        a2 = f64x2.add(a2, f64x2.mul(va, y2)); a3 = f64x2.add(a3, f64x2.mul(va, y3));
        b0 = f64x2.add(b0, f64x2.mul(vb, y0)); b1 = f64x2.add(b1, f64x2.mul(vb, y1));
        b2 = f64x2.add(b2, f64x2.mul(vb, y2)); b3 = f64x2.add(b3, f64x2.mul(vb, y3));
      }
      const i = P << 1;
      update4(best, arg, i, n, a0, a1, a2, a3, rowBase + j);
      update4(best, arg, i + 2, n, b0, b1, b2, b3, rowBase + j);
    }
    if (P < pairs) {
      const qa = qp + <usize>P * pairBytes;
      let a0 = f64x2.splat(0), a1 = f64x2.splat(0), a2 = f64x2.splat(0), a3 = f64x2.splat(0);
      for (let k = 0; k < d; k++) {
        const o = <usize>k << 2;
        const va = v128.load(qa + (<usize>k << 4));
        a0 = f64x2.add(a0, f64x2.mul(va, f64x2.splat(<f64>load<f32>(x0 + o))));
        a1 = f64x2.add(a1, f64x2.mul(va, f64x2.splat(<f64>load<f32>(x1 + o))));
        a2 = f64x2.add(a2, f64x2.mul(va, f64x2.splat(<f64>load<f32>(x2 + o))));
        a3 = f64x2.add(a3, f64x2.mul(va, f64x2.splat(<f64>load<f32>(x3 + o))));
      }
      update4(best, arg, P << 1, n, a0, a1, a2, a3, rowBase + j);
    }
  }
  for (; j < rows; j++) {
    const x0 = x + <usize>j * rowBytes;
    for (let P = 0; P < pairs; P++) {
      const qa = qp + <usize>P * pairBytes;
      let a0 = f64x2.splat(0);
      for (let k = 0; k < d; k++) {
        a0 = f64x2.add(a0, f64x2.mul(v128.load(qa + (<usize>k << 4)), f64x2.splat(<f64>load<f32>(x0 + (<usize>k << 2)))));
      }
      const i = P << 1;
      update1(best, arg, i, f64x2.extract_lane(a0, 0), rowBase + j);
      if (i + 1 < n) update1(best, arg, i + 1, f64x2.extract_lane(a0, 1), rowBase + j);
    }
  }
}

// @ts-ignore: decorator
@inline function update1(best: usize, arg: usize, i: i32, s: f64, row: i32): void {
  const pb = best + (<usize>i << 3);
  if (s > load<f64>(pb)) {
    store<f64>(pb, s);
    store<i32>(arg + (<usize>i << 2), row);
  }
}

/** Query tokens i and i + 1 (lanes 0, 1; i + 1 only when < n) against 4 consecutive rows. */
// @ts-ignore: decorator
@inline function update4(best: usize, arg: usize, i: i32, n: i32, s0: v128, s1: v128, s2: v128, s3: v128, row: i32): void {
  update1(best, arg, i, f64x2.extract_lane(s0, 0), row);
  update1(best, arg, i, f64x2.extract_lane(s1, 0), row + 1);
  update1(best, arg, i, f64x2.extract_lane(s2, 0), row + 2);
  update1(best, arg, i, f64x2.extract_lane(s3, 0), row + 3);
  if (i + 1 < n) {
    update1(best, arg, i + 1, f64x2.extract_lane(s0, 1), row);
    update1(best, arg, i + 1, f64x2.extract_lane(s1, 1), row + 1);
    update1(best, arg, i + 1, f64x2.extract_lane(s2, 1), row + 2);
    update1(best, arg, i + 1, f64x2.extract_lane(s3, 1), row + 3);
  }
}

/**
 * All dot products: out[i * rows + j] = q_i . x_j (float32 out, each a float64 sum in dimension
 * order, rounded once). q in pairs as for maxima.
 */
export function dots(qp: usize, n: i32, x: usize, rows: i32, d: i32, out: usize): void {
  const pairs = (n + 1) >> 1;
  const rowBytes = <usize>d << 2;
  const pairBytes = <usize>d << 4;
  for (let P = 0; P < pairs; P++) {
    const qa = qp + <usize>P * pairBytes;
    const i = P << 1;
    const o0 = out + (<usize>i * <usize>rows << 2);
    const o1 = o0 + (<usize>rows << 2);
    const two = i + 1 < n;
    let j = 0;
    for (; j + 4 <= rows; j += 4) {
      const x0 = x + <usize>j * rowBytes, x1 = x0 + rowBytes, x2 = x1 + rowBytes, x3 = x2 + rowBytes;
      let a0 = f64x2.splat(0), a1 = f64x2.splat(0), a2 = f64x2.splat(0), a3 = f64x2.splat(0);
      for (let k = 0; k < d; k++) {
        const o = <usize>k << 2;
        const va = v128.load(qa + (<usize>k << 4));
        a0 = f64x2.add(a0, f64x2.mul(va, f64x2.splat(<f64>load<f32>(x0 + o))));
        a1 = f64x2.add(a1, f64x2.mul(va, f64x2.splat(<f64>load<f32>(x1 + o))));
        a2 = f64x2.add(a2, f64x2.mul(va, f64x2.splat(<f64>load<f32>(x2 + o))));
        a3 = f64x2.add(a3, f64x2.mul(va, f64x2.splat(<f64>load<f32>(x3 + o))));
      }
      const w = <usize>j << 2;
      store<f32>(o0 + w, <f32>f64x2.extract_lane(a0, 0)); store<f32>(o0 + w + 4, <f32>f64x2.extract_lane(a1, 0));
      store<f32>(o0 + w + 8, <f32>f64x2.extract_lane(a2, 0)); store<f32>(o0 + w + 12, <f32>f64x2.extract_lane(a3, 0));
      if (two) {
        store<f32>(o1 + w, <f32>f64x2.extract_lane(a0, 1)); store<f32>(o1 + w + 4, <f32>f64x2.extract_lane(a1, 1));
        store<f32>(o1 + w + 8, <f32>f64x2.extract_lane(a2, 1)); store<f32>(o1 + w + 12, <f32>f64x2.extract_lane(a3, 1));
      }
    }
    for (; j < rows; j++) {
      const x0 = x + <usize>j * rowBytes;
      let a0 = f64x2.splat(0);
      for (let k = 0; k < d; k++) a0 = f64x2.add(a0, f64x2.mul(v128.load(qa + (<usize>k << 4)), f64x2.splat(<f64>load<f32>(x0 + (<usize>k << 2)))));
      store<f32>(o0 + (<usize>j << 2), <f32>f64x2.extract_lane(a0, 0));
      if (two) store<f32>(o1 + (<usize>j << 2), <f32>f64x2.extract_lane(a0, 1));
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Rows of one query token (XTR's probed lists): out[p] = q . x[list[p] - base] for p in [0, count),
// float64, each a sum in dimension order. q: d float32 values.

/** Scalar, 4 rows at a time (the JavaScript kernel's shape, without its bounds checks). */
export function scoreRows(q: usize, x: usize, base: i32, d: i32, list: usize, count: i32, out: usize): void {
  const rowBytes = <usize>d << 2;
  let p = 0;
  for (; p + 4 <= count; p += 4) {
    const l = list + (<usize>p << 2);
    const x0 = x + <usize>(load<u32>(l) - <u32>base) * rowBytes;
    const x1 = x + <usize>(load<u32>(l, 4) - <u32>base) * rowBytes;
    const x2 = x + <usize>(load<u32>(l, 8) - <u32>base) * rowBytes;
    const x3 = x + <usize>(load<u32>(l, 12) - <u32>base) * rowBytes;
    let s0: f64 = 0, s1: f64 = 0, s2: f64 = 0, s3: f64 = 0;
    for (let k = 0; k < d; k++) {
      const o = <usize>k << 2;
      const v = <f64>load<f32>(q + o);
      s0 += v * <f64>load<f32>(x0 + o);
      s1 += v * <f64>load<f32>(x1 + o);
      s2 += v * <f64>load<f32>(x2 + o);
      s3 += v * <f64>load<f32>(x3 + o);
    }
    const w = out + (<usize>p << 3);
    store<f64>(w, s0); store<f64>(w, s1, 8); store<f64>(w, s2, 16); store<f64>(w, s3, 24);
  }
  for (; p < count; p++) {
    const x0 = x + <usize>(load<u32>(list + (<usize>p << 2)) - <u32>base) * rowBytes;
    let s: f64 = 0;
    for (let k = 0; k < d; k++) s += <f64>load<f32>(q + (<usize>k << 2)) * <f64>load<f32>(x0 + (<usize>k << 2));
    store<f64>(out + (<usize>p << 3), s);
  }
}

/**
 * SIMD, float64, two rows per lane pair: lanes (r0, r1) and (r2, r3) of 4 rows, each lane a sum in
 * dimension order (so equal to scoreRows bit for bit). q: d float64 values (qd).
 */
export function scoreRowsPairs(qd: usize, x: usize, base: i32, d: i32, list: usize, count: i32, out: usize): void {
  const rowBytes = <usize>d << 2;
  let p = 0;
  for (; p + 4 <= count; p += 4) {
    const l = list + (<usize>p << 2);
    const x0 = x + <usize>(load<u32>(l) - <u32>base) * rowBytes;
    const x1 = x + <usize>(load<u32>(l, 4) - <u32>base) * rowBytes;
    const x2 = x + <usize>(load<u32>(l, 8) - <u32>base) * rowBytes;
    const x3 = x + <usize>(load<u32>(l, 12) - <u32>base) * rowBytes;
    let a = f64x2.splat(0), b = f64x2.splat(0);
    let k = 0;
    for (; k + 4 <= d; k += 4) {
      const o = <usize>k << 2;
      // 4 dims of each row, transposed into (row0, row1) and (row2, row3) pairs per dimension
      const r0 = v128.load(x0 + o), r1 = v128.load(x1 + o), r2 = v128.load(x2 + o), r3 = v128.load(x3 + o);
      const t01lo = v128.shuffle<f32>(r0, r1, 0, 4, 1, 5); // r0k r1k r0k1 r1k1
      const t01hi = v128.shuffle<f32>(r0, r1, 2, 6, 3, 7);
      const t23lo = v128.shuffle<f32>(r2, r3, 0, 4, 1, 5);
      const t23hi = v128.shuffle<f32>(r2, r3, 2, 6, 3, 7);
      const qv0 = v128.load(qd + (<usize>k << 3));
      const qv1 = v128.load(qd + (<usize>k << 3), 16);
      const q0 = f64x2.splat(f64x2.extract_lane(qv0, 0)), q1 = f64x2.splat(f64x2.extract_lane(qv0, 1));
      const q2 = f64x2.splat(f64x2.extract_lane(qv1, 0)), q3 = f64x2.splat(f64x2.extract_lane(qv1, 1));
      a = f64x2.add(a, f64x2.mul(q0, f64x2.promote_low_f32x4(t01lo)));
      b = f64x2.add(b, f64x2.mul(q0, f64x2.promote_low_f32x4(t23lo)));
      a = f64x2.add(a, f64x2.mul(q1, f64x2.promote_low_f32x4(v128.shuffle<f32>(t01lo, t01lo, 2, 3, 0, 1))));
      b = f64x2.add(b, f64x2.mul(q1, f64x2.promote_low_f32x4(v128.shuffle<f32>(t23lo, t23lo, 2, 3, 0, 1))));
      a = f64x2.add(a, f64x2.mul(q2, f64x2.promote_low_f32x4(t01hi)));
      b = f64x2.add(b, f64x2.mul(q2, f64x2.promote_low_f32x4(t23hi)));
      a = f64x2.add(a, f64x2.mul(q3, f64x2.promote_low_f32x4(v128.shuffle<f32>(t01hi, t01hi, 2, 3, 0, 1))));
      b = f64x2.add(b, f64x2.mul(q3, f64x2.promote_low_f32x4(v128.shuffle<f32>(t23hi, t23hi, 2, 3, 0, 1))));
    }
    for (; k < d; k++) {
      const o = <usize>k << 2;
      const qk = f64x2.splat(load<f64>(qd + (<usize>k << 3)));
      const ya = f64x2.replace_lane(f64x2.splat(<f64>load<f32>(x0 + o)), 1, <f64>load<f32>(x1 + o));
      const yb = f64x2.replace_lane(f64x2.splat(<f64>load<f32>(x2 + o)), 1, <f64>load<f32>(x3 + o));
      a = f64x2.add(a, f64x2.mul(qk, ya));
      b = f64x2.add(b, f64x2.mul(qk, yb));
    }
    const w = out + (<usize>p << 3);
    v128.store(w, a);
    v128.store(w, b, 16);
  }
  for (; p < count; p++) {
    const x0 = x + <usize>(load<u32>(list + (<usize>p << 2)) - <u32>base) * rowBytes;
    let s: f64 = 0;
    for (let k = 0; k < d; k++) s += load<f64>(qd + (<usize>k << 3)) * <f64>load<f32>(x0 + (<usize>k << 2));
    store<f64>(out + (<usize>p << 3), s);
  }
}

/**
 * SIMD, float32 accumulation (4 lanes over dimensions, summed at the end): NOT equal to the
 * float64 kernels; kept to measure what giving up exactness would buy (score bench).
 */
export function scoreRowsF32(q: usize, x: usize, base: i32, d: i32, list: usize, count: i32, out: usize): void {
  const rowBytes = <usize>d << 2;
  const d4 = d & ~3;
  for (let p = 0; p < count; p++) {
    const x0 = x + <usize>(load<u32>(list + (<usize>p << 2)) - <u32>base) * rowBytes;
    let a = f32x4.splat(0);
    let k = 0;
    for (; k < d4; k += 4) a = f32x4.add(a, f32x4.mul(v128.load(q + (<usize>k << 2)), v128.load(x0 + (<usize>k << 2))));
    let s: f32 = (f32x4.extract_lane(a, 0) + f32x4.extract_lane(a, 1)) + (f32x4.extract_lane(a, 2) + f32x4.extract_lane(a, 3));
    for (; k < d; k++) s += load<f32>(q + (<usize>k << 2)) * load<f32>(x0 + (<usize>k << 2));
    store<f64>(out + (<usize>p << 3), <f64>s);
  }
}

// ---------------------------------------------------------------------------------------------
// WARP (SPEC 3.5): lookup tables and table sums over packed codes.

/**
 * The 256-entry tables of one byte position from its two 16-entry nibble tables (float64):
 * out[h * 16 + l] = f32(lo[l] + hi[h]).
 */
export function byteTable(lo: usize, hi: usize, out: usize): void {
  const l0 = v128.load(lo), l1 = v128.load(lo, 16), l2 = v128.load(lo, 32), l3 = v128.load(lo, 48);
  const l4 = v128.load(lo, 64), l5 = v128.load(lo, 80), l6 = v128.load(lo, 96), l7 = v128.load(lo, 112);
  for (let h = 0; h < 16; h++) {
    const x = v128.load64_splat(hi + (<usize>h << 3));
    const o = out + (<usize>h << 6);
    v128.store(o, v128.shuffle<f32>(f32x4.demote_f64x2_zero(f64x2.add(l0, x)), f32x4.demote_f64x2_zero(f64x2.add(l1, x)), 0, 1, 4, 5));
    v128.store(o, v128.shuffle<f32>(f32x4.demote_f64x2_zero(f64x2.add(l2, x)), f32x4.demote_f64x2_zero(f64x2.add(l3, x)), 0, 1, 4, 5), 16);
    v128.store(o, v128.shuffle<f32>(f32x4.demote_f64x2_zero(f64x2.add(l4, x)), f32x4.demote_f64x2_zero(f64x2.add(l5, x)), 0, 1, 4, 5), 32);
    v128.store(o, v128.shuffle<f32>(f32x4.demote_f64x2_zero(f64x2.add(l6, x)), f32x4.demote_f64x2_zero(f64x2.add(l7, x)), 0, 1, 4, 5), 48);
  }
}

/**
 * Tables of n query tokens (row-major q, f32, n x dims) for a b-bit codec (weights: dims x 2^b
 * f32): out (f32) n x bpt x 256, as warpTables. scratch: 32 f64 (two nibble tables).
 */
export function warpTables(q: usize, n: i32, dims: i32, bits: i32, weights: usize, bpt: i32, out: usize, scratch: usize): void {
  const lo = scratch, hi = scratch + 128;
  const perNibble = 4 / bits;
  for (let i = 0; i < n; i++) {
    const qo = q + (<usize>(i * dims) << 2);
    for (let p = 0; p < bpt; p++) {
      const j0 = p * 2 * perNibble;
      nibble(qo, weights, dims, bits, j0, lo);
      nibble(qo, weights, dims, bits, j0 + perNibble, hi);
      byteTable(lo, hi, out + (<usize>((i * bpt + p) << 8) << 2));
    }
  }
}

// @ts-ignore: decorator
@inline function nibble(qo: usize, weights: usize, dims: i32, bits: i32, j: i32, out: usize): void {
  if (bits == 4) {
    if (j >= dims) {
      for (let k = 0; k < 16; k++) store<f64>(out + (<usize>k << 3), 0);
    } else {
      const x = <f64>load<f32>(qo + (<usize>j << 2));
      const w = weights + (<usize>(j << 4) << 2);
      for (let k = 0; k < 16; k++) store<f64>(out + (<usize>k << 3), x * <f64>load<f32>(w + (<usize>k << 2)));
    }
    return;
  }
  const x0: f64 = j < dims ? <f64>load<f32>(qo + (<usize>j << 2)) : 0;
  const x1: f64 = j + 1 < dims ? <f64>load<f32>(qo + (<usize>(j + 1) << 2)) : 0;
  const w0 = weights + (<usize>(min(j, dims - 1) * 4) << 2);
  const w1 = weights + (<usize>(min(j + 1, dims - 1) * 4) << 2);
  for (let v = 0; v < 16; v++) {
    store<f64>(out + (<usize>v << 3), x0 * <f64>load<f32>(w0 + (<usize>(v & 3) << 2)) + x1 * <f64>load<f32>(w1 + (<usize>(v >> 2) << 2)));
  }
}

/**
 * One token's table sum (s0 + s1) + (s2 + s3) over its bpt code bytes at c: s_r the float64 sum of
 * the lookups of bytes p = r (mod 4), in byte order, bytes past the last whole word of 4 (b4 =
 * bpt & ~3) going to s0 (the JavaScript lookupSum's order). lookupSums and warpToken share it.
 * Each code byte is loaded on its own (a byte load, then the table load at a constant offset):
 * measured ~20% faster than one u32 load per 4 bytes split by shifts and masks (fewer
 * instructions per lookup; the sums are the same).
 */
// @ts-ignore: decorator
@inline function tableSum(tables: usize, c: usize, bpt: i32, b4: i32): f64 {
  let s0: f64 = 0, s1: f64 = 0, s2: f64 = 0, s3: f64 = 0;
  let t = tables;
  let q = c;
  const q4 = c + <usize>b4;
  for (; q < q4; q += 4, t += 4096) {
    s0 += <f64>load<f32>(t + (<usize>load<u8>(q) << 2));
    s1 += <f64>load<f32>(t + (<usize>load<u8>(q, 1) << 2), 1024);
    s2 += <f64>load<f32>(t + (<usize>load<u8>(q, 2) << 2), 2048);
    s3 += <f64>load<f32>(t + (<usize>load<u8>(q, 3) << 2), 3072);
  }
  for (let p = b4; p < bpt; p++, t += 1024) s0 += <f64>load<f32>(t + (<usize>load<u8>(c + <usize>p) << 2));
  return s0 + s1 + (s2 + s3);
}

/**
 * Table sums of `count` tokens of bpt code bytes each (codes, packed back to back) against one
 * query token's tables (bpt x 256 f32): out[e] = cs + ((s0 + s1) + (s2 + s3)), s_r the float64
 * sum of the lookups of bytes p = r (mod 4), in byte order, bytes past the last whole word of 4
 * going to s0 (the JavaScript lookupSum's order).
 */
export function lookupSums(tables: usize, codes: usize, count: i32, bpt: i32, cs: f64, out: usize): void {
  const b4 = bpt & ~3;
  for (let e = 0; e < count; e++) {
    store<f64>(out + (<usize>e << 3), cs + tableSum(tables, codes + <usize>(e * bpt), bpt, b4));
  }
}

/**
 * WARP's per-document state in a resident scan (warpToken): a record of 16 bytes per document,
 * [best f64, acc f64], so the fields a list entry touches at a random document lie in one cache
 * line (a query's documents span tens of MB; separate best / tag / acc / reached arrays cost up to
 * four misses an entry). Both fields start as UNSET, a signalling NaN: best UNSET means no score
 * for the current query token yet (reset after each token's fold), acc UNSET means never reached
 * (not a candidate). No arithmetic result has these bits (WebAssembly's float operations give
 * quiet NaNs), so they never stand for a score.
 */
const UNSET: u64 = 0xfff4000000000001;

/** Sets count u64 at `at` (16-byte aligned, count even) to UNSET: a scan's records before its first token. */
export function warpClear(at: usize, count: i32): void {
  const v = i64x2.splat(<i64>UNSET);
  const end = at + (<usize>count << 3);
  for (let p = at; p < end; p += 16) v128.store(p, v);
}

/**
 * One query token of WARP's search over the probed lists of every segment, in module memory, with
 * no copy per query: the per-document token maxima and their fold into the document sums (the
 * engine's scoreQueryTokenAll and foldTokenMaxima, the same float64 operations in the same order).
 * lists: nl records of 24 bytes, grouped by segment in segment order:
 *   [codes u32, docs u32 (count u32 local ids), count u32, segment u32, cs f64];
 * segs: ns records of 32 bytes: [docs u32 (the documents' records), 0, touched (u32), mask (u8,
 *   0 = none), 0, 0, candidates (u32), nc u32 (the candidates so far, updated)].
 * Entry e of a list scores s = cs + ((s0 + s1) + (s2 + s3)) as lookupSums; a masked document's
 * entries are skipped; a document's first score for this token (best UNSET) starts its maximum
 * and lists it as touched; then each touched document adds best - mi to acc (from +0 when it had
 * none: appended to the candidates) and its best is UNSET again.
 */
export function warpToken(tables: usize, bpt: i32, lists: usize, nl: i32, segs: usize, ns: i32, mi: f64): void {
  const b4 = bpt & ~3;
  let l = 0;
  for (let s = 0; s < ns; s++) {
    const sr = segs + (<usize>s << 5);
    const recs = <usize>load<u32>(sr), touched = <usize>load<u32>(sr, 8), mask = <usize>load<u32>(sr, 12);
    let nt = 0;
    for (; l < nl; l++) {
      const lr = lists + <usize>(l * 24);
      if (<i32>load<u32>(lr, 12) != s) break;
      const codes = <usize>load<u32>(lr), docs = <usize>load<u32>(lr, 4), count = <i32>load<u32>(lr, 8);
      const cs = load<f64>(lr, 16);
      for (let e = 0; e < count; e++) {
        const doc = <usize>load<u32>(docs + (<usize>e << 2));
        if (mask != 0 && load<u8>(mask + doc) == 0) continue;
        const sc = cs + tableSum(tables, codes + <usize>(e * bpt), bpt, b4);
        const rp = recs + (doc << 4);
        if (load<u64>(rp) == UNSET) {
          store<f64>(rp, sc);
          store<u32>(touched + (<usize>nt << 2), <u32>doc);
          nt++;
        } else if (sc > load<f64>(rp)) store<f64>(rp, sc);
      }
    }
    const candidates = <usize>load<u32>(sr, 24);
    let nc = <i32>load<u32>(sr, 28);
    for (let k = 0; k < nt; k++) {
      const doc = <usize>load<u32>(touched + (<usize>k << 2));
      const rp = recs + (doc << 4);
      const d = load<f64>(rp) - mi;
      if (load<u64>(rp, 8) == UNSET) {
        store<u32>(candidates + (<usize>nc << 2), <u32>doc);
        nc++;
        store<f64>(rp, 0.0 + d, 8);
      } else store<f64>(rp, load<f64>(rp, 8) + d, 8);
      store<u64>(rp, UNSET);
    }
    store<u32>(sr, <u32>nc, 28);
  }
}

/** TopK.siftDown: (score, id) placed from the root of the heap [0, size) (hs: f64 scores, hid: u32 ids). */
function topSiftDown(hs: usize, hid: usize, score: f64, id: u32, size: i32): void {
  let p = 0;
  for (;;) {
    const l = 2 * p + 1;
    if (l >= size) break;
    let c = l;
    const r = l + 1;
    // the worse child
    if (r < size) {
      const sr = load<f64>(hs + (<usize>r << 3)), sl = load<f64>(hs + (<usize>l << 3));
      if (sr < sl || (sr == sl && load<u32>(hid + (<usize>r << 2)) > load<u32>(hid + (<usize>l << 2)))) c = r;
    }
    const sc = load<f64>(hs + (<usize>c << 3)), ic = load<u32>(hid + (<usize>c << 2));
    if (score < sc || (score == sc && id > ic)) break;
    store<f64>(hs + (<usize>p << 3), sc);
    store<u32>(hid + (<usize>p << 2), ic);
    p = c;
  }
  store<f64>(hs + (<usize>p << 3), score);
  store<u32>(hid + (<usize>p << 2), id);
}

/** TopK.push of (score, doc) into the heap of `size` pairs bounded by kk (score not NaN): the new size. */
// @ts-ignore: decorator
@inline function topPush(hs: usize, hid: usize, size: i32, kk: i32, score: f64, doc: u32): i32 {
  if (size < kk) {
    let p = size;
    while (p > 0) {
      const parent = (p - 1) >> 1;
      const ps = load<f64>(hs + (<usize>parent << 3)), pid = load<u32>(hid + (<usize>parent << 2));
      // stop when the parent is worse than or equal to the new pair
      if (ps < score || (ps == score && pid > doc)) break;
      store<f64>(hs + (<usize>p << 3), ps);
      store<u32>(hid + (<usize>p << 2), pid);
      p = parent;
    }
    store<f64>(hs + (<usize>p << 3), score);
    store<u32>(hid + (<usize>p << 2), doc);
    return size + 1;
  }
  // full: enter only when better than the root (the worst kept)
  const rs = load<f64>(hs);
  if (score < rs || (score == rs && doc > load<u32>(hid))) return size;
  topSiftDown(hs, hid, score, doc, kk);
  return size;
}

/** TopK.drain in place: the root (the worst left) to the end of the shrinking heap; best first when done. */
function topDrain(hs: usize, hid: usize, size: i32): void {
  for (let n = size; n > 1; n--) {
    const rs = load<f64>(hs), ri = load<u32>(hid);
    const last = <usize>(n - 1);
    topSiftDown(hs, hid, load<f64>(hs + (last << 3)), load<u32>(hid + (last << 2)), n - 1);
    store<f64>(hs + (last << 3), rs);
    store<u32>(hid + (last << 2), ri);
  }
}

/**
 * One segment's top k (the engine's TopK over its candidates, in the module): each candidate doc
 * (u32 at candidates, count of them, in order) scores (base + acc_doc) / divide (f64), acc_doc
 * the f64 at acc + (doc << shift) (3: an array of f64; 4: warpToken's document records from
 * their acc field); the k best by score, then lower id (NaN never kept), left in hs (f64) and hid
 * (u32) best first. Returns how many (min(k, count) at most). TopK.push per candidate then
 * TopK.drain: the same pairs in the same order (the order of pushes does not change them: the
 * kept set and its drained order are those of a total order).
 */
export function warpTop(candidates: usize, count: i32, acc: usize, shift: i32, base: f64, divide: f64, k: i32, hs: usize, hid: usize): i32 {
  const kk = min(k, count);
  if (kk <= 0) return 0;
  let size = 0;
  for (let e = 0; e < count; e++) {
    const doc = load<u32>(candidates + (<usize>e << 2));
    const score = (base + load<f64>(acc + (<usize>doc << <usize>shift))) / divide;
    if (score != score) continue;
    size = topPush(hs, hid, size, kk, score, doc);
  }
  topDrain(hs, hid, size);
  return size;
}

/**
 * warpTop over a scan's document records (recs, D of them) in document order, the reached ones
 * (acc not UNSET) being the candidates: the same pairs (the push order does not matter), read
 * front to back instead of at the candidates' random places (cheaper once the candidates are a
 * fair share of the documents). kk: at most the candidates' count.
 */
export function warpTopRecords(recs: usize, D: i32, base: f64, divide: f64, kk: i32, hs: usize, hid: usize): i32 {
  if (kk <= 0) return 0;
  let size = 0;
  for (let d = 0; d < D; d++) {
    const rp = recs + (<usize>d << 4);
    if (load<u64>(rp, 8) == UNSET) continue;
    const score = (base + load<f64>(rp, 8)) / divide;
    if (score != score) continue;
    size = topPush(hs, hid, size, kk, score, <u32>d);
  }
  topDrain(hs, hid, size);
  return size;
}

// ---------------------------------------------------------------------------------------------
// ME-BERT's prefix scan from EDEN codes: per document the max over its first rows of
// offset + norm inv S, S the float64 sum of one query token's table entries (bpt x 256 f64) over
// the row's code bytes in byte order (EdenRowScorer.score; jsRowMaxima). WebAssembly has no
// gather: four rows of a document are summed side by side (four independent chains), their code
// bytes read as u32 words.

/** Row r's norm (f32, or IEEE binary16 bits when half != 0) as f64, exact. */
// @ts-ignore: decorator
@inline function normAt(norms: usize, half: i32, r: usize): f64 {
  if (half == 0) return <f64>load<f32>(norms + (r << 2));
  const x = <i32>load<u16>(norms + (r << 1));
  const em = x & 0x7fff;
  let b = reinterpret<i32>(reinterpret<f32>(em << 13) * reinterpret<f32>(0x77800000));
  if (em >= 0x7c00) b = (em << 13) | 0x7f800000;
  return <f64>reinterpret<f32>(b | ((x & 0x8000) << 16));
}

// @ts-ignore: decorator
@inline function rowScore(norms: usize, half: i32, r: usize, offset: f64, inv: f64, s: f64): f64 {
  const norm = normAt(norms, half, r);
  // a zero or non-finite norm: the mean alone
  return norm == 0 || !(abs<f64>(norm) < Infinity) ? offset : offset + norm * inv * s;
}

/** out[j] (f64) = the scores of rows [0, rows), eight rows side by side (eight independent sums), then one at a time. */
function rowScores(table: usize, bpt: i32, offset: f64, inv: f64, codes: usize, norms: usize, half: i32, rows: i32, out: usize): void {
  const rb = <usize>bpt;
  const w4 = bpt & ~3;
  let j = 0;
  for (; j + 8 <= rows; j += 8) {
    const c0 = codes + <usize>j * rb, c1 = c0 + rb, c2 = c1 + rb, c3 = c2 + rb, c4 = c3 + rb, c5 = c4 + rb, c6 = c5 + rb, c7 = c6 + rb;
    let s0: f64 = 0, s1: f64 = 0, s2: f64 = 0, s3: f64 = 0, s4: f64 = 0, s5: f64 = 0, s6: f64 = 0, s7: f64 = 0;
    let t = table;
    let p = 0;
    for (; p < w4; p += 4, t += 8192) {
      const x0 = load<u32>(c0 + <usize>p), x1 = load<u32>(c1 + <usize>p), x2 = load<u32>(c2 + <usize>p), x3 = load<u32>(c3 + <usize>p);
      const x4 = load<u32>(c4 + <usize>p), x5 = load<u32>(c5 + <usize>p), x6 = load<u32>(c6 + <usize>p), x7 = load<u32>(c7 + <usize>p);
      s0 += load<f64>(t + <usize>((x0 << 3) & 0x7f8)); s1 += load<f64>(t + <usize>((x1 << 3) & 0x7f8));
      s2 += load<f64>(t + <usize>((x2 << 3) & 0x7f8)); s3 += load<f64>(t + <usize>((x3 << 3) & 0x7f8));
      s4 += load<f64>(t + <usize>((x4 << 3) & 0x7f8)); s5 += load<f64>(t + <usize>((x5 << 3) & 0x7f8));
      s6 += load<f64>(t + <usize>((x6 << 3) & 0x7f8)); s7 += load<f64>(t + <usize>((x7 << 3) & 0x7f8));
      s0 += load<f64>(t + <usize>((x0 >> 5) & 0x7f8), 2048); s1 += load<f64>(t + <usize>((x1 >> 5) & 0x7f8), 2048);
      s2 += load<f64>(t + <usize>((x2 >> 5) & 0x7f8), 2048); s3 += load<f64>(t + <usize>((x3 >> 5) & 0x7f8), 2048);
      s4 += load<f64>(t + <usize>((x4 >> 5) & 0x7f8), 2048); s5 += load<f64>(t + <usize>((x5 >> 5) & 0x7f8), 2048);
      s6 += load<f64>(t + <usize>((x6 >> 5) & 0x7f8), 2048); s7 += load<f64>(t + <usize>((x7 >> 5) & 0x7f8), 2048);
      s0 += load<f64>(t + <usize>((x0 >> 13) & 0x7f8), 4096); s1 += load<f64>(t + <usize>((x1 >> 13) & 0x7f8), 4096);
      s2 += load<f64>(t + <usize>((x2 >> 13) & 0x7f8), 4096); s3 += load<f64>(t + <usize>((x3 >> 13) & 0x7f8), 4096);
      s4 += load<f64>(t + <usize>((x4 >> 13) & 0x7f8), 4096); s5 += load<f64>(t + <usize>((x5 >> 13) & 0x7f8), 4096);
      s6 += load<f64>(t + <usize>((x6 >> 13) & 0x7f8), 4096); s7 += load<f64>(t + <usize>((x7 >> 13) & 0x7f8), 4096);
      s0 += load<f64>(t + <usize>((x0 >> 21) & 0x7f8), 6144); s1 += load<f64>(t + <usize>((x1 >> 21) & 0x7f8), 6144);
      s2 += load<f64>(t + <usize>((x2 >> 21) & 0x7f8), 6144); s3 += load<f64>(t + <usize>((x3 >> 21) & 0x7f8), 6144);
      s4 += load<f64>(t + <usize>((x4 >> 21) & 0x7f8), 6144); s5 += load<f64>(t + <usize>((x5 >> 21) & 0x7f8), 6144);
      s6 += load<f64>(t + <usize>((x6 >> 21) & 0x7f8), 6144); s7 += load<f64>(t + <usize>((x7 >> 21) & 0x7f8), 6144);
    }
    for (; p < bpt; p++, t += 2048) {
      s0 += load<f64>(t + (<usize>load<u8>(c0 + <usize>p) << 3)); s1 += load<f64>(t + (<usize>load<u8>(c1 + <usize>p) << 3));
      s2 += load<f64>(t + (<usize>load<u8>(c2 + <usize>p) << 3)); s3 += load<f64>(t + (<usize>load<u8>(c3 + <usize>p) << 3));
      s4 += load<f64>(t + (<usize>load<u8>(c4 + <usize>p) << 3)); s5 += load<f64>(t + (<usize>load<u8>(c5 + <usize>p) << 3));
      s6 += load<f64>(t + (<usize>load<u8>(c6 + <usize>p) << 3)); s7 += load<f64>(t + (<usize>load<u8>(c7 + <usize>p) << 3));
    }
    const r = <usize>j;
    const o = out + (r << 3);
    store<f64>(o, rowScore(norms, half, r, offset, inv, s0));
    store<f64>(o, rowScore(norms, half, r + 1, offset, inv, s1), 8);
    store<f64>(o, rowScore(norms, half, r + 2, offset, inv, s2), 16);
    store<f64>(o, rowScore(norms, half, r + 3, offset, inv, s3), 24);
    store<f64>(o, rowScore(norms, half, r + 4, offset, inv, s4), 32);
    store<f64>(o, rowScore(norms, half, r + 5, offset, inv, s5), 40);
    store<f64>(o, rowScore(norms, half, r + 6, offset, inv, s6), 48);
    store<f64>(o, rowScore(norms, half, r + 7, offset, inv, s7), 56);
  }
  for (; j < rows; j++) {
    const c = codes + <usize>j * rb;
    let s: f64 = 0;
    let t = table;
    for (let p = 0; p < bpt; p++, t += 2048) s += load<f64>(t + (<usize>load<u8>(c + <usize>p) << 3));
    store<f64>(out + (<usize>j << 3), rowScore(norms, half, <usize>j, offset, inv, s));
  }
}

/**
 * Per document k < docs: rows [start[k], start[k] + min(m, start[k + 1] - start[k])) (start: u32,
 * rows numbered from the first row at codes / norms), best[k] (f64) = the largest row score
 * (the first on ties; -Infinity without rows), arg[k] (i32) = its place among the document's rows.
 */
export function rowMaxima(table: usize, bpt: i32, offset: f64, inv: f64, codes: usize, norms: usize, half: i32, start: usize, docs: i32, m: i32, best: usize, arg: usize, scratch: usize): void {
  // Every document within m rows (ME-BERT's m = the section's rows, the default): every row is
  // scored, eight at a time across documents (scores at scratch), then each document's max.
  let all = true;
  for (let k = 0; k < docs; k++) {
    if (<i32>(load<u32>(start + (<usize>(k + 1) << 2)) - load<u32>(start + (<usize>k << 2))) > m) {
      all = false;
      break;
    }
  }
  if (all) {
    const base = load<u32>(start);
    rowScores(table, bpt, offset, inv, codes + <usize>base * <usize>bpt, norms + (<usize>base << (half ? 1 : 2)), half, <i32>(load<u32>(start + (<usize>docs << 2)) - base), scratch);
    for (let k = 0; k < docs; k++) {
      const r0 = load<u32>(start + (<usize>k << 2)) - base;
      const rows = <i32>(load<u32>(start + (<usize>(k + 1) << 2)) - base - r0);
      let b = -Infinity;
      let a = 0;
      for (let j = 0; j < rows; j++) {
        const y = load<f64>(scratch + ((<usize>r0 + <usize>j) << 3));
        if (y > b) { b = y; a = j; }
      }
      store<f64>(best + (<usize>k << 3), b);
      store<i32>(arg + (<usize>k << 2), a);
    }
    return;
  }
  const rb = <usize>bpt;
  const w4 = bpt & ~3;
  for (let k = 0; k < docs; k++) {
    const r0 = <i32>load<u32>(start + (<usize>k << 2));
    let rows = <i32>load<u32>(start + (<usize>(k + 1) << 2)) - r0;
    if (rows > m) rows = m;
    let b = -Infinity;
    let a = 0;
    let j = 0;
    for (; j + 4 <= rows; j += 4) {
      const c0 = codes + <usize>(r0 + j) * rb, c1 = c0 + rb, c2 = c1 + rb, c3 = c2 + rb;
      let s0: f64 = 0, s1: f64 = 0, s2: f64 = 0, s3: f64 = 0;
      let t = table;
      let p = 0;
      for (; p < w4; p += 4, t += 8192) {
        const x0 = load<u32>(c0 + <usize>p), x1 = load<u32>(c1 + <usize>p), x2 = load<u32>(c2 + <usize>p), x3 = load<u32>(c3 + <usize>p);
        s0 += load<f64>(t + <usize>((x0 << 3) & 0x7f8)); s1 += load<f64>(t + <usize>((x1 << 3) & 0x7f8));
        s2 += load<f64>(t + <usize>((x2 << 3) & 0x7f8)); s3 += load<f64>(t + <usize>((x3 << 3) & 0x7f8));
        s0 += load<f64>(t + <usize>((x0 >> 5) & 0x7f8), 2048); s1 += load<f64>(t + <usize>((x1 >> 5) & 0x7f8), 2048);
        s2 += load<f64>(t + <usize>((x2 >> 5) & 0x7f8), 2048); s3 += load<f64>(t + <usize>((x3 >> 5) & 0x7f8), 2048);
        s0 += load<f64>(t + <usize>((x0 >> 13) & 0x7f8), 4096); s1 += load<f64>(t + <usize>((x1 >> 13) & 0x7f8), 4096);
        s2 += load<f64>(t + <usize>((x2 >> 13) & 0x7f8), 4096); s3 += load<f64>(t + <usize>((x3 >> 13) & 0x7f8), 4096);
        s0 += load<f64>(t + <usize>((x0 >> 21) & 0x7f8), 6144); s1 += load<f64>(t + <usize>((x1 >> 21) & 0x7f8), 6144);
        s2 += load<f64>(t + <usize>((x2 >> 21) & 0x7f8), 6144); s3 += load<f64>(t + <usize>((x3 >> 21) & 0x7f8), 6144);
      }
      for (; p < bpt; p++, t += 2048) {
        s0 += load<f64>(t + (<usize>load<u8>(c0 + <usize>p) << 3)); s1 += load<f64>(t + (<usize>load<u8>(c1 + <usize>p) << 3));
        s2 += load<f64>(t + (<usize>load<u8>(c2 + <usize>p) << 3)); s3 += load<f64>(t + (<usize>load<u8>(c3 + <usize>p) << 3));
      }
      const r = <usize>(r0 + j);
      const y0 = rowScore(norms, half, r, offset, inv, s0), y1 = rowScore(norms, half, r + 1, offset, inv, s1);
      const y2 = rowScore(norms, half, r + 2, offset, inv, s2), y3 = rowScore(norms, half, r + 3, offset, inv, s3);
      if (y0 > b) { b = y0; a = j; }
      if (y1 > b) { b = y1; a = j + 1; }
      if (y2 > b) { b = y2; a = j + 2; }
      if (y3 > b) { b = y3; a = j + 3; }
    }
    for (; j < rows; j++) {
      const c = codes + <usize>(r0 + j) * rb;
      let s: f64 = 0;
      let t = table;
      for (let p = 0; p < bpt; p++, t += 2048) s += load<f64>(t + (<usize>load<u8>(c + <usize>p) << 3));
      const y = rowScore(norms, half, <usize>(r0 + j), offset, inv, s);
      if (y > b) { b = y; a = j; }
    }
    store<f64>(best + (<usize>k << 3), b);
    store<i32>(arg + (<usize>k << 2), a);
  }
}

// ---------------------------------------------------------------------------------------------
// WARP's exact final stage: exact MaxSim of one query against a few documents, scored from their
// codes in this module (decoded here to float32 rows, a block at a time, then one pass of dot
// products per row and query token in float32 SIMD). Within float tolerance of decode + GEMM.

/** IEEE binary16 bits h[0 .. count) as float32 at out: exact (every half is a float32). */
export function halfToF32(h: usize, count: i32, out: usize): void {
  const magic = f32x4.splat(reinterpret<f32>(0x77800000)); // 2^112: rebias a half's exponent
  const low = i32x4.splat(0x7fff), top = i32x4.splat(0x7c00), expAll = i32x4.splat(0x7f800000);
  let i = 0;
  for (; i + 8 <= count; i += 8) {
    const v = v128.load(h + (<usize>i << 1));
    v128.store(out + (<usize>i << 2), half4(i32x4.extend_low_i16x8_u(v), magic, low, top, expAll));
    v128.store(out + (<usize>i << 2) + 16, half4(i32x4.extend_high_i16x8_u(v), magic, low, top, expAll));
  }
  for (; i < count; i++) {
    const x = <i32>load<u16>(h + (<usize>i << 1));
    const em = x & 0x7fff;
    let b = reinterpret<i32>(reinterpret<f32>(em << 13) * reinterpret<f32>(0x77800000));
    if (em >= 0x7c00) b = (em << 13) | 0x7f800000;
    store<i32>(out + (<usize>i << 2), b | ((x & 0x8000) << 16));
  }
}

/** Four halves (low 16 bits of each i32 lane) as float32: normals and subnormals by one multiply, infinities and NaN by their exponent. */
// @ts-ignore: decorator
@inline function half4(x: v128, magic: v128, low: v128, top: v128, expAll: v128): v128 {
  const em = v128.and(x, low);
  const sh = i32x4.shl(em, 13);
  const f = v128.bitselect(v128.or(sh, expAll), f32x4.mul(sh, magic), i32x4.ge_s(em, top));
  return v128.or(f, i32x4.shl(v128.xor(x, em), 16));
}

/**
 * Coded rows (b = 1..8 bits per value, little-endian bit stream, row r from bit r p b) as float32
 * values levels[code] at out (rows x p). lut: for b = 4, 256 pairs [levels[v & 15], levels[v >> 4]]
 * (one 8-byte store per code byte); else unused.
 */
export function codesToF32(codes: usize, rows: i32, p: i32, bits: i32, levels: usize, lut: usize, out: usize): void {
  if (bits == 4 && (p & 1) == 0) {
    const bytes = (rows * p) >> 1;
    for (let b = 0; b < bytes; b++) store<u64>(out + (<usize>b << 3), load<u64>(lut + (<usize>load<u8>(codes + <usize>b) << 3)));
    return;
  }
  const mask = (1 << bits) - 1;
  const total = rows * p;
  for (let k = 0; k < total; k++) {
    const pos = k * bits;
    const v = (<i32>load<u16>(codes + <usize>(pos >> 3)) >> (pos & 7)) & mask;
    store<f32>(out + (<usize>k << 2), load<f32>(levels + (<usize>v << 2)));
  }
}

/**
 * Per query token i (q: n x w float32), best[i] (f32) = max(best[i], max over rows r of
 * scale_r (q_i . x_r)) over float32 rows x (rows x w); scales: f32 per row, or 0 for none. Dot
 * products in float32, 4 lanes over the dimensions, 4 rows x 2 query tokens at a time.
 */
export function maxsimF32(q: usize, n: i32, w: i32, x: usize, rows: i32, scales: usize, best: usize): void {
  const rowBytes = <usize>w << 2;
  let j = 0;
  for (; j + 4 <= rows; j += 4) {
    const x0 = x + <usize>j * rowBytes, x1 = x0 + rowBytes, x2 = x1 + rowBytes, x3 = x2 + rowBytes;
    let c0: f32 = 1, c1: f32 = 1, c2: f32 = 1, c3: f32 = 1;
    if (scales != 0) {
      const sp = scales + (<usize>j << 2);
      c0 = load<f32>(sp); c1 = load<f32>(sp, 4); c2 = load<f32>(sp, 8); c3 = load<f32>(sp, 12);
    }
    let i = 0;
    for (; i + 2 <= n; i += 2) {
      const qa = q + <usize>i * rowBytes, qb = qa + rowBytes;
      let a0 = f32x4.splat(0), a1 = f32x4.splat(0), a2 = f32x4.splat(0), a3 = f32x4.splat(0);
      let b0 = f32x4.splat(0), b1 = f32x4.splat(0), b2 = f32x4.splat(0), b3 = f32x4.splat(0);
      let k = 0;
      for (; k + 4 <= w; k += 4) {
        const o = <usize>k << 2;
        const va = v128.load(qa + o), vb = v128.load(qb + o);
        const y0 = v128.load(x0 + o), y1 = v128.load(x1 + o), y2 = v128.load(x2 + o), y3 = v128.load(x3 + o);
        a0 = f32x4.add(a0, f32x4.mul(va, y0)); a1 = f32x4.add(a1, f32x4.mul(va, y1));
        a2 = f32x4.add(a2, f32x4.mul(va, y2)); a3 = f32x4.add(a3, f32x4.mul(va, y3));
        b0 = f32x4.add(b0, f32x4.mul(vb, y0)); b1 = f32x4.add(b1, f32x4.mul(vb, y1));
        b2 = f32x4.add(b2, f32x4.mul(vb, y2)); b3 = f32x4.add(b3, f32x4.mul(vb, y3));
      }
      let sa0 = hsum(a0), sa1 = hsum(a1), sa2 = hsum(a2), sa3 = hsum(a3);
      let sb0 = hsum(b0), sb1 = hsum(b1), sb2 = hsum(b2), sb3 = hsum(b3);
      for (; k < w; k++) {
        const o = <usize>k << 2;
        const qa1 = load<f32>(qa + o), qb1 = load<f32>(qb + o);
        const y0 = load<f32>(x0 + o), y1 = load<f32>(x1 + o), y2 = load<f32>(x2 + o), y3 = load<f32>(x3 + o);
        sa0 += qa1 * y0; sa1 += qa1 * y1; sa2 += qa1 * y2; sa3 += qa1 * y3;
        sb0 += qb1 * y0; sb1 += qb1 * y1; sb2 += qb1 * y2; sb3 += qb1 * y3;
      }
      raise(best, i, max4(sa0 * c0, sa1 * c1, sa2 * c2, sa3 * c3));
      raise(best, i + 1, max4(sb0 * c0, sb1 * c1, sb2 * c2, sb3 * c3));
    }
    if (i < n) {
      const qa = q + <usize>i * rowBytes;
      raise(best, i, max4(dotF32(qa, x0, w) * c0, dotF32(qa, x1, w) * c1, dotF32(qa, x2, w) * c2, dotF32(qa, x3, w) * c3));
    }
  }
  for (; j < rows; j++) {
    const xr = x + <usize>j * rowBytes;
    const c: f32 = scales != 0 ? load<f32>(scales + (<usize>j << 2)) : 1;
    for (let i = 0; i < n; i++) raise(best, i, dotF32(q + <usize>i * rowBytes, xr, w) * c);
  }
}

/** Lanes summed: (l0 + l1) + (l2 + l3). */
// @ts-ignore: decorator
@inline function hsum(a: v128): f32 {
  return (f32x4.extract_lane(a, 0) + f32x4.extract_lane(a, 1)) + (f32x4.extract_lane(a, 2) + f32x4.extract_lane(a, 3));
}

// @ts-ignore: decorator
@inline function max4(a: f32, b: f32, c: f32, d: f32): f32 {
  return max(max(a, b), max(c, d));
}

// @ts-ignore: decorator
@inline function raise(best: usize, i: i32, s: f32): void {
  const p = best + (<usize>i << 2);
  if (s > load<f32>(p)) store<f32>(p, s);
}

/** q . x over w float32 values, 4 lanes then the tail (maxsimF32's order). */
function dotF32(q: usize, x: usize, w: i32): f32 {
  let a = f32x4.splat(0);
  let k = 0;
  for (; k + 4 <= w; k += 4) a = f32x4.add(a, f32x4.mul(v128.load(q + (<usize>k << 2)), v128.load(x + (<usize>k << 2))));
  let s = hsum(a);
  for (; k < w; k++) s += load<f32>(q + (<usize>k << 2)) * load<f32>(x + (<usize>k << 2));
  return s;
}
