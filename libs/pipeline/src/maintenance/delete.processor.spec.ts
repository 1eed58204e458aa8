import { afterEach, describe, expect, it, vi } from 'vitest';
import { PermanentJobError, deleteKeys, s3Keys, type Collection, type CollectionManifest, type DeletePayload, type SegmentRef } from '@lateral/shared';
import type { CommitResult, GenerationChange, Logger } from '@lateral/infra';
import { SegmentIds } from '../segment-ids';
import { deleteDocuments, deleteProcessor, type DeleteDeps, type SegmentDocs } from './delete.processor';
import { strictMock, takeStrictMockViolations } from '../testing/strict-mock';

afterEach(() => expect(takeStrictMockViolations()).toEqual([]));

/**
 * The delete processor with strict mocks (an unstubbed member fails the test): tombstones on the
 * newest generation through GenerationRepository.commit, by ids and by filter, nothing committed
 * when nothing live matches (so a replayed delete writes no generation), permanent errors.
 */
const T = 't1';
const C = 'c1';
const REQUEST = deleteKeys.request(T, C, 'del-1');
const payload: DeletePayload = { op: 'delete', tenantId: T, collectionId: C, deleteId: 'del-1', requestKey: REQUEST };

const collection: Collection = {
  tenantId: T,
  id: C,
  model: 'fake-model',
  dims: 4,
  maxDocTokens: 64,
  codec: { kind: 'fp16', layout: 'token', norms: 'fp32', sideInfo: false },
  codecVersion: 2,
  createdAt: '2024-01-01T00:00:00.000Z',
};

/** Segment documents by batch: b0 is older; 'b' was ingested again in b1, so b0's copy (index 1) is tombstoned. */
const IDS: Record<string, string[]> = { b0: ['a', 'b', 'c'], b1: ['b', 'd'] };
const YEAR: Record<string, Record<string, number>> = { b0: { a: 1950, b: 1951, c: 1970 }, b1: { b: 1980, d: 1955 } };
const ref = (batchId: string, tombstones?: number[]): SegmentRef => ({
  batchId,
  codecVersion: 2,
  key: s3Keys.segment(T, C, batchId, 2),
  documents: IDS[batchId].length,
  tokens: IDS[batchId].length * 2,
  bytes: 100,
  checksum: '00000000',
  ...(tombstones ? { tombstones } : {}),
});
const generation3 = (): CollectionManifest => ({
  tenantId: T,
  collectionId: C,
  generation: 3,
  codecVersion: 2,
  committedAt: '2024-01-02T00:00:00.000Z',
  segments: [ref('b0', [1]), ref('b1')],
  documents: 4,
});

function setup(over: { request?: unknown; collection?: Collection | null; manifest?: CollectionManifest | null } = {}) {
  let current: CollectionManifest | null = over.manifest === undefined ? generation3() : over.manifest;
  const written: CollectionManifest[] = [];
  const getJson = vi.fn(async (key: string) => (key === REQUEST ? (over.request === undefined ? { ids: ['b'] } : over.request) : null));
  const collectionsGet = vi.fn(async () => (over.collection === undefined ? collection : over.collection));
  const manifest = vi.fn(async () => current);
  // GenerationRepository.commit's contract: the change runs on the newest segments; null commits nothing.
  const commit = vi.fn(async (_t: string, _c: string, change: (s: SegmentRef[], m: CollectionManifest | null) => Promise<GenerationChange | null> | GenerationChange | null): Promise<CommitResult> => {
    const next = await change([...(current?.segments ?? [])], current);
    if (next === null) return { manifest: current!, committed: false };
    const m: CollectionManifest = {
      tenantId: T,
      collectionId: C,
      generation: (current?.generation ?? 0) + 1,
      codecVersion: next.codecVersion,
      committedAt: '2024-01-03T00:00:00.000Z',
      segments: next.segments,
      documents: next.documents ?? 0,
    };
    written.push(m);
    current = m;
    return { manifest: m, committed: true };
  });
  const segmentDocs = vi.fn(
    async (_t: string, _c: string, r: SegmentRef): Promise<SegmentDocs> => ({
      docIds: IDS[r.batchId],
      metadata: (i: number) => ({ year: YEAR[r.batchId][IDS[r.batchId][i]] }),
    }),
  );
  const info = vi.fn();
  const deps: DeleteDeps = {
    store: strictMock<DeleteDeps['store']>('store', { getJson: getJson as unknown as DeleteDeps['store']['getJson'] }),
    collections: strictMock<DeleteDeps['collections']>('collections', { get: collectionsGet }),
    generations: strictMock<DeleteDeps['generations']>('generations', { manifest, commit: commit as unknown as DeleteDeps['generations']['commit'] }),
    // the real live-id bookkeeping over an in-memory id table (no I/O)
    liveIds: new SegmentIds(async (_t, _c, r) => IDS[r.batchId]),
    segmentDocs,
    logger: strictMock<Logger>('logger', { info }),
  };
  return { deps, written, commit, segmentDocs, info, getJson };
}

describe('deleteProcessor', () => {
  it('by ids: tombstones the live copy in the next generation, lists unknown and already deleted ids as not found', async () => {
    const s = setup({ request: { ids: ['b', 'a', 'x', 'a'] } });
    const r = await deleteProcessor(s.deps, payload);
    expect(r).toEqual({ deleteId: 'del-1', generation: 4, committed: true, deleted: 2, notFound: ['x'], documents: 2 });
    expect(s.written).toHaveLength(1);
    const [b0, b1] = s.written[0].segments;
    expect(b0.tombstones).toEqual([0, 1]); // 'a' deleted, the old copy of 'b' stays tombstoned
    expect(b1.tombstones).toEqual([0]); // the live 'b'
    expect(s.written[0].codecVersion).toBe(2);
    expect(s.getJson).toHaveBeenCalledExactlyOnceWith(REQUEST);
    expect(s.segmentDocs).not.toHaveBeenCalled();
    expect(s.info).toHaveBeenCalledOnce();
  });

  it('deleteDocuments hands the record it read and the manifest it committed to the maintenance after it; nothing when nothing was committed', async () => {
    const s = setup({ request: { ids: ['b'] } });
    const out = await deleteDocuments(s.deps, payload);
    expect(out.result).toMatchObject({ generation: 4, committed: true, deleted: 1 });
    expect(out.committed?.manifest).toBe(s.written[0]);
    expect(out.committed?.collection).toMatchObject({ tenantId: T, id: C });
    expect((await deleteDocuments(s.deps, payload)).committed).toBeNull();
  });

  it('replayed (or nothing live matches): no generation is written', async () => {
    const s = setup({ request: { ids: ['b'] } });
    expect(await deleteProcessor(s.deps, payload)).toMatchObject({ generation: 4, committed: true, deleted: 1, notFound: [], documents: 3 });
    const again = await deleteProcessor(s.deps, payload);
    expect(again).toEqual({ deleteId: 'del-1', generation: 4, committed: false, deleted: 0, notFound: ['b'], documents: 3 });
    expect(s.written).toHaveLength(1);
    expect(s.info).toHaveBeenCalledOnce();
  });

  it('by filter: every live document the filter accepts, judged on its live copy only', async () => {
    // year <= 1955: a (1950) and d (1955); b's live copy is 1980 (its older 1951 copy does not count), c is 1970
    const s = setup({ request: { filter: { must: [{ key: 'year', range: { lte: 1955 } }] } } });
    const r = await deleteProcessor(s.deps, payload);
    expect(r).toEqual({ deleteId: 'del-1', generation: 4, committed: true, deleted: 2, notFound: [], documents: 2 });
    const [b0, b1] = s.written[0].segments;
    expect(b0.tombstones).toEqual([0, 1]);
    expect(b1.tombstones).toEqual([1]);
    expect(s.segmentDocs).toHaveBeenCalledTimes(2);
  });

  it('by filter on a generation whose superseded copy carries no tombstone: the older copy of an id is not judged', async () => {
    // b0's 'b' (1951) is superseded by b1's 'b' (1980) without a tombstone (a manifest from before tombstones)
    const s = setup({ manifest: { ...generation3(), segments: [ref('b0'), ref('b1')] }, request: { filter: { must: [{ key: 'year', range: { lte: 1955 } }] } } });
    const r = await deleteProcessor(s.deps, payload);
    expect(r).toMatchObject({ committed: true, deleted: 2, notFound: [], documents: 2 });
    expect(s.written[0].segments[0].tombstones).toContain(0);
    expect(s.written[0].segments[1].tombstones).toEqual([1]); // d, not the live b
  });

  it('a collection without a generation: nothing to delete, nothing committed', async () => {
    const s = setup({ manifest: null, request: { ids: ['a'] } });
    expect(await deleteProcessor(s.deps, payload)).toEqual({ deleteId: 'del-1', generation: 0, committed: false, deleted: 0, notFound: ['a'], documents: 0 });
    expect(s.commit).not.toHaveBeenCalled();
  });

  it('fails for good on a missing collection, a missing or invalid stored request, and a bad filter', async () => {
    await expect(deleteProcessor(setup({ collection: null }).deps, payload)).rejects.toThrow(PermanentJobError);
    await expect(deleteProcessor(setup({ request: null }).deps, payload)).rejects.toThrow(/delete request missing from S3/);
    await expect(deleteProcessor(setup({ request: { ids: ['a'], filter: {} } }).deps, payload)).rejects.toThrow(/invalid stored delete request/);
    const bad = deleteProcessor(setup({ request: { filter: { must: [{ key: 'year', range: { lte: 'soon' } }] } } }).deps, payload);
    await expect(bad).rejects.toThrow(PermanentJobError);
  });
});
