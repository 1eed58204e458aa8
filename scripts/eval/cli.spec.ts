import { afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { runUntilExit, type ScriptEntry } from '../lib/cli-harness';
import { parseFlags } from './compression-trec-dl';
import { parseAesiFlags } from './compression-aesi';
import { parsePoolFactors } from './compression-pooling';

/**
 * The command lines of the evaluations (scripts/lib/cli.ts): `--help` prints the flags and exits
 * 0, an unknown flag or a bad value is refused with exit 2, naming it, before anything is loaded.
 */
type Eval = ScriptEntry;
const EVALS: [string, () => Promise<Eval>, string[]][] = [
  ['rerank', async () => (await import('./rerank')).runRerankEval, ['--dataset DIR', '--run FILE', '--qrels FILE', '--model DIR', '--scorers', '--rel-level N (2)', '--lambda X (0.5)', '--lite FILE.onnx']],
  ['fusion', async () => (await import('./fusion')).runFusionEval, ['--datasets DIR,DIR', '--model NAME', '--depth N (100)', '--sample N', '--bm25-only', '--export DIR']],
  ['compression', async () => (await import('./compression')).runCompressionEvalCli, ['--dataset DIR', '--static-model DIR', '--settings', '--docs-per-segment N (1000)', '--sample-tokens N (20000)', '--seed N (20261121)', '--plot', '--pool-factors', '--pool-codecs', '--aesi c:bits', '--aesi-width 1536']],
  ['heads', async () => (await import('./heads')).runHeadsEval, ['--quick', '--datasets', '--models', '--heads', '--folds N (5', '--only-folds', '--no-cv', '--dl19 DIR|none', '--epochs', '--distill-steps', '--distill-weight', '--lr', '--distill-lr', '--depth', '--max-docs', '--seed N (1)', '--positives', '--aesi-json', '--aesi-model', '--sample-tokens']],
  ['negation', async () => (await import('./negation')).runNegationEval, ['--docs 2000', '--queries 100', '--seed 1', '--model .cache/models/glove-ctx-100d']],
  ['retrieval', async () => (await import('./retrieval')).runRetrievalEvalCli, ['--dataset DIR', '--docs FILE', '--queries FILE', '--qrels FILE', '--model NAME|DIR', '--nprobe N', '--modes a,b', '--layout warp', '--bits 2|4', '--quick', '--plot out.svg']],
];

const run = (entry: Eval, args: string[]) => runUntilExit(entry, args, 'the evaluation');

describe('npm run eval: each evaluation parses its flags with parseArgs', () => {
  // Loaded once, before the tests: the first import of an evaluation brings in ONNX Runtime and the model library, slow on a loaded machine.
  const loaded = new Map<string, Eval>();
  beforeAll(async () => {
    for (const [name, load] of EVALS) loaded.set(name, await load());
  }, 300_000);
  afterEach(() => vi.restoreAllMocks());

  it.each(EVALS)('%s: --help prints every flag and exits 0', async (name, _load, flags) => {
    const r = await run(loaded.get(name)!, ['--help']);
    expect(r.code).toBe(0);
    for (const f of [...flags, '--json']) expect(r.out).toContain(f);
  });

  it.each(EVALS)('%s: an unknown flag is refused with exit 2, naming it', async (name) => {
    const r = await run(loaded.get(name)!, ['--bogus', 'x']);
    expect(r.code).toBe(2);
    expect(r.err).toContain(`eval ${name}: Unknown option '--bogus'`);
    expect(r.err).toContain(`usage: npm run eval -- ${name}`);
  });

  it.each([
    ['rerank', ['--lambda', 'half'], '--lambda must be a number of at least 0, got "half"'],
    ['fusion', ['--depth', '0'], '--depth must be a whole number of at least 1, got "0"'],
    ['compression', ['--aesi', '16'], "--aesi takes code size:bits pairs like 16:6,8:5, got '16'"],
    ['compression', ['--dataset', 'x', '--pool-factors', '1,17'], '--pool-factors wants integers in 1..16'],
    ['compression', ['--sample-tokens', 'lots'], '--sample-tokens must be a whole number of at least 1, got "lots"'],
    ['heads', ['--quick=1'], "Option '--quick' does not take an argument"],
  ])('%s %j: refused with exit 2, naming the flag and the rule', async (name, args, message) => {
    const r = await run(loaded.get(name)!, args);
    expect(r.code).toBe(2);
    expect(r.err).toContain(message);
  });
});

describe('the compression sweeps read the flags of one strict parse', () => {
  it('defaults, values and the model given or not', () => {
    const d = parseFlags([]);
    expect(d).toMatchObject({ dataset: undefined, modelGiven: false, model: '.cache/models/glove-ctx-100d', staticModelGiven: false, docsPerSegment: 1000, sampleTokens: 20_000, seed: 20261121, quick: false, json: false });
    const f = parseFlags(['--data', 'dir', '--model', 'm', '--settings', 'eden, fp16', '--quick', '--seed', '0']);
    expect(f).toMatchObject({ dataset: 'dir', model: 'm', modelGiven: true, only: ['eden', 'fp16'], quick: true, seed: 0 });
    expect(parseAesiFlags(['--aesi', '16:6,8:5', '--aesi-epochs', '3'])).toEqual({ points: [{ codeDims: 16, bits: 6 }, { codeDims: 8, bits: 5 }], options: { width: 1536, maxEpochs: 3, patience: 2, batchTokens: 256 } });
    expect(parseAesiFlags([])).toBeNull();
    expect(parsePoolFactors(['--pool-factors', '1,2,4'])).toEqual([1, 2, 4]);
    expect(parsePoolFactors([])).toBeNull();
    expect(() => parseFlags(['--settngs', 'x'])).toThrow("Unknown option '--settngs'");
  });
});
