import { describe, expect, it } from 'vitest';
import { SegmentCorruptError } from '@lateral/codec';
import { centroidsChecksum } from '../segment-index';
import { warpCodeBytes, warpCodecChecksum } from './codec';
import {
  WARP_HEADER_BYTES, buildWarpLayout, openWarpLayout, parseWarpDirectory, readWarpList, serializeWarpLayout, warpDirectoryBytes, warpLayoutLists, warpListRange, warpListSizes,
  WarpLayoutCorruptError, type WarpLayout,
} from './layout';
import { fixtureSlice, warpFixture, type WarpFixture } from './test-utils';

function layoutOf(f: WarpFixture, a = 0, b = f.corpus.lengths.length): WarpLayout {
  const s = fixtureSlice(f, a, b);
  return buildWarpLayout({ vectors: s.vectors, dims: f.corpus.dims, tokenOffsets: s.tokenOffsets, centroids: f.centroids, codec: f.codec });
}

/** A centroid whose list is not empty, other than `not`. */
function nonEmpty(l: WarpLayout, not = -1): number {
  for (let c = 0; c < l.centroidCount; c++) if (c !== not && l.listOffsets[c + 1] > l.listOffsets[c]) return c;
  throw new Error('no non-empty list');
}

describe('warp centroid-major layout', () => {
  it('each list holds the tokens assigned to its centroid, ascending by document, with their own codes', () => {
    const f = warpFixture(3, { documents: 30, dims: 12, K: 6, bits: 4 });
    const l = layoutOf(f);
    expect(l.tokens).toBe(f.T);
    expect(l.docIdBytes).toBe(2);
    expect(l.bytesPerToken).toBe(warpCodeBytes(12, 4));
    expect(l.centroidsChecksum).toBe(centroidsChecksum(f.centroids));
    expect(l.codecChecksum).toBe(warpCodecChecksum(f.codec));
    // expected: rows in document order, grouped by their centroid
    const d = f.corpus.dims;
    const bpt = l.bytesPerToken;
    const lists = warpLayoutLists(l);
    const owner = new Uint32Array(f.T);
    for (let i = 0; i < f.corpus.lengths.length; i++) owner.fill(i, f.tokenOffsets[i], f.tokenOffsets[i + 1]);
    let total = 0;
    for (let c = 0; c < l.centroidCount; c++) {
      const rows = [...Array(f.T).keys()].filter((r) => f.assignment[r] === c);
      const list = lists.list(c);
      expect(list.count).toBe(rows.length);
      total += list.count;
      expect([...list.docs]).toEqual(rows.map((r) => owner[r]));
      rows.forEach((r, e) => {
        const one = buildWarpLayout({ vectors: f.corpus.vectors.slice(r * d, (r + 1) * d), dims: d, tokenOffsets: Uint32Array.from([0, 1]), centroids: f.centroids, codec: f.codec, assignment: Uint32Array.of(c) });
        expect([...list.codes.subarray(e * bpt, (e + 1) * bpt)]).toEqual([...one.codes]);
      });
    }
    expect(total).toBe(f.T);
  });

  it('round-trips through the serialised form; one list is one contiguous verified range', () => {
    const f = warpFixture(4, { documents: 40, dims: 7, K: 9, bits: 2 });
    const l = layoutOf(f);
    const bytes = serializeWarpLayout(l);
    const dir = parseWarpDirectory(bytes.subarray(0, warpDirectoryBytes(l.centroidCount)), 'seg-a', { centroidsChecksum: l.centroidsChecksum, codecChecksum: l.codecChecksum, bits: 2, dims: 7 });
    expect(dir.byteLength).toBe(bytes.length);
    expect(dir.tokens).toBe(f.T);
    const mem = warpLayoutLists(l);
    let prevEnd = warpDirectoryBytes(l.centroidCount);
    for (let c = 0; c < l.centroidCount; c++) {
      const { offset, length } = warpListRange(dir, c);
      expect(offset).toBe(prevEnd); // lists in centroid order, back to back
      expect(offset % 8).toBe(0);
      prevEnd = offset + length;
      // a ranged read: a copy of exactly those bytes, at an odd offset of its buffer (ids are copied then)
      const buf = new Uint8Array(length + 1);
      buf.set(bytes.subarray(offset, offset + length), 1);
      const got = readWarpList(dir, c, buf.subarray(1));
      const want = mem.list(c);
      expect(got.count).toBe(want.count);
      expect([...got.docs]).toEqual([...want.docs]);
      expect([...got.codes]).toEqual([...want.codes]);
    }
    const reader = openWarpLayout(bytes, 'seg-a');
    expect([...reader.list(nonEmpty(l)).docs]).toEqual([...mem.list(nonEmpty(l)).docs]);
    expect(reader.verified).toBe(1);
  });

  it('uses 32-bit document ids past 65,536 documents', () => {
    const f = warpFixture(5, { documents: 3, dims: 4, K: 2, bits: 4, maxLen: 2 });
    const D = 70_000;
    const tokenOffsets = new Uint32Array(D + 1);
    const T = f.T;
    for (let i = D - 3; i < D; i++) tokenOffsets[i + 1] = f.tokenOffsets[i - (D - 3) + 1];
    const l = buildWarpLayout({ vectors: f.corpus.vectors, dims: 4, tokenOffsets, centroids: f.centroids, codec: f.codec });
    expect(l.docIdBytes).toBe(4);
    expect(l.tokens).toBe(T);
    const reader = openWarpLayout(serializeWarpLayout(l), 'big');
    const c = nonEmpty(l);
    expect(reader.list(c).docs).toBeInstanceOf(Uint32Array);
    expect(Math.min(...reader.list(c).docs)).toBeGreaterThanOrEqual(D - 3);
  });

  it('a corrupt byte in a list range is named when that range is read; other ranges still read', () => {
    const f = warpFixture(6, { documents: 50, dims: 8, K: 8, bits: 4 });
    const l = layoutOf(f);
    const bytes = serializeWarpLayout(l);
    const bad = nonEmpty(l);
    const good = nonEmpty(l, bad);
    const dir = parseWarpDirectory(bytes, 'seg-7');
    const { offset, length } = warpListRange(dir, bad);
    const corrupt = Uint8Array.from(bytes);
    corrupt[offset + (length >> 1)] ^= 0x10;
    // the directory does not cover list bytes: it opens, and unread lists are never checked
    const reader = openWarpLayout(corrupt, 'seg-7');
    expect(reader.list(good).count).toBe(l.listOffsets[good + 1] - l.listOffsets[good]);
    expect(reader.verified).toBe(1);
    let err: unknown;
    try {
      reader.list(bad);
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(WarpLayoutCorruptError);
    expect(err).toBeInstanceOf(SegmentCorruptError); // handled like a corrupt segment
    expect((err as WarpLayoutCorruptError).centroid).toBe(bad);
    expect((err as Error).message).toBe(`search layout "seg-7" is corrupt in section "list ${bad}": checksum mismatch in bytes ${offset}..${offset + length} (corrupted)`);
    // a failed list is not remembered as verified: it fails again
    expect(() => reader.list(bad)).toThrow(WarpLayoutCorruptError);
    expect(reader.list(good).count).toBeGreaterThan(0);
    // ranged read of the corrupt list alone, and a short range
    expect(() => readWarpList(dir, bad, corrupt.subarray(offset, offset + length))).toThrow(/list \d+": checksum mismatch/);
    expect(() => readWarpList(dir, good, bytes.subarray(warpListRange(dir, good).offset, warpListRange(dir, good).offset + 8))).toThrow(/range has 8 bytes, the directory says \d+ .*truncated/);
  });

  it('verifies the header and the directory, and what the reader expects of them', () => {
    const f = warpFixture(7, { documents: 20, dims: 8, K: 5, bits: 2 });
    const l = layoutOf(f);
    const bytes = serializeWarpLayout(l);
    const flip = (at: number) => {
      const b = Uint8Array.from(bytes);
      b[at] ^= 1;
      return b;
    };
    expect(() => parseWarpDirectory(flip(0), 'x')).toThrow(/section "header": bad magic/);
    expect(() => parseWarpDirectory(flip(20), 'x')).toThrow(/section "header": checksum mismatch/);
    expect(() => parseWarpDirectory(flip(WARP_HEADER_BYTES + 3), 'x')).toThrow(/section "directory": checksum mismatch/);
    expect(() => parseWarpDirectory(bytes.subarray(0, 30), 'x')).toThrow(/shorter than the 64-byte header/);
    expect(() => parseWarpDirectory(bytes.subarray(0, WARP_HEADER_BYTES + 4), 'x')).toThrow(/section "directory": .* shorter than the header and directory/);
    expect(() => openWarpLayout(bytes.subarray(0, bytes.length - 8), 'x')).toThrow(/truncated/);
    expect(() => parseWarpDirectory(bytes, 'x', { codecChecksum: (l.codecChecksum + 1) >>> 0 })).toThrow(/codecChecksum is \d+, expected \d+ \(built for another collection, IVF or codec version\?\)/);
    expect(() => parseWarpDirectory(bytes, 'x', { centroidCount: 6 })).toThrow(/centroidCount is 5, expected 6/);
  });

  it('collection-wide list sizes sum the segments (directories or layouts)', () => {
    const f = warpFixture(8, { documents: 30, dims: 6, K: 7, bits: 4 });
    const whole = layoutOf(f);
    const a = layoutOf(f, 0, 11);
    const b = layoutOf(f, 11, 30);
    const fromLayouts = warpListSizes([a, b]);
    const fromDirs = warpListSizes([parseWarpDirectory(serializeWarpLayout(a), 'a'), parseWarpDirectory(serializeWarpLayout(b), 'b')]);
    const want = warpListSizes([whole]);
    expect([...fromLayouts]).toEqual([...want]);
    expect([...fromDirs]).toEqual([...want]);
    expect(want.reduce((x, y) => x + y, 0)).toBe(f.T);
  });

  it('rejects bad input, naming the field', () => {
    const f = warpFixture(9, { documents: 5, dims: 4, K: 3, bits: 4 });
    const base = { vectors: f.corpus.vectors, dims: 4, tokenOffsets: f.tokenOffsets, centroids: f.centroids, codec: f.codec };
    expect(() => buildWarpLayout({ ...base, codec: { ...f.codec, bits: 3 as 2 } })).toThrow(/bits must be 2 or 4, got 3/);
    expect(() => buildWarpLayout({ ...base, dims: 5 })).toThrow(/codec has dims 4, the vectors 5/);
    expect(() => buildWarpLayout({ ...base, vectors: base.vectors.subarray(4) })).toThrow(/vectors has length/);
    expect(() => buildWarpLayout({ ...base, assignment: new Uint32Array(f.T).fill(3) })).toThrow(/assignment\[0\] = 3 is not a centroid \(K = 3\)/);
    expect(() => warpLayoutLists(layoutOf(f)).list(3)).toThrow(/centroid 3 is out of range/);
  });
});
