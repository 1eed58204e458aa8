import { existsSync, readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { TokenEncoder } from './token-encoder';

/**
 * minilm-l6-384-fp16 (the same weights as minilm-l6-384 in half precision, for CUDA; built by
 * `npm run build-model`) runs on ONNX Runtime's CPU provider too, and its vectors stay within
 * 0.999 cosine of the fp32 graph's: every token vector and every pooled vector of 24 Cranfield
 * documents (the issue 29 bar for the fp16 graph on a GPU).
 */
const models = resolve(__dirname, '../../../.cache/models');
const fp32 = resolve(models, 'minilm-l6-384');
const fp16 = resolve(models, 'minilm-l6-384-fp16');
const cranfield = resolve(__dirname, '../../../data/cranfield/cran.all.1400');
const missing = !existsSync(resolve(fp32, 'model.onnx')) || !existsSync(resolve(fp16, 'model.onnx')) || !existsSync(cranfield);

const dot = (a: Float32Array, i: number, b: Float32Array, j: number, d: number) => {
  let s = 0;
  for (let k = 0; k < d; k++) s += a[i + k]! * b[j + k]!;
  return s;
};

describe('minilm-l6-384-fp16 on the CPU provider', () => {
  it.skipIf(missing)('token and pooled vectors within 0.999 cosine of minilm-l6-384, the same tokens', async () => {
    const texts = readFileSync(cranfield, 'utf8')
      .split(/^\.I /m)
      .slice(1, 25)
      .map((r) => r.replace(/^\.[TABW]$/gm, ' ').replace(/\s+/g, ' ').trim());
    const a = await TokenEncoder.load(fp32, { executionProvider: 'cpu', intraOpThreads: 1 });
    const b = await TokenEncoder.load(fp16, { executionProvider: 'cpu', intraOpThreads: 1 });
    try {
      expect(b.manifest.dims).toBe(a.manifest.dims);
      const [ea, eb] = [await a.encodeDocuments(texts), await b.encodeDocuments(texts)];
      const d = a.dims;
      let worst = 1;
      let tokens = 0;
      for (let i = 0; i < texts.length; i++) {
        const x = ea[i]!;
        const y = eb[i]!;
        expect(Array.from(y.tokenIds)).toEqual(Array.from(x.tokenIds));
        for (let r = 0; r < x.length; r++, tokens++) worst = Math.min(worst, dot(x.vectors, r * d, y.vectors, r * d, d));
        worst = Math.min(worst, dot(a.pool(x), 0, b.pool(y), 0, d));
      }
      expect(tokens).toBeGreaterThan(1000);
      expect(worst).toBeGreaterThanOrEqual(0.999);
    } finally {
      await a.release();
      await b.release();
    }
  }, 300_000);
});
