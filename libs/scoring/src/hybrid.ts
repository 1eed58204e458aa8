import { ShapeError } from './shapes';

export type ScoreNormalization = 'none' | 'minmax' | 'zscore';

/**
 * Normalise one system's scores over the candidate set. C -> C (float64).
 * minmax: (s - min) / (max - min), all equal -> 0. zscore: (s - mean) / std (population std),
 * std = 0 -> 0. NaN marks a candidate the system did not score: it is excluded from the
 * statistics and imputed with the minimum normalised score of that system (0 when none is present).
 */
export function normalizeScores(scores: Float32Array | Float64Array, how: ScoreNormalization): Float64Array {
  const C = scores.length;
  const out = new Float64Array(C);
  let cnt = 0, min = Infinity, max = -Infinity, sum = 0;
  for (let c = 0; c < C; c++) {
    const s = scores[c];
    if (Number.isNaN(s)) continue;
    cnt++; sum += s;
    if (s < min) min = s;
    if (s > max) max = s;
  }
  const mean = cnt ? sum / cnt : 0;
  let v = 0;
  for (let c = 0; c < C; c++) if (!Number.isNaN(scores[c])) v += (scores[c] - mean) ** 2;
  const std = cnt ? Math.sqrt(v / cnt) : 0;
  let low = Infinity;
  for (let c = 0; c < C; c++) {
    const s = scores[c];
    if (Number.isNaN(s)) continue;
    out[c] = how === 'none' ? s : how === 'minmax' ? (max > min ? (s - min) / (max - min) : 0) : std > 0 ? (s - mean) / std : 0;
    if (out[c] < low) low = out[c];
  }
  for (let c = 0; c < C; c++) if (Number.isNaN(scores[c])) out[c] = cnt ? low : 0;
  return out;
}

/**
 * Linear hybrid (ME-BERT section 5, SPEC 3.4): norm(first) + lambda * norm(second), computed over
 * the union of both systems' candidates (the caller aligns both arrays to that union; NaN = not scored).
 * first, second: C. Returns C (float64). Neither lambda nor the normalisation has a default:
 * the paper reports neither, so the caller must choose both.
 */
export function hybridLinear(first: Float32Array | Float64Array, second: Float32Array | Float64Array, lambda: number, normalization: ScoreNormalization): Float64Array {
  if (first.length !== second.length) {
    throw new ShapeError(`hybridLinear: first has length ${first.length} but second has length ${second.length}; align both to the union of candidates`);
  }
  if (!Number.isFinite(lambda)) throw new RangeError(`hybridLinear: lambda must be a finite number, got ${lambda}`);
  if (normalization !== 'none' && normalization !== 'minmax' && normalization !== 'zscore') {
    throw new RangeError(`hybridLinear: normalization must be 'none', 'minmax' or 'zscore', got ${String(normalization)}`);
  }
  const a = normalizeScores(first, normalization);
  const b = normalizeScores(second, normalization);
  for (let c = 0; c < a.length; c++) a[c] += lambda * b[c];
  return a;
}

/** Reciprocal-rank-fusion constant (Cormack et al.). */
export const RRF_K = 60;

/**
 * Reciprocal rank fusion: score(id) = sum over rankings of 1 / (k + rank), rank 1-based.
 * rankings: best-first id lists (an id may be missing from some). Returns all ids, fused score
 * descending, ties by first appearance (ranking 0 first, then ranking 1...).
 */
export function rrf(rankings: readonly (readonly string[])[], k = RRF_K): { id: string; score: number }[] {
  const acc = new Map<string, { id: string; score: number; first: number }>();
  let seen = 0;
  for (const ranking of rankings) {
    const dup = new Set<string>();
    ranking.forEach((id, r) => {
      if (dup.has(id)) throw new RangeError(`rrf: id ${JSON.stringify(id)} appears twice in one ranking`);
      dup.add(id);
      const cur = acc.get(id) ?? { id, score: 0, first: seen++ };
      cur.score += 1 / (k + r + 1);
      acc.set(id, cur);
    });
  }
  return [...acc.values()].sort((a, b) => (b.score !== a.score ? b.score - a.score : a.first - b.first)).map(({ id, score }) => ({ id, score }));
}
