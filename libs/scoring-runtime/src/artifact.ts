/**
 * Scorer artifacts on disk: one ONNX file per trained scorer, weights baked in as initializers
 * (SPEC section 1: "Runs from an ONNX artifact"). Writing / reading and seeded random weights.
 */
import { readFileSync } from 'node:fs';
import { liteShapes, assertLiteWeights, KNRM_MU, type KnrmWeights, type LiteWeights } from '@lateral/scoring';
import { onnx, writeModel } from '../../../scripts/lib/onnx-graph';
import { buildKnrmModel, buildLiteModel } from './graphs';

/** splitmix64-seeded xorshift-free generator: portable, so a seed names the same weights everywhere. */
export function seededUniform(seed: number): () => number {
  let s = BigInt.asUintN(64, BigInt(seed) ^ 0x9e3779b97f4a7c15n);
  return () => {
    s = BigInt.asUintN(64, s + 0x9e3779b97f4a7c15n);
    let z = s;
    z = BigInt.asUintN(64, (z ^ (z >> 30n)) * 0xbf58476d1ce4e5b9n);
    z = BigInt.asUintN(64, (z ^ (z >> 27n)) * 0x94d049bb133111ebn);
    z ^= z >> 31n;
    return Number(z >> 11n) / 2 ** 53;
  };
}

/**
 * Random LITE weights for tests and benchmarks: W ~ U(-1, 1) / sqrt(fan_in), biases likewise,
 * LayerNorm gains 1 +- 0.05, LayerNorm biases and the final layer U(-0.1, 0.1).
 */
export function randomLiteWeights(seed: number, sizes: { L1: number; L2: number; m1: number; m2: number }): LiteWeights {
  const { L1, L2, m1, m2 } = sizes;
  const r = seededUniform(seed);
  const fanIn: Record<string, number> = { W1: L2, b1: L2, W2: m2, b2: m2, W3: L1, b3: L1, W4: m1, b4: m1 };
  const w = { L1, L2, m1, m2 } as LiteWeights;
  for (const [key, len] of Object.entries(liteShapes(L1, L2, m1, m2))) {
    const a = new Float32Array(len);
    for (let i = 0; i < len; i++) {
      const u = r() * 2 - 1;
      a[i] = key in fanIn ? u / Math.sqrt(fanIn[key]) : key.startsWith('g') ? 1 + 0.05 * u : 0.1 * u;
    }
    (w as unknown as Record<string, Float32Array>)[key] = a;
  }
  return w;
}

export function randomKnrmWeights(seed: number): KnrmWeights {
  const r = seededUniform(seed);
  return { w: Float32Array.from(KNRM_MU, () => (r() * 2 - 1) * 0.1), b: (r() * 2 - 1) * 0.1 };
}

export function writeLiteArtifact(path: string, weights: LiteWeights): number {
  assertLiteWeights('writeLiteArtifact', weights);
  return writeModel(path, buildLiteModel(weights));
}

export function writeKnrmArtifact(path: string, weights: KnrmWeights): number {
  return writeModel(path, buildKnrmModel(weights));
}

type Init = InstanceType<typeof onnx.TensorProto>;
function initializers(bytes: Uint8Array): Map<string, Float32Array> {
  const model = onnx.ModelProto.decode(bytes);
  const out = new Map<string, Float32Array>();
  for (const t of (model.graph?.initializer ?? []) as Init[]) {
    if (t.dataType !== 1) continue;
    const raw = t.rawData as Uint8Array;
    const copy = new Uint8Array(raw); // aligned copy
    out.set(t.name as string, raw.length ? new Float32Array(copy.buffer, 0, raw.length / 4) : Float32Array.from(t.floatData as number[]));
  }
  return out;
}
function untranspose(wT: Float32Array, inp: number, out: number): Float32Array {
  const w = new Float32Array(wT.length);
  for (let k = 0; k < inp; k++) for (let o = 0; o < out; o++) w[o * inp + k] = wT[k * out + o];
  return w;
}

/** Reads a LITE artifact back into the weights object of `liteReference` (for parity checks). */
export function readLiteArtifact(source: string | Uint8Array): LiteWeights {
  const bytes = typeof source === 'string' ? readFileSync(source) : source;
  const model = onnx.ModelProto.decode(bytes);
  const meta = Object.fromEntries((model.metadataProps ?? []).map((p) => [p.key, p.value]));
  if (meta.scorer !== 'lite') throw new Error(`readLiteArtifact: not a LITE artifact (metadata scorer = ${meta.scorer})`);
  const [L1, L2, m1, m2] = ['L1', 'L2', 'm1', 'm2'].map((k) => Number(meta[k]));
  const init = initializers(bytes);
  // initializer names are unique-ified by GraphBuilder only on collision; ours never collide
  const get = (name: string) => {
    const t = init.get(name);
    if (!t) throw new Error(`readLiteArtifact: missing initializer ${name}`);
    return t;
  };
  const w: LiteWeights = {
    L1, L2, m1, m2,
    W1: untranspose(get('row1_wT'), L2, m2), b1: get('row1_b'), g1: get('row1_g'), be1: get('row1_beta'),
    W2: untranspose(get('row2_wT'), m2, L2), b2: get('row2_b'), g2: get('row2_g'), be2: get('row2_beta'),
    W3: untranspose(get('col1_wT'), L1, m1), b3: get('col1_b'), g3: get('col1_g'), be3: get('col1_beta'),
    W4: untranspose(get('col2_wT'), m1, L1), b4: get('col2_b'), g4: get('col2_g'), be4: get('col2_beta'),
    w: untranspose(get('final_wT'), L2, L1),
  };
  assertLiteWeights('readLiteArtifact', w);
  return w;
}
