import { describe, expect, it } from 'vitest';
import { CodecSettingsSchema } from '@lateral/shared';
import { createCodec, EdenCodec, fitCodec, readSegment, writeSegment } from './index';
import { gaussian } from './test-utils';
import { jsKernels, kernels, useKernels } from '@lateral/simd';

/**
 * Scoring token rows from their codes (EdenCodec.queryLut, what XTR does with EDEN token-layout
 * segments) gives the inner product of the query token with the decoded row: the same number up
 * to rounding (the decode rounds to float32, the table sums in float64), for every bit width
 * (4 bits: two coordinates per table lookup; others: one), both norm formats, with PCA and a
 * mean, and for a zero token (norm 0: the mean alone).
 */
describe('EDEN row scorer', () => {
  for (const bits of [2, 3, 4, 6])
    for (const norms of ['fp32', 'fp16'] as const)
      for (const dims of [undefined, 10])
        it(`equals the decoded rows' inner products: ${bits} bits, ${norms} norms, ${dims ? `PCA to ${dims}` : 'all 24 dims'}`, () => {
          const d = 24;
          const lengths = [3, 0, 5, 1, 9];
          const T = lengths.reduce((a, b) => a + b, 0);
          const vectors = gaussian(T, d, 40 + bits);
          vectors.fill(0, 4 * d, 5 * d); // a zero token
          const settings = CodecSettingsSchema.parse({ kind: 'eden', bits, norms, ...(dims ? { dims } : {}) });
          const artifact = fitCodec(settings, gaussian(200, d, 41).map((v) => v + 0.2), d, { seed: 17n });
          const tokenOffsets = Uint32Array.from([0, ...lengths.map((_, i) => lengths.slice(0, i + 1).reduce((a, b) => a + b, 0))]);
          const bytes = writeSegment({ docIds: lengths.map((_, i) => `d${i}`), tokenOffsets, tokenIds: new Int32Array(T), vectors, dims: d }, createCodec(settings, artifact));
          const r = readSegment(bytes, 'seg', artifact);
          const decoded = r.decodeAll();
          const n = 3;
          const q = gaussian(n, d, 42);
          const codec = createCodec(settings, artifact) as EdenCodec;
          const scorer = codec.queryLut(q, d, r.seed).rows(r.rowCodes()!);
          let max = 0;
          for (let i = 0; i < n; i++)
            for (let row = 0; row < T; row++) {
              let exact = 0;
              for (let k = 0; k < d; k++) exact += q[i * d + k] * decoded[row * d + k];
              const got = scorer.score(i, row);
              expect(Math.abs(got - exact), `query ${i}, row ${row}`).toBeLessThan(1e-5 * (1 + Math.abs(exact)));
              max = Math.max(max, Math.abs(exact));
            }
          expect(max).toBeGreaterThan(0.1); // the rows are not all near zero
        });

  for (const bits of [2, 4])
    for (const norms of ['fp32', 'fp16'] as const)
      it(`maxRows equals the best of score over each document's first m rows, bit for bit: ${bits} bits, ${norms} norms, both kernel sets`, () => {
        const d = 20;
        const lengths = [3, 0, 5, 1, 9, 4, 4, 2, 8, 0, 6];
        const T = lengths.reduce((a, b) => a + b, 0);
        const vectors = gaussian(T, d, 50 + bits);
        vectors.fill(0, 3 * d, 4 * d); // a zero token
        const settings = CodecSettingsSchema.parse({ kind: 'eden', bits, norms });
        const artifact = fitCodec(settings, gaussian(200, d, 51), d, { seed: 5n });
        const tokenOffsets = Uint32Array.from([0, ...lengths.map((_, i) => lengths.slice(0, i + 1).reduce((a, b) => a + b, 0))]);
        const r = readSegment(writeSegment({ docIds: lengths.map((_, i) => `d${i}`), tokenOffsets, tokenIds: new Int32Array(T), vectors, dims: d }, createCodec(settings, artifact)), 'seg', artifact);
        const codec = createCodec(settings, artifact) as EdenCodec;
        const q = gaussian(2, d, 52);
        for (const k of [jsKernels, null]) {
          useKernels(k);
          try {
            const scorer = codec.queryLut(q, d, r.seed).rows(r.rowCodes()!);
            for (const i of [0, 1])
              for (const m of [1, 3, 4, 9])
                for (const [from, to] of [[0, lengths.length], [2, 9]]) {
                  const best = new Float64Array(to - from), arg = new Int32Array(to - from);
                  scorer.maxRows(i, tokenOffsets, from, to, m, best, arg);
                  for (let doc = from; doc < to; doc++) {
                    let b = -Infinity, a = 0;
                    for (let j = 0; j < Math.min(m, lengths[doc]); j++) {
                      const s = scorer.score(i, tokenOffsets[doc] + j);
                      if (s > b) [b, a] = [s, j];
                    }
                    expect(Object.is(best[doc - from], b), `token ${i}, m ${m}, doc ${doc}`).toBe(true);
                    expect(arg[doc - from]).toBe(a);
                  }
                }
          } finally {
            useKernels(null);
          }
        }
        expect(kernels().kind).toBe('wasm'); // the module is built here (ensure-deps): the default set was the WebAssembly one
      });

  it('other codecs give no row codes', () => {
    const d = 8;
    const v = gaussian(4, d, 1);
    for (const raw of [{ kind: 'fp16' }, { kind: 'eden', bits: 4, layout: 'cross' }] as const) {
      const settings = CodecSettingsSchema.parse(raw);
      const artifact = fitCodec(settings, v, d, { seed: 1n });
      const r = readSegment(writeSegment({ docIds: ['a'], tokenOffsets: Uint32Array.of(0, 4), tokenIds: new Int32Array(4), vectors: v, dims: d }, createCodec(settings, artifact)), 's', artifact);
      expect(r.rowCodes()).toBeNull();
    }
  });
});
