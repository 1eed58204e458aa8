import { ShapeError } from './shapes';

/** One query token's retrieved document tokens, best first: owning document index and score. */
export interface XtrRetrieved {
  docs: Uint32Array | Int32Array | number[];
  scores: Float32Array | Float64Array | number[];
}

export interface XtrScores {
  /** candidate document indices, in order of first retrieval (query token 0's list first) */
  docs: Uint32Array;
  /** their XTR scores */
  scores: Float64Array;
  /** m_i, the imputed similarity of each query token (n) */
  imputed: Float64Array;
}

/**
 * XTR inference scoring from retrieved tokens only (XTR section 3.2, SPEC 3.2).
 * retrieved: n lists, list i = query token i's top-k' document tokens in descending score order.
 * m_i = the last (k'-th, or last if fewer) score of list i; an empty list imputes m_i = 0.
 * score(D) = (sum_i m_i + sum_{i in R(D)} (s_iD - m_i)) / n, s_iD = the first (best) hit of D in list i.
 * O(n k') hash-map updates; never touches a document's full token set.
 * Throws on a list that is not in non-increasing order or whose arrays differ in length.
 */
export function xtrAggregate(retrieved: XtrRetrieved[]): XtrScores {
  const n = retrieved.length;
  const imputed = new Float64Array(n);
  let base = 0;
  for (let i = 0; i < n; i++) {
    const { docs, scores } = retrieved[i];
    if (docs.length !== scores.length) {
      throw new ShapeError(`xtrAggregate: query token ${i} has ${docs.length} docs but ${scores.length} scores; both must have k' entries`);
    }
    imputed[i] = scores.length > 0 ? scores[scores.length - 1] : 0;
    base += imputed[i];
  }
  const slot = new Map<number, number>();
  const order: number[] = [];
  const delta: number[] = [];
  // lastSeen[c] = i + 1 when candidate c already took its best hit from list i
  const lastSeen: number[] = [];
  for (let i = 0; i < n; i++) {
    const { docs, scores } = retrieved[i];
    const mi = imputed[i];
    for (let r = 0; r < docs.length; r++) {
      if (r > 0 && scores[r] > scores[r - 1]) {
        throw new ShapeError(`xtrAggregate: query token ${i}'s list must be in descending score order, but scores[${r - 1}] = ${scores[r - 1]} < scores[${r}] = ${scores[r]}`);
      }
      const doc = docs[r];
      let c = slot.get(doc);
      if (c === undefined) {
        c = order.length;
        slot.set(doc, c);
        order.push(doc);
        delta.push(0);
        lastSeen.push(0);
      }
      if (lastSeen[c] !== i + 1) {
        lastSeen[c] = i + 1;
        delta[c] += scores[r] - mi;
      }
    }
  }
  const outScores = new Float64Array(order.length);
  for (let c = 0; c < order.length; c++) outScores[c] = n === 0 ? 0 : (base + delta[c]) / n;
  return { docs: Uint32Array.from(order), scores: outScores, imputed };
}
