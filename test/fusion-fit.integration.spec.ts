import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEFAULT_HYBRID_LAMBDA } from '@lateral/shared';
import { ndcgAt } from '@lateral/scoring';
import { startServer, type Server } from '../apps/all-in-one/src/server';
import { loadCranfield } from '../scripts/lib/cranfield';
import { http, testConfig, until } from './helpers';

/**
 * POST /v1/collections/{id}/fusion/fit through HTTP, queues, S3, Redis and the workers: a small
 * judged Cranfield collection gets hybrid's fusion fitted on its judgments; the grid's figures
 * are those of real hybrid searches; the collection record keeps the winner; a later hybrid
 * search naming no weight fuses with it, one naming a weight keeps its own; bad input is a 400
 * naming the field, an unknown set a 404; DELETE goes back to the defaults.
 */
describe('fusion fit (real Redis, real S3 server, real ONNX model)', () => {
  const config = testConfig({ ENCODE_BATCH_DOCUMENTS: '100' });
  const cran = loadCranfield(path.resolve('data/cranfield'));
  const judgedQueries = cran.queries.slice(0, 24);
  const relevant = new Set(judgedQueries.flatMap((q) => [...(cran.qrels.get(q.id)?.keys() ?? [])]));
  const docs = cran.docs.filter((d) => d.text && (relevant.has(d.id) || Number(d.id) % 10 === 0)).slice(0, 300);
  const inCollection = new Set(docs.map((d) => d.id));
  const judged = judgedQueries
    .map((q) => ({ id: q.id, text: q.text, judgments: [...(cran.qrels.get(q.id) ?? new Map<string, number>())].filter(([doc]) => inCollection.has(doc)).map(([doc, grade]) => ({ doc, grade })) }))
    .filter((q) => q.judgments.some((j) => j.grade > 0));
  let server: Server;
  let judgmentsId: string;
  const api = (method: string, url: string, body?: unknown) => http(server.url, method, url, body);
  const search = async (mode: Record<string, unknown>, queries: { id: string; text: string }[], topK = 10) => {
    const r = await api('POST', '/v1/search?wait=60', { collection: 'fit', mode, topK, queries });
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    expect(r.body.status, JSON.stringify(r.body)).toBe('completed');
    return r.body.result as { mode: { lambda?: number; normalization?: string }; results: { queryId: string; hits: { id: string; score: number }[] }[] };
  };
  /** Mean nDCG@10 of a hybrid search over the judged queries, as the fit scores it. */
  const ndcgOf = async (mode: Record<string, unknown>) => {
    const res = await search(mode, judged.map((q) => ({ id: q.id, text: q.text })));
    const byId = new Map(res.results.map((r) => [r.queryId, r.hits.map((h) => h.id)]));
    return judged.reduce((s, q) => s + ndcgAt(byId.get(q.id)!, new Map(q.judgments.map((j) => [j.doc, j.grade])), 10), 0) / judged.length;
  };

  beforeAll(async () => {
    server = await startServer(config, { quiet: true });
    await api('POST', '/v1/collections', { id: 'fit' });
    const ing = await api('POST', '/v1/collections/fit/documents', docs);
    await until(async () => ((await api('GET', ing.body.status)).body.state === 'done' ? true : null), 240_000);
    const j = await api('POST', '/v1/collections/fit/judgments', { queries: judged });
    expect(j.status, JSON.stringify(j.body)).toBe(201);
    judgmentsId = j.body.judgmentsId;
  }, 300_000);
  afterAll(async () => {
    await server?.stop();
  });

  it('fits the weight on the judged queries: the grid, the parts and the default are the figures of real searches; the record keeps the best', async () => {
    expect(judged.length).toBeGreaterThanOrEqual(15);
    const r = await api('POST', '/v1/collections/fit/fusion/fit', { base: 'exhaustive' });
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    const fit = r.body;
    expect(fit).toMatchObject({ collection: 'fit', judgmentsId, queries: judged.length, skippedQueries: 0 });
    // 3 normalisations x 16 weights (each normalisation's default weight is in the default grid)
    expect(fit.grid).toHaveLength(48);
    const best = Math.max(...fit.grid.map((g: { 'ndcg@10': number }) => g['ndcg@10']));
    expect(fit.fusion['ndcg@10']).toBe(best);
    expect(fit.fusion).toMatchObject({ judgmentsId, base: 'exhaustive', depth: 100, queries: judged.length });
    expect(fit.grid).toContainEqual({ normalization: fit.fusion.normalization, lambda: fit.fusion.lambda, 'ndcg@10': best });
    // The best is never below either part alone (lambda 0 is the base; the fusion of a large weight nears BM25) nor the default.
    expect(best).toBeGreaterThanOrEqual(fit.default['ndcg@10']);
    expect(fit.default).toMatchObject({ normalization: 'minmax', lambda: DEFAULT_HYBRID_LAMBDA.minmax });
    // The figures are those of the service's own searches: the parts, the default and the winner.
    expect(fit.parts.base).toBeCloseTo(await ndcgOf({ name: 'exhaustive' }), 9);
    expect(fit.parts.bm25).toBeCloseTo(await ndcgOf({ name: 'bm25' }), 9);
    expect(fit.default['ndcg@10']).toBeCloseTo(await ndcgOf({ name: 'hybrid', base: 'exhaustive', normalization: 'minmax', lambda: DEFAULT_HYBRID_LAMBDA.minmax }), 9);
    expect(best).toBeCloseTo(await ndcgOf({ name: 'hybrid', base: 'exhaustive', normalization: fit.fusion.normalization, lambda: fit.fusion.lambda }), 9);
    const col = await api('GET', '/v1/collections/fit');
    expect(col.body.fusion).toEqual(fit.fusion);
  }, 300_000);

  it('a later hybrid search naming no weight fuses with the fitted one; a named weight still wins; DELETE goes back to the defaults', async () => {
    // A grid that cannot pick the service default: zscore only.
    const r = await api('POST', '/v1/collections/fit/fusion/fit', { judgments: judgmentsId, base: 'exhaustive', normalizations: ['zscore'], lambdas: [0.05, 2.5] });
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    expect(r.body.grid.map((g: { lambda: number }) => g.lambda)).toEqual([0.05, DEFAULT_HYBRID_LAMBDA.zscore, 2.5]);
    const fitted = r.body.fusion;
    expect(fitted.normalization).toBe('zscore');
    expect(fitted.lambdas).toEqual({ zscore: fitted.lambda });
    const q = [{ id: 'q', text: judged[0].text }];
    const byDefault = await search({ name: 'hybrid', base: 'exhaustive' }, q);
    expect(byDefault.mode).toMatchObject({ normalization: 'zscore', lambda: fitted.lambda });
    const explicit = await search({ name: 'hybrid', base: 'exhaustive', normalization: 'zscore', lambda: fitted.lambda }, q);
    expect(byDefault.results[0].hits).toEqual(explicit.results[0].hits);
    // the request's own weight wins (and names minmax, the default normalisation, with it)
    expect((await search({ name: 'hybrid', base: 'exhaustive', lambda: 0.123 }, q)).mode).toMatchObject({ normalization: 'minmax', lambda: 0.123 });
    // a named normalisation the fit did not try: the service default weight of that normalisation
    expect((await search({ name: 'hybrid', base: 'exhaustive', normalization: 'minmax' }, q)).mode).toMatchObject({ normalization: 'minmax', lambda: DEFAULT_HYBRID_LAMBDA.minmax });
    const del = await api('DELETE', '/v1/collections/fit/fusion');
    expect(del.status, JSON.stringify(del.body)).toBe(200);
    expect(del.body).toEqual({ collection: 'fit', fusion: null });
    expect((await api('GET', '/v1/collections/fit')).body.fusion).toBeUndefined();
    expect((await search({ name: 'hybrid', base: 'exhaustive' }, q)).mode).toMatchObject({ normalization: 'minmax', lambda: DEFAULT_HYBRID_LAMBDA.minmax });
  }, 300_000);

  it('bad input is a 400 naming the field; an unknown collection a 404; an unknown set or a collection without judgments a 409', async () => {
    for (const [body, field] of [
      [{ lambdas: [] }, 'lambdas'],
      [{ lambdas: [-1] }, 'lambdas.0'],
      [{ depth: 0 }, 'depth'],
      [{ base: 'bm25' }, 'base'],
      [{ normalizations: ['l2'] }, 'normalizations.0'],
      [{ judgments: '../x' }, 'judgments'],
      [{ lambda: 0.5 }, 'lambda'],
    ] as const) {
      const r = await api('POST', '/v1/collections/fit/fusion/fit', body);
      expect(r.status, JSON.stringify(body)).toBe(400);
      expect(JSON.stringify(r.body.details), JSON.stringify(body)).toContain(field);
    }
    const unknownSet = await api('POST', '/v1/collections/fit/fusion/fit', { judgments: 'js-nope' });
    expect(unknownSet.status).toBe(409);
    expect(unknownSet.body.message).toMatch(/^judgments: .*'js-nope'/);
    expect((await api('POST', '/v1/collections/nope/fusion/fit', {})).status).toBe(404);
    expect((await api('DELETE', '/v1/collections/nope/fusion')).status).toBe(404);
    await api('POST', '/v1/collections', { id: 'unjudged' });
    const none = await api('POST', '/v1/collections/unjudged/fusion/fit', {});
    expect(none.status).toBe(409);
    expect(none.body.message).toMatch(/no judgments/);
  }, 120_000);
});
