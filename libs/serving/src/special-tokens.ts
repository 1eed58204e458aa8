import type { TokenEncoder } from '@lateral/model';
import { bm25AnalyzerOf, type Collection } from '@lateral/shared';
import { englishTermIds } from '@lateral/search';

/** Token ids that are no words: the manifest's special and marker tokens (left out of BM25). */
export function specialTokenIds(encoder: Pick<TokenEncoder, 'manifest' | 'tokenizer'>): Set<number> {
  const m = encoder.manifest;
  const ids = new Set<number>();
  for (const t of [m.clsToken, m.sepToken, m.queryMarker, m.docMarker, m.maskToken, m.padToken]) {
    if (t === null) continue;
    const id = encoder.tokenizer.tokenizer.token_to_id(t);
    if (id !== undefined) ids.add(id);
  }
  return ids;
}

/**
 * A query's BM25 terms under the collection's analyser (@lateral/shared's bm25AnalyzerOf), and the
 * skip rule its postings were built with: `english`, the analysed words' term ids (nothing to
 * skip: stop words are gone); `pieces`, the encoder's content token ids, special and skip-listed
 * tokens left out.
 */
export function bm25QueryTerms(
  collection: Pick<Collection, 'bm25'>,
  encoder: Pick<TokenEncoder, 'manifest' | 'tokenizer'>,
  texts: readonly string[],
): { terms: number[][]; skip: ((id: number) => boolean) | undefined } {
  if (bm25AnalyzerOf(collection) === 'english') return { terms: texts.map((t) => Array.from(englishTermIds(t))), skip: undefined };
  const specials = specialTokenIds(encoder);
  const skip = (id: number) => specials.has(id) || encoder.tokenizer.skipIds.has(id);
  return { terms: texts.map((t) => Array.from(encoder.tokenizer.contentIds(t)).filter((id) => !skip(id))), skip };
}
