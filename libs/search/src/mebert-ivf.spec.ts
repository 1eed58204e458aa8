import { describe, expect, it } from 'vitest';
import { createCodec, fitCodec, readSegment, writeSegment, type EdenCodec } from '@lateral/codec';
import { CodecSettingsSchema } from '@lateral/shared';
import { jsKernels, useKernels } from '@lateral/simd';
import { mebertSearch } from './dense';
import { docMask } from './filters';
import { assignNearest, sphericalKmeans } from './kmeans';
import { buildMebertLists, buildMebertListsFromPrefix, mebertIvfSearch, mebertIvfStats, mebertListSource, mebertProbe, type MebertListSource } from './mebert-ivf';
import { prefixScanOf } from './prefix-scan';
import { makeCorpus, randomUnit, rng } from './test-utils';
import { concatDocPrefixes, searchSegment, type Hit, type PrefixScan, type SearchSegment } from './types';

const d = 12;
// documents of 0 to 9 tokens (empty ones included), vectors around 24 directions: an IVF has structure
const big = makeCorpus(71, { documents: 2600, dims: d, maxLen: 9, minLen: 0, clusters: 24 });
const cuts = [0, 1, 1400, 2600];
const bstarts = [0];
big.lengths.forEach((m, i) => bstarts.push(bstarts[i] + m));
const K = 32;
const full = (hits: Hit[]) => hits.map((h) => [h.key, h.score, h.explain!.rows[0]]);
const plain = (hits: Hit[]) => hits.map((h) => [h.key, h.score]);

/** The corpus written as segments with a 4-row prefix section; ME-BERT searched through the section (the prefix scan), and the IVF's lists per segment. */
function build(raw: Record<string, unknown>, lut: boolean) {
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
  const parts = readers.map((r, s) => {
    const scan = prefixScanOf(r.prefix!, codec, d, (i) => ({ docId: r.docIds[i], seed: r.seed }), lut ? (q, _n, rows) => (codec as EdenCodec).queryLut(q, d, r.seed).rows(rows) : undefined);
    const segment = searchSegment(
      {
        name: r.name, documents: r.documents, dims: r.dims, docIds: r.docIds, tokenOffsets: r.tokenOffsets, tokenIds: r.tokenIds, docVectors: r.docVectors,
        metadata: (i: number) => r.metadata(i), decodeAll: () => r.decodeAll(),
        decodeDocPrefixes: (from: number, to: number, m: number) => concatDocPrefixes(r.tokenOffsets, d, from, to, m, (i) => r.decodeDocPrefix(i, m)),
        prefixScan: scan,
        rowScorer: () => {
          throw new Error('the code sections were read');
        },
      },
      cuts[s],
    );
    return { segment };
  });
  // The collection's centroids: k-means over every segment's decoded prefix rows.
  const rows = parts.map((p) => p.segment.prefixScan!.decodePrefixes(0, p.segment.documents, 4));
  const all = new Float32Array(rows.reduce((a, x) => a + x.length, 0));
  let at = 0;
  for (const x of rows) {
    all.set(x, at);
    at += x.length;
  }
  const { centroids } = sphericalKmeans(all, all.length / d, d, K, { seed: 5, iterations: 4 });
  const lists = parts.map((p) => buildMebertListsFromPrefix(p.segment.prefixScan!, d, centroids));
  const ivf = parts.map((p, s) => ({ ...p, lists: mebertListSource(lists[s]) as MebertListSource | null }));
  // the lists holding their rows' codes (list-major), scored by the same factory: lut codecs only
  const ivfCodes = parts.map((p, s) => {
    const r = readers[s];
    const scorer = (q: Float32Array, _n: number, rows: { codes: Uint8Array; norms: Uint8Array }) => (codec as EdenCodec).queryLut(q, d, r.seed).rows(rows);
    return { ...p, lists: (lut ? mebertListSource(lists[s], { ...r.prefix!, scorer }) : mebertListSource(lists[s])) as MebertListSource | null };
  });
  return { parts, ivf, ivfCodes, centroids, lists };
}

/** The same segments with a prefix scan that cannot gather (its rows scored in place). */
const noGather = (ivf: { segment: SearchSegment; lists: MebertListSource | null }[]) =>
  ivf.map((p) => {
    const ps = p.segment.prefixScan!;
    const plainScan: PrefixScan = { rows: ps.rows, start: ps.start, rowScorer: (q, n) => ps.rowScorer(q, n), decodePrefixes: (a, b, m) => ps.decodePrefixes(a, b, m) };
    return { ...p, segment: { ...p.segment, prefixScan: plainScan } };
  });

const codecs: [string, Record<string, unknown>, boolean][] = [
  ['eden 4-bit, rows scored from their codes (rowMaxima)', { kind: 'eden', bits: 4 }, true],
  ['eden 2-bit fp16 norms, rows scored from their codes', { kind: 'eden', bits: 2, norms: 'fp16' }, true],
  ['eden 4-bit, rows decoded', { kind: 'eden', bits: 4 }, false],
  ['fp16, rows decoded', { kind: 'fp16' }, false],
];

describe('mebert through an IVF over the prefix rows', () => {
  for (const [name, raw, lut] of codecs)
    it(`${name}: every list probed == the prefix scan bit for bit (scores, order, explained rows), m = 1..4, masked or not, gathered or in place`, () => {
      const { parts, ivf, ivfCodes, centroids } = build(raw, lut);
      const withRows = big.lengths.filter((len) => len > 0).length;
      const pred = (m: Record<string, unknown> | null) => m !== null && (m.n as number) % 3 === 0;
      for (let t = 0; t < 2; t++) {
        const q = randomUnit(rng(70 + t), 1, d);
        const probed = mebertProbe(q, centroids, d, K);
        expect(Array.from(probed)).toEqual(Array.from({ length: K }, (_, c) => c));
        for (const m of [1, 2, 3, 4]) {
          const want = mebertSearch(parts, q, m, 4000, { explain: true });
          expect(want.length).toBe(withRows);
          const stats = mebertIvfStats();
          expect(full(mebertIvfSearch(ivf, probed, q, m, 4000, { explain: true }, stats))).toEqual(full(want));
          expect(stats.candidates).toBe(withRows);
          expect(stats.scanned).toBe(false);
          expect(full(mebertIvfSearch(noGather(ivf), probed, q, m, 4000, { explain: true }))).toEqual(full(want));
          const top10 = mebertSearch(parts, q, m, 10, { explain: true });
          expect(full(mebertIvfSearch(ivf, probed, q, m, 10, { explain: true }))).toEqual(full(top10));
          // probed rows first, then the best 10 or 40 documents rescored: every row probed, so the same
          for (const rescore of [10, 40])
            for (const source of [ivf, ivfCodes]) {
              const st = mebertIvfStats();
              expect(full(mebertIvfSearch(source, probed, q, m, 10, { explain: true, rescore }, st))).toEqual(full(top10));
              // the probed rows once (list entries), then at most `rescore` documents' m rows per segment
              if (lut) expect(st.rows).toBeLessThanOrEqual(st.entries + cuts.length * rescore * m);
            }
          const mask = <P extends { segment: SearchSegment }>(ps: P[]) => ps.map((p) => ({ ...p, mask: docMask(p.segment, pred) }));
          const masked = mebertIvfSearch(mask(ivf), probed, q, m, 50);
          expect(masked.every((h) => pred(big.metadata[h.key]))).toBe(true);
          expect(plain(masked)).toEqual(plain(mebertSearch(mask(parts), q, m, 50)));
          expect(plain(mebertIvfSearch(mask(ivf), probed, q, m, 50, { rescore: 60 }))).toEqual(plain(masked));
        }
      }
    });

  it('eden 4-bit on the JavaScript kernels: the same answers as on the WebAssembly ones', () => {
    const { parts, ivf, centroids } = build(codecs[0][1], true);
    for (let t = 0; t < 2; t++) {
      const q = randomUnit(rng(90 + t), 1, d);
      for (const nprobe of [4, K]) {
        const probed = mebertProbe(q, centroids, d, nprobe);
        const want = full(mebertIvfSearch(ivf, probed, q, 4, 500, { explain: true }));
        if (nprobe === K) expect(want).toEqual(full(mebertSearch(parts, q, 4, 500, { explain: true })));
        useKernels(jsKernels);
        try {
          expect(mebertProbe(q, centroids, d, nprobe)).toEqual(probed);
          expect(full(mebertIvfSearch(ivf, probed, q, 4, 500, { explain: true }))).toEqual(want);
        } finally {
          useKernels(null);
        }
      }
    }
  });

  it('nprobe < K: the exact top-n of the documents with a prefix row in a probed list (a brute-force reference), recall@10 measured and growing with nprobe', () => {
    const { parts, ivf, centroids } = build(codecs[0][1], true);
    const recalls: number[][] = [];
    for (let t = 0; t < 8; t++) {
      const q = randomUnit(rng(200 + t), 1, d);
      // the reference: every document's exact score (the prefix scan, all of them), the probe by brute force
      const scores = new Float64Array(K);
      for (let c = 0; c < K; c++) for (let k = 0; k < d; k++) scores[c] += q[k] * centroids[c * d + k];
      const order = Array.from({ length: K }, (_, c) => c).sort((a, b) => Math.fround(scores[b]) - Math.fround(scores[a]) || a - b);
      const exact = mebertSearch(parts, q, 4, 4000);
      const exact10 = new Set(exact.slice(0, 10).map((h) => h.key));
      const row = [];
      for (const nprobe of [1, 2, 4, 8, 16, K]) {
        const probed = mebertProbe(q, centroids, d, nprobe);
        expect(Array.from(probed)).toEqual(order.slice(0, nprobe).sort((a, b) => a - b));
        const inProbe = new Set(probed);
        // candidates: a document (global key) with a decoded prefix row whose nearest centroid is probed
        const cand = new Set<number>();
        parts.forEach((p, s) => {
          const ps = p.segment.prefixScan!;
          const rows = ps.decodePrefixes(0, p.segment.documents, 4);
          const nRows = ps.start[p.segment.documents];
          const near = assignNearest(rows, nRows, centroids, K, d).index;
          for (let i = 0; i < p.segment.documents; i++) for (let r = ps.start[i]; r < ps.start[i + 1]; r++) if (inProbe.has(near[r])) cand.add(cuts[s] + i);
        });
        const want = exact.filter((h) => cand.has(h.key)).slice(0, 10);
        const got = mebertIvfSearch(ivf, probed, q, 4, 10);
        expect(plain(got)).toEqual(plain(want));
        row.push(got.filter((h) => exact10.has(h.key)).length / 10);
      }
      expect(row[row.length - 1]).toBe(1);
      for (let k = 1; k < row.length; k++) expect(row[k]).toBeGreaterThanOrEqual(row[k - 1]);
      recalls.push(row);
    }
    // On this clustered corpus a quarter of the lists already finds most of the exact top-10.
    const mean = (k: number) => recalls.reduce((a, r) => a + r[k], 0) / recalls.length;
    expect(mean(3)).toBeGreaterThan(0.5);
    expect(mean(0)).toBeLessThan(mean(5));
  });

  it('rescore r, nprobe < K: the exact top-n of each segment\'s best r documents by their probed rows (a brute-force reference)', () => {
    const { parts, ivf, ivfCodes, centroids } = build(codecs[0][1], true);
    for (let t = 0; t < 4; t++) {
      const q = randomUnit(rng(500 + t), 1, d);
      const exact = mebertSearch(parts, q, 3, 4000);
      for (const [nprobe, r] of [[2, 10], [4, 25], [8, 12]]) {
        const probed = mebertProbe(q, centroids, d, nprobe);
        const inProbe = new Set(probed);
        const kept = new Set<number>();
        parts.forEach((p, s) => {
          const ps = p.segment.prefixScan!;
          const D = p.segment.documents;
          const near = assignNearest(ps.decodePrefixes(0, D, 4), ps.start[D], centroids, K, d).index;
          const scorer = ps.rowScorer(q, 1)!;
          const bound: [number, number][] = [];
          for (let i = 0; i < D; i++) {
            let b = -Infinity;
            for (let j = 0; j < Math.min(3, ps.start[i + 1] - ps.start[i]); j++) if (inProbe.has(near[ps.start[i] + j])) b = Math.max(b, scorer.score(0, ps.start[i] + j));
            if (b > -Infinity) bound.push([b, i]);
          }
          bound.sort((x, y) => y[0] - x[0] || x[1] - y[1]);
          for (const [, i] of bound.slice(0, r)) kept.add(cuts[s] + i);
        });
        const want = exact.filter((h) => kept.has(h.key)).slice(0, 10);
        for (const source of [ivf, ivfCodes]) {
          const st = mebertIvfStats();
          expect(plain(mebertIvfSearch(source, probed, q, 3, 10, { rescore: r }, st))).toEqual(plain(want));
          expect(st.rows).toBeLessThan(st.candidates * 3);
        }
        useKernels(jsKernels);
        try {
          expect(plain(mebertIvfSearch(ivfCodes, probed, q, 3, 10, { rescore: r }))).toEqual(plain(want));
        } finally {
          useKernels(null);
        }
      }
    }
    expect(() => mebertIvfSearch(ivf, mebertProbe(randomUnit(rng(9), 1, d), centroids, d, 2), randomUnit(rng(9), 1, d), 3, 10, { rescore: 9 })).toThrow(/rescore must be an integer >= topN \(10\), got 9/);
  });

  it('a segment without lists, without a prefix section or asked m above its rows is scanned whole: the same answers', () => {
    const { parts, ivf, centroids } = build(codecs[0][1], true);
    const q = randomUnit(rng(300), 1, d);
    const probed = mebertProbe(q, centroids, d, 2);
    const stats = mebertIvfStats();
    expect(full(mebertIvfSearch(ivf.map((p) => ({ ...p, lists: null })), probed, q, 3, 100, { explain: true }, stats))).toEqual(full(mebertSearch(parts, q, 3, 100, { explain: true })));
    expect(stats.scanned).toBe(true);
    expect(stats.candidates).toBe(big.lengths.length);
    // m = 5 > the section's 4 rows: the code sections (decoded here), as mebertSearch reads them
    const decoded = ivf.map((p) => ({ ...p, segment: { ...p.segment, rowScorer: () => null } }));
    expect(plain(mebertIvfSearch(decoded, probed, q, 5, 100))).toEqual(plain(mebertSearch(decoded, q, 5, 100)));
  });

  it('lists: documents ascending, each once per centroid however many of its rows go there; gather scores the same bytes', () => {
    const start = Uint32Array.of(0, 3, 3, 5, 9);
    const assignment = Uint32Array.of(2, 0, 2, /* doc 1: none */ 1, 1, 0, 2, 2, 1);
    const lists = buildMebertLists({ start, assignment, centroidCount: 4 });
    const src = mebertListSource(lists);
    expect([0, 1, 2, 3].map((c) => Array.from(src.list(c).docs))).toEqual([[0, 3], [2, 2, 3], [0, 0, 3, 3], []]);
    expect([0, 1, 2, 3].map((c) => Array.from(src.list(c).places ?? []))).toEqual([[1, 0], [0, 1, 3], [0, 2, 1, 2], []]);
    expect(() => src.list(4)).toThrow(/centroid 4 is out of range/);
    expect(() => buildMebertLists({ start, assignment: assignment.subarray(1), centroidCount: 4 })).toThrow(/assignment has 8 entries, expected the 9 prefix rows/);
    expect(() => buildMebertLists({ start, assignment: Uint32Array.of(2, 0, 2, 1, 1, 0, 2, 4, 1), centroidCount: 4 })).toThrow(/assignment\[7\] = 4 is not a centroid/);

    const { parts } = build(codecs[0][1], true);
    const ps = parts[2].segment.prefixScan!;
    const docs = Uint32Array.of(0, 5, 6, 400, 1199);
    const sub = ps.gather!(docs, docs.length);
    const q = randomUnit(rng(400), 1, d);
    const a = ps.rowScorer(q, 1)!, b = sub.rowScorer(q, 1)!;
    docs.forEach((i, k) => {
      expect(sub.start[k + 1] - sub.start[k]).toBe(ps.start[i + 1] - ps.start[i]);
      for (let j = 0; j < sub.start[k + 1] - sub.start[k]; j++) expect(b.score(0, sub.start[k] + j)).toBe(a.score(0, ps.start[i] + j));
      expect(sub.decodePrefixes(k, k + 1, 4)).toEqual(ps.decodePrefixes(i, i + 1, 4));
    });
    expect(() => ps.gather!(Uint32Array.of(5, 5), 2)).toThrow(/must ascend/);
    // gatherRows: any rows of each document, scored as in place
    const rowsOf = (i: number) => Array.from({ length: ps.start[i + 1] - ps.start[i] }, (_, j) => ps.start[i] + j).reverse();
    const picked = [5, 6, 400].filter((i) => ps.start[i + 1] > ps.start[i]);
    const flat = picked.flatMap(rowsOf);
    const gstart = Uint32Array.from([0, ...picked.map((i) => rowsOf(i).length)].map((_, k, xs) => xs.slice(0, k + 1).reduce((x, y) => x + y, 0)));
    const g = ps.gatherRows!(Uint32Array.from(picked), gstart, Uint32Array.from(flat), picked.length).rowScorer(q, 1)!;
    flat.forEach((row, e) => expect(g.score(0, e)).toBe(a.score(0, row)));
    expect(() => ps.gatherRows!(Uint32Array.of(5), Uint32Array.of(0, 1), Uint32Array.of(ps.start[7]), 1)).toThrow(/is not a row of document 5/);
    expect(() => mebertProbe(q, new Float32Array(d * 3), d, 0)).toThrow(/nprobe must be an integer >= 1, got 0/);
    expect(() => mebertProbe(q.subarray(1), new Float32Array(d * 3), d, 1)).toThrow(/qVec has length 11/);
  });
});
