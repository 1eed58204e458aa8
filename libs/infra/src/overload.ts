/**
 * "Unreachable" means unreachable (issue 31 item 4): a dependency that does not answer in time
 * while it is connected, or while this process's event loop was held up, is overload, not an
 * outage. This file measures the event loop (EventLoopMonitor) and sorts a failed Redis or S3
 * call into `down` (refused, not connected, no such host, credentials, bucket) or `overloaded`
 * (a command or request timeout on a live connection, S3's own SlowDown / 503, or a timeout or
 * reset while the event loop was busy). The API answers both with 503 + Retry-After, naming which.
 */
import { performance } from 'node:perf_hooks';

/** One sample of the event loop: when it was taken, how late the tick ran, and how busy the loop was since the tick before. */
interface Sample {
  at: number;
  lagMs: number;
  /** The time since the tick before, and how much of it the loop was busy (ms). */
  spanMs: number;
  activeMs: number;
}

/**
 * Measures this process's event loop every `everyMs`: how late each tick runs (lag) and its
 * utilization (performance.eventLoopUtilization) between ticks. The timer is unref'd. A tick that
 * is late right now (the loop is inside a long task, or has just come out of one and has not run
 * the tick yet) counts too, so a timeout handled straight after a block sees the block.
 */
export class EventLoopMonitor {
  private readonly samples: Sample[] = [];
  private last = performance.now();
  private elu = performance.eventLoopUtilization();
  private readonly timer: NodeJS.Timeout;

  constructor(private readonly everyMs = 100, private readonly keepMs = 60_000) {
    this.timer = setInterval(() => this.tick(), everyMs);
    this.timer.unref();
  }

  private tick(): void {
    const now = performance.now();
    const elu = performance.eventLoopUtilization();
    const utilization = performance.eventLoopUtilization(elu, this.elu).utilization;
    this.elu = elu;
    const spanMs = now - this.last;
    this.samples.push({ at: now, lagMs: Math.max(0, spanMs - this.everyMs), spanMs, activeMs: utilization * spanMs });
    this.last = now;
    while (this.samples.length > 0 && this.samples[0].at < now - this.keepMs) this.samples.shift();
  }

  /** How late the tick in progress is (0 when it is not due yet). */
  pendingLagMs(now = performance.now()): number {
    return Math.max(0, now - this.last - this.everyMs);
  }

  /** The largest lag over the last `windowMs` (the tick in progress included), in ms. */
  maxLagMs(windowMs: number, now = performance.now()): number {
    let max = this.pendingLagMs(now);
    for (let i = this.samples.length - 1; i >= 0 && this.samples[i].at >= now - windowMs; i--) max = Math.max(max, this.samples[i].lagMs);
    return Math.round(max);
  }

  /** Utilization of the loop over the last `windowMs` (0..1), time-weighted; a tick overdue right now counts as busy time. */
  utilization(windowMs: number, now = performance.now()): number {
    const pending = this.pendingLagMs(now);
    let span = pending;
    let active = pending;
    for (let i = this.samples.length - 1; i >= 0 && this.samples[i].at >= now - windowMs; i--) {
      span += this.samples[i].spanMs;
      active += this.samples[i].activeMs;
    }
    return span > 0 ? Math.min(1, active / span) : 0;
  }

  stop(): void {
    clearInterval(this.timer);
  }
}

let shared: EventLoopMonitor | undefined;

/** The process's one monitor, started on first use. */
export function eventLoopMonitor(): EventLoopMonitor {
  return (shared ??= new EventLoopMonitor());
}

/** Utilization over a window above which the loop counts as busy whatever the lag of single ticks (a loop that yields every 50 ms but never rests). */
export const BUSY_UTILIZATION = 0.95;

/** What the process knew when a call failed. */
export interface LoadContext {
  /** Largest event loop lag over the window in which the call ran (ms). */
  lagMs: number;
  /** Mean event loop utilization over that window (0..1); optional. */
  utilization?: number;
  /** EVENT_LOOP_OVERLOAD_MS: a lag at or above this means the process was busy. */
  overloadLagMs: number;
  /** The Redis connection's state (ioredis `status`, e.g. 'ready', 'connecting', 'end'); undefined when unknown. */
  redisStatus?: string;
}

export interface DependencyFault {
  service: 'Redis' | 'S3';
  kind: 'down' | 'overloaded';
  /** Why, in a few words, without addresses or keys: e.g. 'command timeout on a connected client', 'connection refused'. */
  reason: string;
  /** true when the event loop was busy (lag or utilization) while the call ran. */
  busy: boolean;
}

interface Cause {
  name?: string;
  code?: string;
  message?: string;
  $metadata?: { httpStatusCode?: number };
}

/** ObjectStore wraps every S3 failure as "<verb> s3://bucket/key: <cause>" (wrapError). */
const S3_WRAPPED = /^(reading|writing|listing|checking|deleting|creating bucket)\b.*(s3:\/\/|bucket)/;
const NETWORK = /ECONNREFUSED|ECONNRESET|ETIMEDOUT|EHOSTUNREACH|ENETUNREACH|ENOTFOUND|EAI_AGAIN|EPIPE|socket hang up|timed? ?out/i;
/** No server there, or not this one: down whatever the load. */
const NO_SERVER = /ECONNREFUSED|ENOTFOUND|EAI_AGAIN|EHOSTUNREACH|ENETUNREACH/i;
const S3_CONFIG = ['AccessDenied', 'NoSuchBucket', 'InvalidAccessKeyId', 'SignatureDoesNotMatch'];
/** S3 saying it is overloaded, or a request that got no answer on an established connection. */
const S3_OVERLOAD_NAMES = ['SlowDown', 'ServiceUnavailable', 'RequestTimeout'];

export function isBusy(ctx: Pick<LoadContext, 'lagMs' | 'utilization' | 'overloadLagMs'>): boolean {
  return ctx.lagMs >= ctx.overloadLagMs || (ctx.utilization ?? 0) >= BUSY_UTILIZATION;
}

/**
 * Sorts a failed Redis or S3 call into `down` or `overloaded`; null for anything else. Rules:
 * - no server (connection refused, unknown host, no route), S3 credentials or bucket refused,
 *   Redis not connected (offline queue off, connection closed, not ready): down;
 * - a Redis command timeout while the connection is ready, Redis BUSY, S3 SlowDown / 503 /
 *   RequestTimeout, an S3 socket that went quiet past S3_SOCKET_TIMEOUT_MS once connected: overloaded;
 * - anything else that looks like the network (a reset, a connect timeout, a Redis timeout on a
 *   connection that is not ready, an S3 5xx): overloaded when the event loop was busy while it
 *   ran (the process could not read the answer in time), down otherwise.
 */
export function classifyDependencyError(err: unknown, ctx: LoadContext): DependencyFault | null {
  if (!(err instanceof Error)) return null;
  const busy = isBusy(ctx);
  const fault = (service: DependencyFault['service'], kind: DependencyFault['kind'], reason: string): DependencyFault => ({ service, kind, reason, busy });
  const byLoad = (service: DependencyFault['service'], reason: string) => fault(service, busy ? 'overloaded' : 'down', busy ? `${reason} while the event loop was busy` : reason);

  const s3 = (cause: Cause | undefined, text: string): DependencyFault | null => {
    const status = cause?.$metadata?.httpStatusCode;
    const name = cause?.name ?? '';
    if (S3_CONFIG.includes(name) || status === 403) return fault('S3', 'down', `credentials or bucket refused (${name || status})`);
    if (NO_SERVER.test(text)) return fault('S3', 'down', 'no server answers at S3_ENDPOINT');
    if (S3_OVERLOAD_NAMES.includes(name) || status === 503) return fault('S3', 'overloaded', `the store answered ${name || status}`);
    if (name === 'TimeoutError' && /of inactivity|requestTimeout/.test(cause?.message ?? text)) return fault('S3', 'overloaded', 'no answer within S3_SOCKET_TIMEOUT_MS on a connected socket');
    if (name === 'TimeoutError') return byLoad('S3', 'no connection within S3_CONNECT_TIMEOUT_MS');
    if (NETWORK.test(text) || (status !== undefined && status >= 500) || name === 'InternalError') return byLoad('S3', `the connection failed (${name || status || 'network'})`);
    return null;
  };

  if (S3_WRAPPED.test(err.message)) {
    const cause = (err as Error & { cause?: Cause }).cause;
    const found = s3(cause, `${err.message} ${cause?.name ?? ''} ${cause?.code ?? ''}`);
    if (found) return found;
  }
  // An AWS SDK error that was not wrapped (it carries $metadata).
  if ('$metadata' in err) {
    const found = s3(err as Cause, `${err.name} ${err.message} ${(err as Cause).code ?? ''}`);
    if (found) return found;
  }
  // After S3: the Redis patterns also match the network errors that an S3 failure carries.
  const m = err.message;
  if (/Command timed out/i.test(m)) {
    if (ctx.redisStatus === 'ready') return fault('Redis', 'overloaded', 'command timeout on a connected client');
    return byLoad('Redis', 'command timeout on a connection that is not ready');
  }
  if (/^BUSY\b/.test(m)) return fault('Redis', 'overloaded', 'Redis is busy running a script');
  if (/Stream isn't writeable|enableOfflineQueue|Connection is closed|Redis not ready|max retries per request/i.test(m) || err.name === 'MaxRetriesPerRequestError') return fault('Redis', 'down', 'not connected');
  if (NO_SERVER.test(m)) return fault('Redis', 'down', 'no server answers at REDIS_URL');
  if (/ETIMEDOUT|ECONNRESET|EPIPE/i.test(m)) return byLoad('Redis', 'the connection failed');
  return null;
}
