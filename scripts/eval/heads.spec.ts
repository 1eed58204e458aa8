import { describe, expect, it } from 'vitest';
import { ndcgAt } from '../lib/metrics';
import { aesiComparison, chooseLambda, interpolate, mergeCompressionResults, parseOnlyFolds } from './heads';
import type { RerankCompressionResult } from './compression-trec-dl';

describe('eval heads: MaxSim interpolation', () => {
  it('interpolate mixes per-list z-scores: lambda 0 is MaxSim, 1 the head, a constant list counts 0', () => {
    const maxsim = [3, 1, 2];
    const head = [10, 30, 20];
    const z = (x: number[]) => {
      const m = x.reduce((a, b) => a + b, 0) / x.length;
      const sd = Math.sqrt(x.reduce((a, b) => a + (b - m) ** 2, 0) / x.length);
      return x.map((v) => (v - m) / sd);
    };
    Array.from(interpolate(maxsim, head, 0)).forEach((v, i) => expect(v).toBeCloseTo(z(maxsim)[i], 12));
    Array.from(interpolate(maxsim, head, 1)).forEach((v, i) => expect(v).toBeCloseTo(z(head)[i], 12));
    Array.from(interpolate(maxsim, head, 0.3)).forEach((v, i) => expect(v).toBeCloseTo(0.7 * z(maxsim)[i] + 0.3 * z(head)[i], 12));
    Array.from(interpolate(maxsim, [5, 5, 5], 0.5)).forEach((v, i) => expect(v).toBeCloseTo(0.5 * z(maxsim)[i], 12));
  });

  it('chooseLambda picks the best mean nDCG@10 on the lists given, ties to the smaller lambda', () => {
    const docs = ['a', 'b', 'c'];
    const list = (maxsim: number[], head: number[], relevant: string) => ({
      maxsim,
      head,
      ndcg: (s: ArrayLike<number>) => ndcgAt([0, 1, 2].sort((x, y) => s[y] - s[x] || x - y).map((i) => docs[i]), new Map([[relevant, 1]]), 10),
    });
    // MaxSim ranks the relevant document 'c' last, the head first: only the head's side helps.
    const helped = chooseLambda([list([3, 2, 1], [1, 2, 9], 'c')]);
    expect(helped.ndcg10).toBe(1);
    expect(helped.lambda).toBeGreaterThan(0);
    // the head agrees with MaxSim: every lambda ties, lambda 0 is kept
    expect(chooseLambda([list([3, 2, 1], [3, 2, 1], 'a')])).toEqual({ lambda: 0, ndcg10: 1 });
    // the head is wrong: MaxSim alone is best
    expect(chooseLambda([list([3, 2, 1], [1, 2, 9], 'a')]).lambda).toBe(0);
  });
});

describe('eval heads: the AESI comparison', () => {
  const row = (name: string, bytes: number, ndcg: number) => ({ name, bytes_per_token: bytes, 'ndcg@10': ndcg, ndcg_rel_change: ndcg / 0.7 - 1 });
  const result = (settings: ReturnType<typeof row>[]) =>
    ({ dataset: '/x/trec-dl-2019-passage', model: 'minilm-l6-384', queries: 43, fp32: { bytes_per_token: 1540, 'ndcg@10': 0.7 }, settings: [row('fp32', 1540, 0.7), ...settings] }) as unknown as RerankCompressionResult;

  it('groups the rows per (c, bits) and finds each method\'s fewest bytes within 1% of fp32', () => {
    const c = aesiComparison(
      result([row('eden-6b-c16-cross', 13, 0.6), row('eden-6b-c16-cross-side', 13, 0.699), row('aesi-6b-c16-h384', 13, 0.5), row('eden-5b-c8-cross', 6, 0.5), row('eden-5b-c8-cross-side', 6, 0.695), row('aesi-5b-c8-h384', 6, 0.3)]),
      'file.json',
    );
    expect(c.points.map((p) => [p.codeDims, p.bits])).toEqual([[8, 5], [16, 6]]);
    expect(c.points[1].noSideInfo?.name).toBe('eden-6b-c16-cross');
    expect(c.points[1].ridge?.name).toBe('eden-6b-c16-cross-side');
    expect(c.points[1].aesi).toMatchObject({ name: 'aesi-6b-c16-h384', width: 384 });
    expect(c.smallestWithin1pct.ridge?.name).toBe('eden-5b-c8-cross-side');
    expect(c.smallestWithin1pct.noSideInfo).toBeNull();
    expect(c.smallestWithin1pct.aesi).toBeNull();
    expect(c.targetMet).toBe(false);
    expect(c.dataset).toBe('trec-dl-2019-passage');
  });

  it('the target is met when AESI is within 1% at fewer bytes than the ridge predictor', () => {
    const c = aesiComparison(result([row('eden-6b-c16-cross-side', 13, 0.699), row('aesi-5b-c8-h384', 6, 0.698), row('aesi-6b-c16-h384', 13, 0.7)]), 'f');
    expect(c.smallestWithin1pct.aesi?.name).toBe('aesi-5b-c8-h384');
    expect(c.targetMet).toBe(true);
  });
});

describe('eval heads: the AESI target when no ridge point is within 1%', () => {
  const row = (name: string, bytes: number, ndcg: number) => ({ name, bytes_per_token: bytes, 'ndcg@10': ndcg, ndcg_rel_change: ndcg / 0.7 - 1 });
  const result = (settings: ReturnType<typeof row>[]) =>
    ({ dataset: '/x/trec-dl-2019-passage', model: 'minilm-l6-384', queries: 43, fp32: { bytes_per_token: 1540, 'ndcg@10': 0.7 }, settings: [row('fp32', 1540, 0.7), ...settings] }) as unknown as RerankCompressionResult;

  it('is met only if the ridge predictor missed at AESI\'s bytes per token or more', () => {
    // ridge measured only below AESI's point: nothing says it would miss at AESI's bytes
    const below = aesiComparison(result([row('eden-6b-c4-cross-side', 3.8, 0.55), row('aesi-4b-c32-h384', 17.4, 0.7)]), 'f');
    expect(below.smallestWithin1pct.ridge).toBeNull();
    expect(below.targetMet).toBe(false);
    // ridge also measured (and 13% short) at more bytes than AESI's point
    const above = aesiComparison(result([row('eden-6b-c4-cross-side', 3.8, 0.55), row('eden-4b-c64-cross-side', 34.3, 0.61), row('aesi-4b-c32-h384', 17.4, 0.7)]), 'f');
    expect(above.targetMet).toBe(true);
  });
});

describe('eval heads: --aesi-json A,B (one grid run as several processes)', () => {
  const row = (name: string, bytes: number, ndcg: number, se = 0.01) => ({ name, bytes_per_token: bytes, 'ndcg@10': ndcg, ndcg_rel_change: ndcg / 0.7 - 1, ndcg_delta_se: se, top10_recall: 0.5 });
  const result = (settings: ReturnType<typeof row>[], over: Record<string, unknown> = {}) =>
    ({ dataset: '/x/trec-dl-2019-passage', model: 'minilm-l6-384', queries: 43, documents: 4297, tokens: 325496, fp32: { bytes_per_token: 1536, 'ndcg@10': 0.7 }, settings: [row('fp32', 1536, 0.7, 0), ...settings], ms: 5, ...over }) as unknown as RerankCompressionResult;

  it('merges the settings of results of the same collection (fp32 once) and compares across them', () => {
    const c4 = result([row('eden-6b-c4-cross', 3.8, 0.5), row('eden-6b-c4-cross-side', 3.8, 0.68), row('aesi-6b-c4-h384', 3.8, 0.697, 0.012)]);
    const c8 = result([row('eden-4b-c8-cross', 4.73, 0.55), row('eden-4b-c8-cross-side', 4.73, 0.699), row('aesi-4b-c8-h384', 4.73, 0.71)], { ms: 7 });
    const merged = mergeCompressionResults([c4, c8], ['c4.out', 'c8.out']);
    expect(merged.settings.map((r) => r.name)).toEqual(['fp32', 'eden-6b-c4-cross', 'eden-6b-c4-cross-side', 'aesi-6b-c4-h384', 'eden-4b-c8-cross', 'eden-4b-c8-cross-side', 'aesi-4b-c8-h384']);
    expect(merged.ms).toBe(12);
    const c = aesiComparison(merged, 'c4.out,c8.out');
    expect(c.points.map((p) => [p.codeDims, p.bits])).toEqual([[4, 6], [8, 4]]);
    expect(c.smallestWithin1pct.ridge?.name).toBe('eden-4b-c8-cross-side');
    expect(c.smallestWithin1pct.aesi).toMatchObject({ name: 'aesi-6b-c4-h384', ndcg_delta_se: 0.012, top10_recall: 0.5 });
    expect(c.targetMet).toBe(true);
  });

  it('refuses results of another collection or encoding, naming the file', () => {
    const a = result([]);
    expect(() => mergeCompressionResults([a, result([], { queries: 10 })], ['a', 'quick.out'])).toThrow(/quick.out: queries 10/);
    expect(() => mergeCompressionResults([a, result([], { fp32: { bytes_per_token: 1536, 'ndcg@10': 0.69 } })], ['a', 'b'])).toThrow(/b: fp32 nDCG@10/);
    expect(() => mergeCompressionResults([])).toThrow(/no compression results/);
  });
});

describe('eval heads: --only-folds', () => {
  it('parses 1-based fold numbers into sorted distinct 0-based folds, and refuses folds out of range', () => {
    expect(parseOnlyFolds('', 5)).toBeUndefined();
    expect(parseOnlyFolds('5,3,4,3', 5)).toEqual([2, 3, 4]);
    expect(() => parseOnlyFolds('0', 5)).toThrow(/--only-folds/);
    expect(() => parseOnlyFolds('6', 5)).toThrow(/--only-folds/);
    expect(() => parseOnlyFolds('2.5', 5)).toThrow(/--only-folds/);
  });
});
