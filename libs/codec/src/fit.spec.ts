import { describe, expect, it } from 'vitest';
import { CodecSettingsSchema, type CodecSettings } from '@lateral/shared';
import {
  CodecArtifactCorruptError,
  createCodec,
  deserializeArtifact,
  fitCodec,
  fitLinear,
  fitPca,
  readSegment,
  SegmentCorruptError,
  serializeArtifact,
  symmetricEigen,
  writeSegment,
} from './index';
import { gaussian, rng } from './test-utils';

const S = (o: Record<string, unknown>): CodecSettings => CodecSettingsSchema.parse(o);

/** n x d data on a planted k-dim subspace (basis rows B, k x d) plus isotropic noise. */
function planted(n: number, d: number, k: number, noise: number, seed: number) {
  const basis = gaussian(k, d, seed);
  const z = gaussian(n, k, seed + 1);
  const e = gaussian(n, d, seed + 2);
  const x = new Float32Array(n * d);
  for (let i = 0; i < n; i++)
    for (let j = 0; j < d; j++) {
      let s = 1 + noise * e[i * d + j]; // offset 1: a non-zero mean to remove
      for (let a = 0; a < k; a++) s += z[i * k + a] * (k - a) * basis[a * d + j];
      x[i * d + j] = s;
    }
  return { x, basis };
}

function relErr(a: Float32Array, b: Float32Array): number {
  let e = 0;
  let n = 0;
  for (let i = 0; i < a.length; i++) {
    e += (a[i] - b[i]) ** 2;
    n += b[i] ** 2;
  }
  return e / n;
}

describe('symmetric eigendecomposition (Jacobi)', () => {
  it('solves a 2 x 2 by hand', () => {
    const { values, vectors } = symmetricEigen(Float64Array.from([2, 1, 1, 2]), 2);
    expect(values[0]).toBeCloseTo(3, 12);
    expect(values[1]).toBeCloseTo(1, 12);
    expect(Math.abs(vectors[0])).toBeCloseTo(Math.SQRT1_2, 12);
    expect(vectors[0] * vectors[1]).toBeGreaterThan(0);
  });
  it('gives A v = lambda v with orthonormal vectors on a random 24 x 24', () => {
    const d = 24;
    const r = rng(4);
    const a = new Float64Array(d * d);
    for (let i = 0; i < d; i++) for (let j = i; j < d; j++) a[i * d + j] = a[j * d + i] = r() - 0.5;
    const { values, vectors } = symmetricEigen(a, d);
    for (let k = 0; k < d; k++) {
      if (k > 0) expect(values[k]).toBeLessThanOrEqual(values[k - 1]);
      for (let i = 0; i < d; i++) {
        let av = 0;
        for (let j = 0; j < d; j++) av += a[i * d + j] * vectors[k * d + j];
        expect(av).toBeCloseTo(values[k] * vectors[k * d + i], 9);
      }
      for (let l = 0; l < d; l++) {
        let dot = 0;
        for (let j = 0; j < d; j++) dot += vectors[k * d + j] * vectors[l * d + j];
        expect(dot).toBeCloseTo(k === l ? 1 : 0, 9);
      }
    }
  });
});

describe('PCA and least squares', () => {
  it('recovers a planted subspace', () => {
    const d = 32;
    const k = 4;
    const { x, basis } = planted(3000, d, k, 0.01, 10);
    const { components, mean } = fitPca(x, 3000, d, k);
    for (let j = 0; j < d; j++) expect(Math.abs(mean[j] - 1)).toBeLessThan(0.5); // sampling noise of a high-variance mean
    for (let a = 0; a < k; a++) {
      const b = basis.subarray(a * d, (a + 1) * d);
      const nb = Math.hypot(...b);
      let proj = 0;
      for (let c = 0; c < k; c++) {
        let dot = 0;
        for (let j = 0; j < d; j++) dot += components[c * d + j] * b[j];
        proj += dot * dot;
      }
      expect(Math.sqrt(proj) / nb).toBeGreaterThan(0.9999);
    }
  });
  it('fits a planted linear map with intercept', () => {
    const n = 500;
    const s = 6;
    const d = 5;
    const u = gaussian(n, s, 20);
    const w = gaussian(s + 1, d, 21);
    const y = new Float32Array(n * d);
    for (let i = 0; i < n; i++)
      for (let j = 0; j < d; j++) {
        let v = w[s * d + j];
        for (let a = 0; a < s; a++) v += u[i * s + a] * w[a * d + j];
        y[i * d + j] = v;
      }
    const got = fitLinear(u, s, y, d, n, 1e-9);
    for (let i = 0; i < w.length; i++) expect(got[i]).toBeCloseTo(w[i], 4);
  });
});

describe('fitted codecs', () => {
  const d = 64;
  const n = 2000;
  const { x } = planted(n, d, 8, 0.05, 30);

  it('EDEN + PCA: round trip, bytes per token = ceil(m c / 128) (16 B + 4), artifact round trip', () => {
    const settings = S({ kind: 'eden', bits: 6, dims: 16, layout: 'cross' });
    const art = fitCodec(settings, x, d, { seed: 7n });
    expect(art.codedDims).toBe(16);
    const restored = deserializeArtifact(serializeArtifact(art));
    expect(restored.checksum).toBe(art.checksum);
    expect(restored.seed).toBe(7n);
    expect(Array.from(restored.components!)).toEqual(Array.from(art.components!));
    const codec = createCodec(settings, restored);
    const m = [100, 7, 0];
    const offsets = Uint32Array.from([0, 100, 107, 107]);
    const vectors = x.subarray(0, 107 * d);
    const seg = writeSegment({ docIds: ['x', 'y', 'z'], tokenOffsets: offsets, tokenIds: new Int32Array(107), vectors, dims: d }, codec);
    const r = readSegment(seg, 'pca', art);
    expect(r.seed).toBe(7n);
    expect(r.codec.codedDims).toBe(16);
    const err = relErr(r.decodeAll(), vectors);
    console.log(`EDEN-6b PCA 64->16 cross on planted rank-8 data: relative error ${err.toExponential(3)}`);
    expect(err).toBeLessThan(0.01);
    expect(r.sectionSizes().codes + r.sectionSizes().norms).toBe(m.reduce((s, l) => s + Math.ceil((l * 16) / 128) * (16 * 6 + 4), 0));
    expect(codec.bytesPerTokenEstimate(d)).toBeCloseTo((16 / 128) * 100, 10);
    // The wrong artifact, or none, is refused with a segment error naming the header.
    const other = fitCodec(settings, x, d, { seed: 8n });
    expect(() => readSegment(seg, 'pca', other)).toThrow(SegmentCorruptError);
    expect(() => readSegment(seg, 'pca')).toThrow(/section "header": codec descriptor unusable: .*needs its artifact/);
  });

  it('artifact corruption is detected', () => {
    const bytes = serializeArtifact(fitCodec(S({ kind: 'eden', dims: 8 }), x, d, { seed: 1 }));
    const r = rng(5);
    for (let c = 0; c < 200; c++) {
      const bad = bytes.slice();
      bad[Math.floor(r() * bad.length)] ^= 1 + Math.floor(r() * 255);
      expect(() => deserializeArtifact(bad)).toThrow(CodecArtifactCorruptError);
      expect(() => deserializeArtifact(bytes.subarray(0, Math.floor(r() * bytes.length)))).toThrow(CodecArtifactCorruptError);
    }
  });

  it('side information: coding only what the static embedding does not predict', () => {
    // Contextual v = A u + b + small context noise: u predicts most of v.
    const s = 12;
    const u = gaussian(n, s, 40);
    const a = gaussian(s + 1, d, 41);
    const noise = gaussian(n, d, 42);
    const v = new Float32Array(n * d);
    for (let i = 0; i < n; i++)
      for (let j = 0; j < d; j++) {
        let t = a[s * d + j] + 0.1 * noise[i * d + j];
        for (let k = 0; k < s; k++) t += u[i * s + k] * a[k * d + j];
        v[i * d + j] = t;
      }
    const withSide = S({ kind: 'eden', bits: 4, dims: 8, sideInfo: true, layout: 'cross' });
    const without = S({ kind: 'eden', bits: 4, dims: 8, layout: 'cross' });
    const artS = fitCodec(withSide, v, d, { seed: 3, staticEmbeddings: u, staticDims: s });
    const artN = fitCodec(without, v, d, { seed: 3 });
    expect(artS.sideDims).toBe(s);
    const T = 200;
    const offsets = Uint32Array.from([0, 120, T]);
    const vectors = v.subarray(0, T * d);
    const side = u.subarray(0, T * s);
    const segS = writeSegment({ docIds: ['p', 'q'], tokenOffsets: offsets, tokenIds: new Int32Array(T), vectors, dims: d, staticEmbeddings: side }, createCodec(withSide, artS));
    const segN = writeSegment({ docIds: ['p', 'q'], tokenOffsets: offsets, tokenIds: new Int32Array(T), vectors, dims: d }, createCodec(without, artN));
    const rS = readSegment(segS, 'side', artS, { staticEmbeddings: (i) => side.subarray(offsets[i] * s, offsets[i + 1] * s) });
    const errS = relErr(rS.decodeAll(), vectors);
    const errN = relErr(readSegment(segN, 'plain', artN).decodeAll(), vectors);
    console.log(`side info (AESI-like linear) 64->8 dims, 4 bits: relative error ${errS.toExponential(3)} vs ${errN.toExponential(3)} without`);
    expect(errS).toBeLessThan(errN / 10);
    expect(rS.sectionSizes().codes).toBe(readSegment(segN, 'plain', artN).sectionSizes().codes);
    expect(() => readSegment(segS, 'side', artS).decodeDoc(0)).toThrow(/staticEmbeddings/);
  });

  it('PLAID-style residual: centroid id + B-bit residual, 4 + c B / 8 bytes per token', () => {
    for (const bits of [1, 2, 4]) {
      const settings = S({ kind: 'residual', bits });
      const art = fitCodec(settings, x, d, { seed: 11, centroids: 32 });
      expect(art.centroids!.length).toBe(32 * d);
      const codec = createCodec(settings, art);
      const T = 300;
      const vectors = x.subarray(0, T * d);
      const seg = writeSegment({ docIds: ['r'], tokenOffsets: Uint32Array.from([0, T]), tokenIds: new Int32Array(T), vectors, dims: d }, codec);
      const r = readSegment(seg, 'res', art);
      const err = relErr(r.decodeAll(), vectors);
      console.log(`residual ${bits}-bit, K=32, d=64: relative error ${err.toExponential(3)}, ${r.sectionSizes().codes / T} B/token`);
      expect(r.sectionSizes().codes).toBe(T * 4 + Math.ceil((T * d * bits) / 8));
      expect(codec.bytesPerTokenEstimate(d)).toBe(4 + (d * bits) / 8);
      expect(err).toBeLessThan(bits === 1 ? 0.2 : bits === 2 ? 0.1 : 0.02);
    }
    expect(() => createCodec(S({ kind: 'residual' }))).toThrow(/needs a fitted artifact/);
  });

  it('fuzz: corrupted fitted-codec segments throw SegmentCorruptError', () => {
    const settings = S({ kind: 'eden', bits: 3, dims: 8, norms: 'fp16' });
    const art = fitCodec(settings, x, d, { seed: 2 });
    const seg = writeSegment(
      { docIds: ['a', 'b'], tokenOffsets: Uint32Array.from([0, 5, 9]), tokenIds: new Int32Array(9), vectors: x.subarray(0, 9 * d), dims: d, metadata: [{ a: 1 }, null] },
      createCodec(settings, art),
    );
    const r = rng(6);
    for (let c = 0; c < 500; c++) {
      const bad = seg.slice();
      bad[Math.floor(r() * bad.length)] ^= 1 + Math.floor(r() * 255);
      expect(() => readSegment(bad, 'f', art)).toThrow(SegmentCorruptError);
      expect(() => readSegment(seg.subarray(0, Math.floor(r() * seg.length)), 'f', art)).toThrow(SegmentCorruptError);
    }
  });
});
