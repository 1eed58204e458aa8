import { describe, expect, it } from 'vitest';
import { CodecSettingsSchema, type CodecSettings } from '@lateral/shared';
import { createCodec, fitCodec, readSegment, writeSegment } from './index';
import { gaussian } from './test-utils';

/**
 * SegmentReader.decodeDocPrefix(i, m) (ME-BERT reads the first m vectors of each document) must
 * equal the first min(m, tokens_i) rows of decodeDoc(i) for every codec: EDEN's token layout
 * decodes only those tokens (with side information, their static rows), the others slice the
 * whole document (a residual segment's residual codes start after all of the document's
 * centroid ids, so a prefix cannot be decoded on its own).
 */
const d = 12;
const S = 5; // static dims
const lengths = [0, 1, 3, 7, 20];
const T = lengths.reduce((a, b) => a + b, 0);
const tokenOffsets = Uint32Array.from([0, ...lengths.map((_, i) => lengths.slice(0, i + 1).reduce((a, b) => a + b, 0))]);
const tokenIds = Int32Array.from({ length: T }, (_, t) => 10 + ((t * 7) % 13));
const vectors = gaussian(T, d, 21);
const staticRow = (id: number) => Float32Array.from({ length: S }, (_, k) => Math.sin(id * (k + 1)));
const statics = (ids: Int32Array) => {
  const out = new Float32Array(ids.length * S);
  ids.forEach((id, t) => out.set(staticRow(id), t * S));
  return out;
};

const cases: [string, Partial<CodecSettings>][] = [
  ['fp32', { kind: 'fp32' }],
  ['fp16', { kind: 'fp16' }],
  ['int8', { kind: 'int8', norms: 'fp16' }],
  ['eden token 4-bit', { kind: 'eden', bits: 4 }],
  ['eden token 3-bit, PCA to 8 dims, fp16 norms', { kind: 'eden', bits: 3, dims: 8, norms: 'fp16' }],
  ['eden token 5-bit with side information', { kind: 'eden', bits: 5, sideInfo: true }],
  ['eden cross 4-bit', { kind: 'eden', bits: 4, layout: 'cross' }],
  ['residual 2-bit', { kind: 'residual', bits: 2 }],
];

describe('SegmentReader.decodeDocPrefix', () => {
  for (const [name, raw] of cases)
    it(`equals the first rows of decodeDoc: ${name}`, () => {
      const settings = CodecSettingsSchema.parse(raw);
      const side = settings.sideInfo ? statics(tokenIds) : undefined;
      const artifact = fitCodec(settings, vectors, d, { seed: 9n, staticEmbeddings: side, staticDims: side ? S : undefined, centroids: 4 });
      const bytes = writeSegment(
        { docIds: lengths.map((_, i) => `doc-${i}`), tokenOffsets, tokenIds, vectors, dims: d, staticEmbeddings: side },
        createCodec(settings, artifact),
      );
      const r = readSegment(bytes, name, artifact, side ? { staticEmbeddings: (_doc, ids) => statics(ids) } : {});
      for (let i = 0; i < lengths.length; i++) {
        const whole = r.decodeDoc(i);
        for (const m of [0, 1, 2, 4, 7, 25]) {
          const k = Math.min(m, lengths[i]);
          expect(r.decodeDocPrefix(i, m), `doc ${i}, m ${m}`).toEqual(whole.slice(0, k * d));
        }
      }
      expect(() => r.decodeDocPrefix(0, -1)).toThrow(RangeError);
      expect(() => r.decodeDocPrefix(lengths.length, 1)).toThrow(RangeError);
    });
});
