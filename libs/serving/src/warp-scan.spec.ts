import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { DiskObjectCache } from '@lateral/infra';
import { mulberry32, s3Keys, type Collection, type CollectionManifest, type SegmentRef } from '@lateral/shared';
import {
  buildWarpLayout,
  fitWarpCodec,
  normalizeRows,
  openWarpLayout,
  parseWarpDirectory,
  serializeWarpLayout,
  warpCentroidScores,
  warpDirectoryBytes,
  warpCoalescedRanges,
  warpSearch,
  type WarpCodec,
} from '@lateral/search';
import { SegmentCache, WARP_RANGE_GAP_BYTES, type ObjectSource } from './segment-cache';
import { SegmentUnavailableError, type SearchPlan } from './search-plan';
import { earlyCentroidScores, warpScan, type WarpReads } from './warp-scan';

const T = 't1';
const C = 'c1';
const D = 16;
const K = 24;
const collection: Pick<Collection, 'tenantId' | 'id' | 'model'> = { tenantId: T, id: C, model: 'm' };

const r = mulberry32(5);
const centroids = normalizeRows(Float32Array.from({ length: K * D }, () => r() * 2 - 1), K, D);

/** A segment of `docs` documents of 2..9 tokens near the centroids. */
function segmentTokens(docs: number): { vectors: Float32Array; tokenOffsets: Uint32Array } {
  const tokenOffsets = new Uint32Array(docs + 1);
  for (let i = 0; i < docs; i++) tokenOffsets[i + 1] = tokenOffsets[i] + 2 + Math.floor(r() * 8);
  const n = tokenOffsets[docs];
  const vectors = new Float32Array(n * D);
  for (let t = 0; t < n; t++) {
    const c = Math.floor(r() * K);
    for (let j = 0; j < D; j++) vectors[t * D + j] = centroids[c * D + j] + (r() - 0.5) * 0.4;
  }
  return { vectors, tokenOffsets };
}

const segs = [segmentTokens(30), segmentTokens(45), segmentTokens(20)];
const sample = segs[0];
const residuals = new Float32Array(sample.vectors.length);
for (let t = 0; t < residuals.length / D; t++) {
  let best = 0;
  let bs = -Infinity;
  for (let c = 0; c < K; c++) {
    let s = 0;
    for (let j = 0; j < D; j++) s += sample.vectors[t * D + j] * centroids[c * D + j];
    if (s > bs) [bs, best] = [s, c];
  }
  for (let j = 0; j < D; j++) residuals[t * D + j] = sample.vectors[t * D + j] - centroids[best * D + j];
}
const codec: WarpCodec = fitWarpCodec(residuals, residuals.length / D, D, 4);
const layouts = segs.map((s) => serializeWarpLayout(buildWarpLayout({ ...s, dims: D, centroids, codec })));
const refs: SegmentRef[] = segs.map((s, i) => ({
  batchId: `b${i}`,
  codecVersion: 1,
  key: s3Keys.segment(T, C, `b${i}`, 1),
  documents: s.tokenOffsets.length - 1,
  tokens: s.tokenOffsets[s.tokenOffsets.length - 1],
  bytes: 1,
  checksum: '0',
}));
const layoutKey = (ref: SegmentRef) => s3Keys.searchLayout(T, C, ref.batchId, ref.codecVersion);
const manifest: CollectionManifest = { tenantId: T, collectionId: C, generation: 1, codecVersion: 1, committedAt: '2026-01-01T00:00:00.000Z', segments: refs };
const plan = (live: (Uint8Array | undefined)[] = []): SearchPlan => ({
  parts: refs.map((ref, position) => ({ position, ref, live: live[position], index: () => Promise.reject(new Error('not read')), open: () => Promise.reject(new Error('not read')), docIds: () => Promise.reject(new Error('not read')) })),
  openAhead: 2,
  reversed: () => false,
  keep: () => {},
  unavailable: () => [],
});
const queries = [0, 1, 2].map((i) => {
  const n = 3 + i;
  return { vectors: normalizeRows(Float32Array.from({ length: n * D }, () => r() * 2 - 1), n, D), n };
});

const dirs: string[] = [];
afterAll(() => dirs.forEach((d) => rmSync(d, { recursive: true, force: true })));

/** A segment cache over the disk cache of an in-memory store holding the layouts, recording every ranged read and GET. */
function setup(objects: Map<string, Uint8Array>, warpLayoutInMemoryBytes = 0) {
  const dir = mkdtempSync(path.join(tmpdir(), 'warp-scan-'));
  dirs.push(dir);
  const gets: string[] = [];
  const disk = new DiskObjectCache({ get: async (k) => (gets.push(k), objects.get(k) ?? null) }, dir, 1 << 26, 'test');
  const reads: { key: string; offset: number; length: number }[] = [];
  const source: ObjectSource = {
    get: (k) => disk.get(k),
    invalidate: (k) => disk.invalidate(k),
    readRanges: async (k, ranges, check) => {
      for (const [offset, length] of ranges) reads.push({ key: k, offset, length });
      return disk.readRanges(k, ranges, check);
    },
  };
  const cache = new SegmentCache(source, { get: async () => Promise.reject(new Error('no codec artifact')) }, { forCollection: async () => Promise.reject(new Error('none')) }, { maxBytes: 1 << 30, loadConcurrency: 2, scoreFromCodes: true, warpLayoutInMemoryBytes });
  return { cache, reads, gets };
}

const opts = (nprobe: number) => ({ centroids, codec, nprobe, topN: 7, yieldEvery: async () => {} });
const reference = (nprobe: number, which = [0, 1, 2], tPrime?: number) =>
  queries.map((q) => {
    const segments = which.map((s) => ({ documents: refs[s].documents, docBase: refs.slice(0, s).reduce((n, x) => n + x.documents, 0), lists: openWarpLayout(layouts[s], 'ref') }));
    const sizes = new Float64Array(K);
    for (const l of layouts) parseWarpDirectory(l, 'x').counts.forEach((c, i) => (sizes[i] += c));
    // hits name the segment by its place in the plan
    return warpSearch(segments, q.vectors, q.n, centroids, codec, sizes, { nprobe, topN: 7, tPrime }).hits.map((h) => ({ ...h, segment: which[h.segment] }));
  });

describe('warpScan over the segment cache (WARP search layouts read by ranges)', () => {
  it('small layouts are kept whole in memory after the first query (hot lists): the same hits, no list read again; a corrupt list is still named', async () => {
    const { cache, reads, gets } = setup(new Map(refs.map((ref, i) => [layoutKey(ref), layouts[i]])), 1 << 20);
    const first = await warpScan(cache, collection, manifest, plan(), queries, opts(3));
    expect(first.hits).toEqual(reference(3));
    const before = { reads: reads.length, gets: gets.length };
    const again = await warpScan(cache, collection, manifest, plan(), queries, opts(K));
    expect(again.hits).toEqual(reference(K));
    expect({ reads: reads.length, gets: gets.length }).toEqual(before);
    // what each query touched is still reported; no ranged read was made
    for (const q of again.queries.filter((_, qi) => queries[qi].n > 0)) expect([q.bytesRead > 0, q.ranges]).toEqual([true, 0]);

    const bad = new Uint8Array(layouts[1]);
    const d = parseWarpDirectory(bad, 'x');
    let c = 0;
    for (let i = 1; i < K; i++) if (d.counts[i] > d.counts[c]) c = i;
    bad[d.offsets[c] + 1] ^= 0xff;
    const broken = setup(new Map(refs.map((ref, i) => [layoutKey(ref), i === 1 ? bad : layouts[i]])), 1 << 20);
    const scan = await warpScan(broken.cache, collection, manifest, plan(), queries, opts(K));
    expect([...scan.failed.keys()]).toEqual([1]);
    expect(scan.failed.get(1)!.message).toContain(`list ${c}`);
  });

  it("a filter's masks (per plan part) keep the hits to the documents they keep, as warpSearch with those masks; a segment already found unreadable is left out and named", async () => {
    const { cache } = setup(new Map(refs.map((ref, i) => [layoutKey(ref), layouts[i]])));
    const masks = refs.map((ref, s) => Uint8Array.from({ length: ref.documents }, (_, d) => ((d + s) % 3 === 0 ? 1 : 0)));
    const sizes = new Float64Array(K);
    for (const l of layouts) parseWarpDirectory(l, 'x').counts.forEach((c, i) => (sizes[i] += c));
    const expected = queries.map((q) =>
      warpSearch(
        refs.map((ref, s) => ({ documents: ref.documents, docBase: refs.slice(0, s).reduce((n, x) => n + x.documents, 0), lists: openWarpLayout(layouts[s], 'ref'), mask: masks[s] })),
        q.vectors, q.n, centroids, codec, sizes, { nprobe: K, topN: 7 },
      ).hits,
    );
    const scan = await warpScan(cache, collection, manifest, plan(), queries, { ...opts(K), masks });
    expect(scan.hits).toEqual(expected);
    for (const [qi, hits] of scan.hits.entries()) {
      if (queries[qi].n === 0) continue;
      expect(hits!.length).toBeGreaterThan(0);
      for (const h of hits!) expect(masks[h.segment][h.doc]).toBe(1);
    }
    const unreadable = new SegmentUnavailableError(refs[1].key, 'segment', refs[1].key, 'metadata unreadable');
    const partial = await warpScan(cache, collection, manifest, plan(), queries, { ...opts(K), masks, failed: new Map([[1, unreadable]]) });
    expect(partial.failed.get(1)).toBe(unreadable);
    for (const hits of partial.hits) for (const h of hits ?? []) expect(h.segment).not.toBe(1);
  });

  it('given the top centroids per query token (centroidTop, as the ONNX GEMM + TopK gives them), the same hits as from Q C^T in JavaScript', async () => {
    const { cache } = setup(new Map(refs.map((ref, i) => [layoutKey(ref), layouts[i]])));
    const asked: number[] = [];
    // a brute-force top-k (float64 dots, ties to the lower index): what OnnxIvfProbe.top returns up to float32 rounding
    const centroidTop = async (q: Float32Array, n: number, c: Float32Array, d: number, k: number) => {
      asked.push(k);
      const S = warpCentroidScores(q, n, c, d);
      const Kc = c.length / d;
      const ids = new Uint32Array(n * k);
      const scores = new Float32Array(n * k);
      for (let i = 0; i < n; i++) {
        const order = Array.from({ length: Kc }, (_, x) => x).sort((a, b) => S[i * Kc + b] - S[i * Kc + a] || a - b);
        for (let p = 0; p < k; p++) {
          ids[i * k + p] = order[p];
          scores[i * k + p] = S[i * Kc + order[p]];
        }
      }
      return { ids, scores };
    };
    for (const nprobe of [3, K]) {
      const scan = await warpScan(cache, collection, manifest, plan(), queries, { ...opts(nprobe), centroidTop });
      expect(scan.hits).toEqual(reference(Math.min(nprobe, K)));
    }
    // k = the imputation's bound (128, clamped to [nprobe, K]), once per query and epoch (K < the first ask's 48)
    expect(new Set(asked)).toEqual(new Set([Math.min(K, 128), K]));
    expect(asked.length).toBe(2 * queries.filter((q) => q.n > 0).length);
    // A first ask for fewer (firstTop): when every token's walk to t' ends within them, that one call; else the whole bound
    // too. The same hits either way, as from Q C^T in JavaScript.
    const withQuery = queries.filter((q) => q.n > 0).length;
    for (const [tPrime, calls] of [[1, [5]], [100_000, [5, K]]] as const) {
      asked.length = 0;
      const scan = await warpScan(cache, collection, manifest, plan(), queries, { ...opts(3), tPrime, centroidTop, firstTop: 5 });
      expect(scan.hits).toEqual(reference(3, [0, 1, 2], tPrime));
      expect(asked).toEqual(Array.from({ length: withQuery }, () => calls).flat());
    }
  });

  it('equals warpSearch over the whole layouts, reading the directories once and then only probed lists', async () => {
    const { cache, reads } = setup(new Map(refs.map((ref, i) => [layoutKey(ref), layouts[i]])));
    for (const nprobe of [3, K, 10_000]) {
      const before = reads.length;
      const scan = await warpScan(cache, collection, manifest, plan(), queries, opts(nprobe));
      expect(scan.failed.size).toBe(0);
      expect(scan.hits).toEqual(reference(Math.min(nprobe, K)));
      expect(scan.nprobe).toBe(Math.min(nprobe, K));
      expect(scan.layoutBytes).toBe(layouts.reduce((n, l) => n + l.byteLength, 0));
      const mine = reads.slice(before);
      // directories: read on the first scan only (kept in memory), one read each (the expected K gives its size)
      const dirReads = mine.filter((x) => x.offset === 0);
      expect(dirReads.length).toBe(nprobe === 3 ? refs.length : 0);
      const listReads = mine.filter((x) => x.offset !== 0);
      for (const x of listReads) {
        const i = refs.findIndex((ref) => layoutKey(ref) === x.key);
        expect(x.offset).toBeGreaterThanOrEqual(warpDirectoryBytes(K));
        expect(x.offset + x.length).toBeLessThanOrEqual(layouts[i].byteLength);
      }
      expect(listReads.reduce((n, x) => n + x.length, 0)).toBe(scan.queries.reduce((n, q) => n + q.bytesFetched, 0));
      expect(listReads.length).toBe(scan.queries.reduce((n, q) => n + q.ranges, 0));
      if (nprobe === 3) for (const q of scan.queries) expect(q.bytesRead).toBeLessThan(layouts.reduce((n, l) => n + l.byteLength, 0) - refs.length * warpDirectoryBytes(K));
    }
  });

  it('live masks (tombstones, superseded copies) leave documents out', async () => {
    const { cache } = setup(new Map(refs.map((ref, i) => [layoutKey(ref), layouts[i]])));
    const all = await warpScan(cache, collection, manifest, plan(), queries, opts(K));
    const hidden = new Set(all.hits.flat().filter((h) => h!.segment === 1).map((h) => h!.doc));
    expect(hidden.size).toBeGreaterThan(0);
    const live = new Uint8Array(refs[1].documents).fill(1);
    for (const doc of hidden) live[doc] = 0;
    const scan = await warpScan(cache, collection, manifest, plan([undefined, live]), queries, opts(K));
    for (const hits of scan.hits) for (const h of hits!) expect(h.segment === 1 && hidden.has(h.doc)).toBe(false);
    expect(scan.hits.every((hits) => hits!.length === 7)).toBe(true);
  });

  it('a corrupt list range or a missing layout: that segment named unavailable, the others served; answered from memory until the recheck', async () => {
    const bad = new Uint8Array(layouts[1]);
    const dir = parseWarpDirectory(bad, 'x');
    let c = 0;
    for (let i = 1; i < K; i++) if (dir.counts[i] > dir.counts[c]) c = i;
    bad[dir.offsets[c]] ^= 0xff;
    const { cache, gets } = setup(new Map([[layoutKey(refs[0]), layouts[0]], [layoutKey(refs[1]), bad]]));
    const scan = await warpScan(cache, collection, manifest, plan(), queries, opts(K));
    expect([...scan.failed.keys()].sort()).toEqual([1, 2]);
    const e1 = scan.failed.get(1)!;
    expect(e1).toBeInstanceOf(SegmentUnavailableError);
    expect(e1).toMatchObject({ key: layoutKey(refs[1]), object: 'index', segment: refs[1].key });
    expect(e1.reason).toMatch(new RegExp(`list ${c}`));
    expect(scan.failed.get(2)!.reason).toMatch(/missing/);
    expect(scan.hits).toEqual(reference(K, [0]));
    // within the recheck time the same answer, S3 not read again
    const fetched = gets.length;
    const again = await warpScan(cache, collection, manifest, plan(), queries, opts(K));
    expect([...again.failed.keys()].sort()).toEqual([1, 2]);
    expect(again.hits).toEqual(scan.hits);
    expect(gets.length).toBe(fetched);
  });
});

/** A segment cache over a disk cache of a store that answers ranged GETs (as ObjectStore.getRange), recording every GET. */
/** gap: warpRangeGapBytes (0 unless given: these layouts are a few KB, so the default gap would join every list; 'default': the option left out). */
function rangedSetup(objects: Map<string, Uint8Array>, opts: { dir?: string; maxBytes?: number; gap?: number | 'default' } = {}) {
  const dir = opts.dir ?? mkdtempSync(path.join(tmpdir(), 'warp-ranged-'));
  if (!opts.dir) dirs.push(dir);
  const whole: string[] = [];
  const ranged: { key: string; offset: number; length: number }[] = [];
  const store = {
    get: async (k: string) => (whole.push(k), objects.get(k) ?? null),
    getRange: async (k: string, offset: number, length: number) => {
      ranged.push({ key: k, offset, length });
      const b = objects.get(k);
      if (!b) return null;
      if (offset + length > b.byteLength) throw new RangeError(`${k}: range past the end`);
      return b.slice(offset, offset + length);
    },
  };
  const disk = new DiskObjectCache(store, dir, 1 << 26, 'test');
  const source: ObjectSource = { get: (k) => disk.get(k), invalidate: (k) => disk.invalidate(k), readRanges: (k, r, c) => disk.readRanges(k, r, c), ranged: disk.ranged, getRanges: (k, r) => disk.getRanges(k, r) };
  const cache = new SegmentCache(source, { get: async () => Promise.reject(new Error('no codec artifact')) }, { forCollection: async () => Promise.reject(new Error('none')) }, { maxBytes: opts.maxBytes ?? 1 << 30, loadConcurrency: 2, scoreFromCodes: true, warpLayoutInMemoryBytes: 0, ...(opts.gap === 'default' ? {} : { warpRangeGapBytes: opts.gap ?? 0 }) });
  return { cache, disk, whole, ranged, dir };
}

describe('warpScan by ranged GETs (a cold scorer fetches its probed lists, never whole layouts)', () => {
  const stored = () => new Map(refs.map((ref, i) => [layoutKey(ref), layouts[i]]));

  it('an empty disk: one GET per directory, then only the probed lists; the same hits as the whole layouts; hot lists are not fetched again', async () => {
    const { cache, disk, whole, ranged } = rangedSetup(stored());
    const scan = await warpScan(cache, collection, manifest, plan(), queries, opts(3));
    expect(scan.failed.size).toBe(0);
    expect(scan.hits).toEqual(reference(3));
    expect(whole).toEqual([]);
    const dirGets = ranged.filter((x) => x.offset === 0);
    expect(dirGets.map((x) => x.length)).toEqual(refs.map(() => warpDirectoryBytes(K)));
    const listGets = ranged.filter((x) => x.offset !== 0);
    // exactly the probed lists' bytes, each fetched once over the three queries
    const probedBytes = new Map<string, Set<number>>();
    for (const x of listGets) {
      const i = refs.findIndex((ref) => layoutKey(ref) === x.key);
      const d = parseWarpDirectory(layouts[i], 'x');
      expect(x.offset).toBeGreaterThanOrEqual(warpDirectoryBytes(K));
      for (let c = 0; c < K; c++) {
        const inside = d.offsets[c] >= x.offset && d.offsets[c + 1] <= x.offset + x.length && d.counts[c] > 0;
        if (!inside) continue;
        const seen = probedBytes.get(x.key) ?? new Set<number>();
        expect(seen.has(c)).toBe(false);
        seen.add(c);
        probedBytes.set(x.key, seen);
      }
    }
    const fetched = scan.queries.reduce((n, q) => n + q.bytesFetched, 0);
    expect(listGets.reduce((n, x) => n + x.length, 0)).toBe(fetched);
    expect(fetched).toBeLessThan(layouts.reduce((n, l) => n + l.byteLength - warpDirectoryBytes(K), 0));
    expect(disk.stats()).toMatchObject({ rangeGets: ranged.length, rangeBytes: ranged.reduce((n, x) => n + x.length, 0) });
    // The same queries again: every list in memory, nothing fetched, the same hits.
    const before = ranged.length;
    const again = await warpScan(cache, collection, manifest, plan(), queries, opts(3));
    expect(again.hits).toEqual(scan.hits);
    expect(ranged.length).toBe(before);
    expect(again.queries.every((q) => q.bytesFetched === 0 && q.ranges === 0)).toBe(true);
    expect(again.queries.map((q) => q.bytesRead)).toEqual(scan.queries.map((q) => q.bytesRead));
  });

  it('a second scorer over the same disk folder reads the fetched ranges from the sparse local copy (no GET); new probes fetch only their lists', async () => {
    const first = rangedSetup(stored());
    await warpScan(first.cache, collection, manifest, plan(), queries, opts(3));
    const got = first.ranged.length;
    // a new memory cache over the same disk cache: the directories and lists come from the local copies
    const source: ObjectSource = { get: (k) => first.disk.get(k), ranged: true, getRanges: (k, r) => first.disk.getRanges(k, r), invalidate: (k) => first.disk.invalidate(k) };
    const cold = new SegmentCache(source, { get: async () => Promise.reject(new Error('no codec artifact')) }, { forCollection: async () => Promise.reject(new Error('none')) }, { maxBytes: 1 << 30, loadConcurrency: 2, scoreFromCodes: true, warpLayoutInMemoryBytes: 0, warpRangeGapBytes: 0 });
    const again = await warpScan(cold, collection, manifest, plan(), queries, opts(3));
    expect(again.hits).toEqual(reference(3));
    expect(first.ranged.length).toBe(got);
    expect(first.disk.stats().rangeHits).toBeGreaterThan(0);
    // every list: the ones not fetched yet are fetched, by ranges
    const all = await warpScan(cold, collection, manifest, plan(), queries, opts(K));
    expect(all.hits).toEqual(reference(K));
    expect(first.ranged.length).toBeGreaterThan(got);
    expect(first.whole).toEqual([]);
  });

  it('by default, probed lists at most WARP_RANGE_GAP_BYTES apart are one ranged GET', async () => {
    const { cache, ranged } = rangedSetup(stored(), { gap: 'default' });
    const scan = await warpScan(cache, collection, manifest, plan(), queries.slice(0, 1), opts(3));
    expect(scan.hits).toEqual(reference(3).slice(0, 1));
    const probed = new Map<string, number[]>();
    const listGets = ranged.filter((x) => x.offset !== 0);
    // what warpCoalescedRanges gives for the lists the scan fetched, at the default gap
    let want = 0;
    for (const [i, ref] of refs.entries()) {
      const d = parseWarpDirectory(layouts[i], 'x');
      const mine = listGets.filter((x) => x.key === layoutKey(ref));
      const lists: number[] = [];
      for (let c = 0; c < K; c++) if (d.counts[c] > 0 && mine.some((x) => d.offsets[c] >= x.offset && d.offsets[c + 1] <= x.offset + x.length)) lists.push(c);
      probed.set(ref.key, lists);
      want += lists.length === 0 ? 0 : warpCoalescedRanges(d, lists, WARP_RANGE_GAP_BYTES).length;
    }
    expect(WARP_RANGE_GAP_BYTES).toBe(32768);
    expect(scan.queries[0].ranges).toBe(listGets.length);
    expect(listGets.length).toBeLessThanOrEqual(want);
    expect(listGets.length).toBeLessThanOrEqual(refs.length); // these layouts are smaller than the gap: one range each
  });

  it('coalescing across gaps: fewer ranged GETs, more bytes fetched, the same hits', async () => {
    const tight = rangedSetup(stored(), { gap: 0 });
    const loose = rangedSetup(stored(), { gap: 1 << 20 });
    const a = await warpScan(tight.cache, collection, manifest, plan(), queries.slice(0, 1), opts(3));
    const b = await warpScan(loose.cache, collection, manifest, plan(), queries.slice(0, 1), opts(3));
    expect(b.hits).toEqual(a.hits);
    expect(b.queries[0].ranges).toBeLessThanOrEqual(refs.length); // one range per segment
    expect(b.queries[0].ranges).toBeLessThan(a.queries[0].ranges);
    expect(b.queries[0].bytesFetched).toBeGreaterThan(a.queries[0].bytesFetched);
    expect(b.queries[0].bytesRead).toBe(a.queries[0].bytesRead);
  });

  it('a corrupt list range or a missing layout fetched by ranges: that segment named (the list and its byte range), the rest served; the corrupt copy is not kept', async () => {
    const bad = new Uint8Array(layouts[1]);
    const d = parseWarpDirectory(bad, 'x');
    let c = 0;
    for (let i = 1; i < K; i++) if (d.counts[i] > d.counts[c]) c = i;
    bad[d.offsets[c] + 3] ^= 0x10;
    const { cache, disk, whole } = rangedSetup(new Map([[layoutKey(refs[0]), layouts[0]], [layoutKey(refs[1]), bad]]));
    const scan = await warpScan(cache, collection, manifest, plan(), queries, opts(K));
    expect([...scan.failed.keys()].sort()).toEqual([1, 2]);
    const e1 = scan.failed.get(1)!;
    expect(e1).toMatchObject({ key: layoutKey(refs[1]), object: 'index', segment: refs[1].key });
    expect(e1.reason).toContain(`corrupt in section "list ${c}"`);
    expect(e1.reason).toContain(`bytes ${d.offsets[c]}..${d.offsets[c + 1]}`);
    expect(scan.failed.get(2)!.reason).toMatch(/missing from S3/);
    expect(scan.hits).toEqual(reference(K, [0]));
    expect(whole).toEqual([]);
    // the corrupt segment's sparse copy was dropped: another reader of this folder fetches it again
    const fresh = await disk.getRanges(layoutKey(refs[1]), [[d.offsets[c], d.offsets[c + 1] - d.offsets[c]]]);
    expect(fresh![0]).toEqual(bad.subarray(d.offsets[c], d.offsets[c + 1]));
    expect(disk.stats().rangeHits).toBe(0);
  });

  it('a list fetched alone is kept in the buffer its ranged GET returned (no copy) and still verified: its entries as the whole layout gives them; corrupt, the segment is named with the list and its byte range', async () => {
    const d = parseWarpDirectory(layouts[1], 'x');
    let c = 0;
    for (let i = 1; i < K; i++) if (d.counts[i] > d.counts[c]) c = i;
    const length = d.offsets[c + 1] - d.offsets[c];
    const expectDir = { centroidsChecksum: d.centroidsChecksum, codecChecksum: d.codecChecksum, centroidCount: K, dims: D, bits: codec.bits, documents: refs[1].documents };
    const good = rangedSetup(stored());
    // the buffers the ranged reads gave the scorer
    const given: Uint8Array[] = [];
    const source: ObjectSource = { get: (k) => good.disk.get(k), ranged: true, getRanges: async (k, r) => { const got = await good.disk.getRanges(k, r); given.push(...(got ?? [])); return got; }, invalidate: (k) => good.disk.invalidate(k) };
    const cache = new SegmentCache(source, { get: async () => Promise.reject(new Error('no codec artifact')) }, { forCollection: async () => Promise.reject(new Error('none')) }, { maxBytes: 1 << 30, loadConcurrency: 2, scoreFromCodes: true, warpLayoutInMemoryBytes: 0 });
    const dir = await cache.warpDirectory(collection, refs[1], expectDir);
    const read = await cache.warpLists(collection, refs[1], dir, [c]);
    expect(read).toMatchObject({ ranges: 1, fetched: length, bytes: length });
    const list = read.lists.list(c);
    const want = openWarpLayout(layouts[1], 'ref').list(c);
    expect(list.count).toBe(want.count);
    expect(Array.from(list.docs)).toEqual(Array.from(want.docs));
    expect(Array.from(list.codes)).toEqual(Array.from(want.codes));
    expect(given.some((b) => b.buffer === list.codes.buffer)).toBe(true); // the GET's own buffer, no second copy
    // one flipped bit in that list: refused by its CRC-32, named as before
    const bad = new Uint8Array(layouts[1]);
    bad[d.offsets[c + 1] - 1] ^= 0x01;
    const corrupt = rangedSetup(new Map([[layoutKey(refs[1]), bad]]));
    const dir2 = await corrupt.cache.warpDirectory(collection, refs[1], expectDir);
    const err = await corrupt.cache.warpLists(collection, refs[1], dir2, [c]).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(SegmentUnavailableError);
    expect(err).toMatchObject({ key: layoutKey(refs[1]), object: 'index', segment: refs[1].key });
    expect((err as SegmentUnavailableError).reason).toContain(`corrupt in section "list ${c}"`);
    expect((err as SegmentUnavailableError).reason).toContain(`bytes ${d.offsets[c]}..${d.offsets[c + 1]}`);
    // not kept: the next read fetches it again
    expect(corrupt.disk.stats().bytes).toBe(0);
  });

  it('under a small memory bound: the memory cache holds lists (never a whole layout) within the bound, the same hits', async () => {
    const { cache } = rangedSetup(stored(), { maxBytes: 64 * 1024 });
    const scan = await warpScan(cache, collection, manifest, plan(), queries, opts(K));
    expect(scan.hits).toEqual(reference(K));
    expect(cache.heldKeys().some((k) => k.startsWith('warplayout:'))).toBe(false);
    expect(cache.heldKeys().some((k) => k.startsWith('warplist:'))).toBe(true);
    expect(cache.stats().bytes).toBeLessThanOrEqual(64 * 1024);
  });
});

/** A few turns of the event loop (timers and I/O run between them). */
async function turns(k: number): Promise<void> {
  for (let i = 0; i < k; i++) await new Promise((res) => setImmediate(res));
}

/**
 * The cache's WARP reads with each segment's probed lists (or its failure) handed back only when
 * the test releases that segment, in `orders[q]` for query q, a few event-loop turns apart; `log` records
 * each release ('arrive s') and the first read of a segment's lists by the scoring ('score s').
 */
function arriving(cache: SegmentCache, orders: readonly (readonly number[])[]) {
  const log: string[] = [];
  const waiting = new Map<number, () => void>();
  const reads: WarpReads = {
    warpDirectory: (c, ref, expect) => cache.warpDirectory(c, ref, expect),
    warpLists: async (c, ref, dir, probed) => {
      const s = refs.indexOf(ref);
      // read first (a failure kept), then held until released
      const got = await cache.warpLists(c, ref, dir, probed).then((v) => ({ v }), (err: unknown) => ({ err }));
      await new Promise<void>((res) => waiting.set(s, res));
      if ('err' in got) throw got.err;
      const { lists, ...rest } = got.v;
      let scored = false;
      return {
        ...rest,
        lists: {
          list: (centroid: number) => {
            if (!scored) log.push(`score ${s}`);
            scored = true;
            return lists.list(centroid);
          },
        },
      };
    },
  };
  const driven = (async () => {
    for (const order of orders)
      for (const s of order) {
        while (!waiting.has(s)) await turns(1);
        const release = waiting.get(s)!;
        waiting.delete(s);
        log.push(`arrive ${s}`);
        release();
        await turns(5);
      }
  })();
  return { reads, log, driven };
}

describe('warpScan scores each segment as its lists arrive (a cold scorer overlaps its GETs and its scoring)', () => {
  const objects = () => new Map(refs.map((ref, i) => [layoutKey(ref), layouts[i]] as const));

  it('lists arriving one by one in shuffled orders: the same hits and stats as all at once, each segment scored before the next arrives', async () => {
    const all = await warpScan(rangedSetup(objects()).cache, collection, manifest, plan(), queries, opts(6));
    expect(all.hits).toEqual(reference(6));
    for (const order of [[2, 0, 1], [1, 2, 0], [0, 1, 2]]) {
      const { reads, log, driven } = arriving(rangedSetup(objects()).cache, queries.map(() => order));
      const scan = await warpScan(reads, collection, manifest, plan(), queries, opts(6));
      await driven;
      expect(scan.hits).toEqual(all.hits);
      expect(scan.queries).toEqual(all.queries);
      expect(scan.failed.size).toBe(0);
      // per query: every segment scored right after it arrived, the first ones while the last was still in flight
      const expected = Array.from({ length: queries.length }, () => order.flatMap((s) => [`arrive ${s}`, `score ${s}`])).flat();
      expect(log).toEqual(expected);
    }
  });

  it('a segment whose lists fail while others are scored is named, the rest served (the degraded answer of the all-at-once path); another error rejects the scan', async () => {
    const bad = new Uint8Array(layouts[1]);
    const dir = parseWarpDirectory(bad, 'x');
    let c = 0;
    for (let i = 1; i < K; i++) if (dir.counts[i] > dir.counts[c]) c = i;
    bad[dir.offsets[c]] ^= 0xff;
    const corrupt = () => new Map(refs.map((ref, i) => [layoutKey(ref), i === 1 ? bad : layouts[i]] as const));
    const all = await warpScan(rangedSetup(corrupt()).cache, collection, manifest, plan(), queries, opts(K));
    expect([...all.failed.keys()]).toEqual([1]);
    expect(all.hits).toEqual(reference(K, [0, 2]));
    for (const order of [[0, 1, 2], [2, 1, 0], [1, 0, 2]]) {
      const { reads, log, driven } = arriving(rangedSetup(corrupt()).cache, queries.map((_, q) => (q === 0 ? order : order.filter((s) => s !== 1))));
      const scan = await warpScan(reads, collection, manifest, plan(), queries, opts(K));
      await driven;
      expect([...scan.failed.keys()]).toEqual([1]);
      expect(scan.failed.get(1)).toBeInstanceOf(SegmentUnavailableError);
      expect(scan.failed.get(1)!.reason).toMatch(new RegExp(`list ${c}`));
      expect(scan.hits).toEqual(all.hits);
      expect(log).not.toContain('score 1');
    }
    // an error that is not a segment's unavailability (a bug) rejects the scan, as Promise.all did, while the other reads go on
    const { cache } = rangedSetup(objects());
    const failing: WarpReads = {
      warpDirectory: (c2, ref, expect) => cache.warpDirectory(c2, ref, expect),
      warpLists: (c2, ref, d, probed) => (ref === refs[2] ? Promise.reject(new TypeError('boom')) : cache.warpLists(c2, ref, d, probed)),
    };
    await expect(warpScan(failing, collection, manifest, plan(), queries, opts(6))).rejects.toThrow('boom');
  });
});

describe('the first query\'s centroid stage overlaps the directory reads', () => {
  it('Q C^T in slices of centroids, the event loop yielded between them: the same values as warpCentroidScores in one call', async () => {
    const rr = mulberry32(11);
    const k = 9000; // more than one slice, the last one partial
    const cs = normalizeRows(Float32Array.from({ length: k * D }, () => rr() * 2 - 1), k, D);
    const q = queries[2];
    let turned = 0;
    const got = await earlyCentroidScores(q.vectors, q.n, cs, D, () => (turned++, true));
    expect(turned).toBeGreaterThan(1);
    expect(got).toEqual(warpCentroidScores(q.vectors, q.n, cs, D));
    expect(await earlyCentroidScores(q.vectors, q.n, centroids, D, () => true)).toEqual(warpCentroidScores(q.vectors, q.n, centroids, D));
  });
});
