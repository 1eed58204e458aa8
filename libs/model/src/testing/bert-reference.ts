import type { BertConfig, BertWeights } from '../bert-graph';

/**
 * A plain JavaScript BERT forward pass (float64 accumulation), written from the architecture's
 * definition and independent of the ONNX graph builder: the reference the built graph is tested
 * against. One sequence at a time, no padding: ids, token types -> seq x hidden.
 */
export function bertReferenceForward(weights: BertWeights, ids: number[], types: number[] = ids.map(() => 0)): Float32Array {
  const c: BertConfig = weights.bertConfig;
  const H = c.hiddenSize;
  const S = ids.length;
  const nh = c.numHeads;
  const dh = H / nh;
  const word = weights.get('embeddings.word_embeddings.weight', [c.vocabSize, H]);
  const pos = weights.get('embeddings.position_embeddings.weight', [c.maxPositions, H]);
  const typ = weights.get('embeddings.token_type_embeddings.weight', [c.typeVocabSize, H]);
  const ln = (x: Float64Array, prefix: string, width: number) => {
    const gamma = weights.get(`${prefix}.weight`, [width]);
    const beta = weights.get(`${prefix}.bias`, [width]);
    for (let s = 0; s < x.length / width; s++) {
      let mean = 0;
      for (let k = 0; k < width; k++) mean += x[s * width + k];
      mean /= width;
      let v = 0;
      for (let k = 0; k < width; k++) v += (x[s * width + k] - mean) ** 2;
      const inv = 1 / Math.sqrt(v / width + c.layerNormEps);
      for (let k = 0; k < width; k++) x[s * width + k] = (x[s * width + k] - mean) * inv * gamma[k] + beta[k];
    }
    return x;
  };
  // Linear layer, PyTorch layout: weight [out, in], y = x W^T + b
  const linear = (x: Float64Array, prefix: string, inDim: number, outDim: number) => {
    const w = weights.get(`${prefix}.weight`, [outDim, inDim]);
    const b = weights.get(`${prefix}.bias`, [outDim]);
    const rows = x.length / inDim;
    const y = new Float64Array(rows * outDim);
    for (let r = 0; r < rows; r++)
      for (let o = 0; o < outDim; o++) {
        let acc = b[o];
        for (let i = 0; i < inDim; i++) acc += x[r * inDim + i] * w[o * inDim + i];
        y[r * outDim + o] = acc;
      }
    return y;
  };
  let x: Float64Array = new Float64Array(S * H);
  for (let s = 0; s < S; s++) for (let k = 0; k < H; k++) x[s * H + k] = word[ids[s] * H + k] + pos[s * H + k] + typ[types[s] * H + k];
  x = ln(x, 'embeddings.LayerNorm', H);
  for (let l = 0; l < c.numLayers; l++) {
    const p = `encoder.layer.${l}`;
    const q = linear(x, `${p}.attention.self.query`, H, H);
    const k = linear(x, `${p}.attention.self.key`, H, H);
    const v = linear(x, `${p}.attention.self.value`, H, H);
    const ctx = new Float64Array(S * H);
    for (let h = 0; h < nh; h++)
      for (let i = 0; i < S; i++) {
        const scores = new Float64Array(S);
        let max = -Infinity;
        for (let j = 0; j < S; j++) {
          let dot = 0;
          for (let e = 0; e < dh; e++) dot += q[i * H + h * dh + e] * k[j * H + h * dh + e];
          scores[j] = dot / Math.sqrt(dh);
          max = Math.max(max, scores[j]);
        }
        let sum = 0;
        for (let j = 0; j < S; j++) sum += scores[j] = Math.exp(scores[j] - max);
        for (let j = 0; j < S; j++) for (let e = 0; e < dh; e++) ctx[i * H + h * dh + e] += (scores[j] / sum) * v[j * H + h * dh + e];
      }
    const attnOut = linear(ctx, `${p}.attention.output.dense`, H, H);
    for (let i = 0; i < x.length; i++) attnOut[i] += x[i];
    const a = ln(attnOut, `${p}.attention.output.LayerNorm`, H);
    const inter = linear(a, `${p}.intermediate.dense`, H, c.intermediateSize);
    for (let i = 0; i < inter.length; i++) inter[i] = 0.5 * inter[i] * (1 + erf(inter[i] / Math.SQRT2));
    const out = linear(inter, `${p}.output.dense`, c.intermediateSize, H);
    for (let i = 0; i < out.length; i++) out[i] += a[i];
    x = ln(out, `${p}.output.LayerNorm`, H);
  }
  return Float32Array.from(x);
}

/** erf to ~1e-15 (Abramowitz-Stegun 7.1.26 is too coarse for a reference): series / continued fraction. */
export function erf(x: number): number {
  const ax = Math.abs(x);
  if (ax < 2.5) {
    // Maclaurin series
    let term = ax;
    let sum = ax;
    for (let n = 1; n < 100; n++) {
      term *= (-ax * ax) / n;
      const add = term / (2 * n + 1);
      sum += add;
      if (Math.abs(add) < 1e-17) break;
    }
    return Math.sign(x) * (2 / Math.sqrt(Math.PI)) * sum;
  }
  // erfc continued fraction (Lentz) for large |x|
  let f = ax;
  let C = ax;
  let D = 0;
  for (let n = 1; n < 200; n++) {
    const an = n / 2;
    D = ax + an * D;
    D = 1 / D;
    C = ax + an / C;
    const delta = C * D;
    f *= delta;
    if (Math.abs(delta - 1) < 1e-16) break;
  }
  const erfc = Math.exp(-ax * ax) / (Math.sqrt(Math.PI) * f);
  return Math.sign(x) * (1 - erfc);
}
