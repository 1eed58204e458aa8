import { describe, expect, it } from 'vitest';
import { CreateCollectionSchema, ReindexRequestSchema, searchLayoutOf, warpLayoutOf, warpLayoutToWrite, type Collection } from './collection';

const create = (extra: Record<string, unknown> = {}) => CreateCollectionSchema.safeParse({ id: 'c', ...extra });

describe('search layout settings', () => {
  it('gives a new collection the WARP layout at 4 bits unless it asks for another', () => {
    expect(create().data?.search).toEqual({ layout: 'warp', bits: 4 });
    expect(create({ search: {} }).data?.search).toEqual({ layout: 'warp', bits: 4 });
    expect(create({ search: { bits: 2 } }).data?.search).toEqual({ layout: 'warp', bits: 2 });
    expect(create({ search: { layout: 'warp', bits: 2 } }).data?.search).toEqual({ layout: 'warp', bits: 2 });
    expect(create({ search: { layout: 'ivf' } }).data?.search).toEqual({ layout: 'ivf' });
  });

  it('refuses bad settings naming the field', () => {
    for (const [search, field] of [
      [{ layout: 'plaid' }, 'search.layout'],
      [{ layout: 'warp', bits: 3 }, 'search.bits'],
      [{ layout: 'ivf', bits: 4 }, 'search.bits'],
      [{ layout: 'ivf', nprobe: 4 }, 'search'],
      ['warp', 'search'],
    ] as const) {
      const r = create({ search });
      expect(r.success, JSON.stringify(search)).toBe(false);
      const paths = r.error!.issues.map((i) => ['search', ...i.path.slice(1).map(String)].join('.'));
      expect(paths, JSON.stringify(search)).toContain(field);
      expect(r.error!.issues.every((i) => i.path[0] === 'search')).toBe(true);
    }
  });

  it('reads a record stored without `search` (before WARP was the default) as the IVF path, never as WARP', () => {
    const old = { tenantId: 't', id: 'c' } as Pick<Collection, 'search'>;
    expect(warpLayoutOf(old)).toBeNull();
    expect(searchLayoutOf(old)).toBe('ivf');
    // what an old collection.json holds, parsed as the repository parses it (JSON, no schema defaults)
    const stored = JSON.parse(JSON.stringify({ tenantId: 't', id: 'c', model: 'm', dims: 96, maxDocTokens: 300, codec: { kind: 'fp16' }, codecVersion: 1, createdAt: 'x' })) as Collection;
    expect(searchLayoutOf(stored)).toBe('ivf');
    expect(searchLayoutOf({ search: { layout: 'ivf' } })).toBe('ivf');
    expect(warpLayoutOf({ search: { layout: 'warp', bits: 2 } })).toEqual({ layout: 'warp', bits: 2 });
    expect(searchLayoutOf({ search: { layout: 'warp', bits: 4 } })).toBe('warp');
  });
});

describe('re-index settings', () => {
  it('parses to a WARP layout (default 4 bits) and refuses anything else naming the field', () => {
    expect(ReindexRequestSchema.parse({}).search).toEqual({ layout: 'warp', bits: 4 });
    expect(ReindexRequestSchema.parse({ search: { bits: 2 } }).search).toEqual({ layout: 'warp', bits: 2 });
    for (const [body, field] of [[{ search: { layout: 'ivf' } }, 'search.layout'], [{ search: { bits: 3 } }, 'search.bits'], [{ extra: 1 }, '']] as const) {
      const r = ReindexRequestSchema.safeParse(body);
      expect(r.success, JSON.stringify(body)).toBe(false);
      if (field) expect(r.error!.issues.map((i) => i.path.join('.'))).toContain(field);
    }
  });

  it('the layout a segment is written with: the collection\'s own, or a re-index\'s once its epoch is fitted, for its codec version only', () => {
    const warp = { layout: 'warp', bits: 2 } as const;
    expect(warpLayoutToWrite({ search: { layout: 'warp', bits: 4 } }, 1)).toEqual({ search: { layout: 'warp', bits: 4 }, epoch: null });
    expect(warpLayoutToWrite({}, 1)).toBeNull();
    expect(warpLayoutToWrite({ search: { layout: 'ivf' } }, 1)).toBeNull();
    // asked, no epoch yet: nothing to write
    expect(warpLayoutToWrite({ search: { layout: 'ivf' }, reindex: { search: warp, codecVersion: 1, startedAt: 'x' } }, 1)).toBeNull();
    expect(warpLayoutToWrite({ search: { layout: 'ivf' }, reindex: { search: warp, codecVersion: 1, epoch: 1, startedAt: 'x' } }, 1)).toEqual({ search: warp, epoch: 1 });
    expect(warpLayoutToWrite({ reindex: { search: warp, codecVersion: 1, epoch: 1, startedAt: 'x' } }, 2)).toBeNull();
    // searches still read the IVF while the re-index runs
    expect(warpLayoutOf({ search: { layout: 'ivf' }, reindex: { search: warp, codecVersion: 1, epoch: 1, startedAt: 'x' } } as Pick<Collection, 'search'>)).toBeNull();
  });
});
