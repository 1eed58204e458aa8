import { describe, expect, it } from 'vitest';
import { mulberry32, SearchModeSchema } from '@lateral/shared';
import { fuse } from '@lateral/serving';
import { bestPoint, fusedTop } from '../libs/http-api/src/judgments/fusion-fit.service';

/**
 * The fusion fit (libs/http-api, which may not load @lateral/serving) fuses the two parts' hits
 * by document id with `fusedTop`; a hybrid search fuses them in the search job with `fuse`. Both
 * must give the same top 10, or the fit's figures would not be the searches' figures.
 */
describe('fusedTop (the fit) ranks as fuse (the search job)', () => {
  it('on random overlapping lists, every normalisation and several weights', () => {
    const r = mulberry32(11);
    for (let trial = 0; trial < 200; trial++) {
      const docs = 60 + Math.floor(r() * 60);
      const pick = (n: number) => {
        const ids = new Set<number>();
        while (ids.size < n) ids.add(Math.floor(r() * docs));
        return [...ids].map((doc) => ({ doc, score: r() * 10 - 2 })).sort((a, b) => b.score - a.score);
      };
      // 15+ hits each: equal fused scores (a part's lowest, imputed) stay below the top 10, where the two break ties differently
      const a = pick(15 + Math.floor(r() * 25));
      const b = pick(15 + Math.floor(r() * 25));
      const asHits = (l: typeof a) => l.map((x) => ({ key: x.doc, segment: 0, doc: x.doc, score: x.score }));
      const asIds = (l: typeof a) => l.map((x) => ({ id: `d${x.doc}`, score: x.score }));
      for (const normalization of ['minmax', 'zscore', 'none'] as const) {
        for (const lambda of [0.3, 0.7, 2]) {
          const mode = SearchModeSchema.parse({ name: 'hybrid', normalization, lambda });
          if (mode.name !== 'hybrid') throw new Error('not hybrid');
          const ref = fuse(asHits(a), asHits(b), mode, 10).map((h) => `d${h.doc}`);
          expect(fusedTop(asIds(a), asIds(b), lambda, normalization), `${trial} ${normalization} ${lambda}`).toEqual(ref);
        }
      }
    }
  });

  it('bestPoint: the highest figure; among equals the default, else the first', () => {
    const grid = [
      { normalization: 'minmax' as const, lambda: 0.2, 'ndcg@10': 0.5 },
      { normalization: 'minmax' as const, lambda: 0.7, 'ndcg@10': 0.5 },
      { normalization: 'zscore' as const, lambda: 0.3, 'ndcg@10': 0.4 },
    ];
    expect(bestPoint(grid, (p) => p.lambda === 0.7).lambda).toBe(0.7);
    expect(bestPoint(grid, () => false).lambda).toBe(0.2);
    expect(bestPoint([...grid, { normalization: 'none' as const, lambda: 1, 'ndcg@10': 0.51 }], (p) => p.lambda === 0.7).lambda).toBe(1);
  });
});
