import { describe, expect, it } from 'vitest';
import type { SegmentPass, SegmentIndex, SearchSegment } from '@lateral/search';
import { SegmentUnavailableError, type LazySearchPart, type SearchPart, type SearchPlan } from './search-plan';
import { searchSegments } from './segment-pass';

/** A plan of fake parts whose opens answer in a later turn and count what is open now. */
function fakePlan(count: number, openAhead: number, bad: { index?: number[]; open?: number[]; crash?: number } = {}, alternate = false) {
  let open = 0;
  let peak = 0;
  const opened: number[] = [];
  const indexed: number[] = [];
  const release = () => open--;
  const parts: LazySearchPart[] = Array.from({ length: count }, (_, s) => {
    const position = s * 2; // manifest positions need not be the parts' indices
    const unavailable = () => new SegmentUnavailableError(`k${s}`, 'segment', `k${s}`, `segment ${s} is damaged`);
    return {
      position,
      ref: { batchId: `b${s}`, codecVersion: 1, key: `k${s}`, documents: 3, tokens: 6, bytes: 1, checksum: '0' },
      live: undefined,
      index: async () => {
        await new Promise((r) => setImmediate(r));
        indexed.push(s);
        if (bad.index?.includes(s)) throw unavailable();
        return { documents: 3 } as SegmentIndex;
      },
      open: async (): Promise<SearchPart> => {
        open++;
        peak = Math.max(peak, open);
        opened.push(s);
        await new Promise((r) => setImmediate(r));
        if (s === bad.crash) {
          release();
          throw new Error('disk on fire');
        }
        if (bad.open?.includes(s)) {
          release();
          throw unavailable();
        }
        return { ref: { batchId: `b${s}`, codecVersion: 1, key: `k${s}`, documents: 3, tokens: 6, bytes: 1, checksum: '0' }, segment: { documents: 3, name: `k${s}` } as SearchSegment, index: { documents: 3 } as SegmentIndex, live: undefined };
      },
      docIds: async () => ['a', 'b', 'c'],
    };
  });
  let walks = 0;
  const plan: SearchPlan = { parts, openAhead, unavailable: () => [], reversed: () => alternate && walks++ % 2 === 1, keep: () => {} };
  return { plan, release, peak: () => peak, opened, indexed };
}

/** A pass that records what it saw, and lets its segment go when done with it. */
function recorder(needsStats: boolean, release: () => void) {
  const counted: number[] = [];
  const visited: number[] = [];
  const pass: SegmentPass = {
    needsStats,
    count: (index) => counted.push(index.documents),
    visit: function* (s) {
      visited.push(s);
      yield;
      release();
    },
    finish: function* () {
      return [];
    },
  };
  return { pass, counted, visited };
}

describe('searchSegments', () => {
  it('opens each segment once, in order, at most openAhead at a time, and hands it to every pass', async () => {
    for (const ahead of [1, 2, 4, 9]) {
      const f = fakePlan(40, ahead);
      const a = recorder(false, f.release);
      const b = recorder(false, () => {});
      const progress: number[] = [];
      const report = await searchSegments(f.plan, [a.pass, b.pass], { yieldEvery: async () => {}, onSegment: (done) => void progress.push(done) });
      expect(a.visited).toEqual([...Array(40).keys()]);
      expect(b.visited).toEqual(a.visited);
      expect(f.opened).toEqual([...Array(40).keys()]);
      // open from its read until the first pass is done with it: never more than the window
      expect(f.peak()).toBe(Math.min(ahead, 40));
      expect(report.openPeak).toBe(Math.min(ahead, 40));
      expect(progress).toEqual([...Array(40).keys()].map((i) => i + 1));
      expect(report.failed.size).toBe(0);
      expect(f.indexed).toEqual([]); // no pass asked for statistics
    }
  });

  it('counts every index before the first visit when a pass needs statistics', async () => {
    const f = fakePlan(12, 3);
    const order: string[] = [];
    const pass: SegmentPass = {
      needsStats: true,
      count: () => void order.push('count'),
      visit: function* () {
        order.push('visit');
      },
      finish: function* () {
        return [];
      },
    };
    await searchSegments(f.plan, [pass], { yieldEvery: async () => {} });
    expect(order).toEqual([...Array(12).fill('count'), ...Array(12).fill('visit')]);
    expect(f.indexed).toEqual([...Array(12).keys()]);
  });

  it('records unreadable segments by manifest position and searches the rest; an index that fails is not opened', async () => {
    const f = fakePlan(10, 3, { index: [2], open: [5, 9] });
    const a = recorder(true, f.release);
    const report = await searchSegments(f.plan, [a.pass], { yieldEvery: async () => {} });
    expect([...report.failed.keys()]).toEqual([4, 10, 18]);
    expect(report.failed.get(10)!.reason).toBe('segment 5 is damaged');
    expect(a.visited).toEqual([0, 1, 3, 4, 6, 7, 8]);
    expect(f.opened).not.toContain(2);
    expect(a.counted).toHaveLength(9);
  });

  it('any other error ends the search, after the reads already started settled', async () => {
    const f = fakePlan(10, 4, { crash: 3 });
    const a = recorder(false, f.release);
    await expect(searchSegments(f.plan, [a.pass], { yieldEvery: async () => {} })).rejects.toThrow('disk on fire');
    expect(a.visited).toEqual([0, 1, 2]);
    expect(f.opened.length).toBeLessThanOrEqual(7);
  });

  it('a plan that alternates walks the indexes one way and the segments the other, then starts the next search where this one ended; the same window', async () => {
    const f = fakePlan(10, 3, { index: [7] }, true);
    const order: string[] = [];
    const a = recorder(true, f.release);
    const pass: SegmentPass = { ...a.pass, count: (index) => (order.push('count'), a.pass.count(index)) };
    const report = await searchSegments(f.plan, [pass], { yieldEvery: async () => {} });
    expect(f.indexed).toEqual([...Array(10).keys()]);
    expect(order).toHaveLength(9); // every readable index counted first
    // The damaged segment (7, manifest position 14) is recorded and not opened; the visit goes 9 .. 0.
    expect([...report.failed.keys()]).toEqual([14]);
    expect(a.visited).toEqual([9, 8, 6, 5, 4, 3, 2, 1, 0]);
    expect(f.opened).toEqual(a.visited);
    expect(f.peak()).toBe(3);
    // The next search (no statistics: one walk) goes forward again.
    const b = recorder(false, f.release);
    await searchSegments(f.plan, [b.pass], { yieldEvery: async () => {} });
    expect(b.visited).toEqual([...Array(10).keys()]);
    const c = recorder(false, f.release);
    await searchSegments(f.plan, [c.pass], { yieldEvery: async () => {} });
    expect(c.visited).toEqual([...Array(10).keys()].reverse());
  });

  it('no pass: nothing is read', async () => {
    const f = fakePlan(5, 2);
    expect((await searchSegments(f.plan, [], { yieldEvery: async () => {} })).openPeak).toBe(0);
    expect(f.opened).toEqual([]);
  });
});
