import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startServer, type Server } from '../apps/all-in-one/src/server';
import { loadCranfield } from '../scripts/lib/cranfield';
import { http, testConfig, until } from './helpers';

/**
 * Candidates as texts (issue 15): encoded by the encoder pool into the text cache, scored like the
 * same documents ingested into a collection, reused by later jobs; JSONL batch files; the
 * Cohere-compatible endpoint. Real Redis, S3 and ONNX (glove-ctx-100d).
 */
describe('text candidates, batches and the Cohere endpoint', () => {
  const config = testConfig({ ENCODE_BATCH_DOCUMENTS: '32', BATCH_CHUNK_ROWS: '3', BATCH_MAX_BYTES: '200000' });
  const cran = loadCranfield(path.resolve('data/cranfield'));
  const docs = cran.docs.filter((d) => d.text).slice(0, 40);
  const queries = cran.queries.slice(0, 3);
  let server: Server;
  const api = (method: string, url: string, body?: unknown, headers?: Record<string, string>) => http(server.url, method, url, body, headers);

  beforeAll(async () => {
    server = await startServer(config, { quiet: true });
    // fp16 collection: the codec the text cache uses for requests without a collection too.
    expect((await api('POST', '/v1/collections', { id: 'c', codec: { kind: 'fp16' } })).status).toBe(201);
    const ing = await api('POST', '/v1/collections/c/documents', docs);
    await until(async () => ((await api('GET', ing.body.status)).body.state === 'done' ? true : null), 120_000);
  });
  afterAll(async () => {
    await server?.stop();
  });

  const byId = (q: (typeof queries)[number]) => ({ id: q.id, text: q.text, candidates: docs.map((d) => d.id) });
  const byText = (q: (typeof queries)[number]) => ({ id: q.id, text: q.text, candidates: docs.map((d) => ({ id: d.id, text: d.text })) });

  it('text candidates are re-ranked as the same documents ingested and re-ranked by id; a second job reuses every text', async () => {
    const ref = await api('POST', '/v1/rerank?wait=60', { collection: 'c', topK: docs.length, queries: queries.map(byId) });
    expect(ref.status, JSON.stringify(ref.body)).toBe(200);
    const first = await api('POST', '/v1/rerank?wait=60', { model: config.DEFAULT_MODEL, topK: docs.length, queries: queries.map(byText) });
    expect(first.status, JSON.stringify(first.body)).toBe(200);
    expect(first.body.status, JSON.stringify(first.body)).toBe('completed');
    expect(first.body.result.collection).toBeUndefined();
    expect(first.body.result.texts).toEqual({ candidates: docs.length * queries.length, encoded: docs.length, reused: 0 });
    ref.body.result.results.forEach((r: { queryId: string; hits: { id: string; score: number }[] }, qi: number) => {
      const t = first.body.result.results[qi];
      expect(t.queryId).toBe(r.queryId);
      expect(t.hits.map((h: { id: string }) => h.id)).toEqual(r.hits.map((h) => h.id));
      r.hits.forEach((h, i) => expect(Math.abs(t.hits[i].score - h.score)).toBeLessThan(1e-5));
    });

    // Same texts again, now mixed with ids of the collection: nothing is encoded.
    const mixed = queries.map((q) => ({ id: q.id, text: q.text, candidates: docs.map((d, i) => (i % 2 ? d.id : { id: d.id, text: d.text })) }));
    const second = await api('POST', '/v1/rerank?wait=60', { collection: 'c', topK: docs.length, queries: mixed });
    expect(second.status, JSON.stringify(second.body)).toBe(200);
    // The collection is fp16, so its texts live in the same fp16 text space as the request without one.
    expect(second.body.result.texts).toEqual({ candidates: (docs.length / 2) * queries.length, encoded: 0, reused: docs.length / 2 });
    ref.body.result.results.forEach((r: { hits: { id: string; score: number }[] }, qi: number) => {
      const t = second.body.result.results[qi];
      expect(t.hits.map((h: { id: string }) => h.id)).toEqual(r.hits.map((h) => h.id));
    });
  });

  it('a text without an id is named by its position; unknown model and bad candidates are 400s naming them', async () => {
    const res = await api('POST', '/v1/rerank?wait=60', { model: config.DEFAULT_MODEL, queries: [{ id: 'q', text: 'wing flutter', candidates: [{ text: 'flutter of a swept wing' }, { text: 'heat transfer in boundary layers' }] }] });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(res.body.result.results[0].hits.map((h: { id: string }) => h.id).sort()).toEqual(['#0', '#1']);
    const unknown = await api('POST', '/v1/rerank', { model: 'no-such-model', queries: [{ id: 'q', text: 'x', candidates: [{ text: 'y' }] }] });
    expect(unknown.status).toBe(400);
    expect(unknown.body.message).toContain("'no-such-model'");
    const noModel = await api('POST', '/v1/rerank', { queries: [{ id: 'q', text: 'x', candidates: [{ text: 'y' }] }] });
    expect(noModel.status).toBe(400);
    expect(JSON.stringify(noModel.body.details)).toContain('model');
    const idWithoutCollection = await api('POST', '/v1/rerank', { model: config.DEFAULT_MODEL, queries: [{ id: 'q', text: 'x', candidates: ['d1'] }] });
    expect(idWithoutCollection.status).toBe(400);
    expect(JSON.stringify(idWithoutCollection.body.details)).toContain('queries.0.candidates.0');
    const empty = await api('POST', '/v1/rerank', { model: config.DEFAULT_MODEL, queries: [{ id: 'q', text: 'x', candidates: [{ text: '' }] }] });
    expect(empty.status).toBe(400);
    const wrongModel = await api('POST', '/v1/rerank', { collection: 'c', model: 'glove-static-100d', queries: [{ id: 'q', text: 'x', candidates: [{ text: 'y' }] }] });
    expect(wrongModel.status).toBe(400);
    expect(wrongModel.body.message).toContain('glove-static-100d');
  });
});
