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
import { CliUsageError, intFlag, parseCli } from './lib/cli';

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

export const USAGE = `usage: tsx scripts/write-scorer-artifact.ts lite|knrm --out FILE [--weights FILE.json|FILE.bin] [--seed N] [--size default|small] [--L1 N --L2 N --m1 N --m2 N]
  --out <file>       the ONNX file to write (required)
  --weights <file>   trained weights (JSON; LITE also little-endian float32 binary); without it, seeded random weights
  --seed <n>         seed of the random weights (default 1)
  --size <preset>    LITE sizes: default (L1 30, L2 200, m1 360, m2 2400) or small (L2 50, m2 768)
  --L1 --L2 --m1 --m2 <n>  LITE sizes one by one, over the --size preset
  -h, --help         this text`;

/** The command line (throws CliUsageError for a bad one); `--help` is the caller's (`help: true`). */
export function parseArgs(argv: string[]): WriteArtifactArgs & { help?: boolean } {
  const { values: v, positionals } = parseCli(
    argv,
    { out: { type: 'string' }, weights: { type: 'string' }, seed: { type: 'string' }, size: { type: 'string' }, L1: { type: 'string' }, L2: { type: 'string' }, m1: { type: 'string' }, m2: { type: 'string' } },
    { positionals: true },
  );
  if (v.help) return { kind: 'lite', out: '', help: true };
  const [kind, ...extra] = positionals;
  if ((kind !== 'lite' && kind !== 'knrm') || extra.length) throw new CliUsageError(`the first argument is lite or knrm, and the only one${extra.length ? ` (extra: ${extra.join(' ')})` : ''}`);
  if (!v.out) throw new CliUsageError('--out FILE is required');
  if (v.size !== undefined && v.size !== 'default' && v.size !== 'small') throw new CliUsageError(`--size must be default or small, got ${v.size}`);
  const args: WriteArtifactArgs = { kind, out: v.out };
  if (v.weights !== undefined) args.weights = v.weights;
  if (v.seed !== undefined) args.seed = Number(v.seed);
  const dims = (['L1', 'L2', 'm1', 'm2'] as const).filter((k) => v[k] !== undefined);
  if (v.size !== undefined || dims.length) {
    const sizes: { L1: number; L2: number; m1: number; m2: number } = { ...(v.size === 'small' ? LITE_SMALL : LITE_DEFAULT) };
    for (const k of dims) sizes[k] = intFlag(k, v[k]!);
    args.sizes = sizes;
  }
  return args;
}

if (process.argv[1] && import.meta.url === pathToFileURL(resolve(process.argv[1])).href) {
  try {
    const args = parseArgs(process.argv.slice(2));
    if (args.help) console.log(USAGE);
    else {
      const res = writeScorerArtifact(args);
      console.log(`wrote ${res.path} (${res.bytes} bytes)`);
    }
  } catch (err) {
    if (err instanceof CliUsageError) {
      console.error(`write-scorer-artifact: ${err.message}\n\n${USAGE}`);
      process.exit(2);
    }
    console.error(err instanceof Error ? err.message : err);
    process.exit(1);
  }
}
