/** At most `n` loads at once; the others wait their turn (first come, first served). */
export class Limiter {
  private active = 0;
  private readonly waiting: (() => void)[] = [];
  /** The most loads that ever ran at once (for tests and stats). */
  peak = 0;

  constructor(private readonly n: number) {
    if (!Number.isInteger(n) || n < 1) throw new RangeError(`concurrency must be a positive integer, got ${n}`);
  }

  async run<T>(f: () => Promise<T>): Promise<T> {
    if (this.active >= this.n) await new Promise<void>((r) => this.waiting.push(r));
    this.active++;
    this.peak = Math.max(this.peak, this.active);
    try {
      return await f();
    } finally {
      this.active--;
      this.waiting.shift()?.();
    }
  }
}
