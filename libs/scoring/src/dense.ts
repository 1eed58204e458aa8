import { assertDim, assertMatrix, ShapeError } from './shapes';

/**
 * Mean pooling of a document's (or query's) token vectors into one vector (SPEC section 1, DE).
 * vectors: m x d. Returns d (float32).
 * normalize (default true): L2-normalise the mean so `dense` is a cosine. A zero mean (including
 * m = 0) stays the zero vector rather than becoming NaN.
 */
export function meanPool(vectors: Float32Array, m: number, d: number, normalize = true): Float32Array {
  assertDim('meanPool', 'm', m);
  assertDim('meanPool', 'd', d, 1);
  assertMatrix('meanPool', 'vectors', vectors, m, d, 'm', 'd');
  const acc = new Float64Array(d);
  for (let j = 0; j < m; j++) for (let k = 0; k < d; k++) acc[k] += vectors[j * d + k];
  const out = new Float32Array(d);
  if (m === 0) return out;
  let norm = 0;
  for (let k = 0; k < d; k++) {
    acc[k] /= m;
    norm += acc[k] * acc[k];
  }
  const scale = normalize ? (norm > 0 ? 1 / Math.sqrt(norm) : 0) : 1;
  for (let k = 0; k < d; k++) out[k] = acc[k] * scale;
  return out;
}

/**
 * Single-vector score (DE): the inner product of two pooled vectors.
 * qVec: d, dVec: d. Returns a scalar (float64 accumulation).
 */
export function dense(qVec: Float32Array, dVec: Float32Array): number {
  if (qVec.length !== dVec.length) {
    throw new ShapeError(`dense: qVec has d = ${qVec.length} but dVec has d = ${dVec.length}; both must be d-vectors of the same length`);
  }
  let s = 0;
  for (let k = 0; k < qVec.length; k++) s += qVec[k] * dVec[k];
  return s;
}

/**
 * Dense scores of one query vector against C pooled candidates.
 * qVec: d; dVecs: C x d. Returns C (float32).
 */
export function denseBatch(qVec: Float32Array, dVecs: Float32Array, d: number): Float32Array {
  assertDim('denseBatch', 'd', d, 1);
  if (qVec.length !== d) throw new ShapeError(`denseBatch: qVec has length ${qVec.length}, expected d = ${d}`);
  if (dVecs.length % d !== 0) throw new ShapeError(`denseBatch: dVecs has length ${dVecs.length}, expected C x d with d = ${d}`);
  const C = dVecs.length / d;
  const out = new Float32Array(C);
  for (let c = 0; c < C; c++) {
    let s = 0;
    for (let k = 0; k < d; k++) s += qVec[k] * dVecs[c * d + k];
    out[c] = s;
  }
  return out;
}
