import { describe, expect, it } from 'vitest';
import { SearchModeSchema } from '@lateral/shared';
import { sumWarpListSizes, usesWarp } from './warp-search';

const mode = (m: unknown) => SearchModeSchema.parse(m);
const warp = { search: { layout: 'warp' as const, bits: 4 as const } };

describe('WARP routing: which searches run WARP, and the shards\' list sizes', () => {
  it('usesWarp: xtr and hybrid over xtr on a WARP collection, without explain; every other case the IVF path', () => {
    expect(usesWarp(warp, { mode: mode({ name: 'xtr' }), explain: false })).toBe(true);
    expect(usesWarp(warp, { mode: mode({ name: 'hybrid' }), explain: false })).toBe(true);
    expect(usesWarp(warp, { mode: mode({ name: 'hybrid', base: 'xtr', fusion: 'rrf' }), explain: false })).toBe(true);
    // explain names document tokens: the IVF path over the segments' tokens
    expect(usesWarp(warp, { mode: mode({ name: 'xtr' }), explain: true })).toBe(false);
    expect(usesWarp(warp, { mode: mode({ name: 'hybrid' }), explain: true })).toBe(false);
    for (const m of [{ name: 'hybrid', base: 'dense' }, { name: 'hybrid', base: 'exhaustive' }, { name: 'bm25' }, { name: 'dense' }, { name: 'mebert' }, { name: 'exhaustive' }])
      expect(usesWarp(warp, { mode: mode(m), explain: false }), JSON.stringify(m)).toBe(false);
    // a collection without the layout
    expect(usesWarp({}, { mode: mode({ name: 'xtr' }), explain: false })).toBe(false);
    expect(usesWarp({ search: undefined }, { mode: mode({ name: 'hybrid' }), explain: false })).toBe(false);
  });

  it('sumWarpListSizes: per epoch, every shard\'s sizes added; an epoch one shard lacks keeps the others\'; epochs ascending', () => {
    const summed = sumWarpListSizes([
      [{ epoch: 2, sizes: [1, 0, 3] }, { epoch: 0, sizes: [5, 5] }],
      [{ epoch: 2, sizes: [0, 4, 1] }],
      [],
    ]);
    expect(summed).toEqual([
      { epoch: 0, sizes: [5, 5] },
      { epoch: 2, sizes: [1, 4, 4] },
    ]);
    // the inputs are not modified
    const a = [{ epoch: 1, sizes: [1, 2] }];
    sumWarpListSizes([a, [{ epoch: 1, sizes: [3, 4] }]]);
    expect(a[0].sizes).toEqual([1, 2]);
    expect(sumWarpListSizes([])).toEqual([]);
    expect(() => sumWarpListSizes([[{ epoch: 1, sizes: [1, 2] }], [{ epoch: 1, sizes: [1] }]])).toThrow(/epoch 1: shards disagree on its centroid count \(2 and 1\)/);
  });
});
