import { assertDim, assertMatrix, ShapeError } from './shapes';

/**
 * ME-BERT score (ME-BERT section 3, SPEC 1): the query is one vector, the document is represented
 * by its first `mVecs` token vectors (CLS and the next mVecs-1 positions); score = max_j <q, d_j>.
 * q: d, doc: m x d (real tokens only). Uses min(mVecs, m) rows; padded slots are never visited.
 * Empty document: -Infinity.
 */
export function mebert(q: Float32Array, doc: Float32Array, m: number, d: number, mVecs: number): number {
  const fn = 'mebert';
  assertDim(fn, 'm', m);
  assertDim(fn, 'd', d, 1);
  assertDim(fn, 'mVecs', mVecs, 1);
  if (q.length !== d) throw new ShapeError(`${fn}: q has length ${q.length}, expected d = ${d} (one query vector)`);
  assertMatrix(fn, 'doc', doc, m, d, 'm', 'd');
  let best = -Infinity;
  const rows = Math.min(m, mVecs);
  for (let j = 0; j < rows; j++) {
    let s = 0;
    for (let k = 0; k < d; k++) s += q[k] * doc[j * d + k];
    if (s > best) best = s;
  }
  return best;
}

/**
 * Deduplicate vector-level search hits to documents, keeping each document's best score
 * (SPEC 3.3: search m*K vectors, keep the max per document).
 * owners: H (document index of each hit), scores: H. Returns documents sorted by score
 * descending, ties by first appearance, at most k of them.
 */
export function dedupMaxByDoc(owners: Uint32Array | number[], scores: Float32Array | number[], k = Infinity): { doc: number; score: number }[] {
  if (owners.length !== scores.length) {
    throw new ShapeError(`dedupMaxByDoc: owners has length ${owners.length} but scores has length ${scores.length}`);
  }
  const best = new Map<number, { doc: number; score: number; first: number }>();
  for (let h = 0; h < owners.length; h++) {
    const cur = best.get(owners[h]);
    if (!cur) best.set(owners[h], { doc: owners[h], score: scores[h], first: h });
    else if (scores[h] > cur.score) cur.score = scores[h];
  }
  return [...best.values()]
    .sort((a, b) => (b.score !== a.score ? (b.score > a.score ? 1 : -1) : a.first - b.first))
    .slice(0, k)
    .map(({ doc, score }) => ({ doc, score }));
}
