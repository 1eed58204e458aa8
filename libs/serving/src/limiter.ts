import pLimit, { type LimitFunction } from 'p-limit';

/**
 * At most `n` loads at once; the others wait their turn (first come, first served): p-limit's
 * queue (npm, issue 28 item 7), plus the peak this cache's tests and stats read. p-limit ships as
 * ES modules only; these libraries run as CommonJS under tsx and load it through Node's
 * require(esm), unflagged from 20.19 (the floor of `engines`).
 */
export class Limiter {
  private readonly limit: LimitFunction;
  /** The most loads that ever ran at once (for tests and stats). */
  peak = 0;

  constructor(n: number) {
    if (!Number.isInteger(n) || n < 1) throw new RangeError(`concurrency must be a positive integer, got ${n}`);
    this.limit = pLimit(n);
  }

  run<T>(f: () => Promise<T>): Promise<T> {
    return this.limit(() => {
      this.peak = Math.max(this.peak, this.limit.activeCount);
      return f();
    });
  }
}
