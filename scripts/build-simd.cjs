#!/usr/bin/env node
// Compiles lateral's WebAssembly SIMD kernels (libs/simd/assembly/kernels.ts, AssemblyScript from
// npm) into .cache/simd/kernels-<key>.wasm, where <key> hashes the source and the flags in
// libs/simd/assembly/asc.json: a no-op when that file exists. Run by scripts/ensure-deps.cjs (so
// by `npm run demo`, `npm test`, `npm start`, `npm run bench`), by the image build, and by
// libs/simd's spec when the module is missing. The .wasm is never committed. Without it (or
// where WebAssembly SIMD cannot run), @lateral/simd uses its JavaScript kernels: same results.
//
//   node scripts/build-simd.cjs [--quiet] [--force]
const { createHash } = require('node:crypto');
const { existsSync, mkdirSync, readFileSync, renameSync, rmSync } = require('node:fs');
const path = require('node:path');
const { pathToFileURL } = require('node:url');

const root = path.resolve(__dirname, '..');
const source = path.join(root, 'libs', 'simd', 'assembly', 'kernels.ts');
const flagsFile = path.join(root, 'libs', 'simd', 'assembly', 'asc.json');

/** The cache key: the same computation as simdModulePath in libs/simd/src/wasm.ts. */
function simdKey() {
  return createHash('sha256').update(readFileSync(source)).update('\0').update(readFileSync(flagsFile)).digest('hex').slice(0, 16);
}

function simdOutput(dir = path.join(root, '.cache', 'simd')) {
  return path.join(dir, `kernels-${simdKey()}.wasm`);
}

async function buildSimd({ quiet = false, force = false } = {}) {
  const out = simdOutput();
  if (existsSync(out) && !force) return out;
  const ascPath = path.join(root, 'node_modules', 'assemblyscript', 'dist', 'asc.js');
  if (!existsSync(ascPath)) throw new Error('assemblyscript is not installed (a devDependency): run npm ci');
  const asc = await import(pathToFileURL(ascPath).href);
  mkdirSync(path.dirname(out), { recursive: true });
  const tmp = `${out}.${process.pid}.tmp`;
  const { flags } = JSON.parse(readFileSync(flagsFile, 'utf8'));
  let errors = '';
  const { error } = await asc.main([path.relative(root, source), ...flags, '--baseDir', root, '--outFile', path.relative(root, tmp)], {
    stdout: { write: () => true },
    stderr: { write: (s) => { errors += String(s); return true; } },
  });
  if (error) {
    rmSync(tmp, { force: true });
    throw new Error(`asc failed on ${path.relative(root, source)}: ${error.message}\n${errors}`);
  }
  renameSync(tmp, out);
  if (!quiet) console.log(`built the WebAssembly SIMD kernels: ${path.relative(root, out)}`);
  return out;
}

module.exports = { buildSimd, simdOutput, simdKey };

if (require.main === module) {
  const args = process.argv.slice(2);
  const unknown = args.filter((a) => a !== '--quiet' && a !== '--force');
  if (unknown.length) {
    console.error(`build-simd: unknown option ${unknown.join(' ')} (options: --quiet, --force)`);
    process.exit(2);
  }
  buildSimd({ quiet: args.includes('--quiet'), force: args.includes('--force') }).catch((err) => {
    console.error(err instanceof Error ? err.message : err);
    process.exit(1);
  });
}
