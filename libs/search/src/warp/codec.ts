import { crc32 } from 'node:zlib';

/**
 * WARP's residual codec (SPEC 3.5; PLAID's residual compression with per-dimension buckets): a
 * token vector v assigned to centroid c is stored as its residual r = v - c, each dimension j
 * quantised to b bits (b = 2 or 4) against that dimension's bucket cutoffs, and decoded to that
 * dimension's bucket weight: v ~ c + (w_j[code_j])_j. Cutoffs and weights are fitted once per
 * collection and codec version, like the centroids, from a sample of residuals.
 *
 * Packing: a token's d codes form a little-endian bit stream of ceil(d b / 8) bytes, code j at
 * bits [j b, (j+1) b) (bit k is bit k mod 8 of byte floor(k / 8)), the convention of
 * @lateral/codec's bitpack; every token starts on a byte. For b = 4 byte p holds dimensions 2p
 * (low nibble) and 2p + 1 (high nibble); unused high bits of the last byte are zero.
 */

export type WarpBits = 2 | 4;
export const WARP_BITS: readonly WarpBits[] = [2, 4];

export interface WarpCodec {
  dims: number;
  bits: WarpBits;
  /** dims x (2^bits - 1), ascending per dimension: r goes to bucket #{k : cutoffs[j][k] < r}. */
  cutoffs: Float32Array;
  /** dims x 2^bits: the decoded value of each bucket of each dimension. */
  weights: Float32Array;
}

export function assertWarpBits(fn: string, bits: number): asserts bits is WarpBits {
  if (bits !== 2 && bits !== 4) throw new RangeError(`${fn}: bits must be 2 or 4, got ${bits}`);
}

/** Packed code bytes per token: ceil(dims x bits / 8). */
export function warpCodeBytes(dims: number, bits: number): number {
  return Math.ceil((dims * bits) / 8);
}

/** Checks a codec's bits and array shapes (RangeError naming the field). */
export function assertWarpCodec(fn: string, codec: WarpCodec): void {
  assertWarpBits(fn, codec.bits);
  const { dims, bits } = codec;
  if (!Number.isInteger(dims) || dims < 1) throw new RangeError(`${fn}: codec dims must be an integer >= 1, got ${dims}`);
  const B = 1 << bits;
  if (codec.cutoffs.length !== dims * (B - 1)) throw new RangeError(`${fn}: codec cutoffs has length ${codec.cutoffs.length}, expected dims x (2^bits - 1) = ${dims * (B - 1)}`);
  if (codec.weights.length !== dims * B) throw new RangeError(`${fn}: codec weights has length ${codec.weights.length}, expected dims x 2^bits = ${dims * B}`);
}

/**
 * Residuals of token vectors against their assigned centroids. vectors: T x d, centroids: K x d,
 * assignment: T centroid indices. Shape: -> T x d.
 */
export function warpResiduals(vectors: Float32Array, T: number, d: number, centroids: Float32Array, assignment: Uint32Array): Float32Array {
  if (vectors.length !== T * d) throw new RangeError(`warpResiduals: vectors has length ${vectors.length}, expected T x d = ${T * d}`);
  if (assignment.length !== T) throw new RangeError(`warpResiduals: assignment has ${assignment.length} entries, expected T = ${T}`);
  const K = centroids.length / d;
  const out = new Float32Array(T * d);
  for (let t = 0; t < T; t++) {
    const c = assignment[t];
    if (c >= K) throw new RangeError(`warpResiduals: assignment[${t}] = ${c} is not a centroid (K = ${K})`);
    const a = t * d, b = c * d;
    for (let j = 0; j < d; j++) out[a + j] = vectors[a + j] - centroids[b + j];
  }
  return out;
}

/**
 * Fits per-dimension cutoffs and weights from n sampled residuals (n x dims). On each dimension
 * the cutoffs are the (k / 2^b)-quantiles, k = 1 .. 2^b - 1 (equal-mass buckets), and a bucket's
 * weight is the mean of the sample values in it (the reconstruction that minimises the squared
 * error for those cutoffs); an empty bucket takes its middle quantile ((k + 1/2) / 2^b).
 */
/** Columns fitWarpCodec gathers per pass over the sample (16 float32 = 64 bytes, a cache line). */
const FIT_COLUMNS = 16;

export function fitWarpCodec(residuals: Float32Array, n: number, dims: number, bits: number): WarpCodec {
  const fn = 'fitWarpCodec';
  assertWarpBits(fn, bits);
  if (!Number.isInteger(dims) || dims < 1) throw new RangeError(`${fn}: dims must be an integer >= 1, got ${dims}`);
  if (!Number.isInteger(n) || n < 1) throw new RangeError(`${fn}: needs at least one residual, got n = ${n}`);
  if (residuals.length !== n * dims) throw new RangeError(`${fn}: residuals has length ${residuals.length}, expected n x dims = ${n * dims}`);
  const B = 1 << bits;
  const cutoffs = new Float32Array(dims * (B - 1));
  const weights = new Float32Array(dims * B);
  const sorter = new Float32Sorter(n);
  // The columns gathered FIT_COLUMNS at a time: one pass over the rows reads each row's
  // FIT_COLUMNS contiguous values (a cache line) instead of one value per row and column, which
  // strided over the whole n x dims sample for every dimension (most of the fit's own time).
  const block = Math.min(FIT_COLUMNS, dims);
  const cols = new Float32Array(block * n);
  let col = cols.subarray(0, n);
  const quantile = (p: number) => col[Math.min(n - 1, Math.floor(p * n))];
  for (let j = 0; j < dims; j++) {
    const j0 = j - (j % block);
    const width = Math.min(block, dims - j0);
    if (j === j0) {
      for (let i = 0; i < n; i++) {
        const from = i * dims + j0;
        for (let c = 0; c < width; c++) cols[c * n + i] = residuals[from + c];
      }
    }
    col = cols.subarray((j - j0) * n, (j - j0 + 1) * n);
    sorter.sort(col);
    for (let k = 0; k < B - 1; k++) cutoffs[j * (B - 1) + k] = quantile((k + 1) / B);
    // col is ascending: bucket k holds the values in (cutoff[k-1], cutoff[k]]
    let i = 0;
    for (let k = 0; k < B; k++) {
      const hi = k < B - 1 ? cutoffs[j * (B - 1) + k] : Infinity;
      let sum = 0;
      let count = 0;
      while (i < n && col[i] <= hi) {
        sum += col[i++];
        count++;
      }
      weights[j * B + k] = count > 0 ? sum / count : quantile((k + 0.5) / B);
    }
  }
  return { dims, bits, cutoffs, weights };
}

/**
 * Sorts float32 arrays ascending in the order Float32Array.prototype.sort gives (numeric, -0
 * before +0), by a least-significant-digit radix sort of their bits (three 11-bit digits):
 * fitWarpCodec sorts every dimension's sample, 65,536 values each, and the typed array's own sort
 * was most of a first index job's codec fit. The float's bits, with the sign bit flipped for a
 * positive value and every bit for a negative one, order as unsigned integers as the values do.
 * An array holding a NaN is left to the typed array's sort (which puts NaNs last).
 */
export class Float32Sorter {
  private readonly keys: Uint32Array;
  private readonly other: Uint32Array;
  private readonly counts = new Uint32Array(3 * 2048);

  constructor(capacity: number) {
    this.keys = new Uint32Array(capacity);
    this.other = new Uint32Array(capacity);
  }

  sort(a: Float32Array): void {
    const n = a.length;
    if (n > this.keys.length) throw new RangeError(`Float32Sorter: ${n} values, capacity ${this.keys.length}`);
    const bits = new Uint32Array(a.buffer, a.byteOffset, n);
    const { keys, other, counts } = this;
    counts.fill(0);
    for (let i = 0; i < n; i++) {
      const b = bits[i];
      if ((b & 0x7fffffff) > 0x7f800000) {
        a.sort(); // a NaN
        return;
      }
      const k = (b & 0x80000000 ? ~b : b | 0x80000000) >>> 0;
      keys[i] = k;
      counts[k & 0x7ff]++;
      counts[2048 + ((k >>> 11) & 0x7ff)]++;
      counts[4096 + (k >>> 22)]++;
    }
    let from = keys;
    let to = other;
    for (let pass = 0; pass < 3; pass++) {
      const base = pass * 2048;
      const shift = pass * 11;
      let sum = 0;
      for (let d = 0; d < 2048; d++) {
        const c = counts[base + d];
        counts[base + d] = sum;
        sum += c;
      }
      for (let i = 0; i < n; i++) {
        const k = from[i];
        to[counts[base + ((k >>> shift) & 0x7ff)]++] = k;
      }
      const t = from;
      from = to;
      to = t;
    }
    for (let i = 0; i < n; i++) {
      const k = from[i];
      bits[i] = (k & 0x80000000 ? k & 0x7fffffff : ~k) >>> 0;
    }
  }
}

/**
 * Encodes n residuals (n x dims) to packed codes. Shape: -> n x warpCodeBytes(dims, bits).
 * `out` (zeroed, or written whole here) may be given to encode into a larger buffer.
 */
export function encodeWarpResiduals(codec: WarpCodec, residuals: Float32Array, n: number, out?: Uint8Array): Uint8Array {
  const fn = 'encodeWarpResiduals';
  assertWarpCodec(fn, codec);
  const { dims, bits } = codec;
  if (residuals.length !== n * dims) throw new RangeError(`${fn}: residuals has length ${residuals.length}, expected n x dims = ${n * dims}`);
  const bpt = warpCodeBytes(dims, bits);
  const codes = out ?? new Uint8Array(n * bpt);
  if (codes.length < n * bpt) throw new RangeError(`${fn}: out has ${codes.length} bytes, needs ${n * bpt}`);
  for (let t = 0; t < n; t++) encodeWarpResidualInto(codec, residuals, t * dims, null, 0, codes, t * bpt);
  return codes;
}

/**
 * Whether every dimension's cutoffs are non-decreasing (no NaN among them): then the bucket
 * #{k : cutoffs[k] < r}, i.e. the first k with !(r > cutoffs[k]), is found by bisection (bits
 * comparisons instead of up to 2^bits - 1). Fitted codecs always are (sorted quantiles); any other
 * codec takes the linear scan, which gives the same bucket wherever the bisection applies.
 */
const bisectable = new WeakMap<WarpCodec, boolean>();
function cutoffsAscending(codec: WarpCodec): boolean {
  let ok = bisectable.get(codec);
  if (ok === undefined) {
    const { dims, bits, cutoffs } = codec;
    const C = (1 << bits) - 1;
    ok = true;
    for (let j = 0; j < dims && ok; j++) for (let k = 0; k < C - 1; k++) if (!(cutoffs[j * C + k] <= cutoffs[j * C + k + 1])) ok = false;
    if (ok) for (let i = 0; i < cutoffs.length; i++) if (Number.isNaN(cutoffs[i])) ok = false;
    bisectable.set(codec, ok);
  }
  return ok;
}

/**
 * Encodes one token into out[oo .. oo + warpCodeBytes): the residual x[xo ..] - centroids[co ..]
 * (centroids null: x is already the residual). No allocation (the index build's inner loop): each
 * byte is assembled from its dimensions' codes and stored once (unused high bits of the last byte
 * zero), each code found by bisection over the dimension's cutoffs when they are ascending
 * (cutoffsAscending), else by the linear scan; both give #{k : cutoffs[k] < r}.
 */
export function encodeWarpResidualInto(codec: WarpCodec, x: Float32Array, xo: number, centroids: Float32Array | null, co: number, out: Uint8Array, oo: number): void {
  const { dims, bits, cutoffs } = codec;
  const C = (1 << bits) - 1;
  const bisect = cutoffsAscending(codec);
  if (bisect && bits === 4 && (dims & 1) === 0) return encode4(dims, cutoffs, x, xo, centroids, co, out, oo);
  let acc = 0;
  let filled = 0;
  let o = oo;
  for (let j = 0; j < dims; j++) {
    // rounded to float32 as warpResiduals stores it, so both paths pick the same buckets
    const r = centroids ? Math.fround(x[xo + j] - centroids[co + j]) : x[xo + j];
    const cb = j * C;
    let b = 0;
    if (bisect && bits === 4) {
      b = bucket4(cutoffs, cb, r);
    } else if (bisect && bits === 2) {
      if (r > cutoffs[cb + 1]) b = 2;
      if (r > cutoffs[cb + b]) b += 1;
    } else {
      while (b < C && r > cutoffs[cb + b]) b++;
    }
    acc |= b << filled;
    filled += bits;
    if (filled === 8) {
      out[o++] = acc;
      acc = 0;
      filled = 0;
    }
  }
  if (filled > 0) out[o] = acc;
}

/**
 * encodeWarpResidualInto at 4 bits, an even number of dimensions and ascending cutoffs: two
 * dimensions a byte, each code by bucket4's bisection without branches: ~2x faster than with
 * branches on residuals whose buckets are equally likely.
 */
function encode4(dims: number, c: Float32Array, x: Float32Array, xo: number, centroids: Float32Array | null, co: number, out: Uint8Array, oo: number): void {
  let o = oo;
  for (let j = 0; j < dims; j += 2) {
    const r0 = centroids ? Math.fround(x[xo + j] - centroids[co + j]) : x[xo + j];
    const r1 = centroids ? Math.fround(x[xo + j + 1] - centroids[co + j + 1]) : x[xo + j + 1];
    const a = j * 15;
    out[o++] = bucket4(c, a, r0) | (bucket4(c, a + 15, r1) << 4);
  }
}

/**
 * The 4-bit code of residual r against one dimension's 15 ascending cutoffs c[a .. a + 15):
 * #{k : c[a + k] < r}, by a bisection without branches (each step's comparison added as 0 or 1).
 */
function bucket4(c: Float32Array, a: number, r: number): number {
  let b = +(r > c[a + 7]) << 3;
  b |= +(r > c[a + b + 3]) << 2;
  b |= +(r > c[a + b + 1]) << 1;
  return b + +(r > c[a + b]);
}

/** The code (bucket) of dimension j in a token's packed codes starting at byte o. */
export function warpCodeAt(codes: Uint8Array, o: number, j: number, bits: number): number {
  const bit = j * bits;
  return (codes[o + (bit >>> 3)] >>> (bit & 7)) & ((1 << bits) - 1);
}

/** Decodes packed residual codes to the bucket weights (tests, reconstruction). Shape: -> n x dims. */
export function decodeWarpResiduals(codec: WarpCodec, codes: Uint8Array, n: number): Float32Array {
  assertWarpCodec('decodeWarpResiduals', codec);
  const { dims, bits, weights } = codec;
  const bpt = warpCodeBytes(dims, bits);
  if (codes.length < n * bpt) throw new RangeError(`decodeWarpResiduals: codes has ${codes.length} bytes, expected n x ${bpt} = ${n * bpt}`);
  const B = 1 << bits;
  const out = new Float32Array(n * dims);
  for (let t = 0; t < n; t++) for (let j = 0; j < dims; j++) out[t * dims + j] = weights[j * B + warpCodeAt(codes, t * bpt, j, bits)];
  return out;
}

/**
 * CRC-32 (zlib's) of the codec: dims and bits (u32 little-endian each), then the cutoffs and
 * weights as float32 little-endian. A search layout records it, so lists are never scored with
 * weights of another codec version.
 */
export function warpCodecChecksum(codec: WarpCodec): number {
  assertWarpCodec('warpCodecChecksum', codec);
  const head = new Uint8Array(8);
  const view = new DataView(head.buffer);
  view.setUint32(0, codec.dims, true);
  view.setUint32(4, codec.bits, true);
  let c = crc32(head);
  c = crc32(littleEndianBytes(codec.cutoffs), c);
  return crc32(littleEndianBytes(codec.weights), c) >>> 0;
}

function littleEndianBytes(x: Float32Array): Uint8Array {
  const out = new Uint8Array(x.length * 4);
  const view = new DataView(out.buffer);
  for (let i = 0; i < x.length; i++) view.setFloat32(i * 4, x[i], true);
  return out;
}
