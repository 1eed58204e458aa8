import { describe, expect, it } from 'vitest';
import { rng, randomCuts } from '../test-utils';
import { buildWarpLayout, serializeWarpLayout, type WarpLayout } from './layout';
import { mergeWarpLayouts, warpLayoutFromBytes } from './merge';
import { fixtureSlice, warpFixture, type WarpFixture } from './test-utils';

function layoutOf(f: WarpFixture, a: number, b: number): WarpLayout {
  const s = fixtureSlice(f, a, b);
  return buildWarpLayout({ vectors: s.vectors, dims: f.corpus.dims, tokenOffsets: s.tokenOffsets, centroids: f.centroids, codec: f.codec, assignment: s.assignment });
}

describe('warp layout merges', () => {
  it('merging the layouts of consecutive segments gives the layout of the merged segment, byte for byte', () => {
    for (const seed of [1, 2, 3]) {
      const f = warpFixture(seed, { documents: 70, dims: 12, K: 9, bits: seed === 2 ? 2 : 4 });
      const cuts = randomCuts(rng(seed), 70, 4);
      const parts = cuts.slice(0, -1).map((a, s) => ({ layout: warpLayoutFromBytes(serializeWarpLayout(layoutOf(f, a, cuts[s + 1])), `p${s}`) }));
      const merged = mergeWarpLayouts(parts, 70);
      expect(serializeWarpLayout(merged)).toEqual(serializeWarpLayout(layoutOf(f, 0, 70)));
    }
  });

  it('deleted documents are dropped and the rest renumbered: the layout built without them', () => {
    const f = warpFixture(4, { documents: 50, dims: 8, K: 7, bits: 4 });
    const cuts = [0, 18, 33, 50];
    const deleted = (doc: number) => doc % 4 === 1 || (doc >= 20 && doc < 25);
    let next = 0;
    const parts = cuts.slice(0, -1).map((a, s) => ({
      layout: layoutOf(f, a, cuts[s + 1]),
      docMap: Int32Array.from({ length: cuts[s + 1] - a }, (_, i) => (deleted(a + i) ? -1 : next++)),
    }));
    const merged = mergeWarpLayouts(parts, next);
    // expected: the kept documents' rows, in order, as one segment
    const kept = [...Array(50).keys()].filter((doc) => !deleted(doc));
    const d = 8;
    const rows: number[] = [];
    const tokenOffsets = [0];
    for (const doc of kept) {
      for (let t = f.tokenOffsets[doc]; t < f.tokenOffsets[doc + 1]; t++) rows.push(t);
      tokenOffsets.push(rows.length);
    }
    const vectors = new Float32Array(rows.length * d);
    rows.forEach((t, k) => vectors.set(f.corpus.vectors.subarray(t * d, (t + 1) * d), k * d));
    const want = buildWarpLayout({ vectors, dims: d, tokenOffsets: Uint32Array.from(tokenOffsets), centroids: f.centroids, codec: f.codec, assignment: Uint32Array.from(rows.map((t) => f.assignment[t])) });
    expect(serializeWarpLayout(merged)).toEqual(serializeWarpLayout(want));
  });

  it('refuses parts of other centroids or codecs, and doc maps that reorder', () => {
    const f = warpFixture(5, { documents: 20, dims: 8, K: 5, bits: 4 });
    const a = layoutOf(f, 0, 10);
    const b = layoutOf(f, 10, 20);
    expect(() => mergeWarpLayouts([{ layout: a }, { layout: { ...b, codecChecksum: b.codecChecksum ^ 1 } }], 20)).toThrow(/part 1 was built with other centroids or another codec/);
    expect(() => mergeWarpLayouts([{ layout: a, docMap: Int32Array.from({ length: 10 }, (_, i) => 9 - i) }, { layout: b }], 20)).toThrow(/part 0's docMap\[1\] = 8: kept documents must be increasing/);
    expect(() => mergeWarpLayouts([{ layout: a }, { layout: b }], 15)).toThrow(/< 15/);
    expect(() => mergeWarpLayouts([], 0)).toThrow(/at least one layout/);
  });
});
