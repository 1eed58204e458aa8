import { ShapeError } from './shapes';

export interface ScoredId {
  id: string;
  score: number;
}

/**
 * The k best (id, score) pairs. scores: C, ids: C. Returns min(k, C) entries.
 * Order (deterministic): higher score first; equal scores keep input order (lower index first);
 * NaN ranks after every number (including -Infinity), NaNs in input order. -0 and +0 are equal.
 */
export function topK(scores: Float32Array, ids: string[], k: number): ScoredId[] {
  if (scores.length !== ids.length) {
    throw new ShapeError(`topK: scores has length ${scores.length} but ids has length ${ids.length}; both must have C entries`);
  }
  if (!Number.isInteger(k) || k < 0) throw new RangeError(`topK: k must be an integer >= 0, got ${k}`);
  const C = scores.length;
  const idx = new Uint32Array(C);
  for (let c = 0; c < C; c++) idx[c] = c;
  const order = Array.from(idx).sort((a, b) => {
    const sa = scores[a], sb = scores[b];
    const na = Number.isNaN(sa), nb = Number.isNaN(sb);
    if (na || nb) return na === nb ? a - b : na ? 1 : -1;
    if (sa !== sb) return sb > sa ? 1 : -1;
    return a - b;
  });
  const out: ScoredId[] = [];
  for (let r = 0; r < Math.min(k, C); r++) out.push({ id: ids[order[r]], score: scores[order[r]] });
  return out;
}
