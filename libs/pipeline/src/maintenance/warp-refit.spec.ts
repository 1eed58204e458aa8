import { describe, expect, it } from 'vitest';
import { s3Keys, warpEpochOf } from '@lateral/shared';
import { liveTokens, warpRefitCentroids } from './warp-refit';

describe('WARP centroid refits', () => {
  it("refit when PLAID's rule on the collection's tokens gives more centroids than the current epoch; never with a fixed count", () => {
    // 2^floor(log2(16 sqrt N)): 1,024 up to 16,383 tokens, 2,048 from 16,384, 4,096 from 65,536, 8,192 from 262,144
    expect(warpRefitCentroids(16_383, 1024, 0)).toBeNull();
    expect(warpRefitCentroids(16_384, 1024, 0)).toBe(2048);
    expect(warpRefitCentroids(65_535, 2048, 0)).toBeNull();
    expect(warpRefitCentroids(65_536, 2048, 0)).toBe(4096);
    // the full Vaswani collection (571k tokens) from its first segment's 1,024
    expect(warpRefitCentroids(571_000, 1024, 0)).toBe(8192);
    // only growth refits (deletes shrink nothing)
    expect(warpRefitCentroids(20_000, 4096, 0)).toBeNull();
    // never more centroids than tokens (a first fit on a tiny segment)
    expect(warpRefitCentroids(900, 100, 0)).toBe(256);
    expect(warpRefitCentroids(100, 16, 0)).toBe(100); // the rule gives 128
    expect(warpRefitCentroids(1_000_000, 1024, 1024)).toBeNull();
  });

  it("a refit counts live tokens: deleted documents' share of a segment's tokens is left out", () => {
    expect(liveTokens({ tokens: 1000, documents: 10 })).toBe(1000);
    expect(liveTokens({ tokens: 1000, documents: 10, tombstones: [] })).toBe(1000);
    expect(liveTokens({ tokens: 1000, documents: 10, tombstones: [0, 3] })).toBe(800);
    expect(liveTokens({ tokens: 1000, documents: 10, tombstones: [0, 1, 2, 3, 4, 5, 6, 7, 8, 9] })).toBe(0);
    // 70,000 tokens of which half deleted: under 65,536 live, so no refit from 2,048 to 4,096
    const refs = [{ tokens: 35_000, documents: 100 }, { tokens: 35_000, documents: 100, tombstones: Array.from({ length: 100 }, (_, i) => i) }];
    expect(warpRefitCentroids(refs.reduce((a, r) => a + liveTokens(r), 0), 2048, 0)).toBeNull();
    expect(warpRefitCentroids(refs.reduce((a, r) => a + r.tokens, 0), 2048, 0)).toBe(4096);
  });

  it('epochs: the newest of the segments; keys of epoch 0 unchanged, later ones apart', () => {
    expect(warpEpochOf([])).toBe(0);
    expect(warpEpochOf([{}, { warpEpoch: 2 }, { warpEpoch: 1 }])).toBe(2);
    expect(s3Keys.searchLayout('t', 'c', 'b', 3)).toBe('tenants/t/collections/c/search-layouts/v3/b.warp');
    expect(s3Keys.searchLayout('t', 'c', 'b', 3, 0)).toBe('tenants/t/collections/c/search-layouts/v3/b.warp');
    expect(s3Keys.searchLayout('t', 'c', 'b', 3, 2)).toBe('tenants/t/collections/c/search-layouts/v3/e2/b.warp');
    expect(s3Keys.ivfCentroids('t', 'c', 3)).toBe('tenants/t/collections/c/ivf/v3.centroids');
    expect(s3Keys.ivfCentroids('t', 'c', 3, 2)).toBe('tenants/t/collections/c/ivf/v3.e2.centroids');
    expect(s3Keys.warpCodec('t', 'c', 3, 2)).toBe('tenants/t/collections/c/ivf/v3.e2.warp-codec');
    expect(() => s3Keys.searchLayout('t', 'c', 'b', 3, -1)).toThrow('epoch');
  });
});
