import { createHash } from 'node:crypto';
import { mkdtempSync, readdirSync, rmSync, truncateSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { fitCodec, readSegment, type CodecArtifact } from '@lateral/codec';
import { s3Keys, type CodecSettings, type Collection, type CollectionManifest, type SegmentRef } from '@lateral/shared';
import { DiskObjectCache } from '@lateral/infra';
import type { EncodedText } from '@lateral/model';
import { bm25Search, buildSegmentIndex, denseSearch, exhaustiveSearch, mebertSearch, searchSegment, serializeSegmentIndex, xtrSearch } from '@lateral/search';
import { SegmentCache, WHOLE_DECODE_FRACTION, type ObjectSource } from './segment-cache';
import { segmentHeadData, serializeSegmentHead } from './segment-head';
import { manifestOf as storedManifest, storedSegment, threeTokenDocs } from './testing/stored-segments';

const T = 't1';
const C = 'c1';
const DIMS = 4;
const fp16: CodecSettings = { kind: 'fp16', layout: 'token', norms: 'fp32', sideInfo: false };
const eden4: CodecSettings = { kind: 'eden', bits: 4, layout: 'token', norms: 'fp32', sideInfo: false };
const fp16Artifact = fitCodec(fp16, new Float32Array(DIMS), DIMS, { seed: 7n });
const edenArtifact = fitCodec(eden4, Float32Array.from({ length: 64 * DIMS }, (_, i) => Math.cos(i * 1.7)), DIMS, { seed: 11n });
const collection: Pick<Collection, 'tenantId' | 'id' | 'model'> = { tenantId: T, id: C, model: 'm' };

const encodedDocs = (n: number, salt: number): EncodedText[] => threeTokenDocs(n, salt, DIMS);

interface Stored {
  ref: SegmentRef;
  bytes: Uint8Array;
}

function segment(batchId: string, ids: string[], salt: number, settings: CodecSettings = fp16, artifact: CodecArtifact = fp16Artifact, prefixRows = 0): Stored {
  return storedSegment(T, C, batchId, ids, encodedDocs(ids.length, salt), DIMS, settings, artifact, prefixRows);
}

const manifestOf = (generation: number, refs: SegmentRef[]): CollectionManifest => storedManifest(T, C, generation, refs);

/** An object source over stored segments that counts reads per key and the most reads at once. */
function countingSource(stored: Stored[], delayMs = 0) {
  const byKey = new Map(stored.map((s) => [s.ref.key, s.bytes]));
  const reads = new Map<string, number>();
  let inFlight = 0;
  let peak = 0;
  const source: ObjectSource & { get(key: string): Promise<Uint8Array | null> } = {
    async get(key) {
      reads.set(key, (reads.get(key) ?? 0) + 1);
      inFlight++;
      peak = Math.max(peak, inFlight);
      if (delayMs > 0) await new Promise((r) => setTimeout(r, delayMs));
      inFlight--;
      const b = byKey.get(key);
      return b ? b.slice() : null;
    },
  };
  return { source, reads, peak: () => peak, add: (s: Stored) => byKey.set(s.ref.key, s.bytes) };
}

const noStatic = { forCollection: async () => Promise.reject(new Error('no side information in these tests')) };
const cacheOver = (source: ObjectSource, maxBytes = 1 << 30, loadConcurrency = 4, artifact: CodecArtifact = fp16Artifact) =>
  new SegmentCache(source, { get: async () => artifact }, noStatic, { maxBytes, loadConcurrency, scoreFromCodes: true });

/**
 * EDEN segments with their search indexes in one counting source, and two caches over it: one
 * reading ranges of copies in the disk cache under `dir`, one loading whole segments.
 */
function rangesAndWhole(dir: string, stored: Stored[], centroids: Float32Array) {
  const src = countingSource(stored);
  for (const E of stored) {
    const index = serializeSegmentIndex(buildSegmentIndex(searchSegment(readSegment(E.bytes, E.ref.key, edenArtifact)), centroids, DIMS));
    src.add({ ref: { ...E.ref, key: s3Keys.segmentIndex(T, C, E.ref.batchId, 1) }, bytes: index });
  }
  const opts = { maxBytes: 1 << 30, loadConcurrency: 2, scoreFromCodes: true };
  const ranges = new SegmentCache(new DiskObjectCache(src.source, dir, 1 << 20, 'test'), { get: async () => edenArtifact }, noStatic, { ...opts, rangeReads: true });
  const whole = new SegmentCache(src.source, { get: async () => edenArtifact }, noStatic, opts);
  return { src, opts, ranges, whole, m: manifestOf(1, stored.map((E) => E.ref)) };
}

/** The vectors of document `id` as the segment holding it decodes them. */
function decodedOf(s: Stored, id: string, artifact: CodecArtifact = fp16Artifact): Float32Array {
  const r = readSegment(s.bytes, s.ref.key, artifact);
  return r.decodeDoc(r.docIds.indexOf(id));
}

describe('SegmentCache', () => {
  const A = segment('b-a', ['d1', 'd2', 'd3'], 1);
  const B = segment('b-b', ['d4', 'd5'], 2);
  const B2 = segment('b-c', ['d2', 'd6'], 3); // re-ingests d2

  it('a view holds the live candidates only, in request order, with the vectors of their owning segment', async () => {
    const src = countingSource([A, B, B2]);
    const cache = cacheOver(src.source);
    const m = manifestOf(2, [A.ref, B.ref, { ...B2.ref, tombstones: [1] }]); // d6 deleted
    const view = await cache.view(collection, m, ['d5', 'nope', 'd2', 'd6', 'd5']);
    expect(view.docIds).toEqual(['d5', 'd2']);
    expect([...view.rowOf]).toEqual([
      ['d5', 0],
      ['d2', 1],
    ]);
    expect(view.generation).toBe(2);
    expect(view.rotated).toBeNull();
    expect(Array.from(view.offsets)).toEqual([0, 3, 6]);
    expect(view.vectors!.subarray(0, 3 * DIMS)).toEqual(decodedOf(B, 'd5'));
    expect(view.vectors!.subarray(3 * DIMS)).toEqual(decodedOf(B2, 'd2')); // the later copy, not A's
    expect(decodedOf(A, 'd2')).not.toEqual(decodedOf(B2, 'd2'));
    // Only the segments holding candidates were decoded; A was read for its ids alone.
    expect(cache.heldKeys().filter((k) => k.startsWith('dec:')).sort()).toEqual([`dec:${B.ref.key}`, `dec:${B2.ref.key}`].sort());
  });

  it('a view over kept whole decodes hands MaxSim each candidate where it is (rowBlocks), equal to the contiguous vectors made on demand', async () => {
    const cache = cacheOver(countingSource([A, B, B2]).source);
    const m = manifestOf(2, [A.ref, B.ref, { ...B2.ref, tombstones: [1] }]);
    const view = await cache.view(collection, m, ['d5', 'd2', 'd1']);
    expect(view.rowBlocks).toBeDefined();
    const blocks = view.rowBlocks!([2, 0, 1]);
    expect(blocks.map((b) => Array.from(b))).toEqual([decodedOf(A, 'd1'), decodedOf(B, 'd5'), decodedOf(B2, 'd2')].map((v) => Array.from(v)));
    // views into the kept decode, not copies: the same rows asked again share its buffer
    expect(view.rowBlocks!([0])[0].buffer).toBe(blocks[1].buffer);
    const { docs, offsets } = view.rowVectors([1, 2]);
    expect(Array.from(offsets)).toEqual([0, 3, 6]);
    expect(Array.from(docs)).toEqual([...decodedOf(B2, 'd2'), ...decodedOf(A, 'd1')]);
    expect(Array.from(view.vectors!)).toEqual([...decodedOf(B, 'd5'), ...decodedOf(B2, 'd2'), ...decodedOf(A, 'd1')]);
    expect(view.rowVectors([0, 1, 2]).docs).toBe(view.vectors);
  });

  it('a new generation reuses every loaded segment: committing a batch costs reading that batch', async () => {
    const src = countingSource([A, B]);
    const cache = cacheOver(src.source);
    const g1 = manifestOf(1, [A.ref, B.ref]);
    await cache.view(collection, g1, ['d1', 'd4']);
    expect(src.reads.get(A.ref.key)).toBe(1);
    expect(src.reads.get(B.ref.key)).toBe(1);
    src.add(B2);
    const g2 = manifestOf(2, [A.ref, B.ref, B2.ref]);
    const view = await cache.view(collection, g2, ['d1', 'd6']);
    expect(view.docIds).toEqual(['d1', 'd6']);
    expect(src.reads.get(A.ref.key)).toBe(1);
    expect(src.reads.get(B.ref.key)).toBe(1);
    expect(src.reads.get(B2.ref.key)).toBe(1);
    expect(cache.stats().hits).toBeGreaterThan(0);
  });

  it('respects its byte bound, and a segment evicted from memory comes back from the disk cache, not S3', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'lateral-disk-cache-'));
    try {
      const src = countingSource([A, B]);
      const disk = new DiskObjectCache(src.source, dir, 1 << 20, 'test');
      // Room for about one segment with its tables and vectors: loading B evicts A's entries.
      const bound = A.bytes.byteLength + 600;
      const cache = cacheOver(disk, bound);
      await cache.view(collection, manifestOf(1, [A.ref]), ['d1']);
      expect(cache.stats().bytes).toBeLessThanOrEqual(bound);
      await cache.view(collection, manifestOf(2, [B.ref]), ['d4']);
      expect(cache.stats().bytes).toBeLessThanOrEqual(bound);
      expect(cache.stats().evictions).toBeGreaterThan(0);
      expect(cache.heldKeys()).not.toContain(`seg:${A.ref.key}`);
      const view = await cache.view(collection, manifestOf(1, [A.ref]), ['d1']);
      expect(view.vectors!).toEqual(decodedOf(A, 'd1'));
      expect(src.reads.get(A.ref.key)).toBe(1); // read from S3 once; the second load came from disk
      expect(disk.stats().hits).toBeGreaterThanOrEqual(1);
      expect(cache.stats().disk).toEqual(disk.stats());
      expect(cache.stats().bytes).toBeLessThanOrEqual(bound);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('loads at most loadConcurrency segments at once', async () => {
    const many = Array.from({ length: 9 }, (_, i) => segment(`b-${i}`, [`x${i}a`, `x${i}b`], i));
    const src = countingSource(many, 5);
    const cache = cacheOver(src.source, 1 << 30, 3);
    const view = await cache.view(collection, manifestOf(1, many.map((s) => s.ref)), many.map((_, i) => `x${i}b`));
    expect(view.docIds).toHaveLength(9);
    expect(src.peak()).toBe(3);
    expect(cache.stats().loadPeak).toBe(3);
  });

  it('EDEN token-layout segments give the int8 rotated image of the candidates, shared across segments', async () => {
    const E1 = segment('e-1', ['e1', 'e2'], 4, eden4, edenArtifact);
    const E2 = segment('e-2', ['e3'], 5, eden4, edenArtifact);
    const cache = cacheOver(countingSource([E1, E2]).source, 1 << 30, 2, edenArtifact);
    const view = await cache.view(collection, manifestOf(1, [E1.ref, E2.ref]), ['e3', 'e1']);
    expect(view.vectors).toBeNull();
    expect(view.rotated).not.toBeNull();
    expect(view.rotated!.scales).toHaveLength(6);
    expect(view.rotated!.image).toHaveLength(6 * view.rotated!.p);
    // Rows in candidate order, each the image its segment's codes give (e3 is E2's first document, e1 E1's).
    const { codec, p } = view.rotated!;
    const expected = (st: Stored, id: string) => {
      const r = readSegment(st.bytes, st.ref.key, edenArtifact);
      const d = r.docIds.indexOf(id);
      const image = new Uint8Array(3 * p);
      const scales = new Float32Array(3);
      codec.rotatedImage(r.encodedDoc(d), 3, DIMS, image, scales, 0);
      return { image, scales };
    };
    const e3 = expected(E2, 'e3');
    const e1 = expected(E1, 'e1');
    expect(Array.from(view.rotated!.image)).toEqual([...e3.image, ...e1.image]);
    expect(Array.from(view.rotated!.scales)).toEqual([...e3.scales, ...e1.scales]);
    // The image is made for the candidates at each request, never cached per segment.
    expect(cache.heldKeys().filter((k) => !k.startsWith('seg:') && !k.startsWith('ids:') && !k.startsWith('gen:'))).toEqual([]);
    // Other scorers get the candidates decoded from the codes.
    const { docs } = view.rowVectors([1]);
    expect(docs).toEqual(decodedOf(E1, 'e1', edenArtifact));
  });

  it('rangeReads: a re-rank view from positioned reads of the disk copies equals the whole-segment view, and memory holds heads only', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'lateral-ranges-'));
    try {
      const E1 = segment('r-1', ['e1', 'e2', 'e3', 'e4'], 6, eden4, edenArtifact);
      const E2 = segment('r-2', ['e5', 'e6'], 7, eden4, edenArtifact);
      const gone = segment('r-3', ['e7'], 8, eden4, edenArtifact); // in the manifest, not in S3
      const src = countingSource([E1, E2]);
      const disk = new DiskObjectCache(src.source, dir, 1 << 20, 'test');
      const opts = { maxBytes: 1 << 30, loadConcurrency: 2, scoreFromCodes: true };
      const ranges = new SegmentCache(disk, { get: async () => edenArtifact }, noStatic, { ...opts, rangeReads: true });
      const whole = new SegmentCache(countingSource([E1, E2]).source, { get: async () => edenArtifact }, noStatic, opts);
      const m = manifestOf(1, [E1.ref, E2.ref, gone.ref]);
      const ids = ['e6', 'e2', 'nope', 'e7', 'e4', 'e5'];
      const a = await ranges.view(collection, m, ids);
      const b = await whole.view(collection, m, ids);
      expect(a.docIds).toEqual(['e6', 'e2', 'e4', 'e5']);
      expect(a.docIds).toEqual(b.docIds);
      expect(a.unavailableIds).toEqual(b.unavailableIds);
      expect(a.unavailable).toEqual(b.unavailable);
      expect(Array.from(a.offsets)).toEqual(Array.from(b.offsets));
      expect(Array.from(a.rotated!.image)).toEqual(Array.from(b.rotated!.image));
      expect(Array.from(a.rotated!.scales)).toEqual(Array.from(b.rotated!.scales));
      expect(a.rotated!.seed).toBe(b.rotated!.seed);
      expect(Array.from(a.docVectors)).toEqual(Array.from(b.docVectors));
      expect(a.docVectors.some((x) => x !== 0)).toBe(true);
      expect(a.rowVectors([3, 1]).docs).toEqual(b.rowVectors([3, 1]).docs);
      expect(a.rowVectors([1]).docs).toEqual(decodedOf(E1, 'e2', edenArtifact));
      // Memory keeps heads, id tables and the generation's table; never a segment's codes.
      expect(ranges.heldKeys().filter((k) => !/^(head|ids|gen):/.test(k))).toEqual([]);
      // Again: from the local copies (S3 read once per segment), the same answer.
      const again = await ranges.view(collection, m, ids);
      expect(Array.from(again.rotated!.image)).toEqual(Array.from(a.rotated!.image));
      expect(src.reads.get(E1.ref.key)).toBe(1);
      expect(src.reads.get(E2.ref.key)).toBe(1);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('rangeReads: BM25 and dense read segment heads and pooled vectors, never codes, and rank as whole segments do', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'lateral-ranges-'));
    try {
      const E1 = segment('b-1', ['e1', 'e2', 'e3', 'e4'], 6, eden4, edenArtifact);
      const E2 = segment('b-2', ['e5', 'e6', 'e7'], 7, eden4, edenArtifact);
      const centroids = Float32Array.from({ length: 2 * DIMS }, (_, i) => Math.sin(i + 3));
      const { ranges, whole, m } = rangesAndWhole(dir, [E1, E2], centroids);
      const light = await ranges.searchParts(collection, m, { rows: 'none', tokenIds: false, metadata: false, pooled: true });
      const full = await whole.searchParts(collection, m);
      const qVec = Float32Array.from({ length: DIMS }, (_, i) => Math.cos(i * 0.7));
      const terms = [1, 4, 5, 9, 20];
      const rank = (parts: typeof light) => ({
        dense: denseSearch(parts, qVec, 5).map((h) => [h.key, h.score]),
        bm25: bm25Search(parts, terms, 5).map((h) => [h.key, h.score]),
        ids: parts.map((p) => p.segment.docIds),
      });
      expect(rank(light)).toEqual(rank(full));
      expect(rank(light).dense).toHaveLength(5);
      expect(rank(light).bm25.length).toBeGreaterThan(0);
      // Heads, pooled vectors and indexes in memory; no segment, no decode.
      expect(ranges.heldKeys().filter((k) => !/^(head|dvec|idx|ids|gen):/.test(k))).toEqual([]);
      expect(ranges.heldKeys().filter((k) => k.startsWith('dvec:'))).toHaveLength(2);
      // What such a search does not read, it cannot touch by mistake.
      expect(() => light[0].segment.metadata(0)).toThrow('reads no metadata');
      expect(() => light[0].segment.tokenIds).toThrow('reads no token ids');
      // A mode that reads token rows (or a filter) gets whole segments, from the same cache.
      const [again] = await ranges.searchParts(collection, m, { rows: 'none', tokenIds: false, metadata: true, pooled: true });
      expect(again.segment.metadata(0)).toEqual(full[0].segment.metadata(0));
      expect(ranges.heldKeys()).toContain(`seg:${E1.ref.key}`);
      // BM25 alone reads heads and indexes: no pooled vectors read or kept, the same ranking.
      const { ranges: bm25Only, m: m2 } = rangesAndWhole(path.join(dir, 'bm25'), [E1, E2], centroids);
      const heads = await bm25Only.searchParts(collection, m2, { rows: 'none', tokenIds: false, metadata: false, pooled: false });
      expect(bm25Search(heads, terms, 5).map((h) => [h.key, h.score])).toEqual(rank(full).bm25);
      expect(heads[0].segment.docVectors).toBeNull();
      expect(bm25Only.heldKeys().filter((k) => !/^(head|idx|ids|gen):/.test(k))).toEqual([]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('rangeReads: ME-BERT reads the prefix section alone where a segment has one (m up to its rows), the code sections of a segment written before; the answers of the code sections, bit for bit', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'lateral-ranges-'));
    try {
      const idsA = Array.from({ length: 12 }, (_, i) => `a${i}`);
      const idsB = Array.from({ length: 7 }, (_, i) => `b${i}`);
      const P1 = segment('p-1', idsA, 9, eden4, edenArtifact, 4); // written with the section
      const O2 = segment('p-2', idsB, 10, eden4, edenArtifact); // written before it
      const centroids = Float32Array.from({ length: 3 * DIMS }, (_, i) => Math.sin(i + 5));
      const { ranges, whole, m } = rangesAndWhole(dir, [P1, O2], centroids);
      const needs = (prefixRows: number) => ({ rows: 'scores' as const, tokenIds: false, metadata: false, pooled: false, prefixRows });
      const parts = await ranges.searchParts(collection, m, needs(2));
      expect(parts[0].segment.prefixScan?.rows).toBe(4);
      expect(parts[1].segment.prefixScan).toBeNull();
      // The first segment's prefix section only; the second's code sections (today's path).
      expect(ranges.heldKeys()).toContain(`pfx:${P1.ref.key}`);
      expect(ranges.heldKeys()).not.toContain(`rows:${P1.ref.key}`);
      expect(ranges.heldKeys()).toContain(`rows:${O2.ref.key}`);
      expect(ranges.heldKeys().filter((k) => !/^(head|pfx|rows|idx|ids|gen):/.test(k))).toEqual([]);
      // The reference: the same documents written without the section, scored from their codes.
      const { ranges: old, m: mOld } = rangesAndWhole(path.join(dir, 'old'), [segment('p-1', idsA, 9, eden4, edenArtifact), O2], centroids);
      const before = await old.searchParts(collection, mOld, needs(2));
      expect(before[0].segment.prefixScan).toBeNull();
      const q = Float32Array.from({ length: DIMS }, (_, i) => Math.cos(i * 1.1));
      for (const mv of [1, 2, 4]) {
        const got = mebertSearch(await ranges.searchParts(collection, m, needs(mv)), q, mv, 100);
        const want = mebertSearch(before, q, mv, 100);
        expect(got.length).toBe(19);
        expect(got.map((h) => [h.key, h.score])).toEqual(want.map((h) => [h.key, h.score]));
        // A whole segment read (no local copy) answers from its code sections: the same scores bit for bit.
        expect(mebertSearch(await whole.searchParts(collection, m, needs(mv)), q, mv, 100).map((h) => [h.key, h.score])).toEqual(got.map((h) => [h.key, h.score]));
      }
      // m above the stored rows: the code sections, as for a segment written before.
      const five = await ranges.searchParts(collection, m, needs(5));
      expect(mebertSearch(five, q, 5, 100).map((h) => [h.key, h.score])).toEqual(mebertSearch(before, q, 5, 100).map((h) => [h.key, h.score]));
      expect(ranges.heldKeys()).toContain(`rows:${P1.ref.key}`);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('rangeReads: a corrupt prefix section is named like a corrupt segment (section prefixCodes), the other segments served', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'lateral-ranges-'));
    try {
      const P1 = segment('q-1', Array.from({ length: 12 }, (_, i) => `a${i}`), 9, eden4, edenArtifact, 4);
      const P2 = segment('q-2', Array.from({ length: 7 }, (_, i) => `b${i}`), 10, eden4, edenArtifact, 4);
      const centroids = Float32Array.from({ length: 3 * DIMS }, (_, i) => Math.sin(i + 5));
      const { src, ranges, m } = rangesAndWhole(dir, [P1, P2], centroids);
      // The prefix section is the object's last: flip a byte of it.
      const bad = P1.bytes.slice();
      bad[bad.byteLength - 3] ^= 0xff;
      src.add({ ref: P1.ref, bytes: bad });
      const plan = await ranges.searchGeneration(collection, m, { rows: 'scores', tokenIds: false, metadata: false, pooled: false, prefixRows: 4 });
      expect(plan.unavailable.map((u) => u.key)).toEqual([P1.ref.key]);
      expect(plan.unavailable[0].reason).toMatch(/section "prefixCodes": checksum mismatch/);
      expect(plan.parts.map((p) => p.ref.key)).toEqual([P2.ref.key]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('rangeReads: XTR and ME-BERT score rows from the code sections alone, as from whole segments; their documents decode the same', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'lateral-ranges-'));
    try {
      const E1 = segment('c-1', Array.from({ length: 12 }, (_, i) => `a${i}`), 9, eden4, edenArtifact);
      const E2 = segment('c-2', Array.from({ length: 7 }, (_, i) => `b${i}`), 10, eden4, edenArtifact);
      const centroids = Float32Array.from({ length: 3 * DIMS }, (_, i) => Math.sin(i + 5));
      const { src, opts, ranges, whole, m } = rangesAndWhole(dir, [E1, E2], centroids);
      const coded = await ranges.searchParts(collection, m, { rows: 'scores', tokenIds: false, metadata: false, pooled: false });
      const full = await whole.searchParts(collection, m);
      const q = Float32Array.from({ length: 3 * DIMS }, (_, i) => Math.cos(i * 1.1));
      const rank = (parts: typeof coded) => ({
        xtr: xtrSearch(parts, q, 3, centroids, { kPrime: 20, nprobe: 2, topN: 8 }).hits.map((h) => [h.key, h.score]),
        mebert: mebertSearch(parts, q.subarray(0, DIMS), 2, 8).map((h) => [h.key, h.score]),
      });
      expect(rank(coded)).toEqual(rank(full));
      expect(rank(coded).xtr).toHaveLength(8);
      expect(coded[0].segment.rowScorer(q, 3)).not.toBeNull();
      // Heads, code sections and indexes in memory; no whole segment, nothing decoded.
      expect(ranges.heldKeys().filter((k) => !/^(head|rows|idx|ids|gen):/.test(k))).toEqual([]);
      // Documents decode from the same bytes as the segment's reader decodes them.
      for (const [s, E] of [E1, E2].entries()) {
        const reader = readSegment(E.bytes, E.ref.key, edenArtifact);
        expect(coded[s].segment.docTokens(2, 5)).toEqual(full[s].segment.docTokens(2, 5));
        expect(coded[s].segment.docPrefixTokens(0, reader.documents, 2)).toEqual(full[s].segment.docPrefixTokens(0, reader.documents, 2));
      }
      // A local copy cut short (its head says more): dropped, the segment read whole from S3, the same ranking.
      const file = path.join(dir, `${createHash('sha256').update('test').update('\0').update(E1.ref.key).digest('hex')}.obj`);
      truncateSync(file, 64);
      const s3Before = src.reads.get(E1.ref.key)!;
      const restarted = new SegmentCache(new DiskObjectCache(src.source, dir, 1 << 20, 'test'), { get: async () => edenArtifact }, noStatic, { ...opts, rangeReads: true });
      expect(rank(await restarted.searchParts(collection, m, { rows: 'scores', tokenIds: false, metadata: false, pooled: false }))).toEqual(rank(full));
      expect(src.reads.get(E1.ref.key)).toBe(s3Before + 1);
      // Without scoring from codes the whole segment is read.
      const decoding = new SegmentCache(new DiskObjectCache(src.source, dir, 1 << 20, 'test'), { get: async () => edenArtifact }, noStatic, { ...opts, scoreFromCodes: false, rangeReads: true });
      await decoding.searchParts(collection, m, { rows: 'scores', tokenIds: false, metadata: false, pooled: false });
      expect(decoding.heldKeys()).toContain(`seg:${E1.ref.key}`);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('rangeReads: a scorer started again over the same disk cache reads the heads kept beside the copies, not whole objects; a damaged head is made again', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'lateral-heads-'));
    try {
      const E1 = segment('h-1', ['e1', 'e2', 'e3'], 6, eden4, edenArtifact);
      const E2 = segment('h-2', ['e4', 'e5'], 7, eden4, edenArtifact);
      const src = countingSource([E1, E2]);
      const m = manifestOf(1, [E1.ref, E2.ref]);
      const ids = ['e5', 'e1', 'e3'];
      // Whole-object reads of the disk cache (a head made from its object), counted per scorer.
      const scorer = (damage = false) => {
        const disk = new DiskObjectCache(src.source, dir, 1 << 20, 'test');
        const wholeReads: string[] = [];
        const source: ObjectSource = {
          get: (key) => (key.endsWith('.seg') && wholeReads.push(key), disk.get(key)),
          readRanges: (key, ranges) => disk.readRanges(key, ranges),
          getLocal: async (key) => {
            const b = await disk.getLocal(key);
            if (!b || !damage) return b;
            const bad = b.slice();
            bad[bad.byteLength >> 1] ^= 1;
            return bad;
          },
          putLocal: (key, bytes) => disk.putLocal(key, bytes),
          invalidate: (key) => disk.invalidate(key),
        };
        return { cache: new SegmentCache(source, { get: async () => edenArtifact }, noStatic, { maxBytes: 1 << 30, loadConcurrency: 2, scoreFromCodes: true, rangeReads: true }), wholeReads };
      };
      const first = scorer();
      const a = await first.cache.view(collection, m, ids);
      expect(first.wholeReads.sort()).toEqual([E1.ref.key, E2.ref.key]);
      const again = scorer();
      const b = await again.cache.view(collection, m, ids);
      expect(again.wholeReads).toEqual([]);
      expect(b.docIds).toEqual(a.docIds);
      expect(Array.from(b.rotated!.image)).toEqual(Array.from(a.rotated!.image));
      expect(Array.from(b.docVectors)).toEqual(Array.from(a.docVectors));
      expect(b.rowVectors([0, 2]).docs).toEqual(a.rowVectors([0, 2]).docs);
      const damaged = scorer(true);
      const c = await damaged.cache.view(collection, m, ids);
      expect(damaged.wholeReads.sort()).toEqual([E1.ref.key, E2.ref.key]);
      expect(Array.from(c.rotated!.image)).toEqual(Array.from(a.rotated!.image));
      expect(src.reads.get(E1.ref.key)).toBe(1); // S3 read once: everything else came from the disk cache
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('rangeReads with an empty disk: heads stored in S3 build the id table; only the segments a request reads by ranges are read whole, once, and checked', async () => {
    const root = mkdtempSync(path.join(tmpdir(), 'lateral-stored-heads-'));
    try {
      const E = [segment('s-1', ['a1', 'a2', 'a3'], 6, eden4, edenArtifact), segment('s-2', ['b1', 'b2'], 7, eden4, edenArtifact), segment('s-3', ['c1', 'c2', 'c3', 'c4'], 8, eden4, edenArtifact)];
      const centroids = Float32Array.from({ length: 2 * DIMS }, (_, i) => Math.sin(i + 3));
      const headKey = (ref: SegmentRef) => s3Keys.segmentHead(T, C, ref.batchId, ref.codecVersion);
      const headOf = (x: Stored) => serializeSegmentHead(segmentHeadData(readSegment(x.bytes, x.ref.key, edenArtifact), x.bytes.byteLength));
      const { src, opts, whole, m: plain } = rangesAndWhole(path.join(root, 'unused'), E, centroids);
      for (const x of E) src.add({ ref: { ...x.ref, key: headKey(x.ref) }, bytes: headOf(x) });
      // The manifest says which segments have a stored head (commit and merge set it).
      const m = { ...plain, segments: plain.segments.map((r) => ({ ...r, head: true })) };
      let disks = 0;
      const scorer = () => {
        const disk = new DiskObjectCache(src.source, path.join(root, `d${disks++}`), 1 << 20, 'test');
        const wholeReads: string[] = [];
        const source: ObjectSource = {
          get: (key) => (key.endsWith('.seg') && wholeReads.push(key), disk.get(key)),
          readRanges: (key, ranges, check) => disk.readRanges(key, ranges, check),
          getLocal: (key) => disk.getLocal(key),
          putLocal: (key, bytes) => disk.putLocal(key, bytes),
          invalidate: (key) => disk.invalidate(key),
        };
        return { cache: new SegmentCache(source, { get: async () => edenArtifact }, noStatic, { ...opts, rangeReads: true }), wholeReads, disk };
      };
      const ids = ['c2', 'a1', 'c4'];
      const want = await whole.view(collection, m, ids);
      // The object of segment x with a byte flipped mid-way (a section's CRC no longer matches).
      const corrupt = (x: Stored) => {
        const bytes = x.bytes.slice();
        bytes[bytes.byteLength >> 1] ^= 0xff;
        return { ref: x.ref, bytes };
      };
      // A view that names segment x unavailable (checksum), answers `kept` and lists `named`.
      const expectNamed = (v: Awaited<ReturnType<SegmentCache['view']>>, x: Stored, kept: string[], named: string[]) => {
        expect(v.docIds).toEqual(kept);
        expect(v.unavailable!.map((u) => u.key)).toEqual([x.ref.key]);
        expect(v.unavailable![0].reason).toMatch(/checksum mismatch/);
        expect(v.unavailableIds).toEqual(named);
      };

      // Three heads read, two segments read whole (those holding candidates), the same view.
      const cold = scorer();
      const got = await cold.cache.view(collection, m, ids);
      expect(cold.cache.stats().storedHeads).toBe(3);
      expect(cold.wholeReads.sort()).toEqual([E[0].ref.key, E[2].ref.key]);
      expect(got.docIds).toEqual(want.docIds);
      expect(Array.from(got.rotated!.image)).toEqual(Array.from(want.rotated!.image));
      expect(Array.from(got.docVectors)).toEqual(Array.from(want.docVectors));
      // Checked once: a second request reads ranges of the copies only.
      await cold.cache.view(collection, m, ['a3', 'c1']);
      expect(cold.wholeReads).toHaveLength(2);
      // BM25 on another cold scorer: heads and indexes, no segment read at all; the same ranking.
      const bm25 = scorer();
      const heads = await bm25.cache.searchParts(collection, m, { rows: 'none', tokenIds: false, metadata: false, pooled: false });
      const full = await whole.searchParts(collection, m);
      expect(bm25Search(heads, [1, 4, 5, 9], 5).map((h) => [h.key, h.score])).toEqual(bm25Search(full, [1, 4, 5, 9], 5).map((h) => [h.key, h.score]));
      expect(bm25.wholeReads).toEqual([]);

      // A corrupt segment whose stored head is intact: named unavailable at its first read by ranges, its candidates listed.
      src.add(corrupt(E[1]));
      const c = scorer();
      expectNamed(await c.cache.view(collection, m, ['b2', 'a2']), E[1], ['a2'], ['b2']);
      src.add(E[1]);

      // A copy checked once, then evicted from the disk cache while the object in S3 went bad: the
      // range read that fetches it again checks it, and the segment is named, not scored from garbage.
      const e = scorer();
      expect((await e.cache.view(collection, m, ['a1'])).docIds).toEqual(['a1']);
      await e.disk.invalidate(E[0].ref.key);
      src.add(corrupt(E[0]));
      expectNamed(await e.cache.view(collection, m, ['a2', 'c1']), E[0], ['c1'], ['a2']);
      // Search's range reads (ME-BERT reads code sections) check a fetched copy the same way.
      src.add(E[0]);
      const f = scorer();
      expect((await f.cache.view(collection, m, ['a1'])).docIds).toEqual(['a1']);
      await f.disk.invalidate(E[0].ref.key);
      src.add(corrupt(E[0]));
      const plan = await f.cache.searchGeneration(collection, m, { rows: 'scores', tokenIds: false, metadata: false, pooled: false });
      expect(plan.unavailable.map((u) => u.key)).toEqual([E[0].ref.key]);
      expect(plan.parts.map((p) => p.ref.key)).toEqual([E[1].ref.key, E[2].ref.key]);
      src.add(E[0]);

      // Segments the manifest does not mark (committed before heads were stored): read whole, no GET of a head.
      const old = scorer();
      const headGets = () => [...src.reads.keys()].filter((k) => k.includes('/segment-heads/')).reduce((n, k) => n + src.reads.get(k)!, 0);
      const before = headGets();
      expect((await old.cache.view(collection, plain, ['c3'])).docIds).toEqual(['c3']);
      expect(old.wholeReads.sort()).toEqual(E.map((x) => x.ref.key).sort());
      expect(headGets()).toBe(before);
      expect(old.cache.stats().storedHeads).toBe(0);

      // A damaged stored head is not used: that segment's head is made from its object.
      const bad = headOf(E[2]);
      bad[10] ^= 1;
      src.add({ ref: { ...E[2].ref, key: headKey(E[2].ref) }, bytes: bad });
      const d = scorer();
      const w = await d.cache.view(collection, m, ['c3']);
      expect(w.docIds).toEqual(['c3']);
      expect(d.cache.stats().storedHeads).toBe(2);
      expect(d.wholeReads).toEqual([E[2].ref.key]);
    } finally {
      rmSync(root, { recursive: true, force: true });
    }
  });

  it("documentRows (WARP's exact stage): each named document's rows as its segment decodes them, by ranges of the local copies (EDEN and fp16), from a held segment, or from whole reads; never a whole decode; an unreadable segment named", async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'lateral-docrows-'));
    try {
      const E1 = segment('x-1', ['e1', 'e2', 'e3', 'e4'], 6, eden4, edenArtifact);
      const E2 = segment('x-2', ['e5', 'e6'], 7, eden4, edenArtifact);
      const gone = segment('x-3', ['e7'], 8, eden4, edenArtifact); // not in S3
      const where = [[E2.ref, 1], [E1.ref, 3], [gone.ref, 0], [E1.ref, 0], [E2.ref, 0], [E1.ref, 3]] as const;
      const expected = [decodedOf(E2, 'e6', edenArtifact), decodedOf(E1, 'e4', edenArtifact), new Float32Array(0), decodedOf(E1, 'e1', edenArtifact), decodedOf(E2, 'e5', edenArtifact), decodedOf(E1, 'e4', edenArtifact)];
      const check = (got: Awaited<ReturnType<SegmentCache['documentRows']>>) => {
        expect(got.dims).toBe(DIMS);
        expected.forEach((e, i) => expect(got.docs.subarray(got.offsets[i] * DIMS, got.offsets[i + 1] * DIMS)).toEqual(e));
        expect([...got.failed.keys()]).toEqual([gone.ref.key]);
      };
      const src = countingSource([E1, E2]);
      const opts = { maxBytes: 1 << 30, loadConcurrency: 2, scoreFromCodes: true };
      const ranges = new SegmentCache(new DiskObjectCache(src.source, dir, 1 << 20, 'test'), { get: async () => edenArtifact }, noStatic, { ...opts, rangeReads: true });
      check(await ranges.documentRows(collection, where));
      // By ranges: memory holds heads, never a segment or a decode; again from the local copies (S3 read once per segment).
      expect(ranges.heldKeys().filter((k) => !/^head:/.test(k))).toEqual([]);
      check(await ranges.documentRows(collection, where));
      expect(src.reads.get(E1.ref.key)).toBe(1);
      // Whole reads (no range reads): the segments held, each document decoded alone, not the segment.
      const whole = new SegmentCache(countingSource([E1, E2]).source, { get: async () => edenArtifact }, noStatic, opts);
      check(await whole.documentRows(collection, where));
      expect(whole.heldKeys().filter((k) => k.startsWith('dec:'))).toEqual([]);
      expect(whole.heldKeys()).toContain(`seg:${E1.ref.key}`);
      // fp16 by ranges, and a segment already held in memory is read from there.
      const F = segment('x-4', ['f1', 'f2', 'f3'], 9);
      const f16 = new SegmentCache(new DiskObjectCache(countingSource([F]).source, path.join(dir, 'f'), 1 << 20, 'test'), { get: async () => fp16Artifact }, noStatic, { ...opts, rangeReads: true });
      const a = await f16.documentRows(collection, [[F.ref, 2], [F.ref, 0]]);
      expect(a.docs).toEqual(Float32Array.from([...decodedOf(F, 'f3'), ...decodedOf(F, 'f1')]));
      await f16.view(collection, manifestOf(1, [F.ref]), ['f2']); // fp16 views load the whole segment
      expect(f16.heldKeys()).toContain(`seg:${F.ref.key}`);
      expect((await f16.documentRows(collection, [[F.ref, 2], [F.ref, 0]])).docs).toEqual(a.docs);
      await expect(f16.documentRows(collection, [[F.ref, 3]])).rejects.toThrow(/outside segment/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('rangeReads falls back to whole segments for segments it cannot read by ranges (fp16 here, or a source with no local copies)', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'lateral-ranges-'));
    try {
      const src = countingSource([A]);
      const cache = new SegmentCache(new DiskObjectCache(src.source, dir, 1 << 20, 'test'), { get: async () => fp16Artifact }, noStatic, { maxBytes: 1 << 30, loadConcurrency: 2, scoreFromCodes: true, rangeReads: true });
      const view = await cache.view(collection, manifestOf(1, [A.ref]), ['d2']);
      expect(view.vectors!).toEqual(decodedOf(A, 'd2'));
      expect(cache.heldKeys()).toContain(`seg:${A.ref.key}`);
      const off = new DiskObjectCache(countingSource([A]).source, dir, 0, 'test');
      expect(await off.readRanges(A.ref.key, [[0, 4]])).toBeNull();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('DiskObjectCache.readRanges reads byte ranges of the local copy, fetches a copy another process removed, and refuses a range outside the object', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'lateral-ranges-'));
    try {
      const src = countingSource([A, B]);
      const disk = new DiskObjectCache(src.source, dir, 1 << 20, 'test');
      const n = A.bytes.byteLength;
      const got = await disk.readRanges(A.ref.key, [[0, 4], [n - 10, 10], [7, 0], [100, 33]]);
      expect(got!.map((b) => Array.from(b))).toEqual([[0, 4], [n - 10, n], [7, 7], [100, 133]].map(([x, y]) => Array.from(A.bytes.subarray(x, y))));
      expect(src.reads.get(A.ref.key)).toBe(1);
      await disk.readRanges(A.ref.key, [[1, 2]]);
      expect(src.reads.get(A.ref.key)).toBe(1); // from the copy
      for (const f of readdirSync(dir)) rmSync(path.join(dir, f)); // another process evicted it
      expect(Array.from((await disk.readRanges(A.ref.key, [[n - 3, 3]]))![0])).toEqual(Array.from(A.bytes.subarray(n - 3)));
      expect(src.reads.get(A.ref.key)).toBe(2);
      await expect(disk.readRanges(A.ref.key, [[n - 2, 3]])).rejects.toThrow(`range [${n - 2}, ${n + 1}) is outside the ${n}-byte object`);
      expect(await disk.readRanges('missing-key', [[0, 1]])).toBeNull();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('search reads a segment larger than its share of the bound in document ranges, never decoding it whole; a small one is decoded once and kept', async () => {
    const ids = Array.from({ length: 40 }, (_, i) => `s${i}`);
    const L = segment('l-1', ids, 6);
    const centroids = Float32Array.from({ length: 3 * DIMS }, (_, i) => Math.sin(i + 1));
    const reader = readSegment(L.bytes, L.ref.key, fp16Artifact);
    const indexKey = s3Keys.segmentIndex(T, C, 'l-1', 1);
    const src = countingSource([L]);
    const source: ObjectSource = { get: (key) => (key === indexKey ? Promise.resolve(serializeSegmentIndex(buildSegmentIndex(searchSegment(reader), centroids, DIMS))) : src.source.get(key)) };
    const decodedBytes = L.ref.tokens * DIMS * 4;
    const q = Float32Array.from({ length: 2 * DIMS }, (_, i) => Math.cos(i * 0.9));
    const expected = searchSegment(reader);
    const want = {
      exhaustive: exhaustiveSearch([{ segment: expected }], q, 2, 5).map((h) => [h.key, h.score]),
      xtr: xtrSearch([{ segment: expected, index: buildSegmentIndex(expected, centroids, DIMS) }], q, 2, centroids, { kPrime: 50, nprobe: 2, topN: 5 }).hits.map((h) => [h.key, h.score]),
      mebert: mebertSearch([{ segment: expected }], q.subarray(0, DIMS), 2, 5).map((h) => [h.key, h.score]),
    };
    // The whole decode is over 1 / WHOLE_DECODE_FRACTION of this bound, and under it of the second.
    for (const [bound, kept] of [
      [decodedBytes * WHOLE_DECODE_FRACTION - 1, false],
      [decodedBytes * WHOLE_DECODE_FRACTION + L.bytes.byteLength * 4, true],
    ] as const) {
      const cache = cacheOver(source, bound);
      const [part] = await cache.searchParts(collection, manifestOf(1, [L.ref]));
      const got = {
        exhaustive: exhaustiveSearch([{ segment: part.segment }], q, 2, 5).map((h) => [h.key, h.score]),
        xtr: xtrSearch([{ segment: part.segment, index: part.index }], q, 2, centroids, { kPrime: 50, nprobe: 2, topN: 5 }).hits.map((h) => [h.key, h.score]),
        mebert: mebertSearch([{ segment: part.segment }], q.subarray(0, DIMS), 2, 5).map((h) => [h.key, h.score]),
      };
      expect(got).toEqual(want);
      expect(cache.heldKeys().includes(`dec:${L.ref.key}`)).toBe(kept);
    }
  });

  it('XTR and ME-BERT score an EDEN token-layout segment from its codes (the decoded rows\' inner products, up to rounding), and from decoded rows with COMPRESSED_SCORING=decode', async () => {
    const ids = Array.from({ length: 30 }, (_, i) => `x${i}`);
    const E = segment('x-1', ids, 8, eden4, edenArtifact);
    const centroids = Float32Array.from({ length: 3 * DIMS }, (_, i) => Math.sin(i + 2));
    const reader = readSegment(E.bytes, E.ref.key, edenArtifact);
    const indexKey = s3Keys.segmentIndex(T, C, 'x-1', 1);
    const src = countingSource([E]);
    const source: ObjectSource = { get: (key) => (key === indexKey ? Promise.resolve(serializeSegmentIndex(buildSegmentIndex(searchSegment(reader), centroids, DIMS))) : src.source.get(key)) };
    const q = Float32Array.from({ length: 3 * DIMS }, (_, i) => Math.cos(i * 1.3));
    const reference = searchSegment(reader);
    const opts = { kPrime: 60, nprobe: 2, topN: 8 };
    const want = xtrSearch([{ segment: reference, index: buildSegmentIndex(reference, centroids, DIMS) }], q, 3, centroids, opts).hits;
    const qVec = q.subarray(0, DIMS);
    const wantMebert = mebertSearch([{ segment: reference }], qVec, 2, 8);
    for (const scoreFromCodes of [true, false]) {
      const cache = new SegmentCache(source, { get: async () => edenArtifact }, noStatic, { maxBytes: 1 << 30, loadConcurrency: 2, scoreFromCodes });
      const [part] = await cache.searchParts(collection, manifestOf(1, [E.ref]));
      expect(part.segment.rowScorer(q, 3) !== null).toBe(scoreFromCodes);
      const got = xtrSearch([{ segment: part.segment, index: part.index }], q, 3, centroids, opts).hits;
      expect(got.map((h) => h.key)).toEqual(want.map((h) => h.key));
      got.forEach((h, i) => (scoreFromCodes ? expect(h.score).toBeCloseTo(want[i].score, 5) : expect(h.score).toBe(want[i].score)));
      // ME-BERT too (its first 2 vectors per document)
      const mebert = mebertSearch([{ segment: part.segment }], qVec, 2, 8);
      expect(mebert.map((h) => h.key)).toEqual(wantMebert.map((h) => h.key));
      mebert.forEach((h, i) => (scoreFromCodes ? expect(h.score).toBeCloseTo(wantMebert[i].score, 5) : expect(h.score).toBe(wantMebert[i].score)));
      // from the codes, nothing was decoded
      expect(cache.heldKeys().some((k) => k.startsWith('dec:'))).toBe(!scoreFromCodes);
    }
  });
});
