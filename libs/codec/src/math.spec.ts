import { describe, expect, it } from 'vitest';
import { fnv1a64, rademacher, SplitMix64 } from './prng';
import { fwht } from './hadamard';
import { erf, erfc, lloydMax } from './lloyd-max';
import { packCodes, packedBytes, unpackCodes } from './bitpack';
import { rng } from './test-utils';

describe('prng', () => {
  it('SplitMix64 matches the reference outputs for seed 1234567', () => {
    const g = new SplitMix64(1234567n);
    expect([g.next(), g.next(), g.next(), g.next(), g.next()]).toEqual([
      6457827717110365317n, 3203168211198807973n, 9817491932198370423n, 4593380528125082431n, 16408922859458223821n,
    ]);
  });
  it('FNV-1a 64 matches known values', () => {
    expect(fnv1a64('')).toBe(0xcbf29ce484222325n);
    expect(fnv1a64('a')).toBe(0xaf63dc4c8601ec8cn);
    expect(fnv1a64('foobar')).toBe(0x85944171f73967e8n);
  });
  it('Rademacher signs are deterministic, balanced and follow the bits LSB first', () => {
    const a = rademacher(99n, 1000);
    expect(Array.from(rademacher(99n, 1000))).toEqual(Array.from(a));
    const sum = a.reduce((s, v) => s + v, 0);
    expect(Math.abs(sum)).toBeLessThan(100);
    const z = new SplitMix64(99n).next();
    for (let k = 0; k < 64; k++) expect(a[k]).toBe((z >> BigInt(k)) & 1n ? -1 : 1);
  });
});

describe('Walsh-Hadamard', () => {
  it('matches H_4 by hand', () => {
    const x = Float64Array.from([1, 2, 3, 4]);
    fwht(x);
    expect(Array.from(x)).toEqual([5, -1, -2, 0]);
  });
  it('is an involution and preserves the norm', () => {
    const r = rng(3);
    for (const n of [1, 2, 8, 128, 1024]) {
      const x = Float64Array.from({ length: n }, () => r() - 0.5);
      const y = x.slice();
      fwht(y);
      const nx = x.reduce((s, v) => s + v * v, 0);
      const ny = y.reduce((s, v) => s + v * v, 0);
      expect(ny).toBeCloseTo(nx, 10);
      fwht(y);
      for (let i = 0; i < n; i++) expect(y[i]).toBeCloseTo(x[i], 12);
    }
    expect(() => fwht(new Float64Array(6))).toThrow(/power of two, got 6/);
  });
});

describe('erf', () => {
  it('matches tabulated values', () => {
    expect(erf(0)).toBe(0);
    expect(erf(0.5)).toBeCloseTo(0.5204998778130465, 14);
    expect(erf(1)).toBeCloseTo(0.8427007929497149, 14);
    expect(erf(-2)).toBeCloseTo(-0.9953222650189527, 14);
    expect(erfc(3) / 2.209049699858544e-5).toBeCloseTo(1, 12);
    expect(erfc(5) / 1.5374597944280349e-12).toBeCloseTo(1, 12);
    expect(erfc(2.4999999) / erfc(2.5)).toBeCloseTo(1, 5); // continuous across the switch
  });
});

describe('Lloyd-Max centroids for N(0,1)', () => {
  const spec: Record<number, number[]> = {
    1: [0.7979],
    2: [0.4528, 1.5104],
    3: [0.2451, 0.756, 1.3439, 2.1519],
    4: [0.1284, 0.388, 0.6568, 0.9423, 1.2562, 1.618, 2.069, 2.7326],
    5: [0.0659, 0.1981, 0.3314, 0.4667, 0.6049, 0.7471, 0.8946, 1.0488, 1.2118, 1.3863, 1.5762, 1.7872, 2.0287, 2.3177, 2.6911, 3.2607],
    6: [
      0.0334, 0.1003, 0.1673, 0.2346, 0.3022, 0.3703, 0.4389, 0.5083, 0.5785, 0.6497, 0.7219, 0.7955, 0.8705, 0.9472, 1.0257, 1.1065, 1.1897, 1.2758, 1.3651,
      1.4583, 1.5558, 1.6586, 1.7675, 1.884, 2.0096, 2.1468, 2.299, 2.4713, 2.6723, 2.9174, 3.2404, 3.7441,
    ],
  };
  it.each([1, 2, 3, 4, 5, 6])('B=%i agrees with SPEC section 2 to 4 digits', (b) => {
    const t = lloydMax(b);
    const pos = Array.from(t.centroids.subarray(1 << (b - 1)));
    expect(pos.length).toBe(spec[b].length);
    pos.forEach((c, k) => expect(Math.abs(c - spec[b][k]), `B=${b} k=${k}: ${c}`).toBeLessThanOrEqual(0.00006));
  });
  it('has the known MSE per coordinate (B=1: 1 - 2/pi, B=6: 6.44e-4)', () => {
    expect(lloydMax(1).mse).toBeCloseTo(1 - 2 / Math.PI, 12);
    expect(lloydMax(2).mse).toBeCloseTo(0.1175, 4);
    expect(lloydMax(3).mse).toBeCloseTo(0.03455, 4);
    expect(lloydMax(6).mse).toBeGreaterThan(6.4e-4);
    expect(lloydMax(6).mse).toBeLessThan(6.48e-4);
  });
  it('B=7 and B=8 converge, symmetric and ascending', () => {
    for (const b of [7, 8]) {
      const t = lloydMax(b);
      expect(t.centroids.length).toBe(1 << b);
      for (let k = 1; k < t.centroids.length; k++) expect(t.centroids[k]).toBeGreaterThan(t.centroids[k - 1]);
      expect(t.centroids[0]).toBeCloseTo(-t.centroids[t.centroids.length - 1], 12);
      expect(t.mse).toBeLessThan(lloydMax(b - 1).mse / 3.5);
      console.log(`Lloyd-Max B=${b}: mse ${t.mse.toExponential(4)}, ${t.iterations} iterations`);
    }
  });
});

describe('bit packing', () => {
  it.each([1, 2, 3, 4, 5, 6, 7, 8])('round-trips %i-bit codes at odd offsets', (b) => {
    const r = rng(b);
    const n = 37;
    const codes = Uint8Array.from({ length: n }, () => Math.floor(r() * (1 << b)));
    const out = new Uint8Array(packedBytes(n + 3, b) + 1);
    packCodes(codes, b, out, 3 * b);
    expect(Array.from(unpackCodes(out, b, n, 3 * b))).toEqual(Array.from(codes));
  });
  it('packs LSB first', () => {
    const out = new Uint8Array(2);
    packCodes(Uint8Array.from([1, 2, 3, 1]), 3, out);
    expect(Array.from(out)).toEqual([0b11010001, 0b00000010]);
  });
});
