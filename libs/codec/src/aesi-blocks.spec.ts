import { describe, expect, it } from 'vitest';
import { AESI_TOKEN_BLOCK, aesiDecode, aesiDecoderLength, aesiEncode, aesiEncoderLength, aesiTwoLayerPerToken, type AesiShape } from './aesi';
import { rng } from './test-utils';

/**
 * The token-blocked AESI halves are the per-token loop's numbers, bit for bit: every token count
 * around the block size (full blocks, remainders, none), zeros in the inputs (skipped by the
 * per-token loop, added as 0 by the blocks), plain arrays as well as typed ones.
 */
describe('AESI encode / decode in token blocks', () => {
  const shape: AesiShape = { inputDims: 12, sideDims: 9, codeDims: 5, width: 23 };
  const r = rng(7);
  const rand = (n: number, zeros = 0.1) => Float32Array.from({ length: n }, () => (r() < zeros ? 0 : (r() * 2 - 1) * 1.5));
  const enc = rand(aesiEncoderLength(shape), 0);
  const dec = rand(aesiDecoderLength(shape), 0);
  const bitEqual = (a: Float64Array, b: Float64Array) => {
    expect(a.length).toBe(b.length);
    const ua = new BigUint64Array(a.buffer, a.byteOffset, a.length);
    const ub = new BigUint64Array(b.buffer, b.byteOffset, b.length);
    for (let i = 0; i < a.length; i++) if (ua[i] !== ub[i]) throw new Error(`value ${i}: ${a[i]} vs ${b[i]}`);
  };

  it.each(Array.from({ length: 3 * AESI_TOKEN_BLOCK }, (_, m) => m))('%i tokens', (m) => {
    const v = rand(m * shape.inputDims, 0.2);
    const u = rand(m * shape.sideDims, 0.2);
    if (m >= 2) u.fill(0, shape.sideDims, 2 * shape.sideDims); // one token without side information
    const z = aesiEncode(shape, enc, v, u, m);
    bitEqual(z, aesiTwoLayerPerToken(enc, v, shape.inputDims, u, shape.sideDims, m, shape.width, shape.codeDims));
    const back = aesiDecode(shape, dec, z, u, m);
    bitEqual(back, aesiTwoLayerPerToken(dec, z, shape.codeDims, u, shape.sideDims, m, shape.width, shape.inputDims));
    // plain arrays in: the same
    bitEqual(aesiEncode(shape, enc, Array.from(v), Array.from(u), m), z);
    if (m > 0) expect(back.some((x) => x !== 0)).toBe(true);
  });
});
