import { describe, expect, it } from 'vitest';
import { DEFAULT_HYBRID_LAMBDA, SearchModeSchema } from './search';
import { FusionFitRequestSchema, resolveHybridMode, withCollectionFusion } from './fusion';

const hybrid = (m: Record<string, unknown>) => {
  const parsed = SearchModeSchema.parse({ name: 'hybrid', ...m });
  if (parsed.name !== 'hybrid') throw new Error('not hybrid');
  return parsed;
};
const fitted = { normalization: 'zscore' as const, lambda: 0.4, lambdas: { zscore: 0.4, none: 0.15 } };

describe('resolveHybridMode: which fusion a hybrid search runs', () => {
  it('without a fitted fusion: minmax and its default weight; a named normalisation gets its default weight', () => {
    expect(resolveHybridMode(hybrid({}))).toMatchObject({ normalization: 'minmax', lambda: DEFAULT_HYBRID_LAMBDA.minmax });
    expect(resolveHybridMode(hybrid({ normalization: 'none' }))).toMatchObject({ normalization: 'none', lambda: DEFAULT_HYBRID_LAMBDA.none });
    expect(resolveHybridMode(hybrid({ lambda: 2 }))).toMatchObject({ normalization: 'minmax', lambda: 2 });
  });

  it("with one: the fitted normalisation and weight when the request names neither; that normalisation's fitted weight when it names only it; its own lambda always", () => {
    expect(resolveHybridMode(hybrid({}), fitted)).toMatchObject({ normalization: 'zscore', lambda: 0.4 });
    expect(resolveHybridMode(hybrid({ normalization: 'none' }), fitted)).toMatchObject({ normalization: 'none', lambda: 0.15 });
    // a normalisation the fit did not try: the service default weight
    expect(resolveHybridMode(hybrid({ normalization: 'minmax' }), fitted)).toMatchObject({ normalization: 'minmax', lambda: DEFAULT_HYBRID_LAMBDA.minmax });
    // a named lambda keeps meaning a min-max weight
    expect(resolveHybridMode(hybrid({ lambda: 0.9 }), fitted)).toMatchObject({ normalization: 'minmax', lambda: 0.9 });
    expect(resolveHybridMode(hybrid({ lambda: 0.9, normalization: 'zscore' }), fitted)).toMatchObject({ normalization: 'zscore', lambda: 0.9 });
    // RRF takes no weight
    expect(resolveHybridMode(hybrid({ fusion: 'rrf' }), fitted)).toMatchObject({ fusion: 'rrf', normalization: 'minmax' });
    expect(resolveHybridMode(hybrid({ fusion: 'rrf' }), fitted).lambda).toBeUndefined();
  });

  it('withCollectionFusion touches hybrid requests only', () => {
    const bm25 = { mode: SearchModeSchema.parse({ name: 'bm25' }) };
    expect(withCollectionFusion(bm25, { fusion: { ...fitted } })).toBe(bm25);
    expect(withCollectionFusion({ mode: hybrid({}) }, { fusion: fitted }).mode).toMatchObject({ normalization: 'zscore', lambda: 0.4 });
    expect(withCollectionFusion({ mode: hybrid({}) }, {}).mode).toMatchObject({ normalization: 'minmax', lambda: DEFAULT_HYBRID_LAMBDA.minmax });
  });

  it('the fit request: defaults, and bad fields named', () => {
    expect(FusionFitRequestSchema.parse({})).toMatchObject({ base: 'xtr', depth: 100, kPrime: 1000, nprobe: 32, k1: 0.9, b: 0.4 });
    const bad = FusionFitRequestSchema.safeParse({ lambdas: [1, -1], normalizations: [], depth: 1001 });
    expect(bad.success).toBe(false);
    expect(bad.error!.issues.map((i) => i.path.join('.')).sort()).toEqual(['depth', 'lambdas.1', 'normalizations']);
  });
});
