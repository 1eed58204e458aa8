import { describe, expect, it } from 'vitest';
import { dedupMaxByDoc, denseBatch, mebert } from '@lateral/scoring';
import { denseSearch, denseSegmentSearch, mebertSearch, mebertSegmentSearch } from './dense';
import { docMask } from './filters';
import { makeCorpus, randomCuts, randomUnit, rng, segmentsOf } from './test-utils';
import { concatDocPrefixes, searchSegment, type Hit, type SearchSegment } from './types';
import { prefixScanOf } from './prefix-scan';
import { createCodec, fitCodec, readSegment, writeSegment, type EdenCodec } from '@lateral/codec';
import { CodecSettingsSchema } from '@lateral/shared';
import { jsKernels, useKernels } from '@lateral/simd';

const d = 12;
const corpus = makeCorpus(51, { documents: 150, dims: d, maxLen: 10, minLen: 0 });
const one = segmentsOf(corpus).map((segment) => ({ segment }));
const plain = (hits: Hit[]) => hits.map((h) => [h.key, h.score]);
const starts = [0];
corpus.lengths.forEach((m, i) => starts.push(starts[i] + m));

describe('dense', () => {
  it('equals brute-force inner products with the pooled vectors (scoring\'s denseBatch), ties to the lower key', () => {
    const q = randomUnit(rng(1), 1, d);
    const ref = Array.from(denseBatch(q, corpus.docVectors, d), (s, doc) => ({ doc, s }));
    const hits = denseSearch(one, q, 150);
    expect(hits.map((h) => h.key)).toEqual([...ref].sort((a, b) => b.s - a.s || a.doc - b.doc).map((r) => r.doc));
    for (const h of hits) expect(Math.abs(h.score - ref[h.key].s)).toBeLessThan(1e-6); // denseBatch returns float32
    // exact ties: the same query against duplicated vectors
    const dup = segmentsOf({ ...corpus, docVectors: corpus.docVectors.map((_, i) => corpus.docVectors[(i % d)]) }).map((segment) => ({ segment }));
    expect(denseSearch(dup, q, 5).map((h) => h.key)).toEqual([0, 1, 2, 3, 4]);
  });

  it('many segments == one segment, bit for bit', () => {
    const r = rng(2);
    for (const parts of [2, 9, 150]) {
      const many = segmentsOf(corpus, randomCuts(r, 150, parts)).map((segment) => ({ segment }));
      for (let t = 0; t < 5; t++) {
        const q = randomUnit(r, 1, d);
        for (const n of [1, 10, 200]) expect(plain(denseSearch(many, q, n))).toEqual(plain(denseSearch(one, q, n)));
      }
    }
  });

  it('a mask keeps filtered documents out: the kept documents\' top-n', () => {
    const pred = (m: Record<string, unknown> | null) => m?.tag === 'a';
    const parts = segmentsOf(corpus, [0, 50, 51, 150]).map((segment) => ({ segment, mask: docMask(segment, pred) }));
    const q = randomUnit(rng(3), 1, d);
    const all = denseSearch(one, q, 150).filter((h) => pred(corpus.metadata[h.key]));
    expect(plain(denseSearch(parts, q, 8))).toEqual(plain(all.slice(0, 8)));
  });

  it('names what is wrong', () => {
    expect(() => denseSegmentSearch(one[0].segment, new Float32Array(3), 1)).toThrow('qVec has length 3, expected d = 12');
    const noVectors = { ...one[0].segment, docVectors: null };
    expect(() => denseSegmentSearch(noVectors, new Float32Array(d), 1)).toThrow('segment "seg-0" has no document vectors');
  });
});

describe('mebert', () => {
  it('equals scoring\'s mebert per document and the search-then-dedup of all first-m vectors (SPEC 5.9)', () => {
    const q = randomUnit(rng(4), 1, d);
    for (const m of [1, 3, 8]) {
      const perDoc = corpus.lengths.map((len, doc) => mebert(q, corpus.vectors.subarray(starts[doc] * d, starts[doc + 1] * d), len, d, m));
      // every first-m vector as its own entry, deduplicated by document
      const owners: number[] = [];
      const scores: number[] = [];
      corpus.lengths.forEach((len, doc) => {
        for (let j = 0; j < Math.min(len, m); j++) {
          owners.push(doc);
          let s = 0;
          for (let t = 0; t < d; t++) s += q[t] * corpus.vectors[(starts[doc] + j) * d + t];
          scores.push(s);
        }
      });
      const dedup = dedupMaxByDoc(owners, scores);
      const hits = mebertSearch(one, q, m, 1000, { explain: true });
      expect(hits.length).toBe(corpus.lengths.filter((len) => len > 0).length); // empty documents never score
      expect(hits.map((h) => h.key)).toEqual(dedup.map((x) => x.doc));
      for (const h of hits) {
        expect(h.score).toBe(perDoc[h.key]);
        const row = h.explain!.rows[0];
        expect(row - one[0].segment.tokenOffsets[h.doc]).toBeLessThan(m);
        expect(h.explain!.similarities[0]).toBe(h.score);
      }
    }
  });

  it('many segments == one segment; a mask keeps filtered documents out', () => {
    const r = rng(5);
    const q = randomUnit(r, 1, d);
    const many = segmentsOf(corpus, randomCuts(r, 150, 12)).map((segment) => ({ segment }));
    expect(plain(mebertSearch(many, q, 4, 20))).toEqual(plain(mebertSearch(one, q, 4, 20)));
    const pred = (m: Record<string, unknown> | null) => m !== null && (m.n as number) % 2 === 0;
    const masked = many.map((p) => ({ ...p, mask: docMask(p.segment, pred) }));
    expect(plain(mebertSearch(masked, q, 4, 20))).toEqual(plain(mebertSearch(one, q, 4, 1000).filter((h) => pred(corpus.metadata[h.key])).slice(0, 20)));
    expect(() => mebertSegmentSearch(one[0].segment, q, 0, 3)).toThrow('mVecs must be an integer >= 1, got 0');
  });
});

describe('mebert over a prefix section (segment format v2): the answers of the code sections\' scan, bit for bit', () => {
  // Long enough for several scan steps; documents of 0 to 9 tokens (empty ones included).
  const big = makeCorpus(61, { documents: 3200, dims: d, maxLen: 9, minLen: 0 });
  const cuts = [0, 1, 1700, 3200];
  const bstarts = [0];
  big.lengths.forEach((m, i) => bstarts.push(bstarts[i] + m));
  const codecs: [string, Record<string, unknown>][] = [
    ['eden 4-bit token', { kind: 'eden', bits: 4 }],
    ['eden 2-bit token, fp16 norms', { kind: 'eden', bits: 2, norms: 'fp16' }],
    ['fp16', { kind: 'fp16' }],
    ['int8', { kind: 'int8', norms: 'fp16' }],
  ];
  /**
   * The corpus's segments written with a prefix section of 4 rows: searched through their code
   * sections (prefixScan null, as a segment written before it) and through the section; `lut`:
   * rows scored from their codes by EDEN's query table (both ways), else decoded.
   */
  const build = (raw: Record<string, unknown>, lut: boolean) => {
    const settings = CodecSettingsSchema.parse(raw);
    const artifact = fitCodec(settings, big.vectors, d, { seed: 3n });
    const codec = createCodec(settings, artifact);
    const readers = cuts.slice(1).map((b, s) => {
      const a = cuts[s];
      const tokenOffsets = Uint32Array.from({ length: b - a + 1 }, (_, i) => bstarts[a + i] - bstarts[a]);
      const bytes = writeSegment(
        { docIds: big.docIds.slice(a, b), tokenOffsets, tokenIds: big.tokenIds.slice(bstarts[a], bstarts[b]), vectors: big.vectors.slice(bstarts[a] * d, bstarts[b] * d), dims: d, metadata: big.metadata.slice(a, b) },
        codec,
        { prefixRows: 4 },
      );
      return readSegment(bytes, `seg-${s}`, artifact);
    });
    const scorer = (r: (typeof readers)[number], rows: { codes: Uint8Array; norms: Uint8Array }) => (q: Float32Array) => (codec as EdenCodec).queryLut(q, d, r.seed).rows(rows);
    const codes = readers.map((r, s) => ({ segment: searchSegment({ ...pick(r), rowScorer: lut ? (q: Float32Array) => scorer(r, r.rowCodes()!)(q) : undefined }, cuts[s]) }));
    const prefix = readers.map((r, s) => ({
      segment: searchSegment({ ...pick(r), prefixScan: prefixScanOf(r.prefix!, codec, d, (i) => ({ docId: r.docIds[i], seed: r.seed }), lut ? (q, _n, rows) => scorer(r, rows)(q) : undefined), rowScorer: () => { throw new Error('the code sections were read'); } }, cuts[s]),
    }));
    return { codes, prefix, readers };
  };
  const pick = (r: ReturnType<typeof readSegment>) => ({
    name: r.name, documents: r.documents, dims: r.dims, docIds: r.docIds, tokenOffsets: r.tokenOffsets, tokenIds: r.tokenIds, docVectors: r.docVectors,
    metadata: (i: number) => r.metadata(i), decodeAll: () => r.decodeAll(),
    decodeDocPrefixes: (from: number, to: number, m: number) => concatDocPrefixes(r.tokenOffsets, d, from, to, m, (i) => r.decodeDocPrefix(i, m)),
  });

  for (const [name, raw] of codecs)
    for (const lut of raw.kind === 'eden' ? [false, true] : [false])
      it(`${name}${lut ? ', rows scored from their codes' : ', rows decoded'}: scores, order and explained rows equal the code scan's for m = 1..4, masked or not`, () => {
        const { codes, prefix, readers } = build(raw, lut);
        expect(readers.every((r) => r.prefixRows === 4 && r.prefix !== null)).toBe(true);
        const all = big.lengths.filter((len) => len > 0).length;
        const pred = (m: Record<string, unknown> | null) => m !== null && (m.n as number) % 3 === 0;
        for (let t = 0; t < 2; t++) {
          const q = randomUnit(rng(70 + t), 1, d);
          for (const m of [1, 2, 3, 4]) {
            const want = mebertSearch(codes, q, m, 4000, { explain: true });
            const got = mebertSearch(prefix, q, m, 4000, { explain: true });
            expect(want.length).toBe(all);
            expect(got.map((h) => [h.key, h.score, h.explain!.rows[0]])).toEqual(want.map((h) => [h.key, h.score, h.explain!.rows[0]]));
            // A filter: the same documents, the same scores.
            const mask = (parts: { segment: SearchSegment }[]) => parts.map((p) => ({ ...p, mask: docMask(p.segment, pred) }));
            const masked = mebertSearch(mask(prefix), q, m, 50);
            expect(masked.every((h) => pred(big.metadata[h.key]))).toBe(true);
            expect(plain(masked)).toEqual(plain(mebertSearch(mask(codes), q, m, 50)));
          }
        }
      });

  it('eden 4-bit rows scored from their codes through the rowMaxima kernel: the same answers on the JavaScript kernels as on the WebAssembly ones', () => {
    for (const raw of [{ kind: 'eden', bits: 4 }, { kind: 'eden', bits: 4, norms: 'fp16' }]) {
      const { codes, prefix } = build(raw, true);
      for (let t = 0; t < 2; t++) {
        const q = randomUnit(rng(90 + t), 1, d);
        for (const m of [2, 4]) {
          const want = mebertSearch(codes, q, m, 4000, { explain: true }).map((h) => [h.key, h.score, h.explain!.rows[0]]);
          expect(mebertSearch(prefix, q, m, 4000, { explain: true }).map((h) => [h.key, h.score, h.explain!.rows[0]])).toEqual(want);
          useKernels(jsKernels);
          try {
            expect(mebertSearch(prefix, q, m, 4000, { explain: true }).map((h) => [h.key, h.score, h.explain!.rows[0]])).toEqual(want);
          } finally {
            useKernels(null);
          }
        }
      }
    }
  });

  it('m above the section\'s rows: the code sections, as for a segment written before it', () => {
    const { codes } = build(codecs[0][1], false);
    const q = randomUnit(rng(80), 1, d);
    const reads: string[] = [];
    const watched = codes.map((p) => ({ segment: { ...p.segment, prefixScan: { rows: 4, start: new Uint32Array(p.segment.documents + 1), rowScorer: () => (reads.push('prefix'), null), decodePrefixes: () => { throw new Error('read the section'); } } } }));
    expect(plain(mebertSearch(watched, q, 5, 300))).toEqual(plain(mebertSearch(codes, q, 5, 300)));
    expect(reads).toEqual([]);
  });
});
