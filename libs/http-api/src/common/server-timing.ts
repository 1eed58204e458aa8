import type { NextFunction, Request, Response } from 'express';

/** Wall-clock milliseconds with sub-millisecond resolution, comparable across processes of one machine. */
export const epochMs = (): number => performance.timeOrigin + performance.now();

/**
 * Where a waiting re-rank or search spends its time (issue 31 item 1): consecutive laps of the
 * request path, so they add up to the time from the request's arrival to its answer. Each lap
 * is named by the part it ends (`http` is the time before the auth middleware, `parse` the body
 * read, `route` Nest's routing and guard, ...); the job's own time, its pick-up and its
 * hand-back come from the timestamps the worker puts in the job's return value (`JobTiming`).
 * Sent as a standard `Server-Timing` header on POST /v1/search and /v1/rerank.
 */
export class RequestTiming {
  private readonly start = epochMs();
  private last = this.start;
  readonly parts: [name: string, ms: number][] = [];

  /** Ends the running lap as part `name` (a part lapped twice adds up). */
  lap(name: string, at = epochMs()): void {
    const ms = Math.max(0, at - this.last);
    const p = this.parts.find((x) => x[0] === name);
    if (p) p[1] += ms;
    else this.parts.push([name, ms]);
    this.last = Math.max(this.last, at);
  }

  /** Laps at the worker's timestamps: pick-up (queued -> the handler starts), job, hand-back (-> now). */
  laps(job: JobTiming | undefined): void {
    if (!job || !Number.isFinite(job.startedAt) || !Number.isFinite(job.doneAt)) return;
    this.lap('pickup', job.startedAt);
    this.lap('job', job.doneAt);
  }

  /**
   * The header value: one metric per part, `total` (arrival to now), and the arrival and this
   * moment as wall-clock times (`arrived` and `sent`, epoch ms in `desc`), so a client on the
   * same machine can tell the request's way in and the answer's way out apart.
   */
  header(): string {
    const f = (ms: number) => (Math.round(ms * 1000) / 1000).toString();
    const now = epochMs();
    return [...this.parts.map(([n, ms]) => `${n};dur=${f(ms)}`), `total;dur=${f(now - this.start)}`, `arrived;desc="${this.start.toFixed(3)}"`, `sent;desc="${now.toFixed(3)}"`].join(', ');
  }
}

/** What a worker adds to the return value of a re-rank or search job: when its handler started and ended (epochMs). */
export interface JobTiming {
  startedAt: number;
  doneAt: number;
}

/** The request's timing (set by `startTiming`, first middleware), or undefined. */
export function requestTiming(res: { locals?: Record<string, unknown> } | undefined): RequestTiming | undefined {
  const t = res?.locals?.timing;
  return t instanceof RequestTiming ? t : undefined;
}

/** First middleware: the request's clock starts. */
export function startTiming(_req: Request, res: Response, next: NextFunction): void {
  res.locals.timing = new RequestTiming();
  next();
}

/** A middleware that ends the running lap as `name` (placed between the stages it separates). */
export function lapTiming(name: string) {
  return (_req: Request, res: Response, next: NextFunction): void => {
    requestTiming(res)?.lap(name);
    next();
  };
}
