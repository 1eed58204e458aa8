/**
 * The facts the compression evaluation (scripts/eval/compression.ts) and the compressed scoring
 * bench (scripts/bench/score.ts) rely on: how segment bytes split into vector bytes and token ids,
 * the EDEN byte formulas at d = 100, and the rotated-domain identities the bench's ONNX graphs use.
 */
import { describe, expect, it } from 'vitest';
import { CodecSettingsSchema } from '@lateral/shared';
import { createCodec, fitCodec, lloydMax, rademacher, readSegment, signKey, writeSegment, type EdenCodec } from './index';
import { gaussian } from './test-utils';

const eden = (bits: number, layout: 'token' | 'cross', dims?: number) =>
  CodecSettingsSchema.parse({ kind: 'eden', bits, layout, ...(dims ? { dims } : {}) });

function docsOf(lengths: number[], d: number, seed: number) {
  const offsets = new Uint32Array(lengths.length + 1);
  lengths.forEach((m, i) => (offsets[i + 1] = offsets[i] + m));
  const T = offsets[lengths.length];
  return {
    docIds: lengths.map((_, i) => `d${i}`),
    tokenOffsets: offsets,
    tokenIds: Int32Array.from({ length: T }, (_, i) => i % 1000),
    vectors: gaussian(T, d, seed),
    dims: d,
  };
}

describe('compression evaluation accounting', () => {
  it('segment bytes = header + offsets + token ids + doc ids + norms + codes, with the documented EDEN sizes (d = 100)', () => {
    const d = 100;
    const lengths = [64, 1, 0, 37, 180];
    const docs = docsOf(lengths, d, 3);
    const sample = gaussian(400, d, 4);
    for (const [s, perDoc] of [
      [eden(4, 'cross'), (m: number) => Math.ceil((m * 100) / 128) * (16 * 4 + 4)],
      [eden(2, 'cross', 32), (m: number) => Math.ceil((m * 32) / 128) * (16 * 2 + 4)],
      [eden(4, 'token'), (m: number) => m * (128 * 4 / 8 + 4)],
      [eden(3, 'token', 16), (m: number) => Math.ceil((m * 16 * 3) / 8) + 4 * m],
    ] as const) {
      const artifact = fitCodec(s, sample, d, { seed: 9 });
      const bytes = writeSegment(docs, createCodec(s, artifact), { seed: 9 });
      const sizes = readSegment(bytes, 's', artifact).sectionSizes();
      expect(sizes.codes! + sizes.norms!).toBe(lengths.reduce((a, m) => a + perDoc(m), 0));
      expect(sizes.tokenIds).toBe(4 * docs.tokenIds.length);
      expect(sizes.tokenOffsets).toBe(4 * (lengths.length + 1));
      const sections = ['docIds', 'tokenOffsets', 'tokenIds', 'norms', 'codes', 'docVectors', 'metadata'].reduce((a, k) => a + sizes[k]!, 0);
      expect(sizes.header! + sections).toBe(bytes.length);
    }
  });

  it('4-bit token-layout codes read as uint16 words hold 4 codes each (code k in bits 4k..4k+3), as the bench graphs assume', () => {
    const d = 128;
    const docs = docsOf([7], d, 5);
    const codec = createCodec(eden(4, 'token')) as EdenCodec;
    const seed = 11n;
    const enc = codec.encodeDoc(docs.vectors, d, { docId: 'x', seed });
    const words = new Uint16Array(enc.codes.buffer.slice(enc.codes.byteOffset, enc.codes.byteOffset + enc.codes.byteLength));
    const norms = new Float32Array(enc.norms.buffer.slice(enc.norms.byteOffset, enc.norms.byteOffset + enc.norms.byteLength));
    const cent = lloydMax(4).centroids;
    const signs = rademacher(signKey(seed, 0n, 0), d);
    const decoded = codec.decodeDoc(enc, 7, d, { docId: 'x', seed });
    // x^ = Dg H (||x|| / sqrt p) C[X], H normalised: entry (i, j) = (-1)^popcount(i & j) / sqrt p
    for (const t of [0, 3, 6]) {
      const v = Array.from({ length: d }, (_, k) => cent[(words[t * 32 + (k >> 2)] >> (4 * (k & 3))) & 15]);
      for (const i of [0, 1, 77, 127]) {
        let s = 0;
        for (let j = 0; j < d; j++) {
          let b = i & j;
          let parity = 0;
          while (b) {
            parity ^= b & 1;
            b >>= 1;
          }
          s += (parity ? -1 : 1) * v[j];
        }
        expect(decoded[t * d + i]).toBeCloseTo((signs[i] * s * norms[t]) / d, 5);
      }
    }
  });

  it('rotated-domain scores equal dot products with the decoded vectors (token layout, with a fitted mean)', () => {
    const d = 100;
    const s = eden(4, 'token');
    const artifact = fitCodec(s, gaussian(300, d, 6), d, { seed: 2 });
    const codec = createCodec(s, artifact) as EdenCodec;
    const x = gaussian(9, d, 7);
    const q = gaussian(3, d, 8);
    const key = { docId: 'doc', seed: 2n };
    const enc = codec.encodeDoc(x, d, key);
    const dec = codec.decodeDoc(enc, 9, d, key);
    const S = codec.scoreRotated(codec.rotateQuery(q, d, key.seed), enc, 9, d);
    for (let i = 0; i < 3; i++)
      for (let t = 0; t < 9; t++) {
        let dot = 0;
        for (let k = 0; k < d; k++) dot += q[i * d + k] * dec[t * d + k];
        expect(S[i * 9 + t]).toBeCloseTo(dot, 4);
      }
  });
});
