import { describe, expect, it } from 'vitest';
import { benchWarp } from './bench';

describe('benchWarp', () => {
  it('runs on a small segment and reports every timing and the ratios', () => {
    const b = benchWarp({ tokens: 3000, dims: 16, centroids: 32, n: 4, nprobe: 4, docLength: 20, kPrime: 50, repeats: 1 });
    expect(b.documents).toBe(150);
    expect(b.scoredPerQuery).toBeGreaterThan(0);
    for (const v of [b.centroidScoresMs, b.tableMs, b.lookupMs, b.floatMs, b.warpSearchMs, b.xtrSearchMs]) expect(v).toBeGreaterThanOrEqual(0);
    expect(b.kernelRatio).toBeCloseTo(b.floatMs / (b.tableMs + b.lookupMs), 9);
    expect(b.top10Overlap).toBeGreaterThanOrEqual(0);
    expect(b.top10Overlap).toBeLessThanOrEqual(1);
  });
});
