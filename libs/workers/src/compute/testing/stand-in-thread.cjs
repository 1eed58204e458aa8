// A stand-in compute thread for pool.spec.ts: speaks the pool's protocol (../protocol.ts) without
// Redis, S3 or the pipeline. Payload `op` says what the "job" does: echo, call its job's methods,
// fail with a named error, keep its thread busy for `ms`, say its nice value, or end the thread mid-job.
const { parentPort, workerData } = require('node:worker_threads');

// As thread-main.ts does first: a thread started with niceAtStart lowers its own priority (lanes.spec.ts).
if (workerData.niceAtStart) {
  require('tsx/cjs');
  require('../thread-priority.ts').lowerThreadPriority(workerData.niceAtStart);
}

let seq = 0;
const calls = new Map();
const post = (m) => parentPort.postMessage(m);

async function run(m) {
  const p = m.payload;
  const call = (method, ...args) =>
    new Promise((resolve, reject) => {
      const id = ++seq;
      calls.set(id, { resolve, reject });
      post({ t: 'call', id, run: m.id, method, args });
    });
  try {
    let value;
    if (p.op === 'die') process.exit(3);
    else if (p.op === 'fail') {
      const err = new Error(p.message);
      err.name = p.name;
      err.retryAfterSeconds = 7;
      throw err;
    } else if (p.op === 'job') {
      await call('updateProgress', 50);
      value = { children: await call('getChildrenValues'), data: m.job.data, token: m.job.token, fields: m.job.logFields };
    } else if (p.op === 'forbidden') {
      value = await call('remove');
    } else if (p.op === 'block') {
      const until = Date.now() + p.ms;
      while (Date.now() < until);
      value = { blocked: p.ms };
    } else if (p.op === 'nice') {
      const tid = Number(/\/task\/(\d+)$/.exec(require('node:fs').readlinkSync('/proc/thread-self'))[1]);
      value = { nice: require('node:os').getPriority(tid), niceAtStart: workerData.niceAtStart, diskDir: workerData.config.SCORER_DISK_CACHE_DIR };
    } else value = { echo: p };
    post({ t: 'done', id: m.id, ok: true, value: { thread: workerData.index, ...value } });
  } catch (err) {
    post({ t: 'done', id: m.id, ok: false, error: { name: err.name, message: err.message, props: err.retryAfterSeconds ? { retryAfterSeconds: err.retryAfterSeconds } : undefined } });
  }
}

parentPort.on('message', (m) => {
  if (m.t === 'run') void run(m);
  else if (m.t === 'reply') {
    const c = calls.get(m.id);
    calls.delete(m.id);
    if (m.ok) c.resolve(m.value);
    else c.reject(Object.assign(new Error(m.error.message), { name: m.error.name }));
  } else if (m.t === 'metrics') post({ t: 'metrics', id: m.id, value: [] });
  else if (m.t === 'close') process.exit(0);
});
post({ t: 'ready' });
