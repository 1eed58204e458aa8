import { describe, expect, it } from 'vitest';
import { bm25SearchSteps, segmentBm25Stats, sumBm25Stats } from './bm25';
import { denseSearchSteps, mebertSearchSteps } from './dense';
import { exhaustiveSearchSteps } from './exhaustive';
import { sphericalKmeans } from './kmeans';
import { mergeHits, mergeIntoHits } from './merge';
import { buildSegmentIndex, type SegmentIndex } from './segment-index';
import { runSteps } from './steps';
import { Bm25StatsPass, bm25Pass, densePass, exhaustivePass, mebertPass, pairPass, xtrPass, type SegmentPass } from './stream';
import { intMatrixCorpus, makeCorpus, randomCuts, randomUnit, rng, segmentsOf, type Corpus } from './test-utils';
import type { DocMask, Hit, SearchSegment, SegmentHits } from './types';
import { mergeShardHits, xtrGlobalCut, xtrShardHits } from './shards';
import { xtrProbe, xtrSearchSteps, xtrSegmentSearch } from './xtr';
import { xtrMerge } from './xtr-merge';
import { XtrRunningMerge } from './xtr-running-merge';

const d = 8;
const corpus = makeCorpus(77, { documents: 120, dims: d, maxLen: 16, clusters: 5, vocab: 60 });
const T = corpus.tokenIds.length;
const { centroids } = sphericalKmeans(corpus.vectors, T, d, 16, { seed: 5 });

type Part = { segment: SearchSegment; index: SegmentIndex; mask?: DocMask };

function parts(c: Corpus, cuts: number[], masked: boolean): Part[] {
  const r = rng(cuts.length * 31 + (masked ? 1 : 0));
  return segmentsOf(c, cuts).map((segment) => ({
    segment,
    index: buildSegmentIndex(segment, centroids, d),
    mask: masked ? Uint8Array.from({ length: segment.documents }, () => (r() < 0.7 ? 1 : 0)) : undefined,
  }));
}

/** The pass driven as a caller does: every index counted first when asked, then each segment once, in order. */
function streamed(pass: SegmentPass, ps: Part[]): Hit[] {
  if (pass.needsStats) for (const p of ps) pass.count(p.index);
  for (let s = 0; s < ps.length; s++) runSteps(pass.visit(s, ps[s]));
  return runSteps(pass.finish(ps.length));
}

describe('segment passes (one segment at a time) equal the whole-collection searches', () => {
  const r = rng(3);
  const cases = [1, 2, 7, 40, 120].flatMap((count) => [false, true].map((masked) => ({ count, masked, ps: parts(corpus, randomCuts(r, 120, count), masked) })));
  const q = randomUnit(rng(11), 6, d);
  const pooled = randomUnit(rng(12), 1, d);
  const terms = Array.from(corpus.tokenIds.subarray(0, 9));

  it.each(cases)('dense, ME-BERT, exhaustive, BM25: $count segments, masked $masked', ({ ps }) => {
    for (const topN of [1, 5, 50, 500]) {
      expect(streamed(densePass(pooled, topN), ps)).toEqual(runSteps(denseSearchSteps(ps, pooled, topN)));
      expect(streamed(mebertPass(pooled, 3, topN, { explain: true }), ps)).toEqual(runSteps(mebertSearchSteps(ps, pooled, 3, topN, { explain: true })));
      expect(streamed(exhaustivePass(q, 6, topN, { explain: true }), ps)).toEqual(runSteps(exhaustiveSearchSteps(ps, q, 6, topN, { explain: true })));
      expect(streamed(bm25Pass(terms, topN, { k1: 1.1, b: 0.6 }), ps)).toEqual(runSteps(bm25SearchSteps(ps, terms, topN, { k1: 1.1, b: 0.6 })));
    }
  });

  it.each(cases)('XTR (hits, scores, explanations): $count segments, masked $masked', ({ ps }) => {
    for (const [n, kPrime, nprobe, topN] of [[6, 10, 3, 20], [6, 80, 16, 100], [6, 1, 5, 10], [6, 5000, 16, 500]]) {
      const qq = q.subarray(0, n * d);
      const probe = xtrProbe(qq, n, centroids, d, nprobe);
      const want = runSteps(xtrSearchSteps(ps, qq, n, centroids, { kPrime, nprobe, topN, explain: true, probe }));
      expect(streamed(xtrPass(qq, n, probe, { kPrime, topN, explain: true }), ps)).toEqual(want.hits);
    }
  });

  it('the running XTR merge equals xtrMerge over all lists, in any order of segments, and holds at most k\' entries per query token', () => {
    const ps = parts(corpus, randomCuts(rng(8), 120, 30), false);
    const n = 5;
    const qq = q.subarray(0, n * d);
    const probe = xtrProbe(qq, n, centroids, d, 8);
    for (const kPrime of [1, 7, 64, 10_000]) {
      const lists = ps.map((p) => xtrSegmentSearch(p.segment, p.index, qq, n, probe, { kPrime }));
      const running = new XtrRunningMerge(n, kPrime);
      lists.forEach((l, s) => {
        running.add(l, s);
        const m = running.merged(ps.length);
        for (let i = 0; i < n; i++) expect(m.offsets[i + 1] - m.offsets[i]).toBeLessThanOrEqual(kPrime);
      });
      expect(running.merged(ps.length)).toEqual(xtrMerge(lists));
      expect(() => running.add(lists[0], 0)).toThrow(/segment 0 added twice/);
      // Segments in any order (a search walking the generation backwards, or shuffled): the same merge.
      for (const order of [[...lists.keys()].reverse(), [...lists.keys()].sort((a, b) => ((a * 7919) % 31) - ((b * 7919) % 31))]) {
        const other = new XtrRunningMerge(n, kPrime);
        for (const s of order) other.add(lists[s], s);
        expect(other.merged(ps.length)).toEqual(xtrMerge(lists));
      }
    }
  });

  it("shards: each shard's pass answers round 1 (its merged lists) and round 2 (hits under the global cut) as xtrShardHits does, and the shards together equal one search", () => {
    const ps = parts(corpus, randomCuts(rng(10), 120, 24), true);
    const n = 6;
    const probe = xtrProbe(q, n, centroids, d, 6);
    for (const [kPrime, topN] of [[5, 10], [60, 40], [4000, 200]]) {
      const shards = [0, 1, 2].map((k) => ps.filter((_, s) => s % 3 === k));
      // round 1
      const round1 = shards.map((sp) => {
        const pass = xtrPass(q, n, probe, { kPrime, topN, explain: true });
        streamed(pass, sp);
        return { pass, merged: pass.lists(sp.length) };
      });
      const cuts = Array.from({ length: n }, (_, i) => xtrGlobalCut(round1.map(({ merged: m }) => ({ scores: m.scores.subarray(m.offsets[i], m.offsets[i + 1]), keys: m.keys.subarray(m.offsets[i], m.offsets[i + 1]), rows: m.rows.subarray(m.offsets[i], m.offsets[i + 1]) })), kPrime));
      // round 2, per shard
      const shardHits = shards.map((sp, k) => {
        const imputed = cuts.map((c) => c.imputed);
        const survivors = cuts.map((c) => c.survivors[k]);
        const got = runSteps(round1[k].pass.finishCut(sp.length, { imputed, survivors }));
        const lists = sp.map((p) => xtrSegmentSearch(p.segment, p.index, q, n, probe, { kPrime, mask: p.mask }));
        expect(got).toEqual(xtrShardHits(lists, xtrMerge(lists), imputed, survivors, { topN, explain: true }));
        return got;
      });
      const whole = runSteps(xtrSearchSteps(ps, q, n, centroids, { kPrime, nprobe: 6, topN, probe }));
      expect(mergeShardHits(shardHits, topN).map((h) => [h.key, h.score])).toEqual(whole.hits.map((h) => [h.key, h.score]));
    }
    expect(() => runSteps(xtrPass(q, n, probe, { kPrime: 5, topN: 3 }).finishCut(0, { imputed: [0], survivors: [0] }))).toThrow(/the cut is for 1/);
  });

  it("BM25 statistics alone (a shard's round 1) count the query terms as sumBm25Stats does, and visit nothing", () => {
    const ps = parts(corpus, randomCuts(rng(13), 120, 9), false);
    const counter = new Bm25StatsPass([...terms, 99_999]);
    expect(counter.visits).toBe(false);
    for (const p of ps) counter.count(p.index);
    const all = sumBm25Stats(ps.map((p) => segmentBm25Stats(p.index)));
    const got = counter.stats();
    expect([got.documents, got.totalLength]).toEqual([all.documents, all.totalLength]);
    Array.from(got.terms).forEach((t, u) => {
      const at = Array.from(all.terms).indexOf(t);
      expect(got.df[u]).toBe(at >= 0 ? all.df[at] : 0);
    });
    // given those statistics, a pass scores without counting
    const given = bm25Pass(terms, 20, {}, undefined, got);
    expect(given.needsStats).toBe(false);
    expect(streamed(given, ps)).toEqual(runSteps(bm25SearchSteps(ps, terms, 20)));
  });

  it('a hybrid pair runs both passes over one visit of each segment', () => {
    const ps = parts(corpus, randomCuts(rng(9), 120, 12), true);
    const combine = (a: Hit[], b: Hit[]) => [...a.slice(0, 3), ...b.slice(0, 3)];
    const got = streamed(pairPass(densePass(pooled, 10), bm25Pass(terms, 10), combine), ps);
    expect(got).toEqual(combine(runSteps(denseSearchSteps(ps, pooled, 10)), runSteps(bm25SearchSteps(ps, terms, 10))));
  });

  it('BM25 refuses counting after it started scoring', () => {
    const ps = parts(corpus, [0, 60, 120], false);
    const pass = bm25Pass(terms, 5);
    pass.count(ps[0].index);
    runSteps(pass.visit(0, ps[0]));
    expect(() => pass.count(ps[1].index)).toThrow(/count after the first visit/);
  });
});

describe('mergeIntoHits', () => {
  it('folding segments one by one equals mergeHits, ties included (small-integer scores)', () => {
    const { corpus: c } = intMatrixCorpus();
    const r = rng(4);
    const per: SegmentHits[] = [];
    let base = 0;
    for (let s = 0; s < 9; s++) {
      const m = 1 + Math.floor(r() * 6);
      const scores = Float64Array.from({ length: m }, () => Math.floor(r() * 3)).sort().reverse();
      per.push({ docBase: base, docs: Uint32Array.from({ length: m }, (_, i) => i), scores });
      base += m + c.lengths.length;
    }
    for (const n of [0, 1, 4, 100]) {
      let running: Hit[] = [];
      per.forEach((h, s) => (running = mergeIntoHits(running, h, s, n)));
      expect(running).toEqual(mergeHits(per, n));
    }
  });

  it('refuses a segment out of order', () => {
    expect(() => mergeIntoHits([], { docBase: 0, docs: Uint32Array.of(0, 1), scores: Float64Array.of(1, 2) }, 0, 5)).toThrow(/not in \(score desc, doc asc\) order/);
  });
});
