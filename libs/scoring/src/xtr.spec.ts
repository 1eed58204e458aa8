import { describe, expect, it } from 'vitest';
import { maxsim } from './maxsim';
import { intMatrix, rng } from './test-utils';
import { xtrScores } from './xtr';

/** Candidates concatenated in CSR form. */
function csr(docs: Float32Array[], d: number): { docs: Float32Array; offsets: Uint32Array } {
  const offsets = new Uint32Array(docs.length + 1);
  docs.forEach((x, c) => (offsets[c + 1] = offsets[c] + x.length / d));
  const all = new Float32Array(offsets[docs.length] * d);
  docs.forEach((x, c) => all.set(x, offsets[c] * d));
  return { docs: all, offsets };
}

describe('xtrScores', () => {
  it("k' >= all candidate tokens: every candidate scores maxsim / n; an empty one gets the imputed base (integer vectors, exact)", () => {
    const r = rng(31);
    const d = 3, n = 4;
    const q = intMatrix(r, n, d);
    const parts = [intMatrix(r, 2, d), new Float32Array(0), intMatrix(r, 5, d), intMatrix(r, 1, d)];
    const { docs, offsets } = csr(parts, d);
    const T = offsets[parts.length];
    const got = xtrScores(q, n, docs, offsets, d, T);
    // the imputed similarity of query token i is its smallest similarity over all T tokens
    let base = 0;
    for (let i = 0; i < n; i++) {
      let m = Infinity;
      for (let t = 0; t < T; t++) {
        let s = 0;
        for (let k = 0; k < d; k++) s += q[i * d + k] * docs[t * d + k];
        m = Math.min(m, s);
      }
      base += m;
    }
    parts.forEach((x, c) => expect(got[c]).toBe(x.length ? maxsim(q, n, x, x.length / d, d) / n : base / n));
  });

  it("k' = 1: only each query token's best token counts, the rest is imputed by that same score", () => {
    const q = Float32Array.of(1, 0, 0, 1); // n = 2, d = 2
    const { docs, offsets } = csr([Float32Array.of(1, 0), Float32Array.of(0, 1, 0.5, 0.5)], 2);
    // token 0 retrieves doc 0 (1), token 1 retrieves doc 1 (1): each candidate has one hit, m_i = 1
    expect(Array.from(xtrScores(q, 2, docs, offsets, 2, 1))).toEqual([1, 1]);
    expect(Array.from(xtrScores(new Float32Array(0), 0, docs, offsets, 2, 1))).toEqual([0, 0]);
  });

  it('names shapes in its errors', () => {
    expect(() => xtrScores(new Float32Array(3), 2, new Float32Array(4), Uint32Array.of(0, 2), 2, 1)).toThrow('xtrScores: q has length 3, expected n x d = 2 x 2 = 4');
    expect(() => xtrScores(new Float32Array(2), 1, new Float32Array(4), Uint32Array.of(0, 1), 2, 1)).toThrow('xtrScores: offsets[1] = 1 must equal the number of document token rows T = 2');
  });
});
