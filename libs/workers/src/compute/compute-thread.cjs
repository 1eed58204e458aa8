// Entry of a compute thread (./pool.ts starts it): a worker thread is a fresh module graph that
// does not inherit the TypeScript loader of the process that started it (scripts/start.cjs
// registers tsx in-process; vitest transforms in its own runner), so it registers tsx itself and
// then runs the thread's TypeScript (as libs/training/src/train-thread.cjs does).
require('tsx/cjs');
require('./thread-main.ts');
