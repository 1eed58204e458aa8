import { describe, expect, it } from 'vitest';
import { RequestTiming, epochMs } from '../../libs/http-api/src/common/server-timing';
import { PARTS, parseServerTiming } from './latency';

describe('bench latency: Server-Timing', () => {
  it('the laps of a request add up to its total, the worker timestamps become pickup and job, and the bench reads them back', async () => {
    const t = new RequestTiming();
    const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
    await sleep(2);
    t.lap('http');
    await sleep(2);
    t.lap('enqueue');
    await sleep(12);
    const startedAt = epochMs() - 10; // the worker's times, in the past
    t.laps({ startedAt, doneAt: startedAt + 5 });
    t.lap('handback', startedAt + 6);
    t.lap('handback', startedAt + 7); // a part lapped twice adds up
    const { durations, at } = parseServerTiming(t.header());
    expect(Object.keys(durations)).toEqual(['http', 'enqueue', 'pickup', 'job', 'handback', 'total']);
    expect(durations.job).toBeCloseTo(5, 2);
    expect(durations.pickup).toBeGreaterThan(0);
    expect(durations.handback).toBeCloseTo(2, 2);
    const sum = durations.http + durations.enqueue + durations.pickup + durations.job + durations.handback;
    // total runs to the header's own time, at or after the last lap
    expect(durations.total).toBeGreaterThanOrEqual(sum - 0.01);
    expect(at.sent - at.arrived).toBeCloseTo(durations.total, 1);
    for (const names of Object.values(PARTS)) for (const n of names) expect(typeof n).toBe('string');
  });

  it('a worker timestamp before the running lap (same-process pick-up before the enqueue lap) counts as zero, never negative', () => {
    const t = new RequestTiming();
    const before = epochMs() - 50;
    t.lap('enqueue');
    t.laps({ startedAt: before, doneAt: before + 1 });
    const { durations } = parseServerTiming(t.header());
    expect(durations.pickup).toBe(0);
    expect(durations.job).toBe(0);
  });

  it('ignores malformed metrics', () => {
    expect(parseServerTiming('a;dur=1, b;dur=x, ;dur=2, c, d;desc="5"').durations).toEqual({ a: 1 });
    expect(parseServerTiming(null)).toEqual({ durations: {}, at: {} });
  });
});
