/**
 * The messages between a worker process's main thread and its compute threads (./pool.ts,
 * ./thread-main.ts), and how an error crosses between them with its class intact.
 */
import { DelayedError, UnrecoverableError, WaitingChildrenError, type JobsOptions } from 'bullmq';
import { ConflictError, InvalidPayloadError, NotFoundError, PermanentJobError, UnavailableError, ValidationError, type Config } from '@lateral/shared';
import type { LogFields, LogLevel } from '@lateral/infra';

/** What a thread is started with (workerData). */
export interface ThreadInit {
  /** The process's configuration, with this thread's share of the caches (pool.ts, threadConfig). */
  config: Config;
  redisUrl: string;
  s3Endpoint: string | undefined;
  index: number;
  /** The least severe level the main thread's logger writes: the thread does not send lines below it. */
  logLevel: LogLevel;
  /**
   * > 0: once the default model's encoder (its session thread) is loaded, the thread lowers its own
   * OS priority to this nice value (./thread-priority.ts); 0: it keeps the process's.
   */
  nice?: number;
  /**
   * > 0: the thread lowers its own OS priority to this nice value as it starts, before it creates
   * its runtime, so every thread it starts later (ONNX Runtime's intra-op threads) inherits it
   * (a refit's thread: REFIT_NICE, ./lanes.ts); 0: it keeps the process's.
   */
  niceAtStart?: number;
}

/** A BullMQ job as its processor sees it in the thread: its fields; its methods are calls back to the main thread. */
export interface JobSnapshot {
  id?: string;
  name: string;
  data: unknown;
  opts: JobsOptions;
  attemptsMade: number;
  stalledCounter: number;
  token?: string;
  queueName: string;
  queueQualifiedName: string;
  timestamp: number;
  processedOn?: number;
  /** jobLogFields of the job: every line the processor logs carries them, as on the main thread. */
  logFields: LogFields;
}

/** The Job methods a processor may call (the pipeline uses these; anything else is refused by name). */
export const JOB_METHODS = ['updateProgress', 'updateData', 'getChildrenValues', 'moveToWaitingChildren', 'log'] as const;
export type JobMethod = (typeof JOB_METHODS)[number];

export interface WireError {
  name: string;
  message: string;
  stack?: string;
  /** Own enumerable fields (retryAfterSeconds, issues ...), as JSON. */
  props?: Record<string, unknown>;
}

export type ToThread =
  | { t: 'run'; id: number; kind: string; payload: unknown; job: JobSnapshot }
  | { t: 'reply'; id: number; ok: true; value: unknown }
  | { t: 'reply'; id: number; ok: false; error: WireError }
  | { t: 'metrics'; id: number }
  | { t: 'close' };

export type FromThread =
  | { t: 'ready' }
  | { t: 'start-failed'; error: WireError }
  | { t: 'done'; id: number; ok: true; value: unknown }
  | { t: 'done'; id: number; ok: false; error: WireError }
  | { t: 'call'; id: number; run: number; method: JobMethod; args: unknown[] }
  | { t: 'metrics'; id: number; value: unknown }
  | { t: 'log'; line: string }
  | { t: 'closed' };

/** The error classes whose identity matters to the caller (WorkerHost, BullMQ, the API's mapping): re-created as themselves. */
const KNOWN: Record<string, new (...args: never[]) => Error> = {
  PermanentJobError,
  InvalidPayloadError,
  UnavailableError,
  ValidationError,
  NotFoundError,
  ConflictError,
  UnrecoverableError,
  WaitingChildrenError,
  DelayedError,
};

export function toWire(err: unknown): WireError {
  if (!(err instanceof Error)) return { name: 'Error', message: String(err) };
  let props: Record<string, unknown> | undefined;
  const own = Object.entries(err).filter(([k]) => k !== 'name' && k !== 'message' && k !== 'stack' && k !== 'cause');
  if (own.length) {
    try {
      props = JSON.parse(JSON.stringify(Object.fromEntries(own))) as Record<string, unknown>;
    } catch {
      props = undefined;
    }
  }
  return { name: err.name, message: err.message, stack: err.stack, ...(props ? { props } : {}) };
}

/** The error a WireError describes: an instance of its class when the class is one of KNOWN (instanceof holds), else an Error with its name. */
export function fromWire(w: WireError, where: string): Error {
  const Known = KNOWN[w.name];
  const err: Error = Known ? (Object.create(Known.prototype) as Error) : new Error(w.message);
  Object.assign(err, w.props ?? {});
  Object.defineProperty(err, 'message', { value: w.message, writable: true, configurable: true, enumerable: false });
  Object.defineProperty(err, 'name', { value: w.name, writable: true, configurable: true, enumerable: false });
  const frames = (w.stack ?? '').split('\n').slice(1).join('\n');
  Object.defineProperty(err, 'stack', { value: `${w.name}: ${w.message}\n    (in ${where})${frames ? `\n${frames}` : ''}`, writable: true, configurable: true, enumerable: false });
  return err;
}
