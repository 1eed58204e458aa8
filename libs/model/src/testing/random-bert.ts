import { mulberry32 } from '@lateral/shared';
import { BertWeights, type BertConfig } from '../bert-graph';
import type { NamedTensor } from '../safetensors';

/** A small BERT with seeded random weights in the Hugging Face layout. */
export function randomBert(c: BertConfig, seed = 3): BertWeights {
  return new BertWeights(randomBertTensors(c, seed), c);
}

/** randomBert's tensors by Hugging Face name, for a test to edit before wrapping them in BertWeights. */
export function randomBertTensors(c: BertConfig, seed = 3): Map<string, NamedTensor> {
  const next = mulberry32(seed);
  const t = new Map<string, NamedTensor>();
  const add = (name: string, shape: number[], scale: number, offset = 0) =>
    t.set(name, { shape, data: Float32Array.from({ length: shape.reduce((a, b) => a * b, 1) }, () => offset + (next() * 2 - 1) * scale) });
  const H = c.hiddenSize;
  add('embeddings.word_embeddings.weight', [c.vocabSize, H], 1);
  add('embeddings.position_embeddings.weight', [c.maxPositions, H], 0.3);
  add('embeddings.token_type_embeddings.weight', [c.typeVocabSize, H], 0.3);
  const lnorm = (p: string, w: number) => {
    add(`${p}.weight`, [w], 0.2, 1);
    add(`${p}.bias`, [w], 0.1);
  };
  const lin = (p: string, i: number, o: number) => {
    add(`${p}.weight`, [o, i], 1 / Math.sqrt(i));
    add(`${p}.bias`, [o], 0.1);
  };
  lnorm('embeddings.LayerNorm', H);
  for (let l = 0; l < c.numLayers; l++) {
    const p = `encoder.layer.${l}`;
    for (const x of ['query', 'key', 'value']) lin(`${p}.attention.self.${x}`, H, H);
    lin(`${p}.attention.output.dense`, H, H);
    lnorm(`${p}.attention.output.LayerNorm`, H);
    lin(`${p}.intermediate.dense`, H, c.intermediateSize);
    lin(`${p}.output.dense`, c.intermediateSize, H);
    lnorm(`${p}.output.LayerNorm`, H);
  }
  return t;
}
