import { afterEach, describe, expect, it, vi } from 'vitest';
import { QueueName, refitJobId, type Collection, type CollectionManifest, type SegmentRef } from '@lateral/shared';
import type { JobQueues } from '@lateral/infra';
import { enqueueWarpRefit, warpRefitDue } from './refit.processor';
import { strictMock, takeStrictMockViolations } from '../testing/strict-mock';

afterEach(() => expect(takeStrictMockViolations()).toEqual([]));

/** A collection record as warpRefitDue reads it (the rest does not matter to it). */
const collection = (over: Partial<Collection> = {}) => ({ tenantId: 't', id: 'c', codecVersion: 1, search: { layout: 'warp', bits: 4 }, ...over }) as Collection;
const seg = (i: number, tokens: number, over: Partial<SegmentRef> = {}): SegmentRef => ({ batchId: `b${i}`, codecVersion: 1, key: `k${i}`, documents: 100, tokens, bytes: 1, checksum: '0', ...over });
const manifest = (segments: SegmentRef[]) => ({ tenantId: 't', collectionId: 'c', generation: 7, codecVersion: 1, committedAt: '', segments, documents: 0 }) as CollectionManifest;

/** Centroid counts per epoch, as the IVF repository would hold them. */
function ivf(ks: Record<number, number>) {
  const asked: number[] = [];
  return {
    asked,
    count: async (_t: string, _c: string, _v: number, epoch = 0) => {
      asked.push(epoch);
      return ks[epoch] ?? null;
    },
  };
}

describe('warpRefitDue: which refit job a committed generation queues', () => {
  it("the next epoch when PLAID's rule on the live tokens asks more centroids than the newest epoch has", async () => {
    // 20,000 tokens: 2,048 by the rule; epoch 0 has 1,024
    const repo = ivf({ 0: 1024 });
    expect(await warpRefitDue({ ivf: repo, ivfCentroids: 0 }, collection(), manifest([seg(0, 10_000), seg(1, 10_000)]))).toBe(1);
    expect(repo.asked).toEqual([0]);
    // the newest epoch named by any segment is the one compared (2 here, with 2,048 centroids: not due)
    const at2 = ivf({ 0: 1024, 2: 2048 });
    expect(await warpRefitDue({ ivf: at2, ivfCentroids: 0 }, collection(), manifest([seg(0, 10_000, { warpEpoch: 2 }), seg(1, 10_000, { warpEpoch: 2 })]))).toBeNull();
    expect(at2.asked).toEqual([2]);
    // deleted documents' tokens do not count: half of 20,000 deleted is under 16,384
    expect(await warpRefitDue({ ivf: ivf({ 0: 1024 }), ivfCentroids: 0 }, collection(), manifest([seg(0, 10_000), seg(1, 10_000, { tombstones: Array.from({ length: 100 }, (_, i) => i) })]))).toBeNull();
    // a fixed IVF_CENTROIDS never refits
    expect(await warpRefitDue({ ivf: ivf({ 0: 1024 }), ivfCentroids: 1024 }, collection(), manifest([seg(0, 100_000)]))).toBeNull();
  });

  it('the newest epoch when a segment of an older one is listed (committed during a refit, or a merge output after it); null when all are at it', async () => {
    const repo = ivf({ 0: 1024, 1: 2048 });
    expect(await warpRefitDue({ ivf: repo, ivfCentroids: 0 }, collection(), manifest([seg(0, 10_000, { warpEpoch: 1 }), seg(1, 100)]))).toBe(1);
    expect(await warpRefitDue({ ivf: repo, ivfCentroids: 0 }, collection(), manifest([seg(0, 10_000, { warpEpoch: 1 }), seg(1, 100, { warpEpoch: 1 })]))).toBeNull();
    // segments of another codec version are a re-compression's, not counted
    expect(await warpRefitDue({ ivf: repo, ivfCentroids: 0 }, collection(), manifest([seg(0, 10_000, { warpEpoch: 1 }), seg(1, 100, { codecVersion: 2 })]))).toBeNull();
  });

  it('never for a collection without WARP layouts, being re-compressed or re-indexed, with nothing committed, or without centroids', async () => {
    const m = manifest([seg(0, 100_000)]);
    const repo = ivf({ 0: 1024 });
    expect(await warpRefitDue({ ivf: repo, ivfCentroids: 0 }, collection({ search: { layout: 'ivf' } }), m)).toBeNull();
    expect(await warpRefitDue({ ivf: repo, ivfCentroids: 0 }, collection({ search: undefined }), m)).toBeNull();
    expect(await warpRefitDue({ ivf: repo, ivfCentroids: 0 }, collection({ pending: { codecVersion: 2, codec: {} as never, batches: [], startedAt: '' } }), m)).toBeNull();
    expect(await warpRefitDue({ ivf: repo, ivfCentroids: 0 }, collection({ reindex: {} as never }), m)).toBeNull();
    expect(await warpRefitDue({ ivf: repo, ivfCentroids: 0 }, collection(), null)).toBeNull();
    expect(await warpRefitDue({ ivf: repo, ivfCentroids: 0 }, collection(), manifest([]))).toBeNull();
    expect(await warpRefitDue({ ivf: ivf({}), ivfCentroids: 0 }, collection(), m)).toBeNull();
    // the due case of the same manifest, for contrast
    expect(await warpRefitDue({ ivf: repo, ivfCentroids: 0 }, collection(), m)).toBe(1);
  });
});

describe('enqueueWarpRefit after a commit: decided on what the commit job holds', () => {
  const queue = () => {
    const add = vi.fn(async (_q: QueueName, jobId: string) => ({ id: jobId }));
    return { add, queues: strictMock<Pick<JobQueues, 'add'>>('queues', { add: add as unknown as JobQueues['add'] }) };
  };
  const due = manifest([seg(0, 10_000), seg(1, 10_000)]); // 20,000 tokens: epoch 1 due over 1,024 centroids
  const settled = manifest([seg(0, 100), seg(1, 100)]);

  it('with the committed record and manifest: no read of either (unstubbed: a read fails), the same job as when both are read', async () => {
    const none = { collections: strictMock<{ get: never }>('collections'), generations: strictMock<{ manifest: never }>('generations') };
    const q = queue();
    expect(await enqueueWarpRefit({ ...none, ivf: ivf({ 0: 1024 }), ivfCentroids: 0 }, q.queues, 't', 'c', { collection: collection(), manifest: due })).toBe(refitJobId('t', 'c', 1));
    expect(q.add).toHaveBeenCalledExactlyOnceWith(QueueName.refit, refitJobId('t', 'c', 1), { tenantId: 't', collectionId: 'c', epoch: 1 }, { removeOnComplete: true, removeOnFail: true });

    // Read from the repositories instead (merge jobs): the same decision on the same state.
    const get = vi.fn(async () => collection());
    const read = vi.fn(async () => due);
    const r = queue();
    const deps = { collections: strictMock<{ get: typeof get }>('collections', { get }), generations: strictMock<{ manifest: typeof read }>('generations', { manifest: read }), ivf: ivf({ 0: 1024 }), ivfCentroids: 0 };
    expect(await enqueueWarpRefit(deps, r.queues, 't', 'c')).toBe(refitJobId('t', 'c', 1));
    expect(get).toHaveBeenCalledExactlyOnceWith('t', 'c');
    expect(read).toHaveBeenCalledExactlyOnceWith('t', 'c');
    expect(r.add.mock.calls).toEqual(q.add.mock.calls);
  });

  it('nothing due on the committed state: nothing queued, nothing read', async () => {
    const none = { collections: strictMock<{ get: never }>('collections'), generations: strictMock<{ manifest: never }>('generations') };
    const q = queue();
    expect(await enqueueWarpRefit({ ...none, ivf: ivf({ 0: 1024 }), ivfCentroids: 0 }, q.queues, 't', 'c', { collection: collection(), manifest: settled })).toBeNull();
    expect(await enqueueWarpRefit({ ...none, ivf: ivf({ 0: 1024 }), ivfCentroids: 0 }, q.queues, 't', 'c', { collection: collection({ search: { layout: 'ivf' } }), manifest: due })).toBeNull();
    expect(q.add).not.toHaveBeenCalled();
  });
});
