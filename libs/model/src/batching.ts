/**
 * Length-bucketed batching under a token budget.
 *
 * Texts are sorted by length (longest first, ties by input index so the plan is deterministic) and
 * cut greedily into batches whose padded size `count x longest` stays within `tokenBudget`. Sorting
 * keeps padding small; the budget bounds the activation memory of one `session.run`. A text longer
 * than the budget on its own still gets a batch of one.
 *
 * @param lengths sequence length of each text (input order)
 * @returns batches of input indices, each batch sorted longest first
 */
export function planBatches(lengths: ArrayLike<number>, tokenBudget: number): number[][] {
  if (!(tokenBudget > 0)) throw new RangeError(`tokenBudget must be positive, got ${tokenBudget}`);
  const order = Array.from({ length: lengths.length }, (_, i) => i).sort((a, b) => lengths[b]! - lengths[a]! || a - b);
  const batches: number[][] = [];
  let current: number[] = [];
  let padded = 0;
  for (const i of order) {
    const len = Math.max(1, lengths[i]!);
    if (current.length === 0) padded = len;
    if (current.length > 0 && (current.length + 1) * padded > tokenBudget) {
      batches.push(current);
      current = [];
      padded = len;
    }
    current.push(i);
  }
  if (current.length > 0) batches.push(current);
  return batches;
}
