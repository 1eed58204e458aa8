import { describe, expect, it } from 'vitest';
import { CodecSettingsSchema } from '@lateral/shared';
import { edenDecodeBlock, edenEncodeBlock } from './eden';
import { lloydMax } from './lloyd-max';
import { rademacher } from './prng';
import { createCodec, crc32c, EdenCodec, quantizeRotatedQuery, readSegment, scoreImage, unpackCodes, writeSegment, type DocKey } from './index';
import { gaussian } from './test-utils';

const settings = (o: Record<string, unknown>) => CodecSettingsSchema.parse({ kind: 'eden', ...o });

describe('EDEN block quantizer (SPEC section 5 item 8)', () => {
  it.each([1, 2, 3, 4, 5, 6, 7, 8])('B=%i: relative MSE per coordinate on Gaussian blocks matches the Lloyd-Max MSE', (b) => {
    const d = 128;
    const blocks = 400;
    const x = gaussian(blocks, d, 100 + b);
    const t = lloydMax(b);
    const codes = new Uint8Array(d);
    let err = 0;
    let energy = 0;
    for (let k = 0; k < blocks; k++) {
      const signs = rademacher(BigInt(k * 7919 + b), d);
      const blk = x.subarray(k * d, (k + 1) * d);
      const norm = edenEncodeBlock(blk, signs, t, codes);
      const back = edenDecodeBlock(codes, norm, signs, t);
      for (let i = 0; i < d; i++) {
        err += (back[i] - blk[i]) ** 2;
        energy += blk[i] ** 2;
      }
    }
    const mse = err / energy; // per coordinate of a unit-variance input
    console.log(`EDEN B=${b} d=128: measured ${mse.toExponential(3)} vs Lloyd-Max ${t.mse.toExponential(3)} (ratio ${(mse / t.mse).toFixed(3)})`);
    expect(mse / t.mse).toBeGreaterThan(0.9);
    expect(mse / t.mse).toBeLessThan(1.1);
  });

  it('round-trips a zero block to exactly zero', () => {
    const signs = rademacher(5n, 64);
    const codes = new Uint8Array(64).fill(9);
    const norm = edenEncodeBlock(new Float64Array(64), signs, lloydMax(4), codes);
    expect(norm).toBe(0);
    expect(Array.from(edenDecodeBlock(codes, norm, signs, lloydMax(4)))).toEqual(new Array(64).fill(0));
  });
});

describe('EdenCodec', () => {
  const dims = 96; // not a power of two: token layout pads to 128
  const m = 13;
  const x = gaussian(m, dims, 1);
  const key: DocKey = { docId: 'doc-1', seed: 12345n };

  it('is deterministic for a seed, bit-exact across runs, and changes with the seed (and, cross layout, the doc id)', () => {
    for (const layout of ['token', 'cross'] as const) {
      const codec = createCodec(settings({ bits: 4, layout }));
      const a = codec.encodeDoc(x, dims, key);
      const b = createCodec(settings({ bits: 4, layout })).encodeDoc(x, dims, key);
      expect(a.codes).toEqual(b.codes);
      expect(a.norms).toEqual(b.norms);
      expect(codec.encodeDoc(x, dims, { ...key, seed: 12346n }).codes).not.toEqual(a.codes);
      if (layout === 'cross') expect(codec.encodeDoc(x, dims, { ...key, docId: 'doc-2' }).codes).not.toEqual(a.codes);
      // Pinned: any change to the PRNG, Hadamard, centroids or packing changes these.
      expect([crc32c(a.codes), crc32c(a.norms)]).toEqual(layout === 'token' ? PINNED.token : PINNED.cross);
    }
  });

  it.each([
    ['token', 'fp32'],
    ['token', 'fp16'],
    ['cross', 'fp32'],
    ['cross', 'fp16'],
  ] as const)('round-trips through a segment (%s layout, %s norms) with the expected error and bytes', (layout, norms) => {
    const bits = 5;
    const codec = createCodec(settings({ bits, layout, norms }));
    const lengths = [13, 0, 1, 40];
    const offsets = new Uint32Array(5);
    lengths.forEach((l, i) => (offsets[i + 1] = offsets[i] + l));
    const T = offsets[4];
    const v = gaussian(T, dims, 2);
    const bytes = writeSegment({ docIds: ['a', 'b', 'c', 'd'], tokenOffsets: offsets, tokenIds: new Int32Array(T), vectors: v, dims }, codec, { seed: 77n });
    const r = readSegment(bytes, 'eden');
    expect(r.codec).toEqual(codec.descriptor);
    const back = r.decodeAll();
    let err = 0;
    let energy = 0;
    for (let i = 0; i < v.length; i++) {
      err += (back[i] - v[i]) ** 2;
      energy += v[i] ** 2;
    }
    // Token layout: a block is 96 real + 32 zero-padded coordinates; the rotation spreads the error
    // evenly over all 128, so only 96/128 of it lands on the real coordinates.
    const expected = lloydMax(bits).mse * (layout === 'token' ? 96 / 128 : 1);
    expect(err / energy).toBeLessThan(expected * 1.25);
    expect(err / energy).toBeGreaterThan(expected * 0.75);
    const nb = norms === 'fp32' ? 4 : 2;
    const perDoc = lengths.map((l) => (layout === 'cross' ? Math.ceil((l * dims) / 128) * (16 * bits + nb) : Math.ceil((l * 128 * bits) / 8) + l * nb));
    expect(r.sectionSizes().codes + r.sectionSizes().norms).toBe(perDoc.reduce((s, n) => s + n, 0));
    if (layout === 'cross' && norms === 'fp32') expect(perDoc[3]).toBe(Math.ceil((40 * 96) / 128) * (16 * bits + 4)); // SPEC formula
    expect(r.decodeDoc(1).length).toBe(0);
  });

  it('scores in the rotated domain exactly like decoded vectors (token layout)', () => {
    const codec = createCodec(settings({ bits: 3, layout: 'token' })) as EdenCodec;
    const enc = codec.encodeDoc(x, dims, key);
    const decoded = codec.decodeDoc(enc, m, dims, key);
    const q = gaussian(5, dims, 9);
    const s = codec.scoreRotated(codec.rotateQuery(q, dims, key.seed), enc, m, dims);
    for (let i = 0; i < 5; i++)
      for (let t = 0; t < m; t++) {
        let dot = 0;
        for (let j = 0; j < dims; j++) dot += q[i * dims + j] * decoded[t * dims + j];
        expect(s[i * m + t]).toBeCloseTo(dot, 3);
      }
    expect(() => (createCodec(settings({ layout: 'cross' })) as EdenCodec).rotateQuery(q, dims, key.seed)).toThrow(/token layout/);
  });

  it('shares one rotation per collection seed in the token layout: the codes do not depend on the document id', () => {
    const codec = createCodec(settings({ bits: 4, layout: 'token' })) as EdenCodec;
    const a = codec.encodeDoc(x, dims, { docId: 'a', seed: key.seed });
    const b = codec.encodeDoc(x, dims, { docId: 'another id', seed: key.seed });
    expect(Buffer.from(b.codes).equals(Buffer.from(a.codes))).toBe(true);
    const c = codec.encodeDoc(x, dims, { docId: 'a', seed: key.seed ^ 1n });
    expect(Buffer.from(c.codes).equals(Buffer.from(a.codes))).toBe(false);
    expect(codec.descriptor.rotation).toBe('collection');
  });

  it.each([1, 2, 3, 4, 5, 6, 8])('scores from the int8 rotated image within the rounding bound (B = %i)', (bits) => {
    const codec = createCodec(settings({ bits, layout: 'token' })) as EdenCodec;
    const enc = codec.encodeDoc(x, dims, key);
    const p = codec.paddedDims(dims);
    const image = new Uint8Array(m * p);
    const scales = new Float32Array(m);
    codec.rotatedImage(enc, m, dims, image, scales);
    const q = gaussian(5, dims, 11);
    const rq = codec.rotateQuery(q, dims, key.seed);
    const qq = quantizeRotatedQuery(rq, p);
    const approx = scoreImage(qq, image, scales, m);
    const exact = codec.scoreRotated(rq, enc, m, dims);
    const S = codec.imageScale;
    const norms = new Float32Array(enc.norms.buffer.slice(enc.norms.byteOffset, enc.norms.byteOffset + enc.norms.byteLength));
    const cent = lloydMax(bits).centroids;
    const codes = new Uint8Array(p);
    for (let i = 0; i < 5; i++)
      for (let t = 0; t < m; t++) {
        // |error| <= (||z|| / sqrt p) (qscale / 2 sum |C[X_k]| + sum |qscale q8_k| / (2 S)), plus fp32 rounding
        unpackCodes(enc.codes, bits, p, t * p * bits, codes);
        let b = 0;
        for (let k = 0; k < p; k++) b += (qq.qscale[i] / 2) * Math.abs(cent[codes[k]]) + Math.abs(qq.qscale[i] * qq.q8[i * p + k]) / (2 * S);
        const bound = (norms[t] / Math.sqrt(p)) * b * (1 + 1e-6) + 1e-5;
        expect(Math.abs(approx[i * m + t] - exact[i * m + t])).toBeLessThanOrEqual(bound);
      }
    expect(() => (createCodec(settings({ layout: 'cross' })) as EdenCodec).rotatedImage(enc, m, dims, image, scales)).toThrow(/token layout/);
    // The same image at an unaligned offset (the word-at-a-time path cannot be used there).
    const shifted = new Uint8Array(m * p + 1).subarray(1);
    codec.rotatedImage(enc, m, dims, shifted, new Float32Array(m));
    expect(Buffer.from(shifted).equals(Buffer.from(image))).toBe(true);
    // and the generic unpacking reference
    for (let t = 0; t < m; t++) {
      unpackCodes(enc.codes, bits, p, t * p * bits, codes);
      for (let k = 0; k < p; k++) expect(image[t * p + k]).toBe(128 + Math.round(cent[codes[k]] * S));
    }
  });

  it('batch encode / decode equals the per-document pair', () => {
    for (const layout of ['token', 'cross'] as const) {
      const codec = createCodec(settings({ bits: 3, layout }));
      const offsets = Uint32Array.from([0, 4, 4, 13]);
      const keys = ['a', 'b', 'c'].map((docId) => ({ docId, seed: 3n }));
      const enc = codec.encode(x, offsets, dims, keys);
      const all = codec.decode(enc, offsets, dims, keys);
      const last = codec.decodeDoc(codec.encodeDoc(x.subarray(4 * dims), dims, keys[2]), 9, dims, keys[2]);
      expect(Array.from(all.subarray(4 * dims))).toEqual(Array.from(last));
    }
  });

  it('decodes all-zero tokens to zero in both layouts', () => {
    for (const layout of ['token', 'cross'] as const) {
      const codec = createCodec(settings({ bits: 2, layout }));
      const z = new Float32Array(3 * 128);
      const back = codec.decodeDoc(codec.encodeDoc(z, 128, key), 3, 128, key);
      expect(Array.from(back).every((v) => v === 0)).toBe(true);
    }
  });
});

const PINNED = { token: [1038173054, 3655281934], cross: [2271885564, 25858227] };
