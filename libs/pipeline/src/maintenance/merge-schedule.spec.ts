import { afterEach, describe, expect, it, vi } from 'vitest';
import { QueueName, mergeDedupId, mergeJobId, type Collection, type CollectionManifest, type SegmentRef } from '@lateral/shared';
import type { JobQueues } from '@lateral/infra';
import { enqueueMerge, mergeDue, mergeJobOptions, mergePolicyFor } from './merge-schedule';
import type { MergePolicySettings } from './merge-policy';
import { strictMock, takeStrictMockViolations } from '../testing/strict-mock';

afterEach(() => expect(takeStrictMockViolations()).toEqual([]));

const collection = (over: Partial<Collection> = {}) => ({ tenantId: 't', id: 'c', codecVersion: 1, ...over }) as Collection;
const seg = (i: number, documents: number, over: Partial<SegmentRef> = {}): SegmentRef => ({ batchId: `b${i}`, codecVersion: 1, key: `k${i}`, documents, tokens: documents * 10, bytes: documents * 100, checksum: '0', ...over });
const manifest = (segments: SegmentRef[]) => ({ tenantId: 't', collectionId: 'c', generation: 9, codecVersion: 1, committedAt: '', segments, documents: 0 }) as CollectionManifest;
const policy: MergePolicySettings = { factor: 3, deletedFraction: 0.5, floorDocuments: 100, maxDocuments: 100_000, maxBytes: 1e12, maxSegments: 2 };

describe('mergeDue: whether the next merge job would find something to merge', () => {
  it('true once a tier holds factor segments, false below it', () => {
    expect(mergeDue(collection(), manifest([seg(0, 10), seg(1, 10), seg(2, 10)]), policy)).toBe(true);
    expect(mergeDue(collection(), manifest([seg(0, 10), seg(1, 10), seg(2, 500)]), policy)).toBe(false);
  });

  it('the segment bound (maxSegments) counts only for collections with a WARP search layout', () => {
    // Tier 0 holds two segments (below the factor 3); three segments are over a bound of 2, for WARP only.
    const m = manifest([seg(0, 10), seg(1, 10), seg(2, 5000)]);
    expect(mergeDue(collection(), m, policy)).toBe(false);
    expect(mergeDue(collection({ search: { layout: 'warp', bits: 4 } }), m, policy)).toBe(true);
    expect(mergePolicyFor(collection(), policy).maxSegments).toBe(0);
    expect(mergePolicyFor(collection({ search: { layout: 'warp', bits: 4 } }), policy)).toBe(policy);
  });

  it('segments of another codec version, a pending re-compression or no generation: nothing due', () => {
    const full = manifest([seg(0, 10), seg(1, 10), seg(2, 10)]);
    expect(mergeDue(collection({ codecVersion: 2 }), full, policy)).toBe(false);
    expect(mergeDue(collection({ pending: { codecVersion: 2, codec: {} as never, batches: [], startedAt: '' } }), full, policy)).toBe(false);
    expect(mergeDue(collection(), null, policy)).toBe(false);
    expect(mergeDue(collection(), manifest([]), policy)).toBe(false);
  });

  it('a deleted share past deletedFraction asks a rewrite of one segment', () => {
    expect(mergeDue(collection(), manifest([seg(0, 10, { tombstones: [0, 1, 2, 3, 4, 5] })]), policy)).toBe(true);
  });
});

describe('enqueueMerge: one pending merge per collection', () => {
  const added = () => {
    const add = vi.fn(async (_q: QueueName, jobId: string) => ({ id: jobId }));
    return { add, queues: strictMock<Pick<JobQueues, 'add'>>('queues', { add: add as unknown as JobQueues['add'] }) };
  };

  it('deduplicated by the collection, keeping the last request made while one runs; the job id names the generation asked on', async () => {
    const { add, queues } = added();
    expect(await enqueueMerge(queues, 't', 'c', 'commit', 12)).toBe(mergeJobId('t', 'c', 'commit', 12));
    expect(add).toHaveBeenCalledExactlyOnceWith(QueueName.merge, 't~c~merge~commit-g12', { op: 'merge', tenantId: 't', collectionId: 'c', trigger: 'commit' }, { deduplication: { id: 't~c~merge', keepLastIfActive: true } });
  });

  it('another collection, another tenant: another deduplication id', () => {
    expect(mergeDedupId('t', 'c')).not.toBe(mergeDedupId('t', 'd'));
    expect(mergeDedupId('t', 'c')).not.toBe(mergeDedupId('u', 'c'));
    expect(mergeJobOptions('t', 'd').deduplication).toEqual({ id: 't~d~merge', keepLastIfActive: true });
  });

  it('a busy merge asks again after a delay, under an id of its own', async () => {
    const { add, queues } = added();
    await enqueueMerge(queues, 't', 'c', 'api', 3, { delayMs: 30_000, suffix: '-busy1' });
    expect(add).toHaveBeenCalledExactlyOnceWith(QueueName.merge, 't~c~merge~api-g3-busy1', { op: 'merge', tenantId: 't', collectionId: 'c', trigger: 'api' }, { deduplication: { id: 't~c~merge', keepLastIfActive: true }, delay: 30_000 });
  });

  it('returns the id of the job that serves the request (a waiting one that absorbed it)', async () => {
    const add = vi.fn(async () => ({ id: 't~c~merge~commit-g4' }));
    const queues = strictMock<Pick<JobQueues, 'add'>>('queues', { add: add as unknown as JobQueues['add'] });
    expect(await enqueueMerge(queues, 't', 'c', 'commit', 7)).toBe('t~c~merge~commit-g4');
  });
});
