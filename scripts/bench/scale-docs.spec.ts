import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { DocumentGenerator, checkScaleResult, corpusFromTexts, docId, loadSourceCorpus, percentile, summarizeRss, topOverlap } from './scale-docs';

const DATASETS = path.resolve(__dirname, '..', '..', '..', 'shared', 'datasets');

describe('bench scale: document generator', () => {
  const small = corpusFromTexts({ a: ['One two three. Four five six!', 'Seven eight nine ten.'], b: ['Alpha beta. Gamma delta. Epsilon.'] });

  it('splits passages into sentences and keeps every word occurrence for the word model', () => {
    expect(small.passages).toHaveLength(3);
    expect(small.passages[0]).toEqual([
      ['One', 'two', 'three.'],
      ['Four', 'five', 'six!'],
    ]);
    expect(small.words).toHaveLength(15);
    expect(small.sources).toEqual({ a: 2, b: 1 });
  });

  it('document i is a function of (seed, i): same text on a second generator, another with another seed', () => {
    const g1 = new DocumentGenerator(small, 7);
    const g2 = new DocumentGenerator(small, 7);
    const g3 = new DocumentGenerator(small, 8);
    const a = Array.from({ length: 50 }, (_, i) => g1.doc(i).text);
    expect(Array.from({ length: 50 }, (_, i) => g2.doc(i).text)).toEqual(a);
    // read out of order: still the same document
    expect(g2.doc(31).text).toBe(a[31]);
    const b = Array.from({ length: 50 }, (_, i) => g3.doc(i).text);
    expect(b.filter((t, i) => t !== a[i]).length).toBeGreaterThan(10);
    expect(g1.doc(12).id).toBe('scale-0000012');
    expect(docId(1_000_000)).toBe('scale-1000000');
  });

  it('with no substitution a document is a sentence permutation of one source passage (same words, same length)', () => {
    const g = new DocumentGenerator(small, 3, 0);
    const sources = small.passages.map((p) => p.flat().sort().join(' '));
    for (let i = 0; i < 40; i++) expect(sources).toContain(g.doc(i).text.split(' ').sort().join(' '));
  });

  it('on the vendored corpora: realistic lengths (the sources\' distribution), ~15% words substituted, varied texts', () => {
    const corpus = loadSourceCorpus(DATASETS);
    expect(corpus.sources['trec-dl-2019']).toBeGreaterThan(4000);
    expect(corpus.sources.vaswani).toBe(11429);
    expect(corpus.sources.cranfield).toBeGreaterThan(1390);
    expect(corpus.queries.length).toBeGreaterThan(300);
    const g = new DocumentGenerator(corpus, 1);
    const n = 4000;
    const lengths: number[] = [];
    const texts = new Set<string>();
    for (let i = 0; i < n; i++) {
      const t = g.doc(i).text;
      texts.add(t);
      lengths.push(t.split(' ').length);
    }
    const srcLengths = corpus.passages.map((p) => p.flat().length);
    const mean = (xs: number[]) => xs.reduce((s, x) => s + x, 0) / xs.length;
    // Same length distribution as the sources, within sampling error (4,000 draws).
    expect(Math.abs(mean(lengths) - mean(srcLengths)) / mean(srcLengths)).toBeLessThan(0.05);
    expect(Math.abs(percentile(lengths, 50) - percentile(srcLengths, 50))).toBeLessThanOrEqual(3);
    expect(percentile(lengths, 5)).toBeGreaterThan(5);
    expect(percentile(lengths, 95)).toBeLessThan(400);
    // Passages drawn twice mostly differ (shuffle + substitutions); a one-sentence passage of a
    // few words drawn twice with no substitution repeats, as duplicates do in real collections.
    expect(texts.size).toBeGreaterThan(0.99 * n);
    // Substitution rate: words of document 0 not at their place in its source's sentences.
    const g0 = new DocumentGenerator(corpus, 1, 0);
    let same = 0;
    let total = 0;
    for (let i = 0; i < 300; i++) {
      const a = g.doc(i).text.split(' ');
      const b = g0.doc(i).text.split(' ');
      // Same stream up to the substitution draws, so compare as multisets.
      const count = new Map<string, number>();
      for (const w of b) count.set(w, (count.get(w) ?? 0) + 1);
      for (const w of a) {
        const c = count.get(w) ?? 0;
        if (c > 0) {
          count.set(w, c - 1);
          same++;
        }
      }
      total += a.length;
    }
    const substituted = 1 - same / total;
    expect(substituted).toBeGreaterThan(0.08);
    expect(substituted).toBeLessThan(0.2);
  });
});

describe('bench scale: percentiles, RSS summary, JSON line', () => {
  it('percentile interpolates between closest ranks', () => {
    expect(percentile([5, 1, 3, 2, 4], 50)).toBe(3);
    expect(percentile([1, 2, 3, 4], 50)).toBe(2.5);
    expect(percentile([1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11], 95)).toBe(10.5);
    expect(percentile([7], 95)).toBe(7);
    expect(percentile([], 50)).toBeNaN();
  });

  it('summarizeRss: peak, steady (last third), quarters show a climb', () => {
    const flat = summarizeRss([100, 300, 200, 200, 201, 199, 200, 200, 202, 200, 199, 200]);
    expect(flat).toMatchObject({ peakMb: 300, steadyMb: 200, samples: 12 });
    expect(flat!.q4Mb - flat!.q2Mb).toBeLessThan(2);
    const climbing = summarizeRss(Array.from({ length: 40 }, (_, i) => 100 + 10 * i));
    expect(climbing!.q4Mb).toBeGreaterThan(climbing!.q2Mb + 150);
    expect(summarizeRss([])).toBeNull();
    // A sample of a process on its way out (no VmRSS) is not a peak of NaN.
    expect(summarizeRss([100, NaN, 120])).toMatchObject({ peakMb: 120, samples: 2 });
  });

  it('checkScaleResult accepts the documented shape and names what is missing or mis-shaped', () => {
    const ok = {
      docs: 10,
      tokens: 500,
      ingest_docs_per_s: 5,
      bytes_per_token: 60,
      rss_peak_mb: { api: 100, scorer: 200 },
      rerank_p50_ms: { warm_100: 10 },
      rerank_p95_ms: { warm_100: 12 },
      search_p50_ms: { xtr: 20, bm25: 5 },
    };
    expect(() => checkScaleResult(ok)).not.toThrow();
    const { tokens: _t, ...noTokens } = ok;
    expect(() => checkScaleResult(noTokens)).toThrow('missing tokens');
    expect(() => checkScaleResult({ ...ok, rss_peak_mb: 5 })).toThrow('rss_peak_mb must be an object keyed by process');
    expect(() => checkScaleResult({ ...ok, search_p50_ms: { xtr: 'fast' } })).toThrow('search_p50_ms.xtr must be a number');
  });

  it('topOverlap: mean and worst top-k agreement with the reference, queries without reference hits left out', () => {
    const want = new Map([
      ['a', ['1', '2', '3', '4']],
      ['b', ['5', '6']],
      ['c', []],
      ['d', ['9']],
    ]);
    const got = new Map([
      ['a', ['2', '1', '7', '3']], // 3 of 4
      ['b', ['6', '5']], // 2 of 2, order does not matter
      ['c', ['1']], // no reference hits: not counted
    ]); // d missing: 0 of 1
    const o = topOverlap(want, got, 4)!;
    expect(o.queries).toBe(3);
    expect(o.mean).toBeCloseTo((0.75 + 1 + 0) / 3, 12);
    expect(o.min).toBe(0);
    // only the top k of each side counts
    expect(topOverlap(new Map([['a', ['1', '2', '3']]]), new Map([['a', ['3', '4', '1']]]), 2)).toEqual({ mean: 0, min: 0, queries: 1 });
    expect(topOverlap(new Map([['c', []]]), got)).toBeNull();
  });
});
