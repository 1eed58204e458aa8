import { ShapeError } from '@lateral/scoring';

/**
 * CSR candidates (docs: T x d, offsets: C + 1) -> a dense [C, L, d] block. Rows past L are
 * truncated, missing rows are zero. When every candidate already has exactly L rows the input
 * buffer is returned as is (no copy).
 */
export function padCandidates(docs: Float32Array, offsets: Uint32Array, d: number, L: number): Float32Array {
  const C = offsets.length - 1;
  let uniform = docs.length === C * L * d;
  for (let c = 0; c < C && uniform; c++) if (offsets[c + 1] - offsets[c] !== L) uniform = false;
  if (uniform) return docs;
  const out = new Float32Array(C * L * d);
  for (let c = 0; c < C; c++) {
    const rows = Math.min(L, offsets[c + 1] - offsets[c]);
    out.set(docs.subarray(offsets[c] * d, (offsets[c] + rows) * d), c * L * d);
  }
  return out;
}

/** q: n x d -> exactly rows x d (truncated or zero-padded). */
export function padRows(q: Float32Array, n: number, d: number, rows: number): Float32Array {
  if (n === rows && q.length === rows * d) return q;
  const out = new Float32Array(rows * d);
  out.set(q.subarray(0, Math.min(n, rows) * d));
  return out;
}

export function checkCsr(fn: string, q: Float32Array, n: number, docs: Float32Array, offsets: Uint32Array, d: number): void {
  if (!Number.isInteger(d) || d < 1) throw new ShapeError(`${fn}: d must be an integer >= 1, got ${d}`);
  if (q.length !== n * d) throw new ShapeError(`${fn}: q has length ${q.length}, expected n x d = ${n} x ${d} = ${n * d}`);
  if (docs.length % d !== 0) throw new ShapeError(`${fn}: docs has length ${docs.length}, expected T x d with d = ${d}`);
  if (offsets.length < 1 || offsets[0] !== 0 || offsets[offsets.length - 1] !== docs.length / d) {
    throw new ShapeError(`${fn}: offsets must start at 0 and end at T = ${docs.length / d}, got [${offsets[0]}..${offsets[offsets.length - 1]}] (${offsets.length} entries)`);
  }
  for (let c = 1; c < offsets.length; c++) {
    if (offsets[c] < offsets[c - 1]) throw new ShapeError(`${fn}: offsets must be non-decreasing, offsets[${c - 1}] = ${offsets[c - 1]} > offsets[${c}] = ${offsets[c]}`);
  }
}
