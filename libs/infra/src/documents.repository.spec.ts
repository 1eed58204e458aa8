import { describe, expect, it, vi } from 'vitest';
import { batchInfoKey, s3Keys, toNdjson, type IngestBatchDocumentInfo, type CollectionManifest, type IngestDocument, type SegmentRef } from '@lateral/shared';
import { DocumentRepository } from './documents.repository';
import type { ObjectStore } from './object-store';

const T = 't';
const C = 'c';

/** An object store held in a Map (the repository only reads). */
function memoryStore(objects: Map<string, string>) {
  const get = vi.fn(async (key: string): Promise<Uint8Array | null> => (objects.has(key) ? new TextEncoder().encode(objects.get(key)) : null));
  const getJson = vi.fn(async (key: string): Promise<unknown> => (objects.has(key) ? JSON.parse(objects.get(key)!) : null));
  const list = async (prefix: string) => [...objects.keys()].filter((k) => k.startsWith(prefix)).sort().map((key) => ({ key, size: objects.get(key)!.length }));
  const store: Pick<ObjectStore, 'get' | 'getJson' | 'list'> = { get, getJson: getJson as unknown as ObjectStore['getJson'], list };
  return { store, getJson };
}

function batch(objects: Map<string, string>, batchId: string, docs: IngestDocument[], info?: Omit<IngestBatchDocumentInfo, 'batchId'>): SegmentRef {
  objects.set(s3Keys.batchDocuments(T, C, batchId), toNdjson(docs));
  if (info) objects.set(batchInfoKey(T, C, batchId), JSON.stringify({ batchId, ...info }));
  return { batchId, codecVersion: 1, key: `seg/${batchId}`, documents: info?.documents.length ?? docs.length, tokens: 0, bytes: 0, checksum: '0' };
}

const manifest = (generation: number, segments: SegmentRef[]): CollectionManifest => ({ tenantId: T, collectionId: C, generation, codecVersion: 1, committedAt: `2026-01-0${generation}T00:00:00Z`, segments });

describe('DocumentRepository', () => {
  it('reads a document back from the last live copy: text and metadata from documents.ndjson, tokens from info.json', async () => {
    const objects = new Map<string, string>();
    const a = batch(objects, 'b1', [{ id: 'x', text: 'old x', metadata: { v: 1 } }, { id: 'y', text: 'y text' }], {
      documents: [
        { id: 'x', line: 0, tokens: 3, truncated: false },
        { id: 'y', line: 1, tokens: 4, truncated: true, originalTokens: 900 },
      ],
    });
    const b = batch(objects, 'b2', [{ id: 'x', text: 'new x', metadata: { v: 2 } }], { documents: [{ id: 'x', line: 0, tokens: 5, truncated: false }] });
    const repo = new DocumentRepository(memoryStore(objects).store);
    const m = manifest(2, [{ ...a, tombstones: [0] }, b]);
    expect(await repo.get(m, 'x')).toEqual({
      id: 'x', collection: C, text: 'new x', metadata: { v: 2 }, tokens: 5, truncated: false, generation: 2, segment: { batchId: 'b2', key: 'seg/b2', codecVersion: 1 },
    });
    expect(await repo.get(m, 'y')).toMatchObject({ text: 'y text', metadata: null, tokens: 4, truncated: true, originalTokens: 900 });
    expect(await repo.get(m, 'nope')).toBeNull();
    // a later copy that is tombstoned (deleted) leaves the id dead, even without a tombstone on the older copy
    expect(await repo.get(manifest(3, [a, { ...b, tombstones: [0] }]), 'x')).toBeNull();
    expect((await repo.listIds(manifest(3, [a, { ...b, tombstones: [0] }]), 10)).ids).toEqual(['y']);
  });

  it('passages: a passage answers its slice and parent; the parent id answers the whole text and its passages', async () => {
    const objects = new Map<string, string>();
    const text = 'one two three four five';
    const s = batch(objects, 'b1', [{ id: 'p', text, metadata: { k: 1 } }], {
      documents: [
        { id: 'p#0', line: 0, tokens: 4, truncated: false, originalTokens: 9, parent: 'p', passage: 0, start: 0, end: 13 },
        { id: 'p#1', line: 0, tokens: 4, truncated: false, originalTokens: 9, parent: 'p', passage: 1, start: 8, end: 23 },
      ],
    });
    const repo = new DocumentRepository(memoryStore(objects).store);
    const m = manifest(1, [s]);
    expect(await repo.get(m, 'p#1')).toMatchObject({ id: 'p#1', text: 'three four five', parent: 'p', metadata: { k: 1 }, tokens: 4 });
    expect(await repo.get(m, 'p')).toMatchObject({ id: 'p', text, passages: ['p#0', 'p#1'], tokens: 8, originalTokens: 9, truncated: false });
    const fields = await repo.hitFields(m, ['p#0', 'p#0', 'gone'], ['text']);
    expect([...fields.entries()]).toEqual([['p#0', { text: 'one two three', parent: 'p' }]]);
    expect((await repo.liveSet(m)).has('p#1')).toBe(true);
  });

  it('a batch encoded before info.json: ids from documents.ndjson, tokens and truncation unknown', async () => {
    const objects = new Map<string, string>();
    const s = batch(objects, 'old', [{ id: 'a', text: 'alpha' }, { id: 'b', text: 'beta' }]);
    const repo = new DocumentRepository(memoryStore(objects).store);
    expect(await repo.get(manifest(1, [s]), 'b')).toMatchObject({ text: 'beta', tokens: null, truncated: null });
    expect(await repo.encodedInfo(T, C, 'old')).toBeNull();
  });

  it('lists live ids sorted, a page after an id, with more while others follow; reads each batch once', async () => {
    const objects = new Map<string, string>();
    const ids = ['k', 'b', 'z', 'a', 'm'];
    const refs = ids.map((id, i) => batch(objects, `b${i}`, [{ id, text: id }], { documents: [{ id, line: 0, tokens: 1, truncated: false }] }));
    const mem = memoryStore(objects);
    const repo = new DocumentRepository(mem.store);
    const m = manifest(1, refs);
    expect(await repo.listIds(m, 2)).toEqual({ ids: ['a', 'b'], more: true });
    expect(await repo.listIds(m, 2, 'b')).toEqual({ ids: ['k', 'm'], more: true });
    expect(await repo.listIds(m, 2, 'c')).toEqual({ ids: ['k', 'm'], more: true });
    expect(await repo.listIds(m, 2, 'm')).toEqual({ ids: ['z'], more: false });
    expect(await repo.listIds(m, 2, 'z')).toEqual({ ids: [], more: false });
    expect(mem.getJson).toHaveBeenCalledTimes(5);
  });

  it('pending: ids accepted by an ingestion whose batch is not committed (nor failed), newest first; passages by their parent', async () => {
    const objects = new Map<string, string>();
    const live = batch(objects, 'ing-1-00000', [{ id: 'a', text: 'a' }], { documents: [{ id: 'a', line: 0, tokens: 1, truncated: false }] });
    batch(objects, 'ing-2-00000', [{ id: 'b', text: 'b' }, { id: 'long', text: 'l' }]);
    batch(objects, 'ing-3-00000', [{ id: 'c', text: 'c' }]);
    batch(objects, 'ing-4-00000', [{ id: 'b', text: 'b again' }]);
    const rec = (n: number, at: string) => objects.set(s3Keys.ingestion(T, C, `ing-${n}`), JSON.stringify({ ingestionId: `ing-${n}`, createdAt: at, documents: 1, batches: [{ batchId: `ing-${n}-00000`, documents: 1 }] }));
    rec(1, '2026-01-01T00:00:00Z');
    rec(2, '2026-01-02T00:00:00Z');
    rec(3, '2026-01-03T00:00:00Z');
    rec(4, '2026-01-04T00:00:00Z');
    objects.set(s3Keys.batchFailure(T, C, 'ing-3-00000'), JSON.stringify({ batchId: 'ing-3-00000' }));
    const repo = new DocumentRepository(memoryStore(objects).store);
    const m = manifest(1, [live]);
    const p = await repo.pending(T, C, m, ['a', 'b', 'c', 'long#2', 'nope']);
    expect([...p.entries()].sort()).toEqual([
      ['b', 'ing-4'],
      ['long#2', 'ing-2'],
    ]);
    // only the newest uncommitted batch looked at
    expect([...(await repo.pending(T, C, m, ['b', 'long'], 1)).entries()]).toEqual([['b', 'ing-4']]);
    expect((await repo.pending(T, C, null, ['a'])).get('a')).toBe('ing-1');
    expect((await repo.pending(T, C, m, [])).size).toBe(0);
  });
});
