/**
 * Scorer artifacts on disk: one ONNX file per trained scorer, weights baked in as initializers
 * (SPEC section 1: "Runs from an ONNX artifact"). Writing / reading and seeded random weights.
 */
import { readFileSync } from 'node:fs';
import { liteShapes, assertLiteWeights, KNRM_MU, type KnrmWeights, type LiteWeights } from '@lateral/scoring';
import { onnx, writeModel } from './onnx-graph';
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

/**
 * LITE weights from JSON: { L1, L2, m1, m2, W1: number[], b1, g1, be1, W2, ..., be4, w }, every
 * matrix row-major as in `LiteWeights`.
 */
export function liteWeightsFromJson(raw: Record<string, unknown>): LiteWeights {
  const dims = ['L1', 'L2', 'm1', 'm2'].map((k) => raw[k]);
  if (!dims.every((v) => Number.isInteger(v))) throw new Error('LITE JSON: L1, L2, m1, m2 must be integers');
  const [L1, L2, m1, m2] = dims as number[];
  const w = { L1, L2, m1, m2 } as LiteWeights;
  for (const [key, len] of Object.entries(liteShapes(L1, L2, m1, m2))) {
    const v = raw[key];
    if (!Array.isArray(v) || v.length !== len) throw new Error(`LITE JSON: ${key} must be an array of ${len} numbers, got ${Array.isArray(v) ? v.length : typeof v}`);
    (w as unknown as Record<string, Float32Array>)[key] = Float32Array.from(v as number[]);
  }
  return w;
}

/**
 * LITE weights from a binary file: little-endian float32, tensors concatenated in the order
 * W1 b1 g1 be1 W2 b2 g2 be2 W3 b3 g3 be3 W4 b4 g4 be4 w; the sizes are not in the file.
 */
export function liteWeightsFromBinary(bytes: Uint8Array, sizes: { L1: number; L2: number; m1: number; m2: number }): LiteWeights {
  const shapes = liteShapes(sizes.L1, sizes.L2, sizes.m1, sizes.m2);
  const total = Object.values(shapes).reduce((a, b) => a + b, 0);
  if (bytes.byteLength !== total * 4) {
    throw new Error(`LITE binary: ${bytes.byteLength} bytes, expected ${total * 4} (${total} float32) for L1=${sizes.L1} L2=${sizes.L2} m1=${sizes.m1} m2=${sizes.m2}`);
  }
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const w = { ...sizes } as LiteWeights;
  let p = 0;
  for (const [key, len] of Object.entries(shapes)) {
    const a = new Float32Array(len);
    for (let i = 0; i < len; i++) a[i] = view.getFloat32((p + i) * 4, true);
    (w as unknown as Record<string, Float32Array>)[key] = a;
    p += len;
  }
  return w;
}

/** K-NRM weights from JSON: { w: [11 numbers in KNRM_MU order], b: number }. */
export function knrmWeightsFromJson(raw: Record<string, unknown>): KnrmWeights {
  if (!Array.isArray(raw.w) || raw.w.length !== KNRM_MU.length || typeof raw.b !== 'number') throw new Error('K-NRM JSON: expected { "w": [11 numbers], "b": number }');
  return { w: Float32Array.from(raw.w as number[]), b: raw.b };
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
  if (meta.residual === 'maxsim') w.maxsimWeight = get('maxsim_weight')[0];
  else if (meta.residual !== undefined) throw new Error(`readLiteArtifact: unknown residual ${meta.residual} (known: maxsim)`);
  assertLiteWeights('readLiteArtifact', w);
  return w;
}
