import { describe, expect, it } from 'vitest';
import type { SegmentRef } from '@lateral/shared';
import { DEFAULT_MERGE_POLICY, chooseMerge, segmentTier, type MergePolicySettings } from './merge-policy';

const seg = (n: number, documents: number, extra: Partial<SegmentRef> = {}): SegmentRef => ({
  batchId: `b${n}`,
  codecVersion: 1,
  key: `seg/b${n}`,
  documents,
  tokens: documents * 10,
  bytes: documents * 100,
  checksum: '0',
  ...extra,
});
const p: MergePolicySettings = { factor: 4, deletedFraction: 0.5, floorDocuments: 100, maxDocuments: 100_000, maxBytes: 1e12 };

describe('segmentTier', () => {
  it('puts everything below the floor in tier 0 and one tier per factor above it', () => {
    expect([0, 1, 99].map((n) => segmentTier(n, p))).toEqual([0, 0, 0]);
    expect([100, 399, 400, 1599, 1600].map((n) => segmentTier(n, p))).toEqual([1, 1, 2, 2, 3]);
  });
});

describe('chooseMerge', () => {
  it('merges nothing while every tier holds fewer than factor segments', () => {
    expect(chooseMerge([seg(0, 10), seg(1, 20), seg(2, 30), seg(3, 150)], 1, p)).toBeNull();
    expect(chooseMerge([], 1, p)).toBeNull();
  });

  it('merges a tier once it holds factor segments, the factor smallest of it', () => {
    const segments = [seg(0, 50), seg(1, 200), seg(2, 10), seg(3, 30), seg(4, 20), seg(5, 90)];
    // Tier 0 holds 0, 2, 3, 4, 5 (5 segments): the 4 smallest are 2 (10), 4 (20), 3 (30), 0 (50).
    expect(chooseMerge(segments, 1, p)).toEqual({ segments: [0, 2, 3, 4], reason: 'tier', tier: 0 });
  });

  it('counts live documents, not stored ones, for the tier', () => {
    // 150 stored, 60 deleted (40 %, under the threshold): 90 live, tier 0 with the three small ones.
    const segments = [seg(0, 150, { tombstones: Array.from({ length: 60 }, (_, i) => i) }), seg(1, 10), seg(2, 10), seg(3, 10)];
    expect(chooseMerge(segments, 1, p)).toEqual({ segments: [0, 1, 2, 3], reason: 'tier', tier: 0 });
  });

  it('takes the lowest full tier first', () => {
    const big = [seg(0, 200), seg(1, 210), seg(2, 220), seg(3, 230)];
    const small = [seg(4, 1), seg(5, 2), seg(6, 3), seg(7, 4)];
    expect(chooseMerge([...big, ...small], 1, p)).toEqual({ segments: [4, 5, 6, 7], reason: 'tier', tier: 0 });
    expect(chooseMerge(big, 1, p)).toEqual({ segments: [0, 1, 2, 3], reason: 'tier', tier: 1 });
  });

  it('rewrites a segment whose deleted fraction reaches the threshold, with the rest of its tier', () => {
    const segments = [seg(0, 1000, { tombstones: Array.from({ length: 500 }, (_, i) => i * 2) }), seg(1, 50), seg(2, 600)];
    // 500 live: tier 2 (400..1599) with segment 2 (600); segment 1 stays (tier 0, alone).
    expect(chooseMerge(segments, 1, p)).toEqual({ segments: [0, 2], reason: 'deletes', tier: 2 });
    // Just under the threshold: nothing.
    const under = [seg(0, 1000, { tombstones: Array.from({ length: 499 }, (_, i) => i) }), seg(1, 50)];
    expect(chooseMerge(under, 1, p)).toBeNull();
  });

  it('rewrites a wholly deleted segment (it vanishes)', () => {
    expect(chooseMerge([seg(0, 3, { tombstones: [0, 1, 2] }), seg(1, 500)], 1, p)).toEqual({ segments: [0], reason: 'deletes', tier: 0 });
  });

  it('leaves segments of another codec version and segments at the size cap alone', () => {
    const other = [seg(0, 1, { codecVersion: 2 }), seg(1, 1, { codecVersion: 2 }), seg(2, 1, { codecVersion: 2 }), seg(3, 1, { codecVersion: 2 })];
    expect(chooseMerge([...other, seg(4, 1)], 1, p)).toBeNull();
    expect(chooseMerge([...other, seg(4, 1)], 2, p)).toEqual({ segments: [0, 1, 2, 3], reason: 'tier', tier: 0 });
    const capped = { ...p, maxDocuments: 300 };
    const atCap = [seg(0, 300), seg(1, 300), seg(2, 300), seg(3, 300)];
    expect(chooseMerge(atCap, 1, capped)).toBeNull();
    // ... unless deletes make one worth rewriting.
    atCap[1] = seg(1, 300, { tombstones: Array.from({ length: 150 }, (_, i) => i) });
    expect(chooseMerge(atCap, 1, capped)).toEqual({ segments: [1], reason: 'deletes', tier: 1 });
  });

  it('caps a merge\'s output at maxBytes (live bytes of its inputs): fewer segments, never one alone, oversized ones left out', () => {
    // seg(n, d): d x 100 bytes. Tier 0: 10, 20, 30, 40 documents = 1,000, 2,000, 3,000, 4,000 bytes.
    const segments = [seg(0, 40), seg(1, 10), seg(2, 30), seg(3, 20)];
    expect(chooseMerge(segments, 1, { ...p, maxBytes: 10_000 })).toEqual({ segments: [0, 1, 2, 3], reason: 'tier', tier: 0 });
    // 6,000 bytes: the three smallest (1,000 + 2,000 + 3,000).
    expect(chooseMerge(segments, 1, { ...p, maxBytes: 6_000 })).toEqual({ segments: [1, 2, 3], reason: 'tier', tier: 0 });
    // 2,999: only one would fit, so no merge of that tier.
    expect(chooseMerge(segments, 1, { ...p, maxBytes: 2_999 })).toBeNull();
    // A segment whose live bytes reach the cap is not a member of its tier; tombstoned documents do not count.
    const half = seg(4, 90, { bytes: 90_000, tombstones: Array.from({ length: 40 }, (_, i) => i) }); // 50 live: 50,000 bytes
    expect(chooseMerge([seg(0, 10), seg(1, 10), seg(2, 10), half], 1, { ...p, maxBytes: 50_000 })).toBeNull();
    expect(chooseMerge([seg(0, 10), seg(1, 10), seg(2, 10), half], 1, { ...p, maxBytes: 53_001 })).toEqual({ segments: [0, 1, 2, 3], reason: 'tier', tier: 0 });
    // A deleted segment is rewritten even when it alone exceeds the cap, with what fits of its tier.
    const dead = seg(5, 80, { tombstones: Array.from({ length: 60 }, (_, i) => i) }); // 20 live: 2,000 bytes
    expect(chooseMerge([seg(0, 30), dead, seg(2, 25)], 1, { ...p, maxBytes: 1_000 })).toEqual({ segments: [1], reason: 'deletes', tier: 0 });
    expect(chooseMerge([seg(0, 30), dead, seg(2, 25)], 1, { ...p, maxBytes: 4_500 })).toEqual({ segments: [1, 2], reason: 'deletes', tier: 0 });
  });

  it('is deterministic with ties and uses the documented defaults', () => {
    const segments = Array.from({ length: 12 }, (_, i) => seg(i, 5));
    expect(chooseMerge(segments, 1)).toEqual({ segments: [0, 1, 2, 3, 4, 5, 6, 7, 8, 9], reason: 'tier', tier: 0 });
    expect(DEFAULT_MERGE_POLICY.factor).toBe(10);
    expect(DEFAULT_MERGE_POLICY.maxBytes).toBe(256 * 2 ** 20);
    expect(() => chooseMerge(segments, 1, { ...p, factor: 1 })).toThrow(/at least 2/);
  });
});

describe('chooseMerge with shards', () => {
  it('merges within one shard: a tier counts its segments per shard', () => {
    // Six tier-0 segments, three in each shard: with factor 4 no shard has a full tier.
    const segs = [0, 1, 2, 3, 4, 5].map((n) => seg(n, 10 + n, { shard: n % 2 }));
    expect(chooseMerge(segs, 1, p, 2)).toBeNull();
    // Unsharded, the same six would merge (the proof that sharding is what held them apart).
    expect(chooseMerge(segs.map(({ shard: _s, ...r }) => r), 1, p, 1)?.segments).toEqual([0, 1, 2, 3]);
    // A fourth segment in shard 1 fills its tier: only shard 1's segments are chosen.
    const more = [...segs, seg(6, 5, { shard: 1 })];
    const spec = chooseMerge(more, 1, p, 2)!;
    expect(spec.segments.map((i) => more[i].shard)).toEqual([1, 1, 1, 1]);
    expect(spec.segments).toEqual([1, 3, 5, 6]);
  });

  it('rewrites a segment with many deletes together with its shard\'s tier only', () => {
    const segs = [seg(0, 10, { shard: 0 }), seg(1, 10, { shard: 1, tombstones: [0, 1, 2, 3, 4, 5] }), seg(2, 10, { shard: 1 }), seg(3, 10, { shard: 0 })];
    expect(chooseMerge(segs, 1, p, 2)).toEqual({ segments: [1, 2], reason: 'deletes', tier: 0 });
  });
});

describe('chooseMerge with a segment bound (maxSegments, WARP collections)', () => {
  /** Ingests `n` batches of `docs` documents, merging after each commit as the merge job does; the segments left and the documents written. */
  const ingest = (policy: MergePolicySettings, batches: number, docs: number) => {
    let segs: SegmentRef[] = [];
    let written = 0;
    let id = 0;
    let most = 0;
    for (let b = 0; b < batches; b++) {
      segs.push(seg(id++, docs));
      written += docs;
      for (let m = chooseMerge(segs, 1, policy); m; m = chooseMerge(segs, 1, policy)) {
        const inputs = m.segments.map((i) => segs[i]);
        const n = inputs.reduce((a, s) => a + s.documents, 0);
        written += n;
        segs = segs.filter((_, i) => !m.segments.includes(i));
        segs.push(seg(id++, n));
      }
      most = Math.max(most, segs.length);
    }
    return { segments: segs, most, amplification: written / (batches * docs) };
  };
  // bytes 100 per document; the byte cap binds at 6,400 documents
  const capped: MergePolicySettings = { ...p, maxBytes: 640_000 };

  it('without it the byte cap makes the segment count grow with the collection; with it the count stays bounded (until searchMaxBytes binds)', () => {
    const without = ingest(capped, 600, 100);
    const withBound = ingest({ ...capped, maxSegments: 6, searchMaxBytes: 1e9 }, 600, 100);
    expect(without.segments.length).toBeGreaterThanOrEqual(12); // 9 at the cap (6,400 documents) and the tiers below
    expect(withBound.most).toBeLessThanOrEqual(7); // one new batch over the bound, merged at once
    expect(withBound.segments.length).toBeLessThanOrEqual(6);
    expect(withBound.segments.reduce((a, s) => a + s.documents, 0)).toBe(60_000);
    // each document is rewritten about once per tier still (log of the growth), not once per batch
    expect(withBound.amplification).toBeLessThan(8);
    // a searchMaxBytes too small to merge further: the count grows again (bounded only up to maxSegments x searchMaxBytes)
    const small = ingest({ ...capped, maxSegments: 6, searchMaxBytes: 700_000 }, 600, 100);
    expect(small.segments.length).toBeGreaterThan(6);
    expect(small.segments.every((s) => s.documents * 100 <= 700_000)).toBe(true);
  });

  it('over the bound the lowest tier holding two or more merges early, its smallest, within searchMaxBytes; under it nothing', () => {
    const big = [seg(0, 5000), seg(1, 5000), seg(2, 5000)];
    const small = [seg(3, 150), seg(4, 120), seg(5, 30)];
    const segs = [...big, ...small];
    expect(chooseMerge(segs, 1, capped)).toBeNull();
    expect(chooseMerge(segs, 1, { ...capped, maxSegments: 6 })).toBeNull();
    // tier 1 (100..399) holds 150 and 120: merged; the tier-0 segment alone is not
    expect(chooseMerge(segs, 1, { ...capped, maxSegments: 5, searchMaxBytes: 1e9 })).toEqual({ segments: [3, 4], reason: 'segments', tier: 1 });
    // the big ones past maxBytes together, when they fit searchMaxBytes
    expect(chooseMerge(big, 1, { ...capped, maxSegments: 2, searchMaxBytes: 1e6 })).toEqual({ segments: [0, 1], reason: 'segments', tier: 3 });
    expect(chooseMerge(big, 1, { ...capped, maxSegments: 2, searchMaxBytes: 900_000 })).toBeNull();
    // per shard: segments of another codec version do not count
    expect(chooseMerge([...segs, seg(9, 40, { codecVersion: 2 })], 1, { ...capped, maxSegments: 6 })).toBeNull();
  });
});
