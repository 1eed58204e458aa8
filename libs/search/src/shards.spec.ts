import { describe, expect, it } from 'vitest';
import {
  bm25Query,
  bm25Search,
  bm25SegmentSearch,
  buildSegmentIndex,
  denseSearch,
  exhaustiveSearch,
  mergeHits,
  segmentBm25Stats,
  sphericalKmeans,
  sumBm25Stats,
  xtrMerge,
  xtrProbe,
  xtrSearch,
  xtrSegmentSearch,
  type Hit,
  type SearchSegment,
} from './index';
import { intMatrixCorpus, makeCorpus, randomCuts, randomUnit, rng, segmentsOf } from './test-utils';
import { mergeShardHits, xtrGlobalCut, xtrShardHits } from './shards';

/**
 * The shard merges (shards.ts, used by libs/pipeline/src/query/shard-fanout.ts) against one process holding every segment: segments are
 * dealt to shards, each shard ranks its own with the global figures, and the parent's merge must
 * give the same hits, keys, scores and explanations as the single-process search, ties included.
 */

const d = 8;
const corpus = makeCorpus(7, { documents: 120, dims: d, maxLen: 12, clusters: 6 });
const T = corpus.tokenIds.length;
const { centroids, k: K } = sphericalKmeans(corpus.vectors, T, d, 16, { seed: 5 });
const parts = (segments: SearchSegment[]) => segments.map((segment) => ({ segment, index: buildSegmentIndex(segment, centroids, d) }));
const all = parts(segmentsOf(corpus, randomCuts(rng(3), 120, 9)));
type Part = (typeof all)[number];
/** Segments dealt to shards as commits would (round-robin by position here; any assignment must work). */
const deal = (ps: Part[], shards: number, by: (i: number) => number = (i) => i % shards) =>
  Array.from({ length: shards }, (_, s) => ps.filter((_, i) => by(i) === s));
const plain = (hits: Hit[], ps: Part[]) =>
  hits.map((h) => ({ key: h.key, score: h.score, id: ps[h.segment].segment.docIds[h.doc], rows: h.explain ? Array.from(h.explain.rows) : null, sims: h.explain ? Array.from(h.explain.similarities) : null }));

/** XTR through the shard protocol: per shard lists merged within it, the global cut, each shard's hits, the parent's merge. */
function shardedXtr(shards: Part[][], q: Float32Array, n: number, kPrime: number, nprobe: number, topN: number, explain = false) {
  const probe = xtrProbe(q, n, centroids, d, nprobe);
  const perShard = shards.map((ps) => {
    const lists = ps.map((p) => xtrSegmentSearch(p.segment, p.index, q, n, probe, { kPrime }));
    return { ps, lists, merged: xtrMerge(lists) };
  });
  const imputed: number[] = [];
  const survivors: number[][] = [];
  for (let i = 0; i < n; i++) {
    const cut = xtrGlobalCut(
      perShard.map(({ merged }) => {
        const a = merged.offsets[i], b = merged.offsets[i + 1];
        return { scores: merged.scores.subarray(a, b), keys: merged.keys.subarray(a, b), rows: merged.rows.subarray(a, b) };
      }),
      kPrime,
    );
    imputed.push(cut.imputed);
    survivors.push(cut.survivors);
  }
  const lists = perShard.map(({ ps, lists: l, merged }, s) =>
    ps.length === 0 ? [] : plain(xtrShardHits(l, merged, imputed, survivors.map((c) => c[s]), { topN, explain }), ps),
  );
  return mergeShardHits(lists, topN);
}

describe('sharded XTR equals one process over every segment', () => {
  for (const shards of [1, 2, 3, 5]) {
    it(`${shards} shard(s), several k' and nprobe, with explanations`, () => {
      for (const [seed, n, kPrime, nprobe] of [[1, 4, 30, 4], [2, 7, 200, 8], [3, 1, 5, 16], [4, 9, T, K]] as const) {
        const q = randomUnit(rng(seed), n, d);
        const one = xtrSearch(all, q, n, centroids, { kPrime, nprobe, topN: 40, explain: true });
        expect(shardedXtr(deal(all, shards), q, n, kPrime, nprobe, 40, true)).toEqual(plain(one.hits, all));
      }
    });
  }

  it('whatever the assignment, an empty shard included', () => {
    const q = randomUnit(rng(11), 5, d);
    const one = plain(xtrSearch(all, q, 5, centroids, { kPrime: 25, nprobe: 6, topN: 30 }).hits, all);
    expect(shardedXtr(deal(all, 3, (i) => (i < 2 ? 2 : i % 2)), q, 5, 25, 6, 30)).toEqual(one);
    expect(shardedXtr(deal(all, 2, () => 1), q, 5, 25, 6, 30)).toEqual(one);
  });

  it('keeps the tie order on exact ties (small-integer vectors)', () => {
    const { corpus: c, q, n } = intMatrixCorpus();
    const cs = sphericalKmeans(c.vectors, c.tokenIds.length, c.dims, 2, { seed: 1 });
    const ps = segmentsOf(c, [0, 1, 2, 3, 4, 5]).map((segment) => ({ segment, index: buildSegmentIndex(segment, cs.centroids, c.dims) }));
    for (const kPrime of [1, 2, 3, 5, 19]) {
      const one = xtrSearch(ps, q, n, cs.centroids, { kPrime, nprobe: cs.k, topN: 5, explain: true });
      const probe = xtrProbe(q, n, cs.centroids, c.dims, cs.k);
      const shards = deal(ps, 2);
      const perShard = shards.map((sp) => {
        const lists = sp.map((p) => xtrSegmentSearch(p.segment, p.index, q, n, probe, { kPrime }));
        return { sp, lists, merged: xtrMerge(lists) };
      });
      const cuts = Array.from({ length: n }, (_, i) =>
        xtrGlobalCut(perShard.map(({ merged: m }) => ({ scores: m.scores.subarray(m.offsets[i], m.offsets[i + 1]), keys: m.keys.subarray(m.offsets[i], m.offsets[i + 1]), rows: m.rows.subarray(m.offsets[i], m.offsets[i + 1]) })), kPrime),
      );
      const hits = mergeShardHits(
        perShard.map(({ sp, lists, merged }, s) => plain(xtrShardHits(lists, merged, cuts.map((x) => x.imputed), cuts.map((x) => x.survivors[s]), { topN: 5, explain: true }), sp)),
        5,
      );
      expect(hits).toEqual(plain(one.hits, ps));
    }
  });
});

describe('sharded BM25, dense and exhaustive equal one process', () => {
  it('BM25 with the statistics summed over shards', () => {
    const terms = [corpus.tokenIds[3], corpus.tokenIds[40], corpus.tokenIds[77], corpus.tokenIds[3]];
    const one = plain(bm25Search(all, terms, 25), all);
    for (const shards of [2, 4]) {
      const dealt = deal(all, shards);
      // Round 1: each shard's statistics; the parent's sum is the global one.
      const global = sumBm25Stats(dealt.map((ps) => sumBm25Stats(ps.map((p) => segmentBm25Stats(p.index)))));
      const query = bm25Query(terms, global);
      const lists = dealt.map((ps) => plain(mergeHits(ps.map((p) => bm25SegmentSearch(p.segment, p.index, query, 25)), 25), ps));
      expect(mergeShardHits(lists, 25)).toEqual(one);
    }
  });

  it('dense and exhaustive (explained) top-n merged by (score, global key)', () => {
    const q = randomUnit(rng(21), 3, d);
    const qv = randomUnit(rng(22), 1, d);
    for (const shards of [2, 3]) {
      const dealt = deal(all, shards);
      expect(mergeShardHits(dealt.map((ps) => plain(denseSearch(ps, qv, 30), ps)), 30)).toEqual(plain(denseSearch(all, qv, 30), all));
      expect(mergeShardHits(dealt.map((ps) => plain(exhaustiveSearch(ps, q, 3, 30, { explain: true }), ps)), 30)).toEqual(plain(exhaustiveSearch(all, q, 3, 30, { explain: true }), all));
    }
  });
});

describe('mergeShardHits', () => {
  it('orders by score descending then global key ascending, NaN last, and cuts to n', () => {
    const a = [{ score: 3, key: 5 }, { score: 1, key: 2 }, { score: NaN, key: 0 }];
    const b = [{ score: 3, key: 1 }, { score: 2, key: 9 }, { score: 1, key: 1 }];
    expect(mergeShardHits([a, b], 10).map((h) => [h.score, h.key])).toEqual([[3, 1], [3, 5], [2, 9], [1, 1], [1, 2], [NaN, 0]]);
    expect(mergeShardHits([a, b], 2)).toHaveLength(2);
    expect(mergeShardHits([[], []], 5)).toEqual([]);
  });
});
