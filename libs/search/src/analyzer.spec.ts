import { describe, expect, it } from 'vitest';
import { analyzeTexts, englishTermIds, englishTerms, ENGLISH_STOP_WORDS, MAX_WORD_LENGTH, termHash } from './analyzer';
import { buildBm25Postings } from './segment-index';
import { bm25Query, bm25SegmentSearch, segmentBm25Stats } from './bm25';
import type { SearchSegment } from './types';

describe('english analyser', () => {
  it('lowercases, drops stop words and possessives, and Porter-stems', () => {
    expect(englishTerms("The Running of the BULLS: John's dogs are barking, and it flies.")).toEqual(['run', 'bull', 'john', 'dog', 'bark', 'fli']);
  });

  it('keeps apostrophes and periods between letters or digits inside one word (UAX #29), and splits on other punctuation', () => {
    expect(englishTerms("don't stop: U.S.A. 3.14 e-mail foo_bar")).toEqual(["don't", 'stop', 'u.s.a', '3.14', 'e', 'mail', 'foo_bar']);
  });

  it('treats the typographic apostrophe like the ASCII one', () => {
    expect(englishTerms('John\u2019s')).toEqual(['john']);
  });

  it('keeps letters of any script and drops words over the length limit', () => {
    expect(englishTerms('Größe naïve café 東京')).toEqual(['größe', 'naïv', 'café', '東京']);
    expect(englishTerms(`${'x'.repeat(MAX_WORD_LENGTH + 1)} word`)).toEqual(['word']);
  });

  it("uses Lucene's 33 English stop words", () => {
    expect(ENGLISH_STOP_WORDS.size).toBe(33);
    expect(englishTerms([...ENGLISH_STOP_WORDS].join(' '))).toEqual([]);
  });

  it('hashes a stem with 32-bit FNV-1a over its UTF-8 bytes (signed)', () => {
    // FNV-1a test vectors: "" -> 0x811c9dc5, "a" -> 0xe40c292c, "foobar" -> 0xbf9cf968
    expect(termHash('')).toBe(0x811c9dc5 | 0);
    expect(termHash('a')).toBe(0xe40c292c | 0);
    expect(termHash('foobar')).toBe(0xbf9cf968 | 0);
    // UTF-8, not UTF-16 units: "é" is the two bytes c3 a9
    let h = 0x811c9dc5;
    for (const b of [0xc3, 0xa9]) h = Math.imul(h ^ b, 0x01000193);
    expect(termHash('é')).toBe(h | 0);
  });

  it('gives the same ids for inflections of one word, in text order', () => {
    const a = englishTermIds('connection connected');
    expect(a.length).toBe(2);
    expect(a[0]).toBe(a[1]);
    expect(a[0]).toBe(termHash('connect'));
  });

  it('concatenates the texts of a batch with offsets', () => {
    const { tokenIds, tokenOffsets } = analyzeTexts(['cats and dogs', '', 'the end']);
    expect(Array.from(tokenOffsets)).toEqual([0, 2, 2, 3]);
    expect(Array.from(tokenIds)).toEqual([termHash('cat'), termHash('dog'), termHash('end')]);
  });
});

describe('BM25 over analysed words', () => {
  it('matches a query to documents by stem, not by surface form, and scores as the textbook formula', () => {
    const docs = ['Aircraft wings were tested.', 'A wing of the building.', 'Boundary layers of flows.'];
    const { tokenIds, tokenOffsets } = analyzeTexts(docs);
    const bm25 = buildBm25Postings(tokenIds, tokenOffsets);
    const index = { documents: docs.length, bm25 } as unknown as Parameters<typeof bm25SegmentSearch>[1];
    const seg = { name: 's', documents: docs.length, docBase: 0 } as unknown as SearchSegment;
    const q = bm25Query(englishTermIds('tested wing'), segmentBm25Stats(index));
    const hits = bm25SegmentSearch(seg, index, q, 10);
    expect(Array.from(hits.docs)).toEqual([0, 1]);
    // |D|: aircraft, wing, were, test = 4 ("were" is no Lucene stop word); wing, build = 2; boundari, layer, flow = 3; avgdl = 3, N = 3
    expect(Array.from(bm25.docLengths)).toEqual([4, 2, 3]);
    const k1 = 0.9, b = 0.4, avgdl = 3;
    const idf = (df: number) => Math.log(1 + (3 - df + 0.5) / (df + 0.5));
    const part = (len: number) => (1 * (k1 + 1)) / (1 + k1 * (1 - b + (b * len) / avgdl));
    expect(hits.scores[0]).toBeCloseTo(idf(1) * part(4) + idf(2) * part(4), 12);
    expect(hits.scores[1]).toBeCloseTo(idf(2) * part(2), 12);
  });
});
