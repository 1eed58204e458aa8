import { describe, expect, it } from 'vitest';
import { maxsim, xtrScores } from '@lateral/scoring';
import { xtrProbe, xtrSearch, xtrSegmentSearch } from './xtr';
import { benchXtrAccumulator, xtrAccumulate, xtrCandidateCount, xtrCandidates, XtrWorkspace, xtrAggregateSegment } from './xtr-aggregate';
import { xtrMerge, type XtrMerged } from './xtr-merge';
import { sphericalKmeans } from './kmeans';
import { buildSegmentIndex } from './segment-index';
import { docMask } from './filters';
import { makeCorpus, randomCuts, randomUnit, rng, segmentsOf, subCorpus, type Corpus } from './test-utils';
import { searchSegment, type Hit, type SearchSegment } from './types';
import { TopK } from './select';

const d = 8;
const corpus = makeCorpus(41, { documents: 90, dims: d, maxLen: 14, clusters: 5 });
const T = corpus.tokenIds.length;
const { centroids, k: K } = sphericalKmeans(corpus.vectors, T, d, 16, { seed: 3 });
const build = (segments: SearchSegment[]) => segments.map((segment) => ({ segment, index: buildSegmentIndex(segment, centroids, d) }));
const one = build(segmentsOf(corpus));
const query = (seed: number, n: number) => randomUnit(rng(seed), n, d);

/** Hits as plain values; explain rows as (global key, position in the document), which do not depend on the cut. */
function portable(hits: Hit[], segments: SearchSegment[]) {
  return hits.map((h) => ({
    key: h.key,
    score: h.score,
    explain: h.explain && Array.from(h.explain.rows, (row, i) => (row < 0 ? [-1, h.explain!.similarities[i]] : [row - segments[h.segment].tokenOffsets[h.doc], h.explain!.similarities[i]])),
  }));
}

function docRows(c: Corpus, doc: number): Float32Array {
  let start = 0;
  for (let i = 0; i < doc; i++) start += c.lengths[i];
  return c.vectors.subarray(start * d, (start + c.lengths[doc]) * d);
}

describe('xtr', () => {
  it('with nprobe = K and k\' >= T equals exhaustive MaxSim / n: same order, scores within 1e-12', () => {
    for (const [seed, n] of [[1, 1], [2, 4], [3, 9]]) {
      const q = query(seed, n);
      const { hits, imputed } = xtrSearch(one, q, n, centroids, { kPrime: T, nprobe: K, topN: 90 });
      const ref = corpus.lengths
        .map((m, doc) => ({ doc, s: maxsim(q, n, docRows(corpus, doc), m, d) / n }))
        .sort((a, b) => b.s - a.s || a.doc - b.doc);
      expect(hits.map((h) => h.key)).toEqual(ref.map((r) => r.doc));
      hits.forEach((h, r) => expect(Math.abs(h.score - ref[r].s)).toBeLessThan(1e-12));
      expect(imputed.length).toBe(n);
    }
  });

  it('agrees with @lateral/scoring\'s xtrScores (exhaustive retrieval over one candidate set) for small k\'', () => {
    const n = 5;
    const q = query(7, n);
    const offsets = new Uint32Array(91);
    corpus.lengths.forEach((m, i) => (offsets[i + 1] = offsets[i] + m));
    for (const kPrime of [1, 3, 20, 150]) {
      const ref = xtrScores(q, n, corpus.vectors, offsets, d, kPrime);
      const { hits, imputed } = xtrSearch(one, q, n, centroids, { kPrime, nprobe: K, topN: 90 });
      const base = imputed.reduce((a, b) => a + b, 0) / n;
      const got = new Float64Array(90).fill(base);
      for (const h of hits) got[h.key] = h.score;
      for (let i = 0; i < 90; i++) expect(Math.abs(got[i] - ref[i])).toBeLessThan(1e-6);
    }
  });

  it('many segments return exactly what one segment returns: lists, imputation, hits, scores, explanations', () => {
    const r = rng(12);
    for (const count of [2, 5, 30, 90]) {
      const cuts = randomCuts(r, 90, count);
      const many = build(segmentsOf(corpus, cuts));
      for (const [seed, n, kPrime, nprobe] of [[1, 4, 10, 3], [2, 8, 60, 16], [3, 3, 1000, 1], [4, 6, 1, 5]]) {
        const q = query(seed, n);
        const a = xtrSearch(one, q, n, centroids, { kPrime, nprobe, topN: 25, explain: true });
        const b = xtrSearch(many, q, n, centroids, { kPrime, nprobe, topN: 25, explain: true });
        expect(Array.from(b.imputed)).toEqual(Array.from(a.imputed));
        expect(b.scored).toBe(a.scored);
        expect(portable(b.hits, many.map((p) => p.segment))).toEqual(portable(a.hits, one.map((p) => p.segment)));
        // the merged global lists themselves, as (score, key, position)
        const lists = (parts: typeof one) => {
          const probe = xtrProbe(q, n, centroids, d, nprobe);
          const m = xtrMerge(parts.map((p) => xtrSegmentSearch(p.segment, p.index, q, n, probe, { kPrime })));
          return Array.from(m.scores, (s, e) => [s, m.keys[e], m.rows[e] - parts[m.segments[e]].segment.tokenOffsets[m.docs[e]]]);
        };
        expect(lists(many)).toEqual(lists(one));
      }
    }
  });

  it('explain: the first retrieved token of each query token, or row -1 and the imputed score', () => {
    const n = 4;
    const q = query(5, n);
    const { hits, imputed } = xtrSearch(one, q, n, centroids, { kPrime: 30, nprobe: 4, topN: 10, explain: true });
    const seg = one[0].segment;
    let imputedSeen = 0;
    for (const h of hits) {
      let total = 0;
      for (let i = 0; i < n; i++) {
        const row = h.explain!.rows[i];
        const sim = h.explain!.similarities[i];
        total += sim;
        if (row < 0) {
          imputedSeen++;
          expect(sim).toBe(imputed[i]);
          continue;
        }
        expect(seg.tokenDoc[row]).toBe(h.doc);
        let s = 0;
        for (let t = 0; t < d; t++) s += q[i * d + t] * seg.tokens[row * d + t];
        expect(sim).toBe(s);
      }
      expect(Math.abs(total / n - h.score)).toBeLessThan(1e-12);
    }
    expect(imputedSeen).toBeGreaterThan(0);
  });

  it('imputes with the global k\'-th score, not a segment\'s own (hand-built case)', () => {
    // d = 2, q0 = e1, q1 = e2; k' = 2. Segment A: a1 = (1, 0), a2 = (0.5, 0.75); segment B: b1 = (0.625, 0.25), b2 = (0, 1).
    // Global lists: q0 -> a1 1, b1 0.625 (m0 = 0.625); q1 -> b2 1, a2 0.75 (m1 = 0.75).
    // Segment A alone would impute m0 = 0.5 (a2) and m1 = 0 (a1): a1 would score 1, a2 1.25.
    const seg = (name: string, rows: number[][], docBase: number): SearchSegment =>
      searchSegment({
        name, documents: rows.length, dims: 2, docIds: rows.map((_, i) => `${name}${i + 1}`),
        tokenOffsets: Uint32Array.from({ length: rows.length + 1 }, (_, i) => i), tokenIds: new Int32Array(rows.length),
        docVectors: null, metadata: () => null, decodeAll: () => Float32Array.from(rows.flat()),
      }, docBase);
    const c2 = Float32Array.of(1, 0, 0, 1);
    const A = seg('a', [[1, 0], [0.5, 0.75]], 0);
    const B = seg('b', [[0.625, 0.25], [0, 1]], 2);
    const parts = [A, B].map((segment) => ({ segment, index: buildSegmentIndex(segment, c2, 2) }));
    const q = Float32Array.of(1, 0, 0, 1);
    const res = xtrSearch(parts, q, 2, c2, { kPrime: 2, nprobe: 2, topN: 4, normalize: false, explain: true });
    expect(Array.from(res.imputed)).toEqual([0.625, 0.75]);
    expect(res.hits.map((h) => [h.key, h.score])).toEqual([[0, 1.75], [3, 1.625], [1, 1.375], [2, 1.375]]);
    expect(Array.from(res.hits[0].explain!.rows)).toEqual([0, -1]);
    // what a segment-local imputation would have given, to show the case discriminates
    const probe = xtrProbe(q, 2, c2, 2, 2);
    const alone = xtrSegmentSearch(A, parts[0].index, q, 2, probe, { kPrime: 2 });
    const localMerged: XtrMerged = xtrMerge([alone]);
    expect(Array.from(localMerged.imputed)).toEqual([0.5, 0]);
    const local = xtrAggregateSegment(alone, localMerged, 0, { topN: 2, normalize: false });
    expect(Array.from(local.scores)).toEqual([1.25, 1]);
  });

  it('a mask keeps filtered documents out of every top-k\' list: same as searching only the kept documents', () => {
    const pred = (m: Record<string, unknown> | null) => m !== null && (m.year as number) % 3 !== 0;
    const kept = subCorpus(corpus, (i) => pred(corpus.metadata[i]));
    const keptParts = build(segmentsOf(kept));
    const cuts = [0, 20, 21, 60, 90];
    const masked = build(segmentsOf(corpus, cuts)).map((p) => ({ ...p, mask: docMask(p.segment, pred) }));
    const n = 5;
    const q = query(8, n);
    for (const [kPrime, nprobe] of [[5, 2], [40, 16], [1000, 7]]) {
      const probe = xtrProbe(q, n, centroids, d, nprobe);
      const lists = masked.map((p) => xtrSegmentSearch(p.segment, p.index, q, n, probe, { kPrime, mask: p.mask }));
      for (const [s, l] of lists.entries()) for (const doc of l.docs) expect(masked[s].mask[doc]).toBe(1);
      const a = xtrSearch(masked, q, n, centroids, { kPrime, nprobe, topN: 30 });
      const b = xtrSearch(keptParts, q, n, centroids, { kPrime, nprobe, topN: 30 });
      expect(Array.from(a.imputed)).toEqual(Array.from(b.imputed));
      expect(a.hits.map((h) => [corpus.docIds[h.key], h.score])).toEqual(b.hits.map((h) => [kept.docIds[h.key], h.score]));
    }
  });

  it('refuses bad k\', nprobe and a probe of another query', () => {
    const q = query(1, 2);
    expect(() => xtrProbe(q, 2, centroids, d, 0)).toThrow(`nprobe must be an integer in [1, K = ${K}], got 0`);
    expect(() => xtrProbe(q, 2, centroids, d, K + 1)).toThrow(`got ${K + 1}`);
    const probe = xtrProbe(q, 2, centroids, d, 2);
    expect(() => xtrSegmentSearch(one[0].segment, one[0].index, q, 2, probe, { kPrime: 0 })).toThrow('kPrime must be an integer >= 1, got 0');
    expect(() => xtrSegmentSearch(one[0].segment, one[0].index, query(1, 3), 3, probe, { kPrime: 3 })).toThrow('probe is for 2 query tokens, q has 3');
  });

  it('more than 255 query tokens (16-bit tags) still equals MaxSim / n', () => {
    const n = 300;
    const q = query(21, n);
    const { hits } = xtrSearch(build(segmentsOf(corpus, [0, 45, 90])), q, n, centroids, { kPrime: T, nprobe: K, topN: 5 });
    const ref = corpus.lengths
      .map((m, doc) => ({ doc, s: maxsim(q, n, docRows(corpus, doc), m, d) / n }))
      .sort((a, b) => b.s - a.s || a.doc - b.doc);
    expect(hits.map((h) => h.key)).toEqual(ref.slice(0, 5).map((r) => r.doc));
    hits.forEach((h, r) => expect(Math.abs(h.score - ref[r].s)).toBeLessThan(1e-12));
  });

  it('the accumulator, candidate scan (dense and sparse) and a reused workspace agree with a plain recomputation', () => {
    const r = rng(33);
    const ws = new XtrWorkspace();
    for (const [n, D, perToken] of [[3, 50, 40], [7, 1000, 5], [300, 64, 30], [2, 10_000, 3]]) {
      const offsets = new Uint32Array(n + 1);
      for (let i = 0; i < n; i++) offsets[i + 1] = offsets[i] + perToken;
      const docs = Uint32Array.from({ length: n * perToken }, () => Math.floor(r() * D));
      const scores = new Float64Array(n * perToken);
      for (let i = 0; i < n; i++) {
        const row = Array.from({ length: perToken }, () => Math.round(r() * 8) / 8).sort((a, b) => b - a); // ties
        scores.set(row, i * perToken);
      }
      const imputed = Float64Array.from({ length: n }, (_, i) => scores[offsets[i + 1] - 1]);
      const base = imputed.reduce((a, b) => a + b, 0);
      // reference: per document, per token, the first hit
      const ref = new Map<number, number>();
      for (let i = 0; i < n; i++) {
        const firstSeen = new Set<number>();
        for (let e = offsets[i]; e < offsets[i + 1]; e++) {
          if (firstSeen.has(docs[e])) continue;
          firstSeen.add(docs[e]);
          ref.set(docs[e], (ref.get(docs[e]) ?? 0) + scores[e] - imputed[i]);
        }
      }
      const expected = [...ref.entries()].map(([doc, a]) => ({ doc, s: (base + a) / n })).sort((x, y) => y.s - x.s || x.doc - y.doc).slice(0, 10);
      for (const sparse of [false, true]) {
        const { acc, seen } = ws.take(n, D);
        expect(seen.BYTES_PER_ELEMENT).toBe(n <= 255 ? 1 : 2);
        xtrAccumulate(n, offsets, offsets.subarray(1).map((o, i) => o - offsets[i]), docs, scores, imputed, acc, seen);
        expect(xtrCandidateCount(seen, D)).toBe(ref.size);
        const top = new TopK(10, D);
        xtrCandidates(seen, D, acc, base, n, top, sparse);
        ws.release(D);
        const got = top.drain();
        expect(Array.from(got.ids)).toEqual(expected.map((e) => e.doc));
        got.scores.forEach((s, k) => expect(s).toBe(expected[k].s));
      }
    }
  });

  it('the accumulator micro-benchmark runs and counts its updates', () => {
    const b = benchXtrAccumulator({ n: 4, kPrime: 1000, documents: 5000, segments: 3, repeats: 2 });
    expect(b.updates).toBe(4000);
    expect(b.candidates).toBeGreaterThan(2000);
    expect(b.candidates).toBeLessThanOrEqual(4000);
    expect(b.updatesPerSecond).toBeGreaterThan(0);
  });
  it('takes a probe computed elsewhere (the ORT GEMM) and refuses one made for another query shape', () => {
    const q = randomUnit(rng(21), 4, d);
    const probe = xtrProbe(q, 4, centroids, d, 3);
    const given = xtrSearch(one, q, 4, centroids, { kPrime: 20, nprobe: 3, topN: 10, probe });
    expect(given.hits.length).toBeGreaterThan(0);
    expect(given.hits).toEqual(xtrSearch(one, q, 4, centroids, { kPrime: 20, nprobe: 3, topN: 10 }).hits);
    expect(() => xtrSearch(one, q, 4, centroids, { kPrime: 20, nprobe: 2, topN: 10, probe })).toThrow(/given probe is for 4 query tokens x nprobe 3, expected 4 x 2/);
  });
});
