import { describe, expect, it } from 'vitest';
import { fitCodec, readSegment } from '@lateral/codec';
import { buildSegmentIndex, searchSegment, serializeSegmentIndex } from '@lateral/search';
import { currentDegradedSegments, degradedRecordKey, s3Keys, type CodecSettings, type Collection, type CollectionManifest, type DegradedRecord, type SegmentRef } from '@lateral/shared';
import type { EncodedText } from '@lateral/model';
import { SegmentCache } from './segment-cache';
import { SegmentUnavailableError, type SegmentHealthListener, type UnavailableEvent } from './search-plan';
import { DegradedSegmentsRecorder } from './segment-health';
import { degradedFields, splitUnavailable } from './degraded-results';
import { manifestOf as storedManifest, storedSegment, threeTokenDocs } from './testing/stored-segments';

/**
 * A segment or search index that fails its checksum or decoding, or is missing: the segment
 * cache serves the other segments, names the one left out (and the candidates it holds), tells
 * its health listener once, answers it from memory until its recheck time, and reads it again
 * afterwards (a rewritten object serves again).
 */

const T = 't1';
const C = 'c1';
const DIMS = 4;
const fp16: CodecSettings = { kind: 'fp16', layout: 'token', norms: 'fp32', sideInfo: false };
const artifact = fitCodec(fp16, new Float32Array(DIMS), DIMS, { seed: 7n });
const collection: Pick<Collection, 'tenantId' | 'id' | 'model'> = { tenantId: T, id: C, model: 'm' };
const centroids = Float32Array.from({ length: 2 * DIMS }, (_, i) => (i % 3) - 1);

const encodedDocs = (n: number, salt: number): EncodedText[] => threeTokenDocs(n, salt, DIMS, 5);

interface Stored {
  ref: SegmentRef;
  ids: string[];
  bytes: Uint8Array;
  index: Uint8Array;
  indexKey: string;
}

function segment(batchId: string, ids: string[], salt: number): Stored {
  const { ref, bytes } = storedSegment(T, C, batchId, ids, encodedDocs(ids.length, salt), DIMS, fp16, artifact);
  const index = serializeSegmentIndex(buildSegmentIndex(searchSegment(readSegment(bytes, ref.key, artifact)), centroids, DIMS));
  return { ref, ids, bytes, index, indexKey: s3Keys.segmentIndex(T, C, batchId, 1) };
}

const manifestOf = (generation: number, refs: SegmentRef[]): CollectionManifest => storedManifest(T, C, generation, refs);

function flipped(bytes: Uint8Array): Uint8Array {
  const out = Uint8Array.from(bytes);
  const mid = Math.floor(out.length / 2);
  for (let i = mid; i < mid + 16; i++) out[i] ^= 0xff;
  return out;
}

/** Objects by key (segments and indexes), counting reads per key. */
function store(stored: Stored[]) {
  const objects = new Map<string, Uint8Array>();
  for (const s of stored) {
    objects.set(s.ref.key, s.bytes);
    objects.set(s.indexKey, s.index);
  }
  const reads = new Map<string, number>();
  return {
    objects,
    reads,
    source: {
      async get(key: string) {
        reads.set(key, (reads.get(key) ?? 0) + 1);
        return objects.get(key)?.slice() ?? null;
      },
    },
  };
}

function listener() {
  const events: UnavailableEvent[] = [];
  const recovered: string[] = [];
  const health: SegmentHealthListener = { unavailable: (e) => events.push(e), recovered: (e) => recovered.push(e.key) };
  return { events, recovered, health };
}

const noStatic = { forCollection: async () => Promise.reject(new Error('no side information in these tests')) };

function cacheOver(src: ReturnType<typeof store>, stored: Stored[], opts: { ids?: boolean; recheckMs?: number; health?: SegmentHealthListener } = {}) {
  const byKey = new Map(stored.map((s) => [s.ref.key, s.ids]));
  return new SegmentCache(src.source, { get: async () => artifact }, noStatic, {
    maxBytes: 1 << 30,
    loadConcurrency: 2,
    scoreFromCodes: true,
    recheckMs: opts.recheckMs,
    health: opts.health,
    ...(opts.ids === false ? {} : { segmentIds: async (_t: string, _c: string, ref: SegmentRef) => byKey.get(ref.key) ?? null }),
  });
}

const a = segment('b1', ['a1', 'a2', 'a3'], 1);
const b = segment('b2', ['b1', 'b2', 'shared'], 2);
const c = segment('b3', ['c1', 'c2'], 3);

describe('segment cache: a segment that cannot be read', () => {
  it('a corrupt segment: its candidates are named unavailable, the others are served, the listener hears once, S3 is not read again before the recheck', async () => {
    const src = store([a, b, c]);
    src.objects.set(b.ref.key, flipped(b.bytes));
    const l = listener();
    const cache = cacheOver(src, [a, b, c], { health: l.health, recheckMs: 60_000 });
    const m = manifestOf(1, [a.ref, b.ref, c.ref]);
    const ids = ['a1', 'b1', 'c2', 'shared', 'nope'];
    const v = await cache.view(collection, m, ids);
    expect(v.docIds).toEqual(['a1', 'c2']);
    expect(v.unavailableIds).toEqual(['b1', 'shared']);
    expect(v.unavailable).toHaveLength(1);
    expect(v.unavailable![0]).toMatchObject({ key: b.ref.key, object: 'segment', segment: b.ref.key, documents: 3 });
    expect(v.unavailable![0].reason).toMatch(new RegExp(`segment "${b.ref.key}" is corrupt in section "\\w+": checksum mismatch`));
    // The healthy rows hold exactly their segments' vectors.
    const healthy = readSegment(a.bytes, a.ref.key, artifact);
    expect(Array.from(v.rowVectors([0]).docs)).toEqual(Array.from(healthy.decodeDoc(0)));
    const readsAfterFirst = src.reads.get(b.ref.key);
    // Again: answered from memory (no S3 read), the listener not told twice.
    const again = await cache.view(collection, m, ids);
    expect(again.unavailableIds).toEqual(['b1', 'shared']);
    expect(src.reads.get(b.ref.key)).toBe(readsAfterFirst);
    expect(l.events).toHaveLength(1);
    expect(l.events[0]).toMatchObject({ tenantId: T, collectionId: C, generation: 1, key: b.ref.key, documents: 3 });
    // Candidates only in healthy segments: a complete, not degraded view.
    const healthyOnly = await cache.view(collection, m, ['a2', 'c1']);
    expect(healthyOnly.docIds).toEqual(['a2', 'c1']);
    expect(healthyOnly.unavailable).toEqual([]);
    expect(cache.unavailableKeys()).toEqual([b.ref.key]);
  });

  it('concurrent requests meeting one broken segment: the listener hears of it once', async () => {
    const src = store([a, b]);
    src.objects.set(b.ref.key, flipped(b.bytes));
    const l = listener();
    const cache = cacheOver(src, [a, b], { health: l.health });
    const m = manifestOf(1, [a.ref, b.ref]);
    const views = await Promise.all([1, 2, 3, 4].map(() => cache.view(collection, m, ['a1', 'b2'])));
    expect(views.map((v) => v.unavailableIds)).toEqual([['b2'], ['b2'], ['b2'], ['b2']]);
    await Promise.all([cache.searchGeneration(collection, m), cache.searchGeneration(collection, m)]);
    expect(l.events).toHaveLength(1);
  });

  it('an older copy of an id held by the unreadable newer segment is not served in its place', async () => {
    const old = segment('b0', ['shared', 'z'], 9);
    const src = store([old, b]);
    src.objects.set(b.ref.key, flipped(b.bytes));
    const cache = cacheOver(src, [old, b]);
    const v = await cache.view(collection, manifestOf(1, [old.ref, b.ref]), ['shared', 'z']);
    expect(v.docIds).toEqual(['z']);
    expect(v.unavailableIds).toEqual(['shared']);
  });

  it('ids not known (no info.json): the segment is listed as unavailable for every view, its candidates are not found, nothing is kept', async () => {
    const src = store([a, b, c]);
    src.objects.delete(b.ref.key);
    const l = listener();
    const cache = cacheOver(src, [a, b, c], { ids: false, health: l.health });
    const m = manifestOf(1, [a.ref, b.ref, c.ref]);
    const v = await cache.view(collection, m, ['a1', 'b1']);
    expect(v.docIds).toEqual(['a1']);
    expect(v.unavailableIds).toEqual([]);
    expect(v.unavailable).toEqual([{ key: b.ref.key, object: 'segment', segment: b.ref.key, reason: `segment ${b.ref.key} of the current generation is missing from S3`, documents: 3 }]);
    expect(l.events).toHaveLength(1);
    // Not kept: the next view builds the table again (and, within the recheck time, does not read S3 for the segment).
    const reads = src.reads.get(b.ref.key);
    expect((await cache.view(collection, m, ['c1'])).unavailable).toHaveLength(1);
    expect(src.reads.get(b.ref.key)).toBe(reads);
  });

  it('a rewritten object is read again after the recheck time and serves; the listener hears it recovered', async () => {
    const src = store([a, b]);
    src.objects.set(b.ref.key, flipped(b.bytes));
    const l = listener();
    const cache = cacheOver(src, [a, b], { health: l.health, recheckMs: 0 });
    const m = manifestOf(1, [a.ref, b.ref]);
    expect((await cache.view(collection, m, ['b1'])).unavailableIds).toEqual(['b1']);
    src.objects.set(b.ref.key, b.bytes);
    const v = await cache.view(collection, m, ['b1', 'a1']);
    expect(v.docIds).toEqual(['b1', 'a1']);
    expect(v.unavailable).toEqual([]);
    expect(l.recovered).toEqual([b.ref.key]);
    expect(cache.unavailableKeys()).toEqual([]);
  });

  it('an object found unreadable while building the id table but never needed is not reported, nor reported recovered', async () => {
    const src = store([a, b]);
    src.objects.set(b.ref.key, flipped(b.bytes));
    const l = listener();
    const cache = cacheOver(src, [a, b], { health: l.health, recheckMs: 0 });
    const m = manifestOf(1, [a.ref, b.ref]);
    expect((await cache.view(collection, m, ['a1'])).unavailable).toEqual([]);
    expect(cache.unavailableKeys()).toEqual([b.ref.key]);
    src.objects.set(b.ref.key, b.bytes);
    expect((await cache.view(collection, m, ['b1'])).docIds).toEqual(['b1']);
    expect(l.events).toEqual([]);
    expect(l.recovered).toEqual([]);
  });

  it('search: a corrupt index leaves its segment out and names the index; searchParts (strict) throws it', async () => {
    const src = store([a, b, c]);
    src.objects.set(c.indexKey, flipped(c.index));
    const cache = cacheOver(src, [a, b, c]);
    const m = manifestOf(1, [a.ref, b.ref, c.ref]);
    const g = await cache.searchGeneration(collection, m);
    expect(g.parts.map((p) => p.ref.key)).toEqual([a.ref.key, b.ref.key]);
    expect(g.parts.map((p) => p.segment.docBase)).toEqual([0, 3]);
    expect(g.unavailable).toHaveLength(1);
    expect(g.unavailable[0]).toMatchObject({ key: c.indexKey, object: 'index', segment: c.ref.key, documents: 2 });
    expect(g.unavailable[0].reason).toContain(c.indexKey);
    await expect(cache.searchParts(collection, m)).rejects.toBeInstanceOf(SegmentUnavailableError);
    // Re-rank does not need the index: the segment's documents are still scored.
    expect((await cache.view(collection, m, ['c1'])).docIds).toEqual(['c1']);
  });

  it('search: a broken segment whose documents were all replaced since is neither read nor reported', async () => {
    const again = segment('b4', ['b1', 'b2', 'shared'], 4);
    const src = store([a, b, again]);
    src.objects.set(b.ref.key, flipped(b.bytes));
    const cache = cacheOver(src, [a, b, again]);
    const g = await cache.searchGeneration(collection, manifestOf(1, [a.ref, { ...b.ref, tombstones: [0, 1, 2] }, again.ref]));
    expect(g.parts.map((p) => p.ref.key)).toEqual([a.ref.key, again.ref.key]);
    expect(g.unavailable).toEqual([]);
  });

  it('the degraded record shows only segments of the current generation that still hold live documents', () => {
    const entry = (segment: string) => ({ key: segment, object: 'segment' as const, segment, reason: 'r', documents: 3, generation: 1, detectedAt: '' });
    const record: DegradedRecord = { tenantId: T, collectionId: C, updatedAt: '', segments: [entry(a.ref.key), entry(b.ref.key), entry('merged-away')] };
    expect(currentDegradedSegments(record, [a.ref, { ...b.ref, tombstones: [0, 1, 2] }]).map((s) => s.segment)).toEqual([a.ref.key]);
    expect(currentDegradedSegments(null, [a.ref])).toEqual([]);
  });

  it('a transient S3 failure is not taken for corruption: it is thrown (the job retries) and nothing is marked', async () => {
    const src = store([a]);
    let fail = true;
    const flaky = { get: async (k: string) => (fail ? Promise.reject(new Error('socket hang up')) : src.source.get(k)) };
    const cache = new SegmentCache(flaky, { get: async () => artifact }, noStatic, { maxBytes: 1 << 30, loadConcurrency: 2, scoreFromCodes: true });
    const m = manifestOf(1, [a.ref]);
    await expect(cache.view(collection, m, ['a1'])).rejects.toThrow('socket hang up');
    expect(cache.unavailableKeys()).toEqual([]);
    fail = false;
    expect((await cache.view(collection, m, ['a1'])).docIds).toEqual(['a1']);
  });
});

describe('degraded results', () => {
  it('splits unavailable candidates from missing ones; degraded fields only when segments were left out', () => {
    expect(splitUnavailable(['x', 'b1', 'y'], { unavailableIds: ['b1', 'b2'] })).toEqual({ missing: ['x', 'y'], unavailable: ['b1'] });
    expect(splitUnavailable(['x'], { unavailableIds: ['b1'] })).toEqual({ missing: ['x'] });
    expect(splitUnavailable(['x'], null)).toEqual({ missing: ['x'] });
    expect(degradedFields([])).toEqual({});
    expect(degradedFields(undefined)).toEqual({});
    const u = { key: 'k', object: 'segment' as const, segment: 'k', reason: 'r', documents: 2 };
    expect(degradedFields([u])).toEqual({ degraded: true, unavailableSegments: [u] });
  });

  it('the recorder writes the collection degraded record, logs once per event, and removes an entry (then the record) on recovery', async () => {
    const objects = new Map<string, unknown>();
    const s3 = {
      getJson: async <J>(k: string) => (objects.has(k) ? (structuredClone(objects.get(k)) as J) : null),
      putJson: async (k: string, v: unknown) => void objects.set(k, structuredClone(v)),
      delete: async (k: string) => void objects.delete(k),
    };
    const lines: string[] = [];
    const rec = new DegradedSegmentsRecorder(s3, { error: (m) => lines.push(`error ${m}`), warn: (m) => lines.push(`warn ${m}`) });
    const e = (key: string): UnavailableEvent => ({ tenantId: T, collectionId: C, generation: 4, key, object: 'segment', segment: key, reason: `segment "${key}" is corrupt`, documents: 20 });
    rec.unavailable(e('s1'));
    rec.unavailable(e('s2'));
    await rec.flush();
    const stored = objects.get(degradedRecordKey(T, C)) as DegradedRecord;
    expect(stored.segments.map((s) => [s.key, s.generation, s.documents])).toEqual([
      ['s1', 4, 20],
      ['s2', 4, 20],
    ]);
    expect(lines.filter((l) => l.startsWith('error'))).toHaveLength(2);
    expect(lines[0]).toContain('segment "s1" is corrupt');
    rec.recovered({ tenantId: T, collectionId: C, key: 's1', object: 'segment' });
    await rec.flush();
    expect((objects.get(degradedRecordKey(T, C)) as DegradedRecord).segments.map((s) => s.key)).toEqual(['s2']);
    rec.recovered({ tenantId: T, collectionId: C, key: 's2', object: 'segment' });
    await rec.flush();
    expect(objects.has(degradedRecordKey(T, C))).toBe(false);
  });
});
