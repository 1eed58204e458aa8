import { describe, expect, it } from 'vitest';
import { SearchRequestSchema, WARP_DEFAULT_NPROBE, withWarpDefaults } from './search';

const parse = (mode: unknown) => SearchRequestSchema.parse({ collection: 'c', queries: [{ id: 'q', text: 'x' }], ...(mode === undefined ? {} : { mode }) }).mode;

describe('withWarpDefaults', () => {
  it("gives mode xtr and hybrid over xtr WARP's nprobe where the request names none, and keeps a named one", () => {
    for (const raw of [undefined, 'xtr', { name: 'xtr' }, { name: 'xtr', exact: 4 }]) {
      const m = withWarpDefaults(parse(raw), raw);
      expect(m).toMatchObject({ name: 'xtr', nprobe: WARP_DEFAULT_NPROBE, kPrime: 1000 });
    }
    expect(withWarpDefaults(parse({ name: 'xtr', exact: 4 }), { name: 'xtr', exact: 4 })).toMatchObject({ exact: 4 });
    expect(withWarpDefaults(parse({ name: 'xtr', nprobe: 7 }), { name: 'xtr', nprobe: 7 })).toMatchObject({ nprobe: 7 });
    expect(withWarpDefaults(parse({ name: 'xtr', nprobe: 32 }), { name: 'xtr', nprobe: 32 })).toMatchObject({ nprobe: 32 });
    expect(withWarpDefaults(parse('hybrid'), 'hybrid')).toMatchObject({ name: 'hybrid', base: 'xtr', nprobe: WARP_DEFAULT_NPROBE });
    expect(withWarpDefaults(parse({ name: 'hybrid', nprobe: 3 }), { name: 'hybrid', nprobe: 3 })).toMatchObject({ nprobe: 3 });
    // hybrid over dense and the other modes are left as parsed
    const dense = parse({ name: 'hybrid', base: 'dense' });
    expect(withWarpDefaults(dense, { name: 'hybrid', base: 'dense' })).toBe(dense);
    const bm25 = parse('bm25');
    expect(withWarpDefaults(bm25, 'bm25')).toBe(bm25);
    // the schema's own default stays 32 (the IVF path)
    expect(parse(undefined)).toMatchObject({ nprobe: 32 });
  });
});
