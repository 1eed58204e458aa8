import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startServer, type Server } from '../apps/all-in-one/src/server';
import { loadCranfield } from '../scripts/lib/cranfield';
import { http, testConfig, until } from './helpers';

/**
 * COMPRESSED_SCORING=decode: a scorer holds EDEN token-layout generations decoded to fp32 instead
 * of as the int8 rotated image, so MaxSim equals MaxSim on the decoded vectors (maxsim-topk, k = 1).
 */
describe('COMPRESSED_SCORING=decode', () => {
  const cran = loadCranfield(path.resolve('data/cranfield'));
  const docs = cran.docs.filter((d) => d.text).slice(0, 60);
  const queries = cran.queries.slice(0, 3);
  let server: Server;
  const api = (method: string, url: string, body?: unknown) => http(server.url, method, url, body);

  beforeAll(async () => {
    server = await startServer(testConfig({ COMPRESSED_SCORING: 'decode' }), { quiet: true });
  });
  afterAll(async () => {
    await server?.stop();
  });

  it('scores EDEN token-layout codes from decoded fp32 vectors', async () => {
    expect((await api('POST', '/v1/collections', { id: 'tok', codec: { kind: 'eden', bits: 4, layout: 'token' } })).status).toBe(201);
    const ing = await api('POST', '/v1/collections/tok/documents', docs);
    await until(async () => ((await api('GET', ing.body.status)).body.state === 'done' ? true : null), 120_000);
    const rank = async (scorer: unknown) => {
      const r = await api('POST', '/v1/rerank?wait=60', { collection: 'tok', topK: docs.length, scorer, queries: queries.map((q) => ({ id: q.id, text: q.text, candidates: docs.map((d) => d.id) })) });
      expect(r.body.status).toBe('completed');
      return r.body.result;
    };
    const maxsim = await rank({ name: 'maxsim' });
    expect(maxsim.vectors).toBe('fp32');
    const exact = await rank({ name: 'maxsim-topk', k: 1, reduce: 'sum' });
    maxsim.results.forEach((res: { hits: { id: string; score: number }[] }, qi: number) => {
      const ref = new Map<string, number>(exact.results[qi].hits.map((h: { id: string; score: number }) => [h.id, h.score]));
      expect(res.hits).toHaveLength(docs.length);
      for (const h of res.hits) expect(Math.abs(h.score - ref.get(h.id)!)).toBeLessThan(1e-4);
    });
  });
});
