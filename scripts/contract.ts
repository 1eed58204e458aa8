/**
 * `npm run contract [-- --max-examples N] [--phases examples,fuzzing,stateful] [--seed S]`: the OpenAPI
 * document against the server that serves it (issue 27 item 4). Starts the service in this
 * process on its own Redis and S3 (embedded, free ports, a temporary data folder), creates a
 * collection for the operations that need one, and runs schemathesis (PyPI, pinned, installed
 * into .cache/schemathesis-venv on first use) against the live /openapi.json with every check:
 * server errors, schema-valid requests refused, undocumented status codes, responses that do not
 * match their schema. Prints schemathesis's report and exits with its status.
 */
import { spawn, spawnSync } from 'node:child_process';
import { createInterface } from 'node:readline';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { loadConfig } from '@lateral/shared';
import { startServer } from '../apps/all-in-one/src/server';

const SCHEMATHESIS = 'schemathesis==4.32.5';
const VENV = path.resolve('.cache/schemathesis-venv');

const { values } = parseArgs({
  options: {
    'max-examples': { type: 'string', default: '20' },
    phases: { type: 'string', default: 'examples,fuzzing,stateful' },
    seed: { type: 'string' },
    'max-seconds': { type: 'string', default: '600' },
    help: { type: 'boolean', short: 'h' },
  },
  strict: true,
});
if (values.help) {
  console.log('usage: npm run contract -- [--max-examples N (20)] [--phases examples,coverage,fuzzing,stateful (examples,fuzzing,stateful)] [--seed S] [--max-seconds T (600): schemathesis is stopped and the run fails past it]');
  process.exit(0);
}

function ensureSchemathesis(): string {
  const bin = path.join(VENV, 'bin', 'schemathesis');
  const version = existsSync(bin) ? spawnSync(bin, ['--version'], { encoding: 'utf8' }).stdout : '';
  if (version.includes(SCHEMATHESIS.split('==')[1])) return bin;
  console.error(`contract: installing ${SCHEMATHESIS} (PyPI) into ${VENV} ...`);
  if (!existsSync(path.join(VENV, 'bin', 'python'))) {
    const r = spawnSync('python3', ['-m', 'venv', VENV], { stdio: 'inherit' });
    if (r.status !== 0) throw new Error('python3 -m venv failed (Debian: apt-get install python3-venv)');
  }
  const r = spawnSync(path.join(VENV, 'bin', 'python'), ['-m', 'pip', 'install', '-q', '--disable-pip-version-check', SCHEMATHESIS], { stdio: 'inherit' });
  if (r.status !== 0) throw new Error(`pip install ${SCHEMATHESIS} failed`);
  return bin;
}

async function main(): Promise<number> {
  const bin = ensureSchemathesis();
  const dir = mkdtempSync(path.join(os.tmpdir(), 'lateral-contract-'));
  const config = loadConfig({ ...process.env, PORT: '0', DATA_DIR: dir, LOG_LEVEL: 'error', DEFAULT_MODEL: process.env.DEFAULT_MODEL ?? 'glove-ctx-100d', RECONCILE_INTERVAL_SECONDS: '0' });
  const server = await startServer(config, { quiet: true });
  try {
    await fetch(`${server.url}/v1/collections`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"id":"c"}' });
    const args = [
      'run',
      `${server.url}/openapi.json`,
      '--checks',
      'all',
      '--max-examples',
      values['max-examples']!,
      '--phases',
      values.phases!,
      '--no-color',
      // Longer than the longest answer the API may block for (a `wait` of at most 60 s; a DELETE of
      // one document waits 30 s by default): schemathesis' own 10 s took a delete still running on a
      // loaded machine for a network error.
      '--request-timeout',
      '90',
      // Its body is a JSONL file: schemathesis has no serializer for application/jsonl, so it cannot
      // generate one (the other JSONL and NDJSON routes also take JSON, which it tests). The upload is
      // checked by test/openapi-live.integration.spec.ts, test/rerank-texts.integration.spec.ts and test/fuzz.integration.spec.ts.
      '--exclude-path',
      '/v1/uploads/{name}',
      ...(values.seed ? ['--seed', values.seed] : []),
    ];
    console.error(`contract: schemathesis ${args.join(' ')}`);
    // Asynchronous: the service answers from this process's event loop while schemathesis runs.
    // The rules between fields that JSON Schema cannot state (scripts/contract-hooks.py).
    const child = spawn(bin, args, { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, SCHEMATHESIS_HOOKS: path.resolve('scripts/contract-hooks.py') } });
    // Schemathesis closes with pytest's framed summary ("==== 2 warnings in 32.36s ===="), which a
    // CI log reader takes for a pytest run that executed no test. The frame is re-drawn with dashes;
    // every line is passed on, in order, to the stream it came on.
    for (const [from, to] of [[child.stdout, process.stdout], [child.stderr, process.stderr]] as const) {
      createInterface({ input: from, crlfDelay: Infinity }).on('line', (line) => to.write(`${unframeSummary(line)}\n`));
    }
    const limit = Number(values['max-seconds']) * 1000;
    const timer = setTimeout(() => {
      console.error(`contract: schemathesis still running after ${values['max-seconds']} s (--max-seconds): stopped, the run fails`);
      child.kill('SIGTERM');
    }, limit);
    const started = Date.now();
    const code = await new Promise<number>((resolve) => child.on('close', (c) => resolve(c ?? 1)));
    clearTimeout(timer);
    console.error(`contract: schemathesis exited ${code} after ${((Date.now() - started) / 1000).toFixed(0)} s`);
    return code;
  } finally {
    await server.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}

/** A pytest-style summary line framed by '=' runs, re-drawn with '-' runs; any other line unchanged. */
function unframeSummary(line: string): string {
  const m = /^=+ (.*) =+$/.exec(line);
  return m ? `-- ${m[1]} --` : line;
}

main().then(
  (code) => process.exit(code),
  (err) => {
    console.error(`contract failed: ${err instanceof Error ? err.message : err}`);
    process.exit(1);
  },
);
