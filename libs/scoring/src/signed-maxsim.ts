import { assertDim, assertMatrix, ShapeError } from './shapes';

/**
 * Signed MaxSim (Signed MaxSim paper section 3.3, SPEC section 1). Every token carries a vector
 * and a signed real weight. For query token i: j* = argmax_j <q_i, d_j> over the vectors only
 * (ties: the lowest j wins), and the score adds qW[i] * dW[j*] * <q_i, d_j*>.
 * The weight cannot be folded into the document vector: that would change the argmax.
 * q: n x d, qWeights: n, doc: m x d, dWeights: m. Returns a scalar.
 * Only the m real document rows are visited (padding is masked, never an implicit zero pair);
 * add an explicit (0, +1) token to a document to get the theory's "zero pair".
 * Empty document (m = 0): -Infinity, as for maxsim; empty query: 0.
 */
export function signedMaxsim(
  q: Float32Array, qWeights: Float32Array, n: number,
  doc: Float32Array, dWeights: Float32Array, m: number, d: number,
): number {
  const fn = 'signedMaxsim';
  assertDim(fn, 'n', n);
  assertDim(fn, 'm', m);
  assertDim(fn, 'd', d, 1);
  assertMatrix(fn, 'q', q, n, d, 'n', 'd');
  assertMatrix(fn, 'doc', doc, m, d, 'm', 'd');
  if (qWeights.length !== n) throw new ShapeError(`${fn}: qWeights has length ${qWeights.length}, expected n = ${n}`);
  if (dWeights.length !== m) throw new ShapeError(`${fn}: dWeights has length ${dWeights.length}, expected m = ${m}`);
  if (n === 0) return 0;
  if (m === 0) return -Infinity;
  let total = 0;
  for (let i = 0; i < n; i++) {
    let best = -Infinity;
    let arg = 0;
    for (let j = 0; j < m; j++) {
      let s = 0;
      for (let k = 0; k < d; k++) s += q[i * d + k] * doc[j * d + k];
      if (s > best) { best = s; arg = j; } // strict: lowest j on ties
    }
    total += qWeights[i] * dWeights[arg] * best;
  }
  return total;
}
