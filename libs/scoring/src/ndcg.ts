/**
 * nDCG, the one implementation of the repository (the trainer's held-out figure, and every
 * evaluation in scripts/ through scripts/lib/metrics.ts). trec_eval's conventions, which published
 * TREC DL figures use: LINEAR gain, DCG = sum_{r < k} gain(ranking[r]) / log2(r + 2), a missing or
 * negative judgement counts 0; the ideal DCG sorts every positive judged gain of the query (not
 * only the retrieved ones) descending. 0 when the query has no positive judgement.
 * Ids may be of any type (strings for document ids, numbers for positions).
 */

/** id -> graded judgement (gain). Ids not in the map are unjudged (gain 0). */
export type Judgments<K = string> = ReadonlyMap<K, number>;

/** Discounted cumulative gain of the first k entries of `ranking` (linear gain, log2(rank + 1) discount). */
export function dcgAt<K>(ranking: readonly K[], judged: Judgments<K>, k = 10): number {
  let dcg = 0;
  for (let r = 0; r < Math.min(k, ranking.length); r++) dcg += Math.max(0, judged.get(ranking[r]!) ?? 0) / Math.log2(r + 2);
  return dcg;
}

/** DCG of the best possible ranking of `gains`: the positive ones, descending, first k. */
export function idealDcg(gains: Iterable<number>, k = 10): number {
  const ideal = [...gains].filter((g) => g > 0).sort((a, b) => b - a);
  let idcg = 0;
  for (let r = 0; r < Math.min(k, ideal.length); r++) idcg += ideal[r]! / Math.log2(r + 2);
  return idcg;
}

/** DCG of the best possible ranking: every positive judged gain, descending, first k. */
export function idealDcgAt<K>(judged: Judgments<K>, k = 10): number {
  return idealDcg(judged.values(), k);
}

/** nDCG@k with linear gain (trec_eval's ndcg_cut_k); 0 when nothing is judged relevant. */
export function ndcgAt<K>(ranking: readonly K[], judged: Judgments<K>, k = 10): number {
  const idcg = idealDcgAt(judged, k);
  return idcg > 0 ? dcgAt(ranking, judged, k) / idcg : 0;
}
