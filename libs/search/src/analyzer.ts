import { stemmer } from 'stemmer';

/**
 * BM25's text analysers (SPEC 3.6): what a collection's BM25 counts as a term.
 *
 * - `english` (the default of collections created since analysers exist): Lucene's / Anserini's
 *   English analysis, the one users compare BM25 with. Words are runs of letters, digits, marks
 *   and underscores (Unicode), joined across an apostrophe or a period between two of them as
 *   UAX #29 (Lucene's StandardTokenizer) does ("don't", "u.s.a", "3.14"); lowercased; a trailing
 *   possessive `'s` dropped (EnglishPossessiveFilter); Lucene's 33 English stop words removed;
 *   stemmed with Porter's algorithm (the npm package `stemmer`, Porter 1980 as Lucene's
 *   PorterStemFilter). A term is the 32-bit FNV-1a hash of the stem's UTF-8 bytes, read as a
 *   signed integer: the postings keep their integer layout (docs/segment-format.md). Two stems
 *   that share a hash are one term (about V^2 / 2^33 such pairs among V distinct stems: none
 *   expected below ~50,000 stems, ~1 at 100,000, ~100 at 1,000,000, each merging two rare words).
 * - `pieces`: the encoder's sub-word token ids, special and punctuation tokens left out (what
 *   BM25 counted before analysers existed; collections created before then keep it).
 *
 * The names are @lateral/shared's BM25_ANALYZERS (a collection's `bm25.analyzer`).
 * Pure: the same text always gives the same terms, on every machine.
 */
/** Lucene's EnglishAnalyzer.ENGLISH_STOP_WORDS_SET (also Anserini's default). */
export const ENGLISH_STOP_WORDS: ReadonlySet<string> = new Set([
  'a', 'an', 'and', 'are', 'as', 'at', 'be', 'but', 'by', 'for', 'if', 'in', 'into', 'is', 'it', 'no', 'not', 'of', 'on', 'or', 'such',
  'that', 'the', 'their', 'then', 'there', 'these', 'they', 'this', 'to', 'was', 'will', 'with',
]);

/** Words longer than this (in UTF-16 units) are dropped, as Lucene's tokenizer drops tokens over 255 characters. */
export const MAX_WORD_LENGTH = 255;

const WORD = /[\p{L}\p{N}\p{M}_]+(?:['\u2019.][\p{L}\p{N}\p{M}_]+)*/gu;

/** The analysed words of a text (`english`), in order; a word may repeat. */
export function englishTerms(text: string): string[] {
  const out: string[] = [];
  for (const m of text.matchAll(WORD)) {
    let w = m[0];
    if (w.length > MAX_WORD_LENGTH) continue;
    w = w.toLowerCase();
    if (w.endsWith("'s") || w.endsWith('\u2019s')) w = w.slice(0, -2);
    if (w.length === 0 || ENGLISH_STOP_WORDS.has(w)) continue;
    out.push(stemmer(w));
  }
  return out;
}

const encoder = new TextEncoder();

/** A stem's term id: FNV-1a (32-bit) of its UTF-8 bytes, as a signed 32-bit integer. */
export function termHash(word: string): number {
  let h = 0x811c9dc5;
  for (const byte of encoder.encode(word)) {
    h ^= byte;
    h = Math.imul(h, 0x01000193);
  }
  return h | 0;
}

/** The term ids of a text under the `english` analyser, in order (one per kept word). */
export function englishTermIds(text: string): Int32Array {
  const words = englishTerms(text);
  const ids = new Int32Array(words.length);
  for (let i = 0; i < words.length; i++) ids[i] = termHash(words[i]);
  return ids;
}

/** The term ids of many texts, concatenated, with offsets (texts + 1), as BM25 postings are built from. */
export function analyzeTexts(texts: readonly string[]): { tokenIds: Int32Array; tokenOffsets: Uint32Array } {
  const parts = texts.map(englishTermIds);
  const tokenOffsets = new Uint32Array(texts.length + 1);
  for (let i = 0; i < parts.length; i++) tokenOffsets[i + 1] = tokenOffsets[i] + parts[i].length;
  const tokenIds = new Int32Array(tokenOffsets[texts.length]);
  parts.forEach((p, i) => tokenIds.set(p, tokenOffsets[i]));
  return { tokenIds, tokenOffsets };
}
