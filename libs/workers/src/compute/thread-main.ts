/**
 * A compute thread (./pool.ts starts it through ./compute-thread.cjs): its own Redis and S3
 * connections and repositories (createRuntime), the pipeline's handler registry over them with
 * its caches kept across jobs, and the loop that runs the jobs the main thread sends.
 */
import { parentPort, workerData } from 'node:worker_threads';
import type { Job } from 'bullmq';
import { createLogger, createRuntime, metricsJson, recordInference, runInJobContext, useThreadMetrics, type Runtime } from '@lateral/infra';
import { setInferenceObserver } from '@lateral/kernels';
import type { ShardJobPayload, ShardJobResult } from '@lateral/shared';
import { pipelineHandlers } from '../handlers';
import { ProgressThrottle } from './progress-throttle';
import { lowerThreadPriority } from './thread-priority';
import { toWire, type FromThread, type JobMethod, type JobSnapshot, type ThreadInit, type ToThread } from './protocol';

const port = parentPort!;
const init = workerData as ThreadInit;
const post = (m: FromThread) => port.postMessage(m);

useThreadMetrics();
setInferenceObserver(recordInference);
// Every line goes to the main thread's logger (its destination and format: stdout, a file, a test's array).
const logger = createLogger(init.logLevel, `compute-${init.index}`, { json: true, destination: { write: (line: string) => post({ t: 'log', line }) } });

let seq = 0;
const calls = new Map<number, { resolve: (v: unknown) => void; reject: (e: Error) => void }>();

/**
 * The job as a processor sees it: its fields, and its methods as calls on the real job in the
 * main thread; percentages through `progress` (coalesced, ./progress-throttle.ts).
 */
function jobOf(run: number, s: JobSnapshot, progress: (send: (p: unknown) => Promise<unknown>) => ProgressThrottle): Job {
  const call = (method: JobMethod, ...args: unknown[]) =>
    new Promise<unknown>((resolve, reject) => {
      const id = ++seq;
      calls.set(id, { resolve, reject });
      post({ t: 'call', id, run, method, args });
    });
  const throttle = progress((p) => call('updateProgress', p));
  const job = {
    id: s.id,
    name: s.name,
    data: s.data,
    opts: s.opts,
    attemptsMade: s.attemptsMade,
    stalledCounter: s.stalledCounter,
    token: s.token,
    queueName: s.queueName,
    queueQualifiedName: s.queueQualifiedName,
    timestamp: s.timestamp,
    processedOn: s.processedOn,
    updateProgress: (p: unknown) => throttle.update(p),
    updateData: async (data: unknown) => {
      await call('updateData', data);
      job.data = data;
    },
    getChildrenValues: () => call('getChildrenValues'),
    moveToWaitingChildren: (token: string, opts?: unknown) => call('moveToWaitingChildren', token, ...(opts === undefined ? [] : [opts])),
    log: (line: string) => call('log', line),
  };
  return job as unknown as Job;
}

/**
 * An encoder process's compute thread (ThreadInit.nice > 0): loads the default model's encoder,
 * whose session thread (and ONNX Runtime's intra-op threads in it) starts with this thread's
 * current priority, then lowers this thread's own (./thread-priority.ts), so that its compress,
 * index, commit and merge work, and the threads it starts from now on, yield the cores to the
 * encoder's runs. An encoder loaded later (another model) starts at the lowered priority. A model
 * that cannot be loaded here is logged and the priority lowered all the same (its first job reports the error).
 */
async function encoderFirst(nice: number, model: string, encoders: ((model: string) => Promise<unknown>) | undefined): Promise<void> {
  if (encoders) await encoders(model).catch((err: Error) => logger.info(`default encoder ${model} not loaded before lowering this thread's priority: ${err.message}`));
  const out = lowerThreadPriority(nice);
  if (out.applied) logger.debug(`compute thread ${init.index} (tid ${out.tid}) at nice ${out.nice}; the encoder's threads keep the process's priority`);
  else logger.warn(`compute thread ${init.index} keeps the process's priority: ${out.reason}`);
}

async function main(): Promise<void> {
  if (init.niceAtStart) {
    const out = lowerThreadPriority(init.niceAtStart);
    if (out.applied) logger.debug(`compute thread ${init.index} (tid ${out.tid}) at nice ${out.nice} from its start`);
    else logger.warn(`compute thread ${init.index} keeps the process's priority: ${out.reason}`);
  }
  let rt: Runtime;
  try {
    rt = await createRuntime(init.config, { redisUrl: init.redisUrl, s3Endpoint: init.s3Endpoint, embedded: [], stop: async () => undefined }, logger);
  } catch (err) {
    post({ t: 'start-failed', error: toWire(err) });
    process.exit(1);
  }
  const extra: { shardChild?: (p: ShardJobPayload) => Promise<ShardJobResult>; encoders?: (model: string) => Promise<unknown> } = {};
  const handlers = pipelineHandlers(rt, extra) as Record<string, ((p: unknown, job: Job) => Promise<unknown>) | undefined>;
  if (init.nice) await encoderFirst(init.nice, init.config.DEFAULT_MODEL, extra.encoders);
  const workerLog = logger.child('worker');
  const active = new Set<Promise<unknown>>();
  let closing = false;

  port.on('message', (m: ToThread) => {
    switch (m.t) {
      case 'run': {
        const handler = m.kind === 'shard' ? (p: unknown) => extra.shardChild!(p as ShardJobPayload) : handlers[m.kind];
        let throttle: ProgressThrottle | undefined;
        const job = () => jobOf(m.id, m.job, (send) => (throttle = new ProgressThrottle(send)));
        const run = handler
          ? runInJobContext(m.job.logFields, workerLog.child(m.job.queueName), () => handler(m.payload, job()))
          : Promise.reject(new Error(`no processor ${m.kind} in the compute thread`));
        const settled = run.then(
          (value) => {
            throttle?.close();
            post({ t: 'done', id: m.id, ok: true, value });
          },
          (err: unknown) => {
            throttle?.close();
            post({ t: 'done', id: m.id, ok: false, error: toWire(err) });
          },
        );
        active.add(settled);
        void settled.finally(() => active.delete(settled));
        break;
      }
      case 'reply': {
        const c = calls.get(m.id);
        calls.delete(m.id);
        if (!c) break;
        if (m.ok) c.resolve(m.value);
        else {
          const err = new Error(m.error.message);
          err.name = m.error.name;
          c.reject(err);
        }
        break;
      }
      case 'metrics':
        void metricsJson().then(
          (value) => post({ t: 'metrics', id: m.id, value }),
          () => post({ t: 'metrics', id: m.id, value: [] }),
        );
        break;
      case 'close':
        if (closing) break;
        closing = true;
        // The main thread closes only after its workers have finished or handed back their jobs;
        // whatever still runs here is abandoned (its job is back in its queue).
        void (async () => {
          await rt.close().catch(() => undefined);
          post({ t: 'closed' });
          process.exit(0); // ends this thread only
        })();
        break;
    }
  });
  post({ t: 'ready' });
}

void main();
