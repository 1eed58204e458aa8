import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import * as ort from 'onnxruntime-node';
import { createCodec, PAIR_SUM_LIMIT, quantizeRotatedQuery, scoreImage, worstPairSum, type EdenCodec } from '@lateral/codec';
import { maxsim, maxsimOfSimilarities } from '@lateral/scoring';
import { mulberry32 } from '@lateral/shared';
import { GemmMaxsim, contiguous } from './gemm-maxsim';
import { RotatedMaxsim, type RotatedImageSet } from './rotated-maxsim';

/** The two ONNX MaxSim paths of the scorer against the library references, on ragged candidates. */
describe('ONNX MaxSim kernels', () => {
  const d = 96;
  const rand = mulberry32(7);
  const gauss = (n: number) => Float32Array.from({ length: n }, () => rand() - 0.5);
  // ragged lengths, including empty candidates and one longer than a whole chunk's average
  const lengths = [5, 0, 17, 1, 40, 3, 0, 22, 9, 180, 2, 11];
  const offsets = new Uint32Array(lengths.length + 1);
  lengths.forEach((m, i) => (offsets[i + 1] = offsets[i] + m));
  const docs = gauss(offsets[lengths.length] * d);
  // 40 query columns (candidates walked as given) and 120 (copied in length order first)
  const few = [7, 1, 32].map((n) => ({ vectors: gauss(n * d), length: n }));
  const many = [...few, ...[30, 30, 20].map((n) => ({ vectors: gauss(n * d), length: n }))];
  let gemm: GemmMaxsim;
  let rotated: RotatedMaxsim;
  beforeAll(async () => {
    gemm = await GemmMaxsim.create(1);
    rotated = await RotatedMaxsim.create(1);
  });
  afterAll(async () => {
    await gemm.release();
    await rotated.release();
  });

  it.each([
    ['few', few],
    ['many', many],
  ])('GemmMaxsim equals the reference MaxSim for every query and candidate; empty candidates score -Infinity (%s query columns)', async (_, queries) => {
    const out = await gemm.score(queries, docs, offsets, d);
    queries.forEach((q, qi) =>
      lengths.forEach((m, c) => {
        const ref = maxsim(q.vectors, q.length, docs.subarray(offsets[c] * d, offsets[c + 1] * d), m, d);
        if (m === 0) expect(out[qi][c]).toBe(-Infinity);
        else expect(out[qi][c]).toBeCloseTo(ref, 4);
      }),
    );
  });

  it.each([
    ['few', few],
    ['many', many],
  ])('GemmMaxsim.scoreBlocks (one block per candidate) gives the same scores as score() over their concatenation, over several row chunks (%s query columns)', async (_, queries) => {
    // 420 ragged candidates, about 42,000 rows: more than one chunk of either plan (32,768 / 17,476 rows).
    const big = Array.from({ length: 420 }, (_, i) => (i % 37 === 5 ? 0 : 1 + ((i * 53) % 199)));
    const bigOffsets = new Uint32Array(big.length + 1);
    big.forEach((m, i) => (bigOffsets[i + 1] = bigOffsets[i] + m));
    const bigDocs = gauss(bigOffsets[big.length] * d);
    const blocks = big.map((_, c) => bigDocs.slice(bigOffsets[c] * d, bigOffsets[c + 1] * d));
    const whole = await gemm.score(queries, bigDocs, bigOffsets, d, { normalize: true });
    const byBlocks = await gemm.scoreBlocks(queries, blocks, d, { normalize: true });
    expect(byBlocks).toEqual(whole);
    expect(byBlocks[0][5]).toBe(-Infinity);
    // and the small ragged set, against the reference
    const small = await gemm.scoreBlocks(queries, lengths.map((_, c) => docs.slice(offsets[c] * d, offsets[c + 1] * d)), d);
    expect(small).toEqual(await gemm.score(queries, docs, offsets, d));
    // Blocks lying one after another in one buffer (taken as they lie), some runs broken (copied): the same scores.
    const lying = big.map((_, c) => (c % 50 === 17 ? bigDocs.slice(bigOffsets[c] * d, bigOffsets[c + 1] * d) : bigDocs.subarray(bigOffsets[c] * d, bigOffsets[c + 1] * d)));
    expect(await gemm.scoreBlocks(queries, lying, d, { normalize: true })).toEqual(whole);
    expect(await gemm.scoreBlocks(queries, big.map((_, c) => bigDocs.subarray(bigOffsets[c] * d, bigOffsets[c + 1] * d)), d, { normalize: true })).toEqual(whole);
  });

  it('contiguous gives one view of blocks lying one after another in one buffer, and null otherwise', () => {
    const buf = new Float32Array(10).map((_, i) => i);
    expect(Array.from(contiguous([buf.subarray(1, 3), buf.subarray(3, 3), buf.subarray(3, 6)])!)).toEqual([1, 2, 3, 4, 5]);
    expect(contiguous([buf.subarray(1, 3), buf.subarray(4, 6)])).toBeNull(); // a gap
    expect(contiguous([buf.subarray(3, 6), buf.subarray(1, 3)])).toBeNull(); // out of order
    expect(contiguous([buf.subarray(1, 3), buf.slice(3, 6)])).toBeNull(); // another buffer
    expect(contiguous([])).toBeNull();
  });

  /** The test documents EDEN-coded (4 bits, token layout) and expanded to the int8 rotated image. */
  function imageSet(): { set: RotatedImageSet; codec: EdenCodec; seed: bigint } {
    const codec = createCodec({ kind: 'eden', bits: 4, layout: 'token', norms: 'fp32', sideInfo: false }) as EdenCodec;
    const seed = 11n;
    const keys = lengths.map((_, i) => ({ docId: `d${i}`, seed }));
    const enc = codec.encode(docs, offsets, d, keys);
    const p = codec.paddedDims(d);
    const image = new Uint8Array(offsets[lengths.length] * p);
    const scales = new Float32Array(offsets[lengths.length]);
    let co = 0;
    let no = 0;
    lengths.forEach((m, c) => {
      const b = codec.docBytes(m, d);
      codec.rotatedImage({ codes: enc.codes.subarray(co, co + b.codes), norms: enc.norms.subarray(no, no + b.norms) }, m, d, image, scales, offsets[c]);
      co += b.codes;
      no += b.norms;
    });
    return { set: { codec, seed, dims: d, p, image, scales, offsets }, codec, seed };
  }

  it.each([
    ['few', few],
    ['many', many],
  ])('RotatedMaxsim equals the integer reference (scoreImage) on a permuted subset of rows (%s query columns)', async (_, queries) => {
    const { set, codec, seed } = imageSet();
    const { p, image, scales } = set;
    const rows = [9, 1, 4, 0, 11, 7, 2];
    const out = await rotated.score(queries, set, rows, { normalize: true });
    queries.forEach((q, qi) => {
      const qq = quantizeRotatedQuery(codec.rotateQuery(q.vectors, d, seed), p);
      rows.forEach((r, c) => {
        const m = lengths[r];
        if (m === 0) return expect(out[qi][c]).toBe(-Infinity);
        const S = scoreImage(qq, image.subarray(offsets[r] * p, offsets[r + 1] * p), scales.subarray(offsets[r], offsets[r + 1]), m);
        expect(out[qi][c]).toBeCloseTo(maxsimOfSimilarities(S, q.length, m, { normalize: true }), 4);
      });
    });
  });

  /**
   * Independent of the CPU the suite runs on: every u8 x s8 GEMM the scorer hands ONNX Runtime is
   * captured, and its operands must be such that no pair of products can leave a signed 16-bit
   * lane (what vpmaddubsw does on CPUs without VNNI). A CPU with VNNI computes the right scores
   * from wider operands too, so the equality test above cannot catch this there; this one can.
   */
  it.each([
    ['few', few],
    ['many', many],
  ])('RotatedMaxsim feeds integer GEMMs operands whose pair sums fit 16 bits (%s query columns)', async (_, queries) => {
    const { set } = imageSet();
    const seen: { u8Max: number; s8Max: number }[] = [];
    const absMax = (a: Int8Array) => a.reduce((m, v) => Math.max(m, Math.abs(v)), 0);
    const max = (a: Uint8Array) => a.reduce((m, v) => Math.max(m, v), 0);
    // Sessions are instances of the class behind ort.InferenceSession (typed as a factory only).
    const proto = (ort.InferenceSession as unknown as { prototype: ort.InferenceSession }).prototype;
    const original = proto.run;
    const spy = vi.spyOn(proto, 'run').mockImplementation(function (this: ort.InferenceSession, feeds: ort.InferenceSession.FeedsType, ...rest: unknown[]) {
      const f = feeds as Record<string, ort.Tensor>;
      if (f.image && f.query_t) seen.push({ u8Max: max(f.image.data as Uint8Array), s8Max: absMax(f.query_t.data as Int8Array) });
      if (f.query_u8 && f.image_t) seen.push({ u8Max: max(f.query_u8.data as Uint8Array), s8Max: absMax(f.image_t.data as Int8Array) });
      return (original as (...a: unknown[]) => ReturnType<typeof original>).call(this, feeds, ...rest);
    });
    try {
      await rotated.score(queries, set, [9, 1, 4, 0, 11, 7, 2]);
    } finally {
      spy.mockRestore();
    }
    expect(seen.length).toBeGreaterThan(0);
    for (const s of seen) expect(worstPairSum(s.u8Max, s.s8Max)).toBeLessThanOrEqual(PAIR_SUM_LIMIT);
  });
});
