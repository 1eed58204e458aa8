/**
 * Test data of the ONNX scorers' specs (runtime.spec.ts here, scripts/bench/maxsim-single-tensor.spec.ts):
 * unit-norm token rows and ragged candidates, drawn from a seeded generator (mulberry32 of
 * @lateral/shared), so a failure reproduces from its seed.
 */

/** `rows` x `d` rows, each uniform in [-0.5, 0.5) then L2-normalised. */
export function unitRows(r: () => number, rows: number, d: number): Float32Array {
  const a = new Float32Array(rows * d);
  for (let i = 0; i < rows; i++) {
    let s = 0;
    for (let k = 0; k < d; k++) {
      a[i * d + k] = r() - 0.5;
      s += a[i * d + k] ** 2;
    }
    for (let k = 0; k < d; k++) a[i * d + k] /= Math.sqrt(s);
  }
  return a;
}

/** Candidates of the given token counts: their rows back to back, and offsets (CSR, length + 1). */
export function candidates(r: () => number, lengths: number[], d: number) {
  const offsets = new Uint32Array(lengths.length + 1);
  lengths.forEach((l, c) => {
    offsets[c + 1] = offsets[c] + l;
  });
  return { docs: unitRows(r, offsets[lengths.length], d), offsets, lengths };
}

/** Candidate `c`'s rows. */
export const docOf = (docs: Float32Array, offsets: Uint32Array, c: number, d: number) => docs.subarray(offsets[c] * d, offsets[c + 1] * d);
