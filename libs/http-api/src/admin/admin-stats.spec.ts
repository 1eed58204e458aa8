import { describe, expect, it } from 'vitest';
import { ingestionWork, percentiles, rateAndEta } from './admin-stats';

describe('percentiles', () => {
  it('nearest rank over 1..100 and a single value; nulls when empty', () => {
    const v = Array.from({ length: 100 }, (_, i) => 100 - i);
    expect(percentiles(v)).toEqual({ count: 100, p50: 50, p95: 95, p99: 99 });
    expect(percentiles([7])).toEqual({ count: 1, p50: 7, p95: 7, p99: 7 });
    expect(percentiles([])).toEqual({ count: 0, p50: null, p95: null, p99: null });
  });
});

describe('ingestion rate and ETA', () => {
  const created = 1_000_000;
  it('the slope of the last minute of samples', () => {
    // 100 documents of work done between t+10 s and t+20 s: 10 docs/s, 500 left -> 50 s.
    const r = rateAndEta([{ t: created + 10_000, work: 200 }, { t: created + 20_000, work: 300 }], created, 800, created + 20_000);
    expect(r).toEqual({ docsPerSecond: 10, etaSeconds: 50 });
  });
  it('a stalled ingestion: 0 docs/s and no ETA', () => {
    expect(rateAndEta([{ t: created + 10_000, work: 300 }, { t: created + 20_000, work: 300 }], created, 800, created + 20_000)).toEqual({ docsPerSecond: 0, etaSeconds: null });
  });
  it('one sample: the mean since the ingestion was created; done: ETA 0', () => {
    expect(rateAndEta([{ t: created + 4_000, work: 20 }], created, 100, created + 4_000)).toEqual({ docsPerSecond: 5, etaSeconds: 16 });
    expect(rateAndEta([{ t: created + 4_000, work: 100 }], created, 100, created + 4_000).etaSeconds).toBe(0);
  });
  it('work is the mean of the four stages past acceptance', () => {
    expect(ingestionWork({ encoded: 100, compressed: 60, indexed: 40, committed: 0 })).toBe(50);
  });
});
