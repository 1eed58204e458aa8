import { spawnSync } from 'node:child_process';
import { afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { runUntilExit, type ScriptEntry } from '../lib/cli-harness';

/**
 * The command lines of the benchmarks (scripts/lib/cli.ts): `--help` prints the flags and exits 0,
 * an unknown flag or a bad value is refused with exit 2, naming it, before anything is started.
 * Each bench is called in this process with process.exit stopped where it is called.
 */
type Bench = ScriptEntry;
const BENCHES: [string, () => Promise<Bench>, string[]][] = [
  ['ingest', async () => (await import('./ingest')).runIngestBench, ['--docs N', '--metrics on|off|both (on)', '--rounds N (1']],
  ['documents', async () => (await import('./documents')).runDocumentsBench, ['--docs N', '--rounds N (5']],
  ['rerank-batch', async () => (await import('./rerank-batch')).runRerankBatchBench, ['--quick', '--rows N (10000)', '--model NAME (glove-ctx-100d)', '--chunk-rows']],
  ['segment-cache', async () => (await import('./segment-cache')).runSegmentCacheBench, ['--segments N', '--docs N (256)', '--tokens N (40', '--dims N (128)', '--candidates N (1000)', '--latency-ms N (10)', '--codec fp16|eden4 (fp16)']],
  ['load', async () => (await import('./load')).runLoadBench, ['--seconds N (60)', '--docs N (300)', '--candidates N (100)', '--connections N (4)', '--only search|rerank (both)', '--layout warp|ivf (warp)', '--idle-seconds N (10)']],
  ['refit', async () => (await import('./refit')).runRefitBench, ['--centroids K (4096)', '--dims D (100)', '--tokens T (200000)', '--rounds R (2)', '--threads N (0']],
  ['score', async () => (await import('./score')).runScoreBench, ['--quick', '--threads N (2)', '--warp-bits 2|4 (4)', '--warp-centroids K (1024)', '--aesi-only', '--simd-only', '--simd-cranfield', '--warp-only', '--mebert-only', '--mebert-docs N (1000000)', '--mebert-dims D (100)', '--mebert-segments S (12)', '--mebert-queries Q (5)']],
  ['scale', async () => (await import('./scale')).runScaleBench, ['--docs N (1000000)', '--codec eden4|fp16 (eden4)', '--layout warp|ivf (warp)', '--bits 2|4 (4)', '--search-modes xtr,bm25', '--ingest-only', '--variant-env K=V,K=V', '--heap-snapshot', '--keep', '--reuse DIR']],
  ['cold-scorer', async () => (await import('./cold-scorer')).runColdScorerBench, ['--section both|rerank|warp (both)', '--quick', '--segments N (400', '--latency-ms N (10)', '--warp-docs N,N', '--bits 2|4 (4)', "--range-gap N (32768: the scorer's default)"]],
  ['peers', async () => (await import('./peers')).runPeersBench, ['--dataset DIR (../shared/datasets/vaswani)', '--quick', '--peers a,b|none', '--no-install', '--threads N (1)', '--layout warp|ivf (warp)', '--data DIR', '--docs N', '--modes xtr,exhaustive,bm25', '--nprobe N', '--exact N', '--tprime N', '--as-is', '--no-alternate']],
  ['latency', async () => (await import('./latency')).runLatencyBench, ['--requests N', '--docs N', '--candidates N', '--warmup N', '--gap-ms N']],
  ['encode', async () => (await import('./encode')).runEncodeBench, ['--models LIST', '--dir DIR', '--data DIR', '--docs N', '--real-docs N', '--passes N', '--threads N', '--inference MODE']],
];

const run = (entry: Bench, args: string[]) => runUntilExit(entry, args, 'the bench');

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
    ['load', ['--only', 'both'], '--only: search or rerank (got both)'],
    ['load', ['--layout', 'plaid'], '--layout: warp or ivf (got plaid)'],
    ['load', ['--idle-seconds', '-1'], '--idle-seconds must be a whole number of at least 0, got "-1"'],
    ['score', ['--warp-bits', '3'], '--warp-bits must be 2 or 4, got 3'],
    ['score', ['--mebert-dims', '4'], '--mebert-dims must be a whole number of at least 8, got "4"'],
    ['refit', ['--centroids', '8'], '--centroids must be a whole number of at least 16, got "8"'],
    ['score', ['--quick=yes'], "Option '--quick' does not take an argument"],
    ['scale', ['--codec', 'int8'], '--codec: eden4 or fp16 (got int8)'],
    ['scale', ['--docs', '0'], '--docs must be a whole number of at least 1, got "0"'],
    ['scale', ['--search-modes', 'xtr,nope'], '--search-modes: unknown nope'],
    ['scale', ['--variant-env', 'X'], '--variant-env: "X" is not NAME=VALUE'],
    ['cold-scorer', ['--section', 'all'], '--section must be both, rerank or warp, got all'],
    ['cold-scorer', ['--latency-ms', '-1'], '--latency-ms must be a number of at least 0, got "-1"'],
    ['cold-scorer', ['--bits', '3'], '--bits must be 2 or 4, got 3'],
    ['peers', ['--peers', 'colbert'], "--peers: unknown peer 'colbert'"],
    ['peers', ['--modes', 'xtr,dense'], "--modes: unknown mode 'dense'"],
    ['peers', ['--layout', 'plaid'], '--layout must be warp or ivf, got plaid'],
    ['peers', ['--threads', '0'], '--threads must be a whole number of at least 1, got "0"'],
    ['peers', ['--exact', '-1'], '--exact must be a whole number of at least 0, got "-1"'],
    ['peers', ['--nprobe', '4,0'], '--nprobe must be a comma list of whole numbers of at least 1, got "4,0"'],
    ['peers', ['--nprobe', '4,8'], '--nprobe / --exact lists (a sweep) measure lateral alone: give --peers none'],
    ['peers', ['--peers', 'none', '--modes', 'exhaustive', '--exact', '0,32'], '--nprobe / --exact lists sweep lateral xtr: --modes must include xtr'],
    ['peers', ['--as-is'], '--as-is measures the collection kept in --data DIR: give --data'],
    ['latency', ['--requests', '0'], '--requests must be a whole number of at least 1, got "0"'],
    ['latency', ['--gap-ms', '-5'], '--gap-ms must be a whole number of at least 0, got "-5"'],
    ['encode', ['--inference', 'gpu'], '--inference: thread, inline or both (got gpu)'],
    ['encode', ['--passes', 'x'], '--passes must be a whole number of at least 1, got "x"'],
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

  it('peers --help through npm run bench prints its usage and exits 0 without starting anything', () => {
    const help = runScript('scripts/bench.ts', 'peers', '--help');
    expect(help.status).toBe(0);
    expect(help.stdout).toContain('usage: npm run bench -- peers');
    expect(help.stderr).not.toContain('peers: creating');
    expect(help.stderr).not.toContain('pip install');
  });
});
