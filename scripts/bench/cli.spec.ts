import { spawnSync } from 'node:child_process';
import { afterEach, beforeAll, describe, expect, it, vi } from 'vitest';

/**
 * The command lines of the benchmarks (scripts/lib/cli.ts): `--help` prints the flags and exits 0,
 * an unknown flag or a bad value is refused with exit 2, naming it, before anything is started.
 * Each bench is called in this process with process.exit stopped where it is called.
 */
class Exit extends Error {
  constructor(readonly code: number | undefined) {
    super(`exit ${code}`);
  }
}

type Bench = (args: string[]) => Promise<unknown>;
const BENCHES: [string, () => Promise<Bench>, string[]][] = [
  ['ingest', async () => (await import('./ingest')).runIngestBench, ['--docs N', '--metrics on|off|both (on)', '--rounds N (1']],
  ['documents', async () => (await import('./documents')).runDocumentsBench, ['--docs N', '--rounds N (5']],
  ['rerank-batch', async () => (await import('./rerank-batch')).runRerankBatchBench, ['--quick', '--rows N (10000)', '--model NAME (glove-ctx-100d)', '--chunk-rows']],
  ['segment-cache', async () => (await import('./segment-cache')).runSegmentCacheBench, ['--segments N', '--docs N (256)', '--tokens N (40', '--dims N (128)', '--candidates N (1000)', '--latency-ms N (10)', '--codec fp16|eden4 (fp16)']],
  ['load', async () => (await import('./load')).runLoadBench, ['--seconds N (60)', '--docs N (300)', '--candidates N (100)', '--connections N (4)']],
  ['refit', async () => (await import('./refit')).runRefitBench, ['--centroids K (4096)', '--dims D (100)', '--tokens T (200000)', '--rounds R (2)', '--threads N (0']],
  ['score', async () => (await import('./score')).runScoreBench, ['--quick', '--threads N (2)', '--warp-bits 2|4 (4)', '--warp-centroids K (1024)', '--aesi-only', '--simd-only', '--simd-cranfield', '--warp-only']],
];

/** Runs `bench(args)` until it exits: the exit code and what it printed. */
async function run(bench: Bench, args: string[]): Promise<{ code: number | undefined; out: string; err: string }> {
  let out = '';
  let err = '';
  vi.spyOn(console, 'log').mockImplementation((...a: unknown[]) => void (out += `${a.join(' ')}\n`));
  vi.spyOn(console, 'error').mockImplementation((...a: unknown[]) => void (err += `${a.join(' ')}\n`));
  vi.spyOn(process, 'exit').mockImplementation((code?: string | number | null) => {
    throw new Exit(code == null ? undefined : Number(code));
  });
  try {
    await bench(args);
  } catch (e) {
    if (e instanceof Exit) return { code: e.code, out, err };
    throw e;
  }
  throw new Error(`the bench ran with ${JSON.stringify(args)} instead of exiting`);
}

describe('npm run bench: each bench parses its flags with parseArgs', () => {
  // Loaded once, before the tests: the first import of a bench brings in the whole service (ONNX Runtime, the server), slow on a loaded machine.
  const loaded = new Map<string, Bench>();
  beforeAll(async () => {
    for (const [name, load] of BENCHES) loaded.set(name, await load());
  }, 300_000);
  afterEach(() => vi.restoreAllMocks());

  it.each(BENCHES)('%s: --help prints every flag with its default and exits 0', async (name, _load, flags) => {
    const r = await run(loaded.get(name)!, ['--help']);
    expect(r.code).toBe(0);
    for (const f of [...flags, '--json']) expect(r.out).toContain(f);
  });

  it.each(BENCHES)('%s: an unknown flag is refused with exit 2, naming it', async (name) => {
    const r = await run(loaded.get(name)!, ['--bogus']);
    expect(r.code).toBe(2);
    expect(r.err).toContain(`bench ${name}: Unknown option '--bogus'`);
    expect(r.err).toContain('usage: npm run bench -- ' + name);
    expect(r.out).toBe('');
  });

  it.each([
    ['ingest', ['--metrics', 'sometimes'], '--metrics: on, off or both (got sometimes)'],
    ['ingest', ['--rounds', '21'], '--rounds: an integer from 1 to 20'],
    ['documents', ['--docs', '0'], '--docs must be a whole number of at least 1, got "0"'],
    ['rerank-batch', ['--rows', 'many'], '--rows must be a whole number of at least 1, got "many"'],
    ['segment-cache', ['--codec', 'int8'], '--codec: fp16 or eden4 (got int8)'],
    ['segment-cache', ['--latency-ms', '-1'], '--latency-ms must be a number of at least 0, got "-1"'],
    ['load', ['--seconds'], "Option '--seconds <value>' argument missing"],
    ['score', ['--warp-bits', '3'], '--warp-bits must be 2 or 4, got 3'],
    ['refit', ['--centroids', '8'], '--centroids must be a whole number of at least 16, got "8"'],
    ['score', ['--quick=yes'], "Option '--quick' does not take an argument"],
  ])('%s %j: refused with exit 2, naming the flag and the rule', async (name, args, message) => {
    const r = await run(loaded.get(name)!, args);
    expect(r.code).toBe(2);
    expect(r.err).toContain(message);
  });
});

describe('npm run bench / eval: the command list', () => {
  const runScript = (script: string, ...args: string[]) => spawnSync(process.execPath, ['--import', 'tsx', script, ...args], { encoding: 'utf8', timeout: 60_000 });

  it('--help lists the benches and exits 0; an unknown bench exits 2, naming it', () => {
    const help = runScript('scripts/bench.ts', '--help');
    expect(help.status).toBe(0);
    for (const name of ['ingest', 'score', 'rerank-batch', 'documents', 'segment-cache', 'load', 'latency', 'encode', 'refit']) expect(help.stdout).toContain(name);
    const bad = runScript('scripts/bench.ts', 'nope');
    expect(bad.status).toBe(2);
    expect(bad.stderr).toContain('bench: unknown bench "nope"');
  });
});
