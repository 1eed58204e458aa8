import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { describe, expect, it } from 'vitest';

/**
 * The API process never loads ONNX Runtime (issue 8 item 4): apps/api imports @lateral/shared,
 * @lateral/infra and @lateral/http-api only, and none of them may reach the kernels, the model
 * library or the pipeline (ESLint's module boundaries check the imports; this checks what Node
 * actually loads). Each probe runs in a fresh Node process, as the API's entry point does.
 */
const ROOT = path.resolve(__dirname, '..');

function onnxModulesLoadedBy(modules: string[]): string[] {
  const script = [
    "import { createRequire } from 'node:module';",
    `for (const m of ${JSON.stringify(modules)}) await import(m);`,
    "const loaded = Object.keys(createRequire(process.cwd() + '/probe.js').cache);",
    'console.log(JSON.stringify(loaded.filter((k) => /[\\\\/]onnxruntime-[a-z]+[\\\\/]/.test(k))));',
  ].join('\n');
  const r = spawnSync(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], { cwd: ROOT, encoding: 'utf8', timeout: 120_000 });
  expect(r.status, r.stderr).toBe(0);
  return JSON.parse(r.stdout.trim().split('\n').at(-1)!) as string[];
}

describe('the API process loads no ONNX Runtime', () => {
  it("apps/api's libraries load none of onnxruntime-node / -common", () => {
    expect(onnxModulesLoadedBy(['@lateral/shared', '@lateral/infra', '@lateral/http-api'])).toEqual([]);
  }, 150_000);

  it('the probe sees ONNX Runtime where it is loaded: the worker composition root', () => {
    expect(onnxModulesLoadedBy(['@lateral/workers']).some((k) => k.includes('onnxruntime-node'))).toBe(true);
  }, 150_000);
});
