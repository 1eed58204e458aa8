import { describe, expect, it, vi } from 'vitest';
import type { CollectionManifest, HitDocumentFields, HitField } from '@lateral/shared';
import { expandCandidates, hitShaping } from './hit-documents';

const manifest: CollectionManifest = { tenantId: 't', collectionId: 'c', generation: 3, codecVersion: 1, committedAt: '2026-01-01T00:00:00.000Z', segments: [] };
const withPassages = { tenantId: 't', id: 'c', passages: { overlap: 0 } };
const plainCollection = { tenantId: 't', id: 'c' };

describe('expandCandidates', () => {
  const stored = new Set(['a#0', 'a#1', 'a#2', 'b', 'c#0', 'c']);
  const has = (id: string) => stored.has(id);

  it('replaces a parent id that is not stored by its passages, in order; keeps stored ids, unknown ids and texts', () => {
    expect(expandCandidates(['a', 'b', 'x', 'c'], has)).toEqual(['a#0', 'a#1', 'a#2', 'b', 'x', 'c']);
    expect(expandCandidates([{ id: 'a', score: 2 }, { text: 'free text' }], has)).toEqual([{ id: 'a#0', score: 2 }, { id: 'a#1', score: 2 }, { id: 'a#2', score: 2 }, { text: 'free text' }]);
  });
});

describe('hitShaping', () => {
  it('group parent keeps the best passage of each parent (ranked order), names it, then cuts to topK', async () => {
    const s = hitShaping(withPassages, { topK: 2, group: 'parent' }, 50);
    expect(s.depth).toBe(50);
    const results = [{ hits: [{ id: 'a#2', score: 0.9 }, { id: 'b', score: 0.8 }, { id: 'a#0', score: 0.7 }, { id: 'c#1', score: 0.6 }] }];
    await s.finish({}, manifest, results);
    expect(results[0].hits).toEqual([
      { id: 'a', score: 0.9, passage: 'a#2' },
      { id: 'b', score: 0.8 },
    ]);
  });

  it('without group, passage hits carry their parent and the list is cut to topK; a collection without passages is left alone', async () => {
    const s = hitShaping(withPassages, { topK: 2 }, 50);
    expect(s.depth).toBe(2);
    const r = [{ hits: [{ id: 'a#1', score: 1 }, { id: 'b', score: 0.5 }] }];
    await s.finish({}, manifest, r);
    expect(r[0].hits).toEqual([{ id: 'a#1', score: 1, parent: 'a' }, { id: 'b', score: 0.5 }]);

    const plain = hitShaping(plainCollection, { topK: 5, group: 'parent' }, 50);
    const p = [{ hits: [{ id: 'x#1', score: 1 }, { id: 'x#2', score: 0.5 }] }];
    await plain.finish({}, manifest, p);
    expect(p[0].hits).toEqual([{ id: 'x#1', score: 1 }, { id: 'x#2', score: 0.5 }]);
  });

  it('include reads the fields of each hit (a grouped hit: its best passage) once, and leaves ids it cannot find as they are', async () => {
    const hitFields = vi.fn(async (_m: CollectionManifest, ids: string[], include: readonly HitField[]) => {
      const out = new Map<string, HitDocumentFields>();
      for (const id of ids) if (id !== 'gone') out.set(id, { ...(include.includes('text') ? { text: `text of ${id}` } : {}), ...(id.includes('#') ? { parent: id.split('#')[0] } : {}) });
      return out;
    });
    const liveSet = vi.fn();
    const pending = vi.fn(async () => new Map([['new', 'ing-9']]));
    const s = hitShaping(withPassages, { topK: 10, group: 'parent', include: ['text'] }, 50);
    const r: { hits: { id: string; score: number }[]; missing?: string[]; pending?: string[] }[] = [{ hits: [{ id: 'a#1', score: 2 }, { id: 'gone', score: 1 }], missing: ['new', 'unknown'] }, { hits: [], missing: ['unknown'] }];
    await s.finish({ documents: { hitFields, liveSet, pending } }, manifest, r);
    expect(pending).toHaveBeenCalledExactlyOnceWith('t', 'c', manifest, ['new', 'unknown']);
    expect(r[0].pending).toEqual(['new']);
    expect(r[1].pending).toBeUndefined();
    expect(hitFields).toHaveBeenCalledExactlyOnceWith(manifest, ['a#1', 'gone'], ['text']);
    expect(r[0].hits).toEqual([
      { id: 'a', score: 2, passage: 'a#1', text: 'text of a#1' },
      { id: 'gone', score: 1 },
    ]);
    expect(liveSet).not.toHaveBeenCalled();
  });

  it('expand rewrites candidates in place from the live ids, only in a collection with passages', async () => {
    const liveSet = vi.fn(async () => ({ has: (id: string) => id === 'a#0' || id === 'a#1' }));
    const deps = { documents: { hitFields: vi.fn(), liveSet, pending: vi.fn() } };
    const queries = [{ candidates: ['a', 'b'] as unknown[] }];
    await hitShaping(withPassages, { topK: 1 }, 1).expand(deps, manifest, queries);
    expect(queries[0].candidates).toEqual(['a#0', 'a#1', 'b']);
    const untouched = [{ candidates: ['a'] as unknown[] }];
    await hitShaping(plainCollection, { topK: 1 }, 1).expand(deps, manifest, untouched);
    expect(untouched[0].candidates).toEqual(['a']);
    expect(liveSet).toHaveBeenCalledOnce();
  });
});
