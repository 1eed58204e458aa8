import { describe, expect, it } from 'vitest';
import { warpQuery, warpSegmentSearch } from './engine';
import { buildWarpLayout, openWarpLayout, parseWarpDirectory, serializeWarpLayout, warpDirectoryBytes, warpListSizes, WarpLayoutCorruptError } from './layout';
import { warpCoalescedRanges, warpFetchedLists, warpProbedCentroids, type WarpFetchedRange } from './ranges';
import { randomQuery, warpFixture } from './test-utils';

function setup(seed: number) {
  const f = warpFixture(seed, { documents: 60, dims: 8, K: 24, bits: 4 });
  const l = buildWarpLayout({ vectors: f.corpus.vectors, dims: 8, tokenOffsets: f.tokenOffsets, centroids: f.centroids, codec: f.codec });
  const bytes = serializeWarpLayout(l);
  const dir = parseWarpDirectory(bytes.subarray(0, warpDirectoryBytes(l.centroidCount)), 'seg-r');
  const q = randomQuery(seed, 3, 8);
  const query = warpQuery(q, 3, f.centroids, f.codec, warpListSizes([l]), { nprobe: 4 });
  return { f, l, bytes, dir, query };
}

const fetch = (bytes: Uint8Array, ranges: { offset: number; length: number }[]): WarpFetchedRange[] =>
  ranges.map((r) => ({ offset: r.offset, bytes: Uint8Array.from(bytes.subarray(r.offset, r.offset + r.length)) }));

describe('warp ranged reads', () => {
  it('a query reads exactly its probed lists (maxGap 0) and scores as from the whole object', () => {
    for (const seed of [1, 2, 3]) {
      const { l, bytes, dir, query } = setup(seed);
      const probed = warpProbedCentroids(query);
      expect([...probed]).toEqual([...new Set(query.probes)].sort((a, b) => a - b));
      const ranges = warpCoalescedRanges(dir, probed);
      const read = ranges.reduce((a, r) => a + r.length, 0);
      const want = [...probed].reduce((a, c) => a + dir.offsets[c + 1] - dir.offsets[c], 0);
      expect(read).toBe(want);
      expect(read).toBeLessThan(bytes.length - warpDirectoryBytes(l.centroidCount));
      for (let k = 1; k < ranges.length; k++) expect(ranges[k].offset).toBeGreaterThan(ranges[k - 1].offset + ranges[k - 1].length); // touching lists were coalesced
      const seg = { documents: 60, docBase: 0 };
      const fromRanges = warpSegmentSearch(query, { ...seg, lists: warpFetchedLists(dir, fetch(bytes, ranges)) }, { topN: 10 });
      const fromObject = warpSegmentSearch(query, { ...seg, lists: openWarpLayout(bytes, 'seg-r') }, { topN: 10 });
      expect([...fromRanges.docs]).toEqual([...fromObject.docs]);
      expect([...fromRanges.scores]).toEqual([...fromObject.scores]);
    }
  });

  it('maxGap coalesces neighbours across small gaps; empty lists are never read', () => {
    const { dir } = setup(4);
    const all = [...Array(dir.centroidCount).keys()];
    const one = warpCoalescedRanges(dir, all);
    expect(one).toEqual([{ offset: dir.offsets[0], length: dir.offsets[dir.centroidCount] - dir.offsets[0] }]);
    const sparse = all.filter((c) => c % 3 === 0 && dir.counts[c] > 0);
    const tight = warpCoalescedRanges(dir, sparse, 0);
    const loose = warpCoalescedRanges(dir, sparse, 1e9);
    expect(loose.length).toBe(1);
    expect(tight.length).toBeGreaterThan(1);
    const empties = all.filter((c) => dir.counts[c] === 0);
    expect(warpCoalescedRanges(dir, empties)).toEqual([]);
    expect(() => warpCoalescedRanges(dir, [3, 2])).toThrow(/ascending, distinct/);
  });

  it('a corrupt byte in a fetched range fails the list it belongs to, when read; an unfetched list is a named RangeError', () => {
    const { bytes, dir, query } = setup(5);
    const probed = warpProbedCentroids(query);
    const ranges = warpCoalescedRanges(dir, probed);
    const fetched = fetch(bytes, ranges);
    const c = [...probed].find((x) => dir.counts[x] > 0)!;
    const r = fetched.find((x) => x.offset <= dir.offsets[c] && dir.offsets[c + 1] <= x.offset + x.bytes.length)!;
    r.bytes[dir.offsets[c] - r.offset + 2] ^= 0x01;
    const lists = warpFetchedLists(dir, fetched);
    const other = [...probed].find((x) => x !== c && dir.counts[x] > 0)!;
    expect(lists.list(other).count).toBe(dir.counts[other]);
    expect(() => lists.list(c)).toThrow(WarpLayoutCorruptError);
    expect(() => lists.list(c)).toThrow(new RegExp(`"seg-r" is corrupt in section "list ${c}"`));
    const missing = [...Array(dir.centroidCount).keys()].find((x) => dir.counts[x] > 0 && !probed.includes(x))!;
    expect(() => lists.list(missing)).toThrow(new RegExp(`list ${missing} \\(bytes \\d+\\.\\.\\d+\\) was not fetched`));
  });
});
