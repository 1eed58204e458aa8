import { describe, expect, it } from 'vitest';
import { CreateCollectionSchema, searchLayoutOf, warpLayoutOf, type Collection } from './collection';

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
