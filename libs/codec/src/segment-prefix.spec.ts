import { describe, expect, it } from 'vitest';
import { CodecSettingsSchema, type CodecSettings } from '@lateral/shared';
import { createCodec, decodePrefixRows, fitCodec, prefixRowBytes, prefixSectionBytes, prefixStarts, readSegment, SegmentCopier, SegmentCorruptError, segmentSectionOffsets, splitPrefixSection, writeSegment } from './index';
import { gaussian, rng } from './test-utils';

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

/**
 * The prefix section (format v2, `PFXV`): ME-BERT's first rows of each document in the codec's
 * own codes (the bytes the code and norm sections hold for them), for codecs whose rows code on
 * their own; the others are written in format v1 whatever prefixRows asks.
 */
describe('prefix section (format v2)', () => {
  const ids = lengths.map((_, i) => `doc-${i}`);
  const M = 3;
  const rowwise = new Set(['fp32', 'fp16', 'int8', 'eden token 4-bit', 'eden token 3-bit, PCA to 8 dims, fp16 norms', 'eden token 5-bit with side information']);

  for (const [name, raw] of cases)
    it(`holds the first rows' codes and norms, which decode as the code sections do: ${name}`, () => {
      const settings = CodecSettingsSchema.parse(raw);
      const side = settings.sideInfo ? statics(tokenIds) : undefined;
      const artifact = fitCodec(settings, vectors, d, { seed: 9n, staticEmbeddings: side, staticDims: side ? S : undefined, centroids: 4 });
      const codec = createCodec(settings, artifact);
      const docs = { docIds: ids, tokenOffsets, tokenIds, vectors, dims: d, staticEmbeddings: side, docVectors: gaussian(lengths.length, d, 5) };
      const opts = side ? { staticEmbeddings: (_doc: number, t: Int32Array) => statics(t) } : {};
      const v1 = writeSegment(docs, codec, { docVectors: 'fp16' });
      const v2 = writeSegment(docs, codec, { docVectors: 'fp16', prefixRows: M });
      const view = (b: Uint8Array) => new DataView(b.buffer, b.byteOffset, b.byteLength);
      expect([view(v1).getUint16(4, true), view(v1).getUint8(7), view(v1).getUint16(32, true)]).toEqual([1, 0, 7]);
      const r1 = readSegment(v1, 'v1', artifact, opts);
      expect([r1.prefixRows, r1.prefix]).toEqual([0, null]);
      if (!rowwise.has(name)) {
        // No prefix of a document's bytes decodes on its own: format v1, byte for byte.
        expect(prefixRowBytes(codec, d)).toBeNull();
        expect(Buffer.from(v2).equals(Buffer.from(v1))).toBe(true);
        return;
      }
      const rb = prefixRowBytes(codec, d)!;
      expect(rb).toEqual(codec.docBytes(1, d));
      expect([view(v2).getUint16(4, true), view(v2).getUint8(7), view(v2).getUint16(32, true)]).toEqual([2, M, 8]);
      const r2 = readSegment(v2, 'v2', artifact, opts);
      const s = r2.prefix!;
      expect([r2.prefixRows, s.rows]).toEqual([M, M]);
      const ks = lengths.map((len) => Math.min(M, len));
      expect(Array.from(s.start)).toEqual(ks.reduce((acc, k) => [...acc, acc[acc.length - 1] + k], [0]));
      expect(Array.from(prefixStarts(tokenOffsets, M))).toEqual(Array.from(s.start));
      // The bytes: each document's first k rows of codes, then of norms, as its code sections hold them.
      for (let i = 0; i < lengths.length; i++) {
        const e = r1.encodedDoc(i);
        const a = s.start[i];
        expect(Buffer.from(s.codes.subarray(a * rb.codes, (a + ks[i]) * rb.codes)).equals(Buffer.from(e.codes.subarray(0, ks[i] * rb.codes)))).toBe(true);
        expect(Buffer.from(s.norms.subarray(a * rb.norms, (a + ks[i]) * rb.norms)).equals(Buffer.from(e.norms.subarray(0, ks[i] * rb.norms)))).toBe(true);
        // Decoded from the section: the code sections' first rows, bit for bit.
        for (const m of [1, 2, M]) {
          const sideRows = side ? statics(tokenIds.subarray(tokenOffsets[i], tokenOffsets[i + 1])) : undefined;
          expect(decodePrefixRows(codec, s, i, m, d, { docId: ids[i], seed: r2.seed }, sideRows, S), `doc ${i}, m ${m}`).toEqual(r1.decodeDocPrefix(i, m));
        }
      }
      // Its size: the section's rows' share of the coded bytes (sum k_i / T of codes + norms).
      const sizes = r2.sectionSizes();
      const rows = ks.reduce((x, y) => x + y, 0);
      expect(sizes.prefixCodes).toBe(rows * (rb.codes + rb.norms));
      expect(sizes.prefixCodes).toBe(prefixSectionBytes(tokenOffsets, M, rb));
      expect(sizes.prefixCodes / (sizes.codes + sizes.norms)).toBeCloseTo(rows / T, 10);
      expect(v2.byteLength - v1.byteLength).toBe(sizes.prefixCodes + 16);
      // At the offset segmentSectionOffsets gives (what a scorer reads by position).
      const off = segmentSectionOffsets(sizes);
      expect(off.prefixCodes + sizes.prefixCodes).toBe(v2.byteLength);
      const split = splitPrefixSection(v2.subarray(off.prefixCodes), tokenOffsets, M, rb);
      expect(Buffer.from(split.codes).equals(Buffer.from(s.codes))).toBe(true);
      expect(Buffer.from(split.norms).equals(Buffer.from(s.norms))).toBe(true);
      expect(() => splitPrefixSection(v2.subarray(off.prefixCodes + 1), tokenOffsets, M, rb)).toThrow(RangeError);
      // Everything else reads as from v1.
      expect(Array.from(r2.decodeAll())).toEqual(Array.from(r1.decodeAll()));
      expect(Array.from(r2.docVectors!)).toEqual(Array.from(r1.docVectors!));
      expect(r1.sectionSizes().prefixCodes).toBeUndefined();
      expect(segmentSectionOffsets(r1.sectionSizes()).metadata + r1.sectionSizes().metadata).toBe(v1.byteLength);
    });

  it('refuses prefixRows outside 0..64 (writer and copier)', () => {
    const codec = createCodec(CodecSettingsSchema.parse({ kind: 'fp16' }));
    const docs = { docIds: ids, tokenOffsets, tokenIds, vectors, dims: d };
    for (const bad of [-1, 65, 1.5]) {
      expect(() => writeSegment(docs, codec, { prefixRows: bad })).toThrow(RangeError);
      expect(() => new SegmentCopier({ prefixRows: bad })).toThrow(RangeError);
    }
  });

  it('every flipped byte and every truncation of a v2 segment throws SegmentCorruptError naming a section', () => {
    const codec = createCodec(CodecSettingsSchema.parse({ kind: 'int8', norms: 'fp16' }));
    const small = writeSegment({ docIds: ['a', 'b', 'c'], tokenOffsets: Uint32Array.of(0, 2, 2, 7), tokenIds: Int32Array.from({ length: 7 }, (_, t) => t), vectors: gaussian(7, 4, 3), dims: 4 }, codec, { prefixRows: 4 });
    expect(readSegment(small, 'ok').prefixRows).toBe(4);
    for (let at = 0; at < small.length; at++) {
      const bad = small.slice();
      bad[at] ^= 0x80;
      expect(() => readSegment(bad, 'x'), `flip at ${at}`).toThrow(SegmentCorruptError);
    }
    for (let len = 0; len < small.length; len++) expect(() => readSegment(small.subarray(0, len), 'x'), `cut at ${len}`).toThrow(SegmentCorruptError);
    // The section's own checksum names it.
    const off = segmentSectionOffsets(readSegment(small, 'ok').sectionSizes()).prefixCodes;
    const bad = small.slice();
    bad[off + 3] ^= 1;
    expect(() => readSegment(bad, 'seg')).toThrow(/section "prefixCodes": checksum mismatch/);
  });

  it("SegmentCopier: makes the section from each document's codes, whether its input held one or not; the merged bytes equal writing the kept documents", () => {
    const settings = CodecSettingsSchema.parse({ kind: 'eden', bits: 4 });
    const artifact = fitCodec(settings, gaussian(400, d, 3), d, { seed: 11n });
    const eden = createCodec(settings, artifact);
    const r = rng(7);
    const make = (lens: number[], seed: number) => {
      const off = Uint32Array.from([0, ...lens.map((_, i) => lens.slice(0, i + 1).reduce((a, b) => a + b, 0))]);
      const n = off[lens.length];
      return { docIds: lens.map((_, i) => `s${seed}-${i}`), tokenOffsets: off, tokenIds: Int32Array.from({ length: n }, () => Math.floor(r() * 1000)), vectors: gaussian(n, d, seed), dims: d };
    };
    const a = make([5, 0, 2, 9], 31);
    const b = make([1, 6, 4], 32);
    const old = readSegment(writeSegment(a, eden), 'a-v1', artifact); // written before prefix sections
    const fresh = readSegment(writeSegment(b, eden, { prefixRows: 2 }), 'b-v2', artifact); // a narrower section
    const keepA = [0, 1, 3];
    const keepB = [1, 2];
    const copier = new SegmentCopier({ prefixRows: M });
    copier.append(old, keepA);
    copier.append(fresh, keepB);
    const merged = copier.finish();
    const pick = (x: typeof a, keep: number[]) => keep.map((i) => ({ id: x.docIds[i], ids: x.tokenIds.subarray(x.tokenOffsets[i], x.tokenOffsets[i + 1]), v: x.vectors.subarray(x.tokenOffsets[i] * d, x.tokenOffsets[i + 1] * d) }));
    const kept = [...pick(a, keepA), ...pick(b, keepB)];
    const offs = [0];
    for (const k of kept) offs.push(offs[offs.length - 1] + k.ids.length);
    const direct = writeSegment(
      { docIds: kept.map((k) => k.id), tokenOffsets: Uint32Array.from(offs), tokenIds: Int32Array.from(kept.flatMap((k) => [...k.ids])), vectors: Float32Array.from(kept.flatMap((k) => [...k.v])), dims: d },
      eden,
      { prefixRows: M },
    );
    expect(readSegment(merged, 'merged', artifact).prefixRows).toBe(M);
    expect(Buffer.from(merged).equals(Buffer.from(direct))).toBe(true);
    // Without prefixRows the copier writes v1, whatever its inputs hold.
    const plain = new SegmentCopier();
    plain.append(fresh, [0, 2]);
    const v1 = readSegment(plain.finish(), 'plain', artifact);
    expect([v1.prefixRows, v1.version]).toEqual([0, 1]);
    // A codec whose rows do not code on their own (EDEN cross): v1 though prefixRows is asked for.
    const cs = CodecSettingsSchema.parse({ kind: 'eden', bits: 4, layout: 'cross' });
    const cart = fitCodec(cs, gaussian(400, d, 3), d, { seed: 11n });
    const cross = readSegment(writeSegment(b, createCodec(cs, cart), { prefixRows: M }), 'cross', cart);
    const cc = new SegmentCopier({ prefixRows: M });
    cc.append(cross, [0, 1, 2]);
    expect(readSegment(cc.finish(), 'cross-merged', cart).version).toBe(1);
  });
});
