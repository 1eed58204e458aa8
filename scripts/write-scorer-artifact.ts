/**
 * Writes a scorer artifact (an ONNX file with the weights baked in) for separable LITE or K-NRM.
 *
 *   tsx scripts/write-scorer-artifact.ts lite --out .cache/scorers/lite.onnx --seed 1 [--size default|small]
 *   tsx scripts/write-scorer-artifact.ts lite --out lite.onnx --weights lite.json
 *   tsx scripts/write-scorer-artifact.ts lite --out lite.onnx --weights lite.bin --size small   (or --L1 --L2 --m1 --m2)
 *   tsx scripts/write-scorer-artifact.ts knrm --out knrm.onnx --weights knrm.json | --seed 1
 *
 * Weight files:
 *  - LITE JSON: { "L1", "L2", "m1", "m2", "W1": [...], "b1", "g1", "be1", "W2", ..., "be4", "w" }, every
 *    matrix row-major as in `LiteWeights` (W1 m2 x L2, W2 L2 x m2, W3 m1 x L1, W4 L1 x m1, w L1*L2 indexed i*L2+j).
 *  - LITE binary: little-endian float32, the tensors concatenated in the order
 *    W1 b1 g1 be1 W2 b2 g2 be2 W3 b3 g3 be3 W4 b4 g4 be4 w; sizes from --size or --L1/--L2/--m1/--m2.
 *  - K-NRM JSON: { "w": [11 numbers, kernel order mu = 1.0, 0.9, ..., -0.9], "b": number }.
 * Seeded random weights (no --weights) are for tests and benchmarks only.
 */
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { LITE_DEFAULT, LITE_SMALL, type LiteWeights } from '@lateral/scoring';
import {
  knrmWeightsFromJson, liteWeightsFromBinary, liteWeightsFromJson, randomKnrmWeights, randomLiteWeights, writeKnrmArtifact, writeLiteArtifact,
} from '@lateral/kernels';

export interface WriteArtifactArgs {
  kind: 'lite' | 'knrm';
  out: string;
  weights?: string;
  seed?: number;
  sizes?: { L1: number; L2: number; m1: number; m2: number };
}

/** Writes the artifact and returns its size in bytes. */
export function writeScorerArtifact(args: WriteArtifactArgs): { path: string; bytes: number } {
  const path = resolve(args.out);
  if (args.kind === 'knrm') {
    const w = args.weights ? knrmWeightsFromJson(JSON.parse(readFileSync(args.weights, 'utf8'))) : randomKnrmWeights(args.seed ?? 1);
    return { path, bytes: writeKnrmArtifact(path, w) };
  }
  let w: LiteWeights;
  if (!args.weights) w = randomLiteWeights(args.seed ?? 1, args.sizes ?? LITE_DEFAULT);
  else if (args.weights.endsWith('.json')) w = liteWeightsFromJson(JSON.parse(readFileSync(args.weights, 'utf8')));
  else w = liteWeightsFromBinary(readFileSync(args.weights), args.sizes ?? LITE_DEFAULT);
  return { path, bytes: writeLiteArtifact(path, w) };
}

export function parseArgs(argv: string[]): WriteArtifactArgs {
  const [kind, ...rest] = argv;
  if (kind !== 'lite' && kind !== 'knrm') throw new Error('usage: write-scorer-artifact.ts lite|knrm --out FILE [--weights FILE.json|FILE.bin] [--seed N] [--size default|small] [--L1 --L2 --m1 --m2]');
  const args: WriteArtifactArgs = { kind, out: '' };
  let sizes: { L1: number; L2: number; m1: number; m2: number } | undefined;
  for (let i = 0; i < rest.length; i++) {
    const flag = rest[i];
    const value = () => {
      const v = rest[++i];
      if (v === undefined) throw new Error(`${flag} needs a value`);
      return v;
    };
    const int = () => {
      const n = Number(value());
      if (!Number.isInteger(n) || n < 1) throw new Error(`${flag} must be a positive integer`);
      return n;
    };
    if (flag === '--out') args.out = value();
    else if (flag === '--weights') args.weights = value();
    else if (flag === '--seed') args.seed = Number(value());
    else if (flag === '--size') {
      const s = value();
      if (s !== 'default' && s !== 'small') throw new Error(`--size must be default or small, got ${s}`);
      sizes = { ...(s === 'small' ? LITE_SMALL : LITE_DEFAULT) };
    } else if (flag === '--L1' || flag === '--L2' || flag === '--m1' || flag === '--m2') {
      sizes = { ...(sizes ?? LITE_DEFAULT), [flag.slice(2)]: int() };
    } else throw new Error(`unknown argument ${flag}`);
  }
  if (!args.out) throw new Error('--out FILE is required');
  if (sizes) args.sizes = sizes;
  return args;
}

if (process.argv[1] && import.meta.url === pathToFileURL(resolve(process.argv[1])).href) {
  try {
    const res = writeScorerArtifact(parseArgs(process.argv.slice(2)));
    console.log(`wrote ${res.path} (${res.bytes} bytes)`);
  } catch (err) {
    console.error(err instanceof Error ? err.message : err);
    process.exit(1);
  }
}
