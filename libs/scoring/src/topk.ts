import { ShapeError } from './shapes';

export interface ScoredId {
  id: string;
  score: number;
}

/** Up to this k (and below C), topK selects the k best as it goes instead of sorting all C. */
const SELECT_MAX_K = 32;

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
  // Ranks a before b (< 0): the order above, a total order (equal scores by index).
  const before = (a: number, b: number): number => {
    const sa = scores[a], sb = scores[b];
    const na = Number.isNaN(sa), nb = Number.isNaN(sb);
    if (na || nb) return na === nb ? a - b : na ? 1 : -1;
    if (sa !== sb) return sb > sa ? 1 : -1;
    return a - b;
  };
  let order: number[];
  if (k === 0) return [];
  if (k < C && k <= SELECT_MAX_K) {
    // A few of many (a re-rank row's top 10 of 100): the k best kept in order as the scores pass, no sort of them all.
    order = [];
    for (let c = 0; c < C; c++) {
      if (order.length === k && before(c, order[k - 1]) >= 0) continue;
      let at = order.length === k ? k - 1 : order.length;
      while (at > 0 && before(c, order[at - 1]) < 0) at--;
      if (order.length === k) order.pop();
      order.splice(at, 0, c);
    }
  } else {
    const idx = new Uint32Array(C);
    for (let c = 0; c < C; c++) idx[c] = c;
    order = Array.from(idx).sort(before);
  }
  const out: ScoredId[] = [];
  for (let r = 0; r < Math.min(k, C); r++) out.push({ id: ids[order[r]], score: scores[order[r]] });
  return out;
}
