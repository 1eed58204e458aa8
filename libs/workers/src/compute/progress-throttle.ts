/**
 * Numeric progress of a job in a compute thread, coalesced (issue 31, CPU per request): each
 * `job.updateProgress` there is a message to the main thread, a BullMQ script in Redis and an
 * event every QueueEvents reader parses, and a search or re-rank on a small collection made two
 * or three of them in a job of a few milliseconds. A percentage reaches Redis at most once per
 * PROGRESS_INTERVAL_MS, counted from the job's start: a job that ends sooner sends none (its
 * answer says 100 once it is completed), a longer one sends the latest value when each interval
 * ends, so a reader sees progress at most that much behind. Anything else a processor passes
 * (training's progress objects) is sent at once, as before.
 */

/** The shortest time between two percentages of one job sent to Redis, and before the first. */
export const PROGRESS_INTERVAL_MS = 250;

export class ProgressThrottle {
  private lastSent: number;
  private pending: number | undefined;
  private timer: ReturnType<typeof setTimeout> | null = null;
  private closed = false;
  /** Percentages the processor reported and those that reached send (for the spec and the bench). */
  reported = 0;
  sent = 0;

  constructor(
    private readonly send: (progress: unknown) => Promise<unknown>,
    private readonly intervalMs = PROGRESS_INTERVAL_MS,
    private readonly now: () => number = Date.now,
  ) {
    this.lastSent = now();
  }

  /** job.updateProgress as the processor calls it. */
  update(progress: unknown): Promise<unknown> {
    if (typeof progress !== 'number' || this.closed) return this.send(progress);
    this.reported++;
    const t = this.now();
    if (this.timer === null && t - this.lastSent >= this.intervalMs) {
      this.lastSent = t;
      this.sent++;
      return this.send(progress);
    }
    this.pending = progress;
    if (this.timer === null) {
      this.timer = setTimeout(() => this.flush(), Math.max(0, this.lastSent + this.intervalMs - t));
      this.timer.unref?.();
    }
    return Promise.resolve();
  }

  private flush(): void {
    this.timer = null;
    const v = this.pending;
    this.pending = undefined;
    if (this.closed || v === undefined) return;
    this.lastSent = this.now();
    this.sent++;
    // A trailing value's failure (the job gone, Redis away) is the job's next call's to report.
    void this.send(v).catch(() => undefined);
  }

  /** The job ended: a value still held is dropped (a completed job reads 100, a failed one its error). */
  close(): void {
    this.closed = true;
    this.pending = undefined;
    if (this.timer !== null) clearTimeout(this.timer);
    this.timer = null;
  }
}
