import { hybridLambda, type SearchHit, type SearchMode, type SearchRequest } from '@lateral/shared';
import { hybridLinear, rrf } from '@lateral/scoring';
import type { Hit, SearchSegment } from '@lateral/search';
import type { EncodedText, TokenEncoder } from '@lateral/model';
import type { SearchNeeds } from './search-plan';

/*
 * The hit helpers that search and re-rank share, in one process or fanned out over shards: what
 * a request reads of each segment, the fusion of two hit lists, a segment hit as a search hit, and
 * queries grouped by candidate set.
 */

/**
 * What the request reads of each segment beyond its index (SearchNeeds): BM25 and dense (and
 * their hybrid) no token rows (dense the pooled vectors, BM25 nothing beyond heads), XTR and ME-BERT (and XTR's hybrid) the rows' scores (ME-BERT
 * its segments' prefix sections where they hold m rows), exhaustive
 * their vectors; explain the token ids; a filter the metadata.
 */
export function searchNeeds(req: Pick<SearchRequest, 'mode' | 'filter' | 'explain'>): SearchNeeds {
  const m = req.mode;
  const base = m.name === 'hybrid' ? m.base : m.name;
  const rows = base === 'bm25' || base === 'dense' ? 'none' : base === 'xtr' || base === 'mebert' ? 'scores' : 'vectors';
  return { rows, tokenIds: !!req.explain, metadata: req.filter !== undefined, pooled: base === 'dense', ...(m.name === 'mebert' ? { prefixRows: m.m } : {}) };
}

/** Linear (lambda, by default hybridLambda's for the normalisation) or RRF fusion of two hit lists over their union. */
export function fuse(a: Hit[], b: Hit[], mode: Extract<SearchMode, { name: 'hybrid' }>, n: number): Hit[] {
  const byKey = new Map<number, Hit>();
  for (const h of [...a, ...b]) if (!byKey.has(h.key)) byKey.set(h.key, { ...h, explain: undefined });
  const keys = [...byKey.keys()];
  let scored: { key: number; score: number }[];
  if (mode.fusion === 'rrf') {
    const fused = rrf([a.map((h) => String(h.key)), b.map((h) => String(h.key))], mode.rrfK);
    scored = fused.map((f) => ({ key: Number(f.id), score: f.score }));
  } else {
    const sa = new Map(a.map((h) => [h.key, h.score]));
    const sb = new Map(b.map((h) => [h.key, h.score]));
    const s = hybridLinear(Float64Array.from(keys, (k) => sa.get(k) ?? NaN), Float64Array.from(keys, (k) => sb.get(k) ?? NaN), hybridLambda(mode), mode.normalization ?? 'minmax');
    scored = keys.map((key, i) => ({ key, score: s[i] }));
  }
  scored.sort((x, y) => y.score - x.score || x.key - y.key);
  return scored.slice(0, n).map(({ key, score }) => ({ ...byKey.get(key)!, score }));
}

/** A segment hit (segment, doc) as the search hit of the response: its id, score, and (explain) its token matches. */
export function toHit(h: Hit, parts: readonly { segment: Pick<SearchSegment, 'docIds' | 'tokenIds'> }[], scoredBy: string, explain: { encoder: TokenEncoder; query: EncodedText } | null): SearchHit {
  const seg = parts[h.segment].segment;
  const hit: SearchHit = { id: seg.docIds[h.doc], score: h.score, scoredBy };
  if (explain && h.explain) {
    const tok = (id: number) => explain.encoder.tokenizer.tokenizer.id_to_token(id) ?? `#${id}`;
    hit.explain = Array.from(h.explain.rows, (row, i) => ({
      queryToken: tok(explain.query.tokenIds[i]),
      docToken: row >= 0 ? tok(seg.tokenIds[row]) : '',
      similarity: h.explain!.similarities[i],
      imputed: row < 0,
    }));
  }
  return hit;
}

/** Indices of `items` grouped by `key`, groups in order of first appearance (queries sharing a candidate set are scored once). */
export function groupIndicesByKey<T>(items: readonly T[], key: (item: T) => string): Map<string, number[]> {
  const groups = new Map<string, number[]>();
  items.forEach((item, i) => {
    const k = key(item);
    const g = groups.get(k);
    if (g) g.push(i);
    else groups.set(k, [i]);
  });
  return groups;
}
