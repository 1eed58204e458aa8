/**
 * Ranking metrics of every evaluation in scripts/ (Cranfield, TREC DL re-ranking, the compression
 * sweeps, the negation benchmark, the demo); nDCG is @lateral/scoring's (libs/scoring/src/ndcg.ts).
 *
 * Conventions (trec_eval's, which published TREC DL figures use):
 * - nDCG@k has LINEAR gain: DCG = sum_{r < k} gain(ranking[r]) / log2(r + 2), a missing or
 *   negative judgement counts 0; the ideal DCG sorts every positive judged gain of the query
 *   (not only the retrieved ones) descending. 0 when the query has no positive judgement.
 * - Binary measures (recall@k, reciprocal rank@k) take a set of relevant ids, e.g. the ids judged
 *   at or above a grade (`relevantAtLeast`) or another run's top k (overlap with a reference).
 * Ids may be of any type (strings for document ids, numbers for positions).
 */

import type { Judgments } from '@lateral/scoring';

/** nDCG lives in @lateral/scoring (one implementation, also the trainer's): re-exported for the scripts. */
export { dcgAt, idealDcgAt, ndcgAt, type Judgments } from '@lateral/scoring';

/** Gain 1 for every id of `relevant`: nDCG@k with binary relevance. */
export function binaryJudgments<K>(relevant: Iterable<K>): Map<K, number> {
  return new Map(Array.from(relevant, (id) => [id, 1] as [K, number]));
}

/** The ids judged `minGrade` or higher (TREC DL's binary measures use grade >= 2). */
export function relevantAtLeast<K>(judged: Judgments<K>, minGrade: number): Set<K> {
  const out = new Set<K>();
  for (const [id, g] of judged) if (g >= minGrade) out.add(id);
  return out;
}

/** Whether any judgement is positive: the queries an evaluation averages over. */
export function hasRelevant<K>(judged: Judgments<K> | undefined): boolean {
  if (!judged) return false;
  for (const g of judged.values()) if (g > 0) return true;
  return false;
}

/** |first k of ranking ∩ relevant| / |relevant|; 0 when `relevant` is empty. */
export function recallAt<K>(ranking: readonly K[], relevant: ReadonlySet<K>, k = 10): number {
  if (relevant.size === 0) return 0;
  let found = 0;
  for (let r = 0; r < Math.min(k, ranking.length); r++) if (relevant.has(ranking[r]!)) found++;
  return found / relevant.size;
}

/** 1 / (rank of the first relevant id), counting ranks from 1, within the first k; 0 when none. */
export function reciprocalRankAt<K>(ranking: readonly K[], relevant: ReadonlySet<K>, k = 10): number {
  for (let r = 0; r < Math.min(k, ranking.length); r++) if (relevant.has(ranking[r]!)) return 1 / (r + 1);
  return 0;
}

/** Positions sorted by descending score; ties keep the input order (first-stage or corpus order). */
export function orderByScore(scores: ArrayLike<number>): number[] {
  return Array.from({ length: scores.length }, (_, i) => i).sort((a, b) => scores[b]! - scores[a]! || a - b);
}

/** `ids` ranked by descending score, ties in input order. */
export function rankByScore<K>(scores: ArrayLike<number>, ids: readonly K[]): K[] {
  return orderByScore(scores).map((i) => ids[i]!);
}

/** Arithmetic mean (0 for no values), summed in order. */
export function mean(values: readonly number[]): number {
  return values.length ? values.reduce((a, b) => a + b, 0) / values.length : 0;
}

/**
 * Paired per-query comparison with a reference run: the mean of (value - reference) and its
 * standard error, sqrt(sample variance / n) (0 for fewer than two queries).
 */
export function pairedDifference(values: readonly number[], reference: readonly number[]): { mean: number; se: number } {
  if (values.length !== reference.length) throw new Error(`pairedDifference: ${values.length} values against ${reference.length} reference values`);
  const diffs = values.map((v, i) => v - reference[i]!);
  const m = diffs.reduce((a, b) => a + b, 0) / diffs.length;
  const se = diffs.length > 1 ? Math.sqrt(diffs.reduce((a, b) => a + (b - m) ** 2, 0) / (diffs.length - 1) / diffs.length) : 0;
  return { mean: m, se };
}
