import type { TokenEncoder } from '@lateral/model';

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
