import { spawnSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';

/** The command lines of `npm run demo` and `npm run dataset` that exit before starting anything. */
const run = (script: string, ...args: string[]) => spawnSync(process.execPath, ['--import', 'tsx', script, ...args], { encoding: 'utf8', timeout: 60_000, maxBuffer: 64 * 1024 * 1024 });

describe('npm run demo: options', () => {
  it('--help prints the options and exits 0', () => {
    const r = run('scripts/demo.ts', '--help');
    expect(r.status).toBe(0);
    for (const o of ['--once', '--full', '--model <dir>', '--keep-data', '--help']) expect(r.stdout).toContain(o);
  });

  it.each([
    [['--bogus'], "Unknown option '--bogus'"],
    [['--once', 'extra'], "Unexpected argument 'extra'"],
    [['--once=yes'], "Option '--once' does not take an argument"],
    [['--model', 'x'], '--model needs --full'],
  ])('refuses %j with exit 2, naming it', (args, message) => {
    const r = run('scripts/demo.ts', ...args);
    expect(r.status).toBe(2);
    expect(r.stderr).toContain(message);
    expect(r.stdout).toBe('');
  });
});

describe('npm run dataset: Cranfield in the API formats', () => {
  it('documents: 1,400 NDJSON lines of {id, text}, none empty', () => {
    const r = run('scripts/dataset.ts', 'cranfield', 'documents');
    expect(r.status).toBe(0);
    const docs = r.stdout.trim().split('\n').map((l) => JSON.parse(l) as { id: string; text: string });
    expect(docs).toHaveLength(1400);
    expect(docs.every((d) => Object.keys(d).join() === 'id,text' && d.text.length > 0)).toBe(true);
  });

  it('judgments: 225 judged queries with graded documents', () => {
    const r = run('scripts/dataset.ts', 'cranfield', 'judgments');
    expect(r.status).toBe(0);
    const { queries } = JSON.parse(r.stdout) as { queries: { id: string; text: string; judgments: { doc: string; grade: number }[] }[] };
    expect(queries).toHaveLength(225);
    expect(queries[0].judgments.length).toBeGreaterThan(0);
    expect(queries.flatMap((q) => q.judgments.map((j) => j.grade)).every((g) => g >= 1 && g <= 4)).toBe(true);
  });

  it('refuses anything else with exit 2', () => {
    expect(run('scripts/dataset.ts', 'cranfield', 'bogus').status).toBe(2);
    expect(run('scripts/dataset.ts', 'vaswani', 'documents').status).toBe(2);
    expect(run('scripts/dataset.ts', 'cranfield', 'documents', '--x').status).toBe(2);
  });
});
