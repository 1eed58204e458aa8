import { afterEach, describe, expect, it, vi } from 'vitest';
import { PermanentJobError, s3Keys, type CodecSettings, type Collection, type CollectionManifest, type SegmentRef } from '@lateral/shared';
import { crc32c, createCodec, fitCodec, readSegment, writeSegment, type CodecArtifact } from '@lateral/codec';
import type { EncodedText } from '@lateral/model';
import type { CommitResult, GenerationChange, Logger } from '@lateral/infra';
import { commitProcessor, commitSegment, type CommitDeps, type SegmentCommitPayload } from './commit.processor';
import { SegmentIds } from '../segment-ids';
import { strictMock, takeStrictMockViolations } from '../testing/strict-mock';
import { gcKeys } from '../maintenance/gc';
import { assembleSegmentDocs, segmentHeadData, serializeSegmentHead } from '@lateral/serving';

afterEach(() => expect(takeStrictMockViolations()).toEqual([]));

const T = 't1';
const C = 'c1';
const DIMS = 4;

const fp16: CodecSettings = { kind: 'fp16', layout: 'token', norms: 'fp32', sideInfo: false };
const eden4: CodecSettings = { kind: 'eden', bits: 4, dims: 2, layout: 'token', norms: 'fp32', sideInfo: false };
const fp16Artifact = fitCodec(fp16, new Float32Array(DIMS), DIMS, { seed: 7n });

const encodedDocs = (n: number, salt: number): EncodedText[] =>
  Array.from({ length: n }, (_, d) => ({
    tokenIds: Int32Array.from([d * 2, d * 2 + 1]),
    vectors: Float32Array.from({ length: 2 * DIMS }, (_, k) => (((salt * 5 + d * 3 + k * 7) % 9) - 4) / 4),
    weights: null,
    length: 2,
    truncated: false,
  }));

/** A segment of `ids` (2 tokens each) written with `settings` (and its artifact when fitted). */
function segment(ids: string[], settings: CodecSettings = fp16, artifact?: CodecArtifact, salt = 0): Uint8Array {
  return writeSegment(assembleSegmentDocs(ids, encodedDocs(ids.length, salt), DIMS), createCodec(settings, artifact));
}

const refOf = (batchId: string, codecVersion: number, bytes: Uint8Array, documents: number): SegmentRef => ({
  batchId,
  codecVersion,
  key: s3Keys.segment(T, C, batchId, codecVersion),
  documents,
  tokens: documents * 2,
  bytes: bytes.byteLength,
  checksum: crc32c(bytes).toString(16).padStart(8, '0'),
});

const collectionWith = (over: Partial<Collection> = {}): Collection => ({
  tenantId: T,
  id: C,
  model: 'fake-model',
  dims: DIMS,
  maxDocTokens: 64,
  codec: fp16,
  codecVersion: 1,
  createdAt: '2024-01-01T00:00:00.000Z',
  ...over,
});

const manifestOf = (generation: number, codecVersion: number, segments: SegmentRef[], documents?: number): CollectionManifest => ({
  tenantId: T,
  collectionId: C,
  generation,
  codecVersion,
  committedAt: '2024-01-01T00:00:00.000Z',
  segments,
  ...(documents !== undefined ? { documents } : {}),
});

const payload = (batchId: string, codecVersion = 1): SegmentCommitPayload => ({
  tenantId: T,
  collectionId: C,
  ingestionId: 'ing-1',
  batchId,
  segmentKey: s3Keys.segment(T, C, batchId, codecVersion),
  codecVersion,
  documents: 2,
});

type Change = (segments: SegmentRef[], current: CollectionManifest | null) => GenerationChange | null | Promise<GenerationChange | null>;

/**
 * generations.commit as GenerationRepository does it, minus S3: the change is applied to a copy of
 * the current generation's segments; null -> no generation, else the next one.
 */
function fakeCommit(current: CollectionManifest | null) {
  const changes: (GenerationChange | null)[] = [];
  const commit = vi.fn(async (tenantId: string, collectionId: string, change: Change): Promise<CommitResult> => {
    const next = await change([...(current?.segments ?? [])], current);
    changes.push(next);
    if (next === null) return { manifest: current!, committed: false };
    const manifest: CollectionManifest = {
      tenantId,
      collectionId,
      generation: (current?.generation ?? 0) + 1,
      codecVersion: next.codecVersion,
      committedAt: '2024-01-03T00:00:00.000Z',
      segments: next.segments,
      documents: next.documents ?? next.segments.reduce((s, x) => s + x.documents, 0),
    };
    return { manifest, committed: true };
  });
  return { commit, changes };
}

/**
 * Deps of an ordinary (non re-compression) commit: generations has commit only, collections get
 * only, the logger nothing; liveIds is a real SegmentIds over a strict loader of `stored` ids.
 */
function setup(opts: { objects: Record<string, Uint8Array>; current: CollectionManifest | null; collection?: Collection | null; stored?: Record<string, string[]>; liveIds?: CommitDeps['liveIds'] }) {
  const get = vi.fn(async (key: string) => opts.objects[key] ?? null);
  const collectionsGet = vi.fn(async (_t: string, _c: string) => (opts.collection === undefined ? collectionWith() : opts.collection));
  const codecsGet = vi.fn(async (_t: string, _c: string, _v: number) => fp16Artifact);
  const { commit, changes } = fakeCommit(opts.current);
  const load = vi.fn(async (_t: string, _c: string, ref: SegmentRef) => {
    const ids = opts.stored?.[ref.key];
    if (!ids) throw new Error(`test: unexpected load of ${ref.key}`);
    return ids;
  });
  const deps: CommitDeps = {
    store: strictMock<CommitDeps['store']>('store', { get, exists: async (key: string) => key in opts.objects }),
    collections: strictMock<CommitDeps['collections']>('collections', { get: collectionsGet }),
    generations: strictMock<CommitDeps['generations']>('generations', { commit }),
    codecs: strictMock<CommitDeps['codecs']>('codecs', { get: codecsGet }),
    liveIds: opts.liveIds ?? new SegmentIds(load),
    logger: strictMock<Logger>('logger'),
  };
  return { deps, get, collectionsGet, codecsGet, commit, changes, load };
}

describe('commitProcessor', () => {
  const b0 = segment(['d1', 'd2'], fp16, undefined, 0);
  const b1 = segment(['d2', 'd3'], fp16, undefined, 1);
  const ref0 = refOf('b-0', 1, b0, 2);
  const ref1 = refOf('b-1', 1, b1, 2);

  it('appends a new batch as the next generation, documents = distinct live ids', async () => {
    const s = setup({ objects: { [ref1.key]: b1 }, current: manifestOf(4, 1, [ref0], 2), stored: { [ref0.key]: ['d1', 'd2'] } });
    const result = await commitProcessor(s.deps, payload('b-1'));

    expect(s.collectionsGet).toHaveBeenCalledExactlyOnceWith(T, C);
    // The segment, then (after the commit) the ingestion record for its one summary line.
    expect(s.get.mock.calls).toEqual([[ref1.key], [s3Keys.ingestion(T, C, 'ing-1')]]);
    expect(s.codecsGet).toHaveBeenCalledExactlyOnceWith(T, C, 1);
    expect(s.commit).toHaveBeenCalledExactlyOnceWith(T, C, expect.any(Function));
    expect(ref1.checksum).toMatch(/^[0-9a-f]{8}$/);
    // d2 is in both segments: 3 distinct documents, not 4; the older copy of d2 (b-0's second document) gets a tombstone.
    expect(s.changes).toEqual([{ segments: [{ ...ref0, tombstones: [1] }, ref1], codecVersion: 1, documents: 3 }]);
    // The committed segment's ids are remembered, the other one is loaded once.
    expect(s.load).toHaveBeenCalledExactlyOnceWith(T, C, ref0);
    expect(result).toEqual({ generation: 5, committed: true });
  });

  it('commitSegment hands the record it read and the manifest it committed to the maintenance after it (no second read); nothing when it committed nothing', async () => {
    const s = setup({ objects: { [ref1.key]: b1 }, current: manifestOf(4, 1, [ref0], 2), stored: { [ref0.key]: ['d1', 'd2'] } });
    const out = await commitSegment(s.deps, payload('b-1'));
    expect(out.result).toEqual({ generation: 5, committed: true });
    expect(out.committed?.collection).toEqual(collectionWith());
    expect(out.committed?.manifest).toMatchObject({ generation: 5, segments: [{ ...ref0, tombstones: [1] }, ref1], documents: 3 });
    expect(s.collectionsGet).toHaveBeenCalledOnce();
    const replay = setup({ objects: { [ref1.key]: b1 }, current: manifestOf(5, 1, [ref0, ref1], 3), stored: { [ref0.key]: ['d1', 'd2'] } });
    expect(await commitSegment(replay.deps, payload('b-1'))).toEqual({ result: { generation: 5, committed: false }, committed: null });
  });

  it('a replayed job of a batch a merge replaced writes no generation (the merged-away segment does not come back)', async () => {
    const merged = { ...ref0, batchId: 'merge-1', key: 'seg/merge-1' };
    const s = setup({ objects: { [ref1.key]: b1, [gcKeys.mergedAway(T, C, 'b-1')]: new Uint8Array(2) }, current: manifestOf(6, 1, [merged], 2) });
    expect(await commitProcessor(s.deps, payload('b-1'))).toEqual({ generation: 6, committed: false });
    expect(s.changes).toEqual([null]); // the change is refused: no generation
  });

  it('the first segment of a collection makes generation 1 at the collection codec version', async () => {
    const s = setup({ objects: { [ref0.key]: b0 }, current: null });
    expect(await commitProcessor(s.deps, payload('b-0'))).toEqual({ generation: 1, committed: true });
    expect(s.changes).toEqual([{ segments: [ref0], codecVersion: 1, documents: 2 }]);
    expect(s.load).not.toHaveBeenCalled();
  });

  it('marks the segment as having a stored head when the index stage wrote one (a scorer with an empty disk reads it)', async () => {
    const s = setup({ objects: { [ref0.key]: b0, [s3Keys.segmentHead(T, C, 'b-0', 1)]: new Uint8Array(8) }, current: null });
    expect(await commitProcessor(s.deps, payload('b-0'))).toEqual({ generation: 1, committed: true });
    expect(s.changes).toEqual([{ segments: [{ ...ref0, head: true }], codecVersion: 1, documents: 2 }]);
  });

  it('a replayed job (same batch, same key and checksum) writes no generation and counts nothing', async () => {
    const remember = vi.fn((_t: string, _c: string, _key: string, _ids: string[]) => undefined);
    const s = setup({
      objects: { [ref1.key]: b1 },
      current: manifestOf(5, 1, [ref0, ref1], 3),
      // count is not stubbed: a replay must not even count the live documents.
      liveIds: strictMock<CommitDeps['liveIds']>('liveIds', { remember }),
    });
    expect(await commitProcessor(s.deps, payload('b-1'))).toEqual({ generation: 5, committed: false });
    expect(s.changes).toEqual([null]);
    expect(remember).toHaveBeenCalledExactlyOnceWith(T, C, ref1.key, ['d2', 'd3']);
  });

  it('the same batch with different bytes replaces its segment in place', async () => {
    const rewritten = segment(['d2', 'd3'], fp16, undefined, 9);
    const newRef = refOf('b-1', 1, rewritten, 2);
    expect(newRef.checksum).not.toBe(ref1.checksum);
    const s = setup({ objects: { [ref1.key]: rewritten }, current: manifestOf(5, 1, [ref1, ref0], 3), stored: { [ref0.key]: ['d1', 'd2'] } });
    expect(await commitProcessor(s.deps, payload('b-1'))).toEqual({ generation: 6, committed: true });
    // b-0, later in the manifest, holds d2 too: the rewritten b-1's d2 is the superseded copy.
    expect(s.changes).toEqual([{ segments: [{ ...newRef, tombstones: [0] }, ref0], codecVersion: 1, documents: 3 }]);
  });

  describe('a job its index job verified the segment for (payload.verified)', () => {
    const headKey = s3Keys.segmentHead(T, C, 'b-0', 1);
    const head0 = serializeSegmentHead(segmentHeadData(readSegment(b0, ref0.key), b0.byteLength));
    const verified = { ...payload('b-0'), verified: { checksum: ref0.checksum, bytes: b0.byteLength } };

    it('commits from the stored head and the verified checksum, without reading the segment whole', async () => {
      const s = setup({ objects: { [ref0.key]: b0, [headKey]: head0 }, current: null });
      expect(await commitProcessor(s.deps, verified)).toEqual({ generation: 1, committed: true });
      expect(s.changes).toEqual([{ segments: [{ ...ref0, head: true }], codecVersion: 1, documents: 2 }]);
      expect(s.get).toHaveBeenCalledWith(headKey);
      expect(s.get).not.toHaveBeenCalledWith(ref0.key);
      expect(s.codecsGet).not.toHaveBeenCalled();
    });

    it('a missing, corrupt or other object\'s head: the segment is read whole and verified (a corrupt segment then fails for good)', async () => {
      const corruptHead = head0.slice();
      corruptHead[20] ^= 0xff;
      const otherHead = serializeSegmentHead(segmentHeadData(readSegment(b0, ref0.key), b0.byteLength + 1));
      for (const head of [undefined, corruptHead, otherHead]) {
        const s = setup({ objects: { [ref0.key]: b0, ...(head ? { [headKey]: head } : {}) }, current: null });
        expect(await commitProcessor(s.deps, verified)).toEqual({ generation: 1, committed: true });
        expect(s.changes).toEqual([{ segments: [head ? { ...ref0, head: true } : ref0], codecVersion: 1, documents: 2 }]);
        expect(s.get).toHaveBeenCalledWith(headKey);
        expect(s.get).toHaveBeenCalledWith(ref0.key);
      }
      const flipped = b0.slice();
      flipped[b0.byteLength - 9] ^= 0xff;
      const s = setup({ objects: { [ref0.key]: flipped }, current: null });
      await expect(commitProcessor(s.deps, verified)).rejects.toThrow(PermanentJobError);
      expect(s.commit).not.toHaveBeenCalled();
    });

    it('a segment object gone from S3 is permanent, whatever the head says', async () => {
      const s = setup({ objects: { [headKey]: head0 }, current: null });
      await expect(commitProcessor(s.deps, verified)).rejects.toThrow(new PermanentJobError(`segment missing from S3: ${ref0.key}`));
      expect(s.commit).not.toHaveBeenCalled();
    });
  });

  it('a missing segment object or collection is permanent; nothing is committed', async () => {
    const noSeg = setup({ objects: {}, current: null });
    await expect(commitProcessor(noSeg.deps, payload('b-1'))).rejects.toThrow(new PermanentJobError(`segment missing from S3: ${ref1.key}`));
    expect(noSeg.codecsGet).not.toHaveBeenCalled();
    expect(noSeg.commit).not.toHaveBeenCalled();

    const noCollection = setup({ objects: { [ref1.key]: b1 }, current: null, collection: null });
    await expect(commitProcessor(noCollection.deps, payload('b-1'))).rejects.toThrow(new PermanentJobError('collection t1/c1 no longer exists'));
    expect(noCollection.get).not.toHaveBeenCalled();
    expect(noCollection.commit).not.toHaveBeenCalled();
  });

  describe('re-compression (collection.pending at the job codec version)', () => {
    const v2Artifact = fitCodec(eden4, Float32Array.from({ length: 16 * DIMS }, (_, i) => Math.cos(i * 1.7)), DIMS, { seed: 11n });
    const r0 = segment(['d1', 'd2'], eden4, v2Artifact, 0);
    const r1 = segment(['d2', 'd3'], eden4, v2Artifact, 1);
    const ref0v2 = refOf('b-0', 2, r0, 2);
    const ref1v2 = refOf('b-1', 2, r1, 2);
    const b2 = segment(['d4'], fp16, undefined, 2);
    const ref2 = refOf('b-2', 1, b2, 1); // ingested during the re-compression, at the current version
    const pending = { codecVersion: 2, codec: eden4, batches: ['b-0', 'b-1'], startedAt: '2024-01-02T00:00:00.000Z' };
    const recompressing = collectionWith({ pending });

    /** generations' pending records as GenerationRepository keeps them (by batch id). */
    function recSetup(opts: { recorded: SegmentRef[]; current: CollectionManifest; commitStubbed: boolean; latest: Collection; update: boolean; info: boolean }) {
      const records = new Map(opts.recorded.map((r) => [r.batchId, r]));
      const recordPending = vi.fn(async (_t: string, _c: string, _v: number, ref: SegmentRef) => void records.set(ref.batchId, ref));
      const pendingFn = vi.fn(async (_t: string, _c: string, _v: number) => new Map(records));
      const clearPending = vi.fn(async (_t: string, _c: string, _v: number) => undefined);
      const { commit, changes } = fakeCommit(opts.current);
      const collectionsGet = vi.fn(async (_t: string, _c: string): Promise<Collection | null> => recompressing);
      collectionsGet.mockResolvedValueOnce(recompressing).mockResolvedValueOnce(opts.latest);
      const update = vi.fn(async (_c: Collection) => undefined);
      const info = vi.fn();
      const codecsGet = vi.fn(async (_t: string, _c: string, _v: number) => v2Artifact);
      const remember = vi.fn();
      const deps: CommitDeps = {
        store: strictMock<CommitDeps['store']>('store', { get: async (key: string) => ({ [ref0v2.key]: r0, [ref1v2.key]: r1 })[key] ?? null, exists: async () => false }),
        collections: strictMock<CommitDeps['collections']>('collections', { get: collectionsGet, ...(opts.update ? { update } : {}) }),
        generations: strictMock<CommitDeps['generations']>('generations', { recordPending, pending: pendingFn, clearPending, ...(opts.commitStubbed ? { commit } : {}) }),
        codecs: strictMock<CommitDeps['codecs']>('codecs', { get: codecsGet }),
        // The live count is kept from the current generation: count is not stubbed.
        liveIds: strictMock<CommitDeps['liveIds']>('liveIds', { remember }),
        logger: strictMock<Logger>('logger', opts.info ? { info } : {}),
      };
      return { deps, recordPending, pendingFn, clearPending, commit, changes, collectionsGet, update, info, codecsGet, remember };
    }

    it('records the written segment and waits while other batches are still being re-compressed', async () => {
      const s = recSetup({ recorded: [], current: manifestOf(4, 1, [ref0, ref1, ref2], 4), commitStubbed: false, latest: recompressing, update: false, info: false });
      expect(await commitProcessor(s.deps, payload('b-0', 2))).toEqual({ generation: 0, committed: false });
      expect(s.codecsGet).toHaveBeenCalledExactlyOnceWith(T, C, 2);
      expect(s.recordPending).toHaveBeenCalledExactlyOnceWith(T, C, 2, ref0v2);
      expect(s.pendingFn).toHaveBeenCalledExactlyOnceWith(T, C, 2);
      expect(s.remember).toHaveBeenCalledExactlyOnceWith(T, C, ref0v2.key, ['d1', 'd2']);
      expect(s.clearPending).not.toHaveBeenCalled();
    });

    it('the last batch commits every re-compressed segment at once, then switches the collection and clears pending', async () => {
      const latest = collectionWith({ pending, maxDocTokens: 32 }); // changed meanwhile: the update starts from it
      const s = recSetup({ recorded: [ref0v2], current: manifestOf(4, 1, [ref0, ref1, ref2], 4), commitStubbed: true, latest, update: true, info: true });
      expect(await commitProcessor(s.deps, payload('b-1', 2))).toEqual({ generation: 5, committed: true });
      expect(s.recordPending).toHaveBeenCalledExactlyOnceWith(T, C, 2, ref1v2);
      expect(s.commit).toHaveBeenCalledExactlyOnceWith(T, C, expect.any(Function));
      // Re-compressed batches swapped in place; the batch ingested meanwhile keeps its version; the live count is kept.
      expect(s.changes).toEqual([{ segments: [ref0v2, ref1v2, ref2], codecVersion: 2, documents: 4 }]);
      expect(s.collectionsGet).toHaveBeenCalledTimes(2);
      expect(s.update).toHaveBeenCalledExactlyOnceWith({ ...latest, codec: eden4, codecVersion: 2, pending: undefined });
      expect(s.update.mock.calls[0][0]).toHaveProperty('pending', undefined);
      expect(s.clearPending).toHaveBeenCalledExactlyOnceWith(T, C, 2);
      // Generation first, then the collection record, then the pending records.
      expect(s.commit.mock.invocationCallOrder[0]).toBeLessThan(s.update.mock.invocationCallOrder[0]);
      expect(s.update.mock.invocationCallOrder[0]).toBeLessThan(s.clearPending.mock.invocationCallOrder[0]);
      expect(s.info).toHaveBeenCalledExactlyOnceWith('re-compressed c1 to codec v2: generation 5');
    });

    it('commitSegment of the last batch hands on the record as it wrote it (re-compression done) and the generation committed', async () => {
      const latest = collectionWith({ pending, maxDocTokens: 32 });
      const s = recSetup({ recorded: [ref0v2], current: manifestOf(4, 1, [ref0, ref1, ref2], 4), commitStubbed: true, latest, update: true, info: true });
      const out = await commitSegment(s.deps, payload('b-1', 2));
      expect(out.committed?.collection).toEqual(s.update.mock.calls[0][0]);
      expect(out.committed?.manifest).toMatchObject({ generation: 5, codecVersion: 2, segments: [ref0v2, ref1v2, ref2] });
      const waiting = recSetup({ recorded: [], current: manifestOf(4, 1, [ref0, ref1, ref2], 4), commitStubbed: false, latest: recompressing, update: false, info: false });
      expect(await commitSegment(waiting.deps, payload('b-0', 2))).toEqual({ result: { generation: 0, committed: false }, committed: null });
    });

    it('a second last job finds the version committed: no generation, no collection update, pending still cleared', async () => {
      const done = collectionWith({ codec: eden4, codecVersion: 2 });
      const s = recSetup({ recorded: [ref0v2, ref1v2], current: manifestOf(5, 2, [ref0v2, ref1v2, ref2], 4), commitStubbed: true, latest: done, update: false, info: false });
      expect(await commitProcessor(s.deps, payload('b-1', 2))).toEqual({ generation: 5, committed: false });
      expect(s.changes).toEqual([null]);
      expect(s.clearPending).toHaveBeenCalledExactlyOnceWith(T, C, 2);
    });
  });
});

describe('SegmentIds', () => {
  const ref = (key: string): SegmentRef => ({ batchId: key, codecVersion: 1, key, documents: 0, tokens: 0, bytes: 0, checksum: '00000000' });
  const ids: Record<string, string[]> = { a: ['d1', 'd2'], b: ['d2', 'd3', 'd3'], c: ['d4'] };

  it('counts distinct ids across segments', async () => {
    const load = vi.fn(async (_t: string, _c: string, r: SegmentRef) => ids[r.key]);
    const live = new SegmentIds(load);
    expect(await live.count(T, C, [ref('a'), ref('b'), ref('c')])).toBe(4);
    expect(await live.count(T, C, [ref('a'), ref('b')])).toBe(3);
    expect(await live.count(T, C, [])).toBe(0);
  });

  it('loads each segment once per instance, and never one it was told about', async () => {
    const load = vi.fn(async (_t: string, _c: string, r: SegmentRef) => ids[r.key]);
    const live = new SegmentIds(load);
    live.remember(T, C, 'c', ['d9']);
    await live.count(T, C, [ref('a'), ref('c')]);
    await live.count(T, C, [ref('a'), ref('b'), ref('c')]);
    expect(await live.count(T, C, [ref('b'), ref('c')])).toBe(3); // d2, d3, d9: the remembered ids are used
    expect(load.mock.calls).toEqual([
      [T, C, ref('a')],
      [T, C, ref('b')],
    ]);
  });

  it('forgets segments no recent generation listed (merged-away inputs): bounded, read again if they come back', async () => {
    const load = vi.fn(async (_t: string, _c: string, r: SegmentRef) => [`${r.key}-doc`]);
    const live = new SegmentIds(load, 3);
    // Generations 1..3 list a and b; a merge replaces them with m (remembered when written).
    for (let g = 0; g < 3; g++) await live.count(T, C, [ref('a'), ref('b')]);
    live.remember(T, C, 'm', ['a-doc', 'b-doc']);
    expect(live.held).toBe(3);
    // A merge output whose commit lost its race is never listed: it goes like the inputs.
    live.remember(T, C, 'lost', ['x']);
    for (let g = 0; g < 2; g++) expect(await live.count(T, C, [ref('m'), ref('c')])).toBe(3);
    expect(live.held).toBe(5); // a and b were seen 3 generations ago, lost remembered 2 ago: still kept
    await live.count(T, C, [ref('m'), ref('c')]);
    expect(live.held).toBe(3); // a and b not seen in the last 3: forgotten
    await live.count(T, C, [ref('m'), ref('c')]);
    expect(live.held).toBe(2); // lost too; m and c stay while listed
    for (let g = 0; g < 50; g++) await live.count(T, C, [ref(`s${g}`), ref('m')]);
    expect(live.held).toBeLessThanOrEqual(4); // a stream of short-lived segments stays bounded
    // Another collection's segments are counted on their own generations.
    await live.count(T, 'other', [ref('a')]);
    expect(live.held).toBeLessThanOrEqual(5);
    // a, listed again, is read again (once).
    const before = load.mock.calls.filter(([, c, r]) => c === C && r.key === 'a').length;
    await live.count(T, C, [ref('a'), ref('m')]);
    expect(load.mock.calls.filter(([, c, r]) => c === C && r.key === 'a').length).toBe(before + 1);
    expect(load.mock.calls.filter(([, , r]) => r.key === 'm')).toEqual([]); // remembered, never read
  });

  it('a failed load propagates and is tried again on the next count', async () => {
    const load = vi.fn(async (_t: string, _c: string, r: SegmentRef) => ids[r.key]);
    load.mockRejectedValueOnce(new Error('S3 503'));
    const live = new SegmentIds(load);
    await expect(live.count(T, C, [ref('a')])).rejects.toThrow('S3 503');
    expect(await live.count(T, C, [ref('a')])).toBe(2);
    expect(load).toHaveBeenCalledTimes(2);
  });

  it('live: superseded copies get tombstones (the last copy of an id wins), tombstoned last copies are not counted', async () => {
    const live = new SegmentIds(async (_t, _c, r) => ids[r.key]);
    const out = await live.live(T, C, [ref('a'), ref('b'), ref('c')]);
    // d2 of a is superseded by b; in b, d3 at 1 by d3 at 2
    expect(out.segments).toEqual([{ ...ref('a'), tombstones: [1] }, { ...ref('b'), tombstones: [1] }, ref('c')]);
    expect(out.documents).toBe(4);
    // b's d2 deleted: d2 is gone even though a holds an older copy (which gets its tombstone too)
    const del = await live.live(T, C, [ref('a'), { ...ref('b'), tombstones: [0] }, ref('c')]);
    expect(del.segments.map((s) => s.tombstones)).toEqual([[1], [0, 1], undefined]);
    expect(del.documents).toBe(3);
    expect(await live.count(T, C, [ref('a'), { ...ref('b'), tombstones: [0, 2] }])).toBe(1);
  });

  it('live with a family (passages): a document ingested again replaces every old passage, whole or split', async () => {
    const families: Record<string, string[]> = { p: ['x#0', 'x#1', 'x#2', 'y'], q: ['x#0', 'x#1', 'z'], r: ['x', 'y#0'], s: ['w'] };
    const fref = (k: string): SegmentRef => ({ ...ref('a'), batchId: k, key: `seg-${k}` });
    const live = new SegmentIds(async (_t, _c, r) => families[r.batchId]);
    const family = (id: string) => id.replace(/#\d+$/, '');
    // x split in 3, then in 2: the old x#2 goes with x#0 and x#1
    const two = await live.live(T, C, [fref('p'), fref('q')], family);
    expect(two.segments.map((s) => s.tombstones)).toEqual([[0, 1, 2], undefined]);
    expect(two.documents).toBe(4); // y, x#0, x#1, z
    // then whole again, and y split: every passage of x and the whole y are replaced
    const three = await live.live(T, C, [fref('p'), fref('q'), fref('r'), fref('s')], family);
    expect(three.segments.map((s) => s.tombstones)).toEqual([[0, 1, 2, 3], [0, 1], undefined, undefined]);
    expect(three.documents).toBe(4); // z, x, y#0, w
    // without a family only equal ids replace each other
    expect((await live.live(T, C, [fref('p'), fref('q')])).segments.map((s) => s.tombstones)).toEqual([[0, 1], undefined]);
  });
});
