import { describe, expect, it } from 'vitest';
import { CodecSettingsSchema } from '@lateral/shared';
import { edenDecodeBlock } from './eden';
import { nextPow2 } from './hadamard';
import { lloydMax } from './lloyd-max';
import { rademacher, signKey } from './prng';
import { fitCodec } from './fit-codec';
import { createCodec, unpackCodes, type DocKey } from './index';
import { readNorms } from './eden-codec';
import { gaussian } from './test-utils';

/**
 * The token layout's decode with a plain linear stage (a copy plus the mean) writes its result
 * directly: it must equal, bit for bit, the general path it replaces: every token's EDEN block
 * decoded in float64 from its unpacked codes and norm, the mean added in float64, one rounding
 * to float32 (written out here from the primitives).
 */
function reference(codes: Uint8Array, normBytes: Uint8Array, m: number, d: number, bits: number, norms: 'fp16' | 'fp32', seed: bigint, mean: Float32Array | null): Float32Array {
  const p = nextPow2(d);
  const signs = rademacher(signKey(seed, 0n, 0), p);
  const table = lloydMax(bits);
  const n = readNorms(normBytes, m, norms);
  const x = new Float64Array(m * d);
  const c = new Uint8Array(p);
  const block = new Float64Array(p);
  for (let t = 0; t < m; t++) {
    unpackCodes(codes, bits, p, t * p * bits, c);
    edenDecodeBlock(c, n[t], signs, table, block);
    for (let j = 0; j < d; j++) x[t * d + j] = block[j];
  }
  if (mean) for (let t = 0; t < m; t++) for (let j = 0; j < d; j++) x[t * d + j] += mean[j];
  return Float32Array.from(x);
}

describe('EDEN token-layout decode, plain linear stage', () => {
  for (const bits of [1, 2, 3, 4, 5, 8])
    for (const norms of ['fp32', 'fp16'] as const)
      for (const d of [100, 64, 7])
        it(`equals the general path bit for bit: ${bits} bits, ${norms} norms, d = ${d}, with and without a mean`, () => {
          const m = 9;
          const x = gaussian(m, d, 1000 + bits * 10 + d);
          x.fill(0, 2 * d, 3 * d); // a zero token (norm 0)
          const settings = CodecSettingsSchema.parse({ kind: 'eden', bits, norms });
          const withMean = fitCodec(settings, gaussian(64, d, 7 + d).map((v) => v + 0.3), d, { seed: 5n });
          expect(withMean.mean).not.toBeNull();
          for (const artifact of [withMean, { ...withMean, mean: null }]) {
            const codec = createCodec(settings, artifact);
            const key: DocKey = { docId: 'doc-1', seed: 5n };
            const enc = codec.encodeDoc(x, d, key);
            const got = codec.decodeDoc(enc, m, d, key);
            expect(got).toEqual(reference(enc.codes, enc.norms, m, d, bits, norms, 5n, artifact.mean));
          }
        });
});
