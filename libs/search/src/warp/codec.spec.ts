import { describe, expect, it } from 'vitest';
import { unpackCodes } from '@lateral/codec';
import { rng } from '../test-utils';
import { Float32Sorter, decodeWarpResiduals, encodeWarpResidualInto, encodeWarpResiduals, fitWarpCodec, warpCodeAt, warpCodeBytes, warpCodecChecksum, warpResiduals, type WarpBits, type WarpCodec } from './codec';

function randomResiduals(seed: number, n: number, d: number): Float32Array {
  const r = rng(seed);
  return Float32Array.from({ length: n * d }, (_, i) => (r() + r() + r() - 1.5) * (0.05 + 0.01 * (i % d)));
}

describe('warp residual codec', () => {
  it('packs codes little-endian per token, the convention of @lateral/codec bitpack (hand-computed)', () => {
    // dims 3, b = 2: cutoffs per dimension [-1, 0, 1] -> buckets 0..3
    const codec: WarpCodec = {
      dims: 3, bits: 2,
      cutoffs: Float32Array.from([-1, 0, 1, -1, 0, 1, -1, 0, 1]),
      weights: Float32Array.from([-2, -0.5, 0.5, 2, -2, -0.5, 0.5, 2, -2, -0.5, 0.5, 2]),
    };
    // r = (0.5, -3, 1) -> codes (2, 0, 2): a value equal to a cutoff (1) goes to the lower bucket
    const codes = encodeWarpResiduals(codec, Float32Array.from([0.5, -3, 1]), 1);
    expect(warpCodeBytes(3, 2)).toBe(1);
    expect([...codes]).toEqual([2 | (0 << 2) | (2 << 4)]);
    expect([...decodeWarpResiduals(codec, codes, 1)]).toEqual([0.5, -2, 0.5]);
    // b = 4 with 3 dims: 2 bytes, dims 0 and 1 in byte 0 (low nibble first), dim 2 in the low nibble of byte 1
    expect(warpCodeBytes(3, 4)).toBe(2);
    expect(warpCodeBytes(128, 4)).toBe(64);
    expect(warpCodeBytes(128, 2)).toBe(32);
    expect(warpCodeBytes(7, 2)).toBe(2);
  });

  for (const bits of [2, 4] as WarpBits[]) {
    for (const d of [128, 7, 1]) {
      it(`b = ${bits}, d = ${d}: cutoffs ascending, weights inside their buckets, codes the bucket of each value, same as bitpack`, () => {
        const n = 500;
        const res = randomResiduals(bits * 100 + d, n, d);
        const codec = fitWarpCodec(res, n, d, bits);
        const B = 1 << bits;
        for (let j = 0; j < d; j++) {
          const cut = codec.cutoffs.subarray(j * (B - 1), (j + 1) * (B - 1));
          const w = codec.weights.subarray(j * B, (j + 1) * B);
          for (let k = 1; k < B - 1; k++) expect(cut[k]).toBeGreaterThanOrEqual(cut[k - 1]);
          for (let k = 0; k < B; k++) {
            if (k > 0) expect(w[k]).toBeGreaterThanOrEqual(cut[k - 1]);
            if (k < B - 1) expect(w[k]).toBeLessThanOrEqual(cut[k]);
          }
        }
        const codes = encodeWarpResiduals(codec, res, n);
        const bpt = warpCodeBytes(d, bits);
        expect(codes.length).toBe(n * bpt);
        const wrong: string[] = []; // one expect at the end: per-value expects made this test slow
        for (let t = 0; t < n; t++) {
          const unpacked = unpackCodes(codes.subarray(t * bpt, (t + 1) * bpt), bits, d);
          for (let j = 0; j < d; j++) {
            const code = warpCodeAt(codes, t * bpt, j, bits);
            const r = res[t * d + j];
            if (code !== unpacked[j]) wrong.push(`token ${t} dim ${j}: code ${code}, bitpack ${unpacked[j]}`);
            if (code > 0 && !(r > codec.cutoffs[j * (B - 1) + code - 1])) wrong.push(`token ${t} dim ${j}: ${r} not above cutoff ${code - 1}`);
            if (code < B - 1 && !(r <= codec.cutoffs[j * (B - 1) + code])) wrong.push(`token ${t} dim ${j}: ${r} above cutoff ${code}`);
          }
          // padding bits of the last byte stay zero
          const used = (d * bits) % 8;
          if (used && codes[t * bpt + bpt - 1] >> used !== 0) wrong.push(`token ${t}: padding bits set`);
        }
        expect(wrong).toEqual([]);
        // equal-mass buckets: every bucket of every dimension is used about n / 2^b times
        const hist = new Uint32Array(d * B);
        for (let t = 0; t < n; t++) for (let j = 0; j < d; j++) hist[j * B + warpCodeAt(codes, t * bpt, j, bits)]++;
        let worst = 0;
        for (let i = 0; i < hist.length; i++) worst = Math.max(worst, Math.abs(hist[i] - n / B));
        expect(worst).toBeLessThanOrEqual(2);
        // more bits, less error; the decode error is bounded by the bucket's spread
        const dec = decodeWarpResiduals(codec, codes, n);
        let err = 0, norm = 0;
        for (let i = 0; i < res.length; i++) {
          err += (res[i] - dec[i]) ** 2;
          norm += res[i] ** 2;
        }
        expect(err / norm).toBeLessThan(bits === 4 ? 0.02 : 0.15);
      });
    }
  }

  it('Float32Sorter orders as Float32Array.prototype.sort does: -0 before +0, infinities, subnormals, duplicates, NaN (the typed sort), a view at an offset', () => {
    const r = rng(41);
    const specials = [0, -0, Infinity, -Infinity, 1e-45, -1e-45, 3.4e38, -3.4e38, 2 ** -126, -(2 ** -126)];
    const values = Float32Array.from({ length: 5000 }, (_, i) => (i % 9 === 0 ? specials[i % specials.length] : (r() - 0.5) * (i % 4 === 0 ? 1e-30 : 1)));
    for (let i = 0; i < 300; i++) values[(i * 37) % values.length] = values[(i * 11) % values.length];
    const bytes = (a: Float32Array) => Array.from(new Uint32Array(a.slice().buffer));
    const sorter = new Float32Sorter(values.length);
    for (const len of [0, 1, 2, 7, 2049, values.length]) {
      const a = values.slice(0, len);
      const b = a.slice().sort();
      sorter.sort(a);
      expect(bytes(a), `length ${len}`).toEqual(bytes(b));
    }
    const withNaN = values.slice(0, 100);
    withNaN[3] = NaN;
    const expected = withNaN.slice().sort();
    sorter.sort(withNaN);
    expect(bytes(withNaN)).toEqual(bytes(expected));
    const backing = values.slice();
    const view = new Float32Array(backing.buffer, 40, 1000);
    const viewSorted = view.slice().sort();
    sorter.sort(view);
    expect(bytes(view)).toEqual(bytes(viewSorted));
    expect(Array.from(backing.subarray(0, 10))).toEqual(Array.from(values.subarray(0, 10)));
    expect(() => sorter.sort(new Float32Array(values.length + 1))).toThrow(/capacity/);
  });

  it('fitWarpCodec: cutoffs are the sorted sample quantiles and weights its bucket means in ascending order (a typed-array sort for reference)', () => {
    const n = 3000;
    // 37 dims: two whole blocks of the columns gathered together (16) and a partial one
    for (const d of [6, 37]) {
    const res = randomResiduals(43, n, d);
    for (const bits of [2, 4] as const) {
      const codec = fitWarpCodec(res, n, d, bits);
      const B = 1 << bits;
      for (let j = 0; j < d; j++) {
        const col = Float32Array.from({ length: n }, (_, i) => res[i * d + j]).sort();
        const cut = Array.from({ length: B - 1 }, (_, k) => col[Math.min(n - 1, Math.floor(((k + 1) / B) * n))]);
        expect(Array.from(codec.cutoffs.subarray(j * (B - 1), (j + 1) * (B - 1)))).toEqual(cut);
        let i = 0;
        for (let k = 0; k < B; k++) {
          let sum = 0;
          let count = 0;
          while (i < n && col[i] <= (k < B - 1 ? cut[k] : Infinity)) {
            sum += col[i++];
            count++;
          }
          expect(codec.weights[j * B + k]).toBe(Math.fround(count > 0 ? sum / count : col[Math.min(n - 1, Math.floor(((k + 0.5) / B) * n))]));
        }
      }
    }
    }
  });

  it('encodeWarpResidualInto gives the codes of the linear bucket scan bit for bit: values on the cutoffs, NaN, infinities, -0, odd dims, a codec whose cutoffs are not ascending', () => {
    /** The reference: #buckets passed by a linear scan, ORed into zeroed bytes (the encoder before its bisection). */
    const linear = (codec: WarpCodec, x: Float32Array, xo: number, centroids: Float32Array | null, co: number, out: Uint8Array, oo: number) => {
      const C = (1 << codec.bits) - 1;
      out.fill(0, oo, oo + warpCodeBytes(codec.dims, codec.bits));
      for (let j = 0; j < codec.dims; j++) {
        const r = centroids ? Math.fround(x[xo + j] - centroids[co + j]) : x[xo + j];
        let b = 0;
        while (b < C && r > codec.cutoffs[j * C + b]) b++;
        out[oo + ((j * codec.bits) >>> 3)] |= b << ((j * codec.bits) & 7);
      }
    };
    const r = rng(47);
    for (const d of [64, 33]) {
      for (const bits of [2, 4] as const) {
        const n = 400;
        const fitted = fitWarpCodec(randomResiduals(45, 2000, d), 2000, d, bits);
        const shuffled: WarpCodec = { ...fitted, cutoffs: fitted.cutoffs.slice().reverse() };
        const C = (1 << bits) - 1;
        const x = Float32Array.from({ length: n * d }, (_, i) => {
          const j = i % d;
          const special = [NaN, Infinity, -Infinity, -0, 0];
          if (i % 9 === 0) return fitted.cutoffs[j * C + (i % C)];
          if (i % 23 === 0) return special[i % special.length];
          return (r() - 0.5) * 0.2;
        });
        const centroids = Float32Array.from({ length: 3 * d }, (_, i) => (i % 5 === 0 ? 0 : (r() - 0.5) * 0.05));
        const bpt = warpCodeBytes(d, bits);
        for (const codec of [fitted, shuffled]) {
          const got = new Uint8Array(n * bpt).fill(0xff);
          const want = new Uint8Array(n * bpt);
          for (let t = 0; t < n; t++) {
            const c = t % 4 === 3 ? null : centroids;
            encodeWarpResidualInto(codec, x, t * d, c, (t % 3) * d, got, t * bpt);
            linear(codec, x, t * d, c, (t % 3) * d, want, t * bpt);
          }
          expect(got).toEqual(want);
        }
      }
    }
  });

  it('residuals are vector minus assigned centroid; the checksum names the codec version', () => {
    const v = Float32Array.from([1, 2, 3, 4]);
    const c = Float32Array.from([0, 0, 1, 1, 0.5, 0.5]);
    expect([...warpResiduals(v, 2, 2, c, Uint32Array.from([1, 2]))]).toEqual([0, 1, 2.5, 3.5]);
    expect(() => warpResiduals(v, 2, 2, c, Uint32Array.from([1, 3]))).toThrow(/assignment\[1\] = 3 is not a centroid \(K = 3\)/);
    const codec = fitWarpCodec(randomResiduals(5, 64, 8), 64, 8, 4);
    const sum = warpCodecChecksum(codec);
    expect(warpCodecChecksum({ ...codec, weights: Float32Array.from(codec.weights) })).toBe(sum);
    const w = Float32Array.from(codec.weights);
    w[3] += 1e-3;
    expect(warpCodecChecksum({ ...codec, weights: w })).not.toBe(sum);
    expect(warpCodecChecksum({ ...codec, bits: 2, cutoffs: codec.cutoffs.subarray(0, 24), weights: codec.weights.subarray(0, 32) })).not.toBe(sum);
  });

  it('rejects bad input, naming the field', () => {
    expect(() => fitWarpCodec(new Float32Array(8), 2, 4, 3)).toThrow(/fitWarpCodec: bits must be 2 or 4, got 3/);
    expect(() => fitWarpCodec(new Float32Array(0), 0, 4, 2)).toThrow(/at least one residual/);
    expect(() => fitWarpCodec(new Float32Array(7), 2, 4, 2)).toThrow(/residuals has length 7, expected n x dims = 8/);
    const codec = fitWarpCodec(randomResiduals(1, 16, 4), 16, 4, 2);
    expect(() => encodeWarpResiduals(codec, new Float32Array(6), 2)).toThrow(/residuals has length 6/);
    expect(() => encodeWarpResiduals({ ...codec, weights: new Float32Array(3) }, new Float32Array(4), 1)).toThrow(/weights has length 3, expected dims x 2\^bits = 16/);
  });
});
