import v8 from 'node:v8';
import vm from 'node:vm';
import { describe, expect, it } from 'vitest';
import { createCodec, fitCodec, readSegment, SegmentCopier, SegmentCorruptError, writeSegment, type SegmentDocs, type SegmentReader } from './index';
import { CodecSettingsSchema } from '@lateral/shared';
import { gaussian, rng } from './test-utils';
import { roundToHalf } from './float16';

function makeDocs(lengths: number[], dims: number, seed: number, withExtras = true): SegmentDocs {
  const offsets = new Uint32Array(lengths.length + 1);
  lengths.forEach((m, i) => (offsets[i + 1] = offsets[i] + m));
  const T = offsets[lengths.length];
  const r = rng(seed);
  return {
    docIds: lengths.map((_, i) => `doc-${seed}-${i}-é`),
    tokenOffsets: offsets,
    tokenIds: Int32Array.from({ length: T }, () => Math.floor(r() * 30000)),
    vectors: gaussian(T, dims, seed),
    dims,
    docVectors: withExtras ? gaussian(lengths.length, dims, seed + 1) : undefined,
    metadata: withExtras ? lengths.map((_, i) => (i % 3 === 0 ? null : { title: `t${i}`, n: i, tags: ['a', 'b'] })) : undefined,
  };
}

const codec = (kind: 'fp32' | 'fp16' | 'int8', norms: 'fp32' | 'fp16' = 'fp32') => createCodec(CodecSettingsSchema.parse({ kind, norms }));

function expectSameMeta(r: SegmentReader, docs: SegmentDocs) {
  expect(r.documents).toBe(docs.docIds.length);
  expect(r.tokens).toBe(docs.tokenIds.length);
  expect(r.dims).toBe(docs.dims);
  expect(r.docIds).toEqual(docs.docIds);
  expect(Array.from(r.tokenOffsets)).toEqual(Array.from(docs.tokenOffsets));
  expect(Array.from(r.tokenIds)).toEqual(Array.from(docs.tokenIds));
  for (let i = 0; i < r.documents; i++) expect(r.metadata(i)).toEqual(docs.metadata?.[i] ?? null);
}

describe('segment format v1', () => {
  it('fp16 codes the batch at once and decodes it at once: the bytes of per-document coding, and decodeDoc concatenated', () => {
    const docs = makeDocs([5, 0, 17, 1, 33], 12, 3);
    const c = codec('fp16');
    const whole = c.encode(docs.vectors, docs.tokenOffsets, docs.dims, []);
    const perDoc: number[] = [];
    for (let i = 0; i < 5; i++) perDoc.push(...c.encodeDoc(docs.vectors.subarray(docs.tokenOffsets[i] * 12, docs.tokenOffsets[i + 1] * 12), 12, { docId: '', seed: 0n }).codes);
    expect(Array.from(whole.codes)).toEqual(perDoc);
    const r = readSegment(writeSegment(docs, c), 'fp16');
    const all = r.decodeAll();
    const concatenated: number[] = [];
    for (let i = 0; i < r.documents; i++) concatenated.push(...r.decodeDoc(i));
    expect(Array.from(all)).toEqual(concatenated);
    expect(Array.from(all)).toEqual(Array.from(roundToHalf(docs.vectors)));
  });
  it('round-trips fp32 exactly, with doc vectors and metadata', () => {
    const docs = makeDocs([5, 0, 17, 1], 12, 1);
    const bytes = writeSegment(docs, codec('fp32'), { seed: 42n });
    const r = readSegment(bytes, 'seg-a');
    expectSameMeta(r, docs);
    expect(r.name).toBe('seg-a');
    expect(r.version).toBe(1);
    expect(r.seed).toBe(42n);
    expect(r.codec.kind).toBe('fp32');
    expect(Array.from(r.decodeAll())).toEqual(Array.from(docs.vectors));
    expect(Array.from(r.docVectors!)).toEqual(Array.from(docs.docVectors!));
    expect(r.decodeDoc(1).length).toBe(0);
    expect(Array.from(r.decodeDoc(2))).toEqual(Array.from(docs.vectors.subarray(5 * 12, 22 * 12)));
    const sizes = r.sectionSizes();
    expect(sizes.codes).toBe(23 * 12 * 4);
    expect(sizes.tokenIds).toBe(23 * 4);
    expect(sizes.total).toBe(bytes.length);
    expect(Object.entries(sizes).filter(([k]) => k !== 'total').reduce((s, [, v]) => s + v, 0)).toBe(bytes.length);
  });

  it('round-trips fp16 to the float16 rounding, and stores fp16 doc vectors', () => {
    const docs = makeDocs([3, 9, 0], 8, 2);
    const r = readSegment(writeSegment(docs, codec('fp16'), { docVectors: 'fp16' }), 'seg-b');
    expectSameMeta(r, docs);
    expect(Array.from(r.decodeAll())).toEqual(Array.from(roundToHalf(docs.vectors)));
    expect(Array.from(r.docVectors!)).toEqual(Array.from(roundToHalf(docs.docVectors!)));
    expect(r.sectionSizes().codes).toBe(12 * 8 * 2);
    expect(r.sectionSizes().docVectors).toBe(3 * 8 * 2);
  });

  it.each(['fp32', 'fp16'] as const)('round-trips int8 within max|x|/254 per coordinate (scales %s)', (norms) => {
    const dims = 16;
    const docs = makeDocs([4, 0, 11], dims, 3);
    docs.vectors.fill(0, 0, dims); // an all-zero token
    const r = readSegment(writeSegment(docs, codec('int8', norms)), 'seg-c');
    const back = r.decodeAll();
    for (let t = 0; t < r.tokens; t++) {
      let max = 0;
      for (let j = 0; j < dims; j++) max = Math.max(max, Math.abs(docs.vectors[t * dims + j]));
      for (let j = 0; j < dims; j++) expect(Math.abs(back[t * dims + j] - docs.vectors[t * dims + j])).toBeLessThanOrEqual((max / 254) * 1.002 + 1e-7);
    }
    for (let j = 0; j < dims; j++) expect(back[j]).toBe(0);
    expect(r.sectionSizes().codes).toBe(15 * dims);
    expect(r.sectionSizes().norms).toBe(15 * (norms === 'fp32' ? 4 : 2));
  });

  it('keeps no view into the object it was read from: overwriting those bytes changes nothing it returns (a cache counting the object size counts what the reader holds)', () => {
    const docs = makeDocs([5, 0, 17, 1], 12, 7);
    for (const [c, dv] of [[codec('fp16'), 'fp16'], [codec('int8', 'fp16'), 'fp32']] as const) {
      const bytes = writeSegment(docs, c, { docVectors: dv });
      const r = readSegment(bytes, 'seg-copy');
      const snapshot = () => ({
        all: Array.from(r.decodeAll()),
        ids: Array.from(r.tokenIds),
        offsets: Array.from(r.tokenOffsets),
        dv: Array.from(r.docVectors!),
        dvBytes: [0, 1, 2, 3].map((i) => Array.from(r.docVectorBytes(i))),
        encoded: [0, 2].map((i) => [Array.from(r.encodedDoc(i).codes), Array.from(r.encodedDoc(i).norms)]),
        docIds: [...r.docIds],
        meta: [0, 1, 2, 3].map((i) => r.metadata(i)),
      });
      const before = snapshot();
      bytes.fill(0xa5);
      expect(snapshot()).toEqual(before);
    }
  });

  it('keeps nothing alive of the buffer it was read from once that is dropped (its closures must not hold the object: a cache would hold it twice)', async () => {
    v8.setFlagsFromString('--expose-gc');
    const gc = vm.runInNewContext('gc') as () => void;
    const docs = makeDocs([5, 0, 17, 1], 12, 7);
    for (const [c, dv] of [[codec('fp16'), 'fp16'], [codec('int8', 'fp16'), 'fp32']] as const) {
      let bytes: Uint8Array | null = writeSegment(docs, c, { docVectors: dv });
      const buffer = new WeakRef(bytes.buffer);
      const r = readSegment(bytes, 'seg-free');
      const before = Array.from(r.decodeAll());
      bytes = null;
      // WeakRef targets stay alive until the current job ends: collect from a later turn, a few times.
      for (let i = 0; i < 5; i++) {
        await new Promise((done) => setImmediate(done));
        gc();
      }
      expect(buffer.deref()).toBeUndefined();
      expect(Array.from(r.decodeAll())).toEqual(before);
      expect(r.docVectorBytes(2).length).toBeGreaterThan(0);
    }
  });

  it('handles zero documents', () => {
    const docs = makeDocs([], 4, 4);
    const r = readSegment(writeSegment(docs, codec('fp16')), 'empty');
    expect(r.documents).toBe(0);
    expect(r.tokens).toBe(0);
    expect(r.decodeAll().length).toBe(0);
    expect(r.docIds).toEqual([]);
    expect(r.docVectors!.length).toBe(0);
  });

  it('handles documents with no tokens and no extras', () => {
    const docs = makeDocs([0, 0], 4, 5, false);
    const r = readSegment(writeSegment(docs, codec('int8')), 'zeros');
    expect(r.tokens).toBe(0);
    expect(r.decodeDoc(0).length).toBe(0);
    expect(r.docVectors).toBeNull();
    expect(r.metadata(1)).toBeNull();
  });

  it('rejects bad writer input and bad indices', () => {
    const docs = makeDocs([2], 4, 6);
    expect(() => writeSegment({ ...docs, vectors: new Float32Array(3) }, codec('fp32'))).toThrow(/vectors has 3 values/);
    expect(() => writeSegment({ ...docs, tokenOffsets: Uint32Array.from([0, 3]) }, codec('fp32'))).toThrow(/tokenIds/);
    const r = readSegment(writeSegment(docs, codec('fp32')), 'x');
    expect(() => r.decodeDoc(1)).toThrow(RangeError);
  });

  it('names the segment and the section in its errors', () => {
    const bytes = writeSegment(makeDocs([3, 4], 8, 7), codec('fp16'));
    const r = readSegment(bytes, 's');
    const codesAt = r.sectionSizes().header + r.sectionSizes().docIds + r.sectionSizes().tokenOffsets + r.sectionSizes().tokenIds + r.sectionSizes().norms;
    const bad = bytes.slice();
    bad[codesAt + 3] ^= 0x10;
    expect(() => readSegment(bad, 'tenants/t/seg-9.seg')).toThrow(SegmentCorruptError);
    expect(() => readSegment(bad, 'tenants/t/seg-9.seg')).toThrow('segment "tenants/t/seg-9.seg" is corrupt in section "codes": checksum mismatch');
    try {
      readSegment(bytes.subarray(0, 10), 'short');
    } catch (e) {
      expect(e).toBeInstanceOf(SegmentCorruptError);
      expect((e as SegmentCorruptError).segment).toBe('short');
      expect((e as SegmentCorruptError).section).toBe('header');
    }
    const magic = bytes.slice();
    magic[0] = 0x58;
    expect(() => readSegment(magic, 'm')).toThrow(/section "header": bad magic/);
  });

  it('fuzz: every flipped byte and every truncation throws SegmentCorruptError', () => {
    const r = rng(20261121);
    const segments = [
      writeSegment(makeDocs([3, 0, 7, 2], 8, 11), codec('fp32'), { seed: 9n }),
      writeSegment(makeDocs([5, 1], 6, 12), codec('fp16'), { docVectors: 'fp16' }),
      writeSegment(makeDocs([4, 4, 0], 10, 13), codec('int8', 'fp16')),
      writeSegment(makeDocs([], 4, 14), codec('int8')),
      writeSegment(makeDocs([2, 3], 4, 15, false), codec('fp32')),
    ];
    let flips = 0;
    let cuts = 0;
    for (let c = 0; c < 4000; c++) {
      const seg = segments[c % segments.length];
      const bad = seg.slice();
      if (c % 2 === 0) {
        const at = Math.floor(r() * bad.length);
        bad[at] ^= 1 + Math.floor(r() * 255);
        flips++;
        expect(() => readSegment(bad, `fuzz-${c}`), `flip at ${at}`).toThrow(SegmentCorruptError);
      } else {
        const len = Math.floor(r() * seg.length);
        cuts++;
        expect(() => readSegment(seg.subarray(0, len), `fuzz-${c}`), `cut at ${len}`).toThrow(SegmentCorruptError);
      }
      // An extra trailing byte is rejected too.
      if (c < 5) {
        const longer = new Uint8Array(seg.length + 1);
        longer.set(seg);
        expect(() => readSegment(longer, 'long')).toThrow(SegmentCorruptError);
      }
    }
    // Exhaustively: every byte of one small segment is covered by some checksum.
    const small = segments[4];
    for (let at = 0; at < small.length; at++) {
      const bad = small.slice();
      bad[at] ^= 0x80;
      expect(() => readSegment(bad, 'x'), `flip at ${at}`).toThrow(SegmentCorruptError);
    }
    expect(flips + cuts).toBe(4000);
  });
});

describe('SegmentCopier (merges copy coded documents)', () => {
  /** Docs `keep` of `docs`, as one SegmentDocs (what re-coding them would write). */
  const pick = (docs: SegmentDocs, keep: number[]): SegmentDocs => {
    const d = docs.dims;
    const offsets = [0];
    const ids: number[] = [];
    const vecs: number[] = [];
    for (const i of keep) {
      const a = docs.tokenOffsets[i];
      const b = docs.tokenOffsets[i + 1];
      offsets.push(offsets[offsets.length - 1] + b - a);
      ids.push(...docs.tokenIds.subarray(a, b));
      vecs.push(...docs.vectors.subarray(a * d, b * d));
    }
    return {
      docIds: keep.map((i) => docs.docIds[i]),
      tokenOffsets: Uint32Array.from(offsets),
      tokenIds: Int32Array.from(ids),
      vectors: Float32Array.from(vecs),
      dims: d,
      docVectors: docs.docVectors ? Float32Array.from(keep.flatMap((i) => [...docs.docVectors!.subarray(i * d, (i + 1) * d)])) : undefined,
      metadata: docs.metadata ? keep.map((i) => docs.metadata![i]) : undefined,
    };
  };
  const concatDocs = (a: SegmentDocs, b: SegmentDocs): SegmentDocs => ({
    docIds: [...a.docIds, ...b.docIds],
    tokenOffsets: Uint32Array.from([...a.tokenOffsets, ...Array.from(b.tokenOffsets.subarray(1), (x) => x + a.tokenOffsets[a.docIds.length])]),
    tokenIds: Int32Array.from([...a.tokenIds, ...b.tokenIds]),
    vectors: Float32Array.from([...a.vectors, ...b.vectors]),
    dims: a.dims,
    docVectors: Float32Array.from([...a.docVectors!, ...b.docVectors!]),
    metadata: [...a.metadata!, ...b.metadata!],
  });

  it('EDEN 4-bit (fitted, per-document signs from id and seed): the copy is byte-identical to re-coding the kept documents', () => {
    const d = 16;
    const artifact = fitCodec(CodecSettingsSchema.parse({ kind: 'eden', bits: 4 }), gaussian(400, d, 3), d, { seed: 11n });
    const eden = createCodec(artifact.settings, artifact);
    const a = makeDocs([4, 7, 0, 3, 9], d, 21);
    const b = makeDocs([2, 5, 6], d, 22);
    const ra = readSegment(writeSegment(a, eden, { seed: artifact.seed }), 'a', artifact);
    const rb = readSegment(writeSegment(b, eden, { seed: artifact.seed }), 'b', artifact);
    const copier = new SegmentCopier();
    copier.append(ra, [0, 2, 4]);
    copier.append(rb, [1, 2]);
    expect([copier.documents, copier.tokens]).toEqual([5, 4 + 0 + 9 + 5 + 6]);
    const copied = copier.finish();
    const recoded = writeSegment(concatDocs(pick(a, [0, 2, 4]), pick(b, [1, 2])), eden, { seed: artifact.seed });
    expect(Buffer.from(copied).equals(Buffer.from(recoded))).toBe(true);
    // And each document decodes exactly as it did in its input.
    const r = readSegment(copied, 'merged', artifact);
    expect(Array.from(r.decodeDoc(2))).toEqual(Array.from(ra.decodeDoc(4)));
    expect(Array.from(r.decodeDoc(4))).toEqual(Array.from(rb.decodeDoc(2)));
    expect(r.metadata(3)).toEqual(b.metadata![1]);
  });

  it('fp16 raw batches with fp16 doc vectors copy their bytes (no fp32 round trip), pooled descriptors carried', () => {
    const a = makeDocs([3, 1, 8], 8, 31);
    const b = makeDocs([5, 2], 8, 32, false);
    const fp16 = codec('fp16');
    const ra = readSegment(writeSegment(a, fp16, { docVectors: 'fp16', poolFactor: 2 }), 'a');
    const copier = new SegmentCopier();
    copier.append(ra, [2, 0]);
    const r = readSegment(copier.finish(), 'm');
    expect(r.codec.poolFactor).toBe(2);
    expect(r.docVectorFormat).toBe('fp16');
    expect(r.docIds).toEqual([a.docIds[2], a.docIds[0]]);
    expect(Array.from(r.encodedDoc(0).codes)).toEqual(Array.from(ra.encodedDoc(2).codes));
    expect(Array.from(r.docVectorBytes(1))).toEqual(Array.from(ra.docVectorBytes(0)));
    expect(Array.from(r.tokenIds)).toEqual([...a.tokenIds.subarray(4, 12), ...a.tokenIds.subarray(0, 3)]);
    // An input coded differently (no doc vectors, no pooling) is refused, naming it.
    const other = new SegmentCopier();
    other.append(ra, [0]);
    expect(() => other.append(readSegment(writeSegment(b, fp16), 'b'), [0])).toThrow(/segment "b" cannot be copied/);
    expect(() => new SegmentCopier().finish()).toThrow(/nothing was appended/);
  });
});
