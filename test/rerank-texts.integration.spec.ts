import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { QueueName } from '@lateral/shared';
import { startServer, type Server } from '../apps/all-in-one/src/server';
import { loadCranfield } from '../scripts/lib/cranfield';
import { http, testConfig, until } from './helpers';

/**
 * Candidates as texts (issue 15): encoded by the encoder pool into the text cache, scored like the
 * same documents ingested into a collection, reused by later jobs; JSONL batch files; the
 * Cohere-compatible endpoint. Real Redis, S3 and ONNX (glove-ctx-100d).
 */
describe('text candidates, batches and the Cohere endpoint', () => {
  const config = testConfig({ ENCODE_BATCH_DOCUMENTS: '32', BATCH_CHUNK_ROWS: '3', BATCH_MAX_BYTES: '400000', MAX_DOCUMENT_BYTES: '20000' });
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
    // a built model that is not the collection's: well formed, refused by the collection's state (409)
    const wrongModel = await api('POST', '/v1/rerank', { collection: 'c', model: 'glove-static-100d', queries: [{ id: 'q', text: 'x', candidates: [{ text: 'y' }] }] });
    expect(wrongModel.status).toBe(409);
    expect(wrongModel.body.message).toContain('glove-static-100d');
  });

  const jsonl = (rows: unknown[]) => rows.map((r) => (typeof r === 'string' ? r : JSON.stringify(r))).join('\n') + '\n';
  const upload = (body: string, query = `?model=${config.DEFAULT_MODEL}&topK=5`) => api('POST', `/v1/batches${query}`, body, { 'content-type': 'application/jsonl' });
  const finished = (id: string) =>
    until(async () => {
      // Long-polled: answered once the batch is finished (or after 30 s, then asked again).
      const st = await api('GET', `/v1/batches/${id}?wait=30`);
      return ['completed', 'failed', 'cancelled'].includes(st.body.state) ? st : null;
    }, 120_000);

  it('a batch file with good and bad rows: a result line per row in input order, bad rows failing alone by line and custom_id', async () => {
    const good = (i: number) => ({ custom_id: `r${i}`, query: queries[i % 3].text, candidates: docs.slice(0, 6).map((d) => ({ id: d.id, text: d.text })) });
    const long = 'x'.repeat(config.MAX_DOCUMENT_BYTES + 1);
    const rows = [
      good(0),
      'this is not json',
      good(1),
      { query: 'no id', candidates: [{ text: 'a' }] },
      { custom_id: 'r0', query: 'duplicate', candidates: [{ text: 'a' }] },
      { custom_id: 'empty-query', query: '  ', candidates: [{ text: 'a' }] },
      { custom_id: 'too-many', query: 'q', candidates: Array.from({ length: 10_001 }, () => 'd1') },
      { custom_id: 'too-long', query: 'q', candidates: [{ text: long }] },
      good(2),
      { custom_id: 'by-id', query: 'q', candidates: ['d1'] },
      { ...good(4), custom_id: 'top2', top_k: 2 },
      { ...good(1), custom_id: 'top3', topK: 3 },
      { ...good(1), custom_id: 'both', topK: 2, top_k: 3 },
    ];
    const created = await upload(jsonl(rows), `?model=${config.DEFAULT_MODEL}&topK=5`);
    expect(created.status, JSON.stringify(created.body)).toBe(202);
    expect(created.headers.get('location')).toBe(`/v1/batches/${created.body.id}`);
    const st = await finished(created.body.id);
    expect(st.body.state, JSON.stringify(st.body)).toBe('completed');
    expect(st.body.counts).toEqual({ rows: rows.length, invalid: 8, completed: 5, failed: 8 });
    expect(st.body.progress.fraction).toBe(1);
    const res = await fetch(`${server.url}/v1/batches/${created.body.id}/results`);
    expect(res.status).toBe(200);
    const lines = (await res.text()).trim().split('\n').map((l) => JSON.parse(l));
    expect(lines.map((l) => l.line)).toEqual(rows.map((_, i) => i + 1));
    expect(lines.map((l) => l.custom_id)).toEqual(['r0', null, 'r1', null, 'r0', 'empty-query', 'too-many', 'too-long', 'r2', 'by-id', 'top2', 'top3', 'both']);
    expect(lines[1].error.message).toContain('line 2: not JSON');
    expect(lines[3].error.message).toContain('custom_id is missing');
    expect(lines[4].error.message).toContain('duplicate custom_id (first at line 1)');
    expect(lines[5].error.message).toContain('query must not be empty');
    expect(lines[6].error.message).toContain('at most 10000');
    expect(lines[7].error.message).toContain(`over MAX_DOCUMENT_BYTES (${config.MAX_DOCUMENT_BYTES})`);
    expect(lines[9].error.message).toContain('needs the batch to name a collection');
    // Good rows carry the same hits as the same query re-ranked on its own.
    for (const [i, li] of [[0, 0], [1, 2], [2, 8]] as const) {
      expect(lines[li].hits).toHaveLength(5);
      const one = await api('POST', '/v1/rerank?wait=60', { model: config.DEFAULT_MODEL, topK: 5, queries: [{ id: 'q', text: good(i).query, candidates: good(i).candidates }] });
      expect(lines[li].hits.map((h: { id: string }) => h.id)).toEqual(one.body.result.results[0].hits.map((h: { id: string }) => h.id));
    }
    // a row's hit count is topK, as on every route (top_k, its earlier spelling, still accepted)
    expect(lines[10].hits).toHaveLength(2);
    expect(lines[11].hits).toHaveLength(3);
    expect(lines[12].error.message).toContain('give topK only: top_k is its deprecated spelling');
    // Every text was encoded by an earlier test: the batch reuses them all.
    expect(st.body.texts.encoded).toBe(0);
    expect(st.body.texts.reused).toBeGreaterThan(0);
  });

  it('a batch can be cancelled; a file that is not JSONL or over BATCH_MAX_BYTES is refused naming the limit', async () => {
    const rows = Array.from({ length: 30 }, (_, i) => ({ custom_id: `c${i}`, query: `cancel me ${i}`, candidates: [{ text: `some text ${i}` }, { text: `other text ${i}` }] }));
    // The batch queue is paused while the batch is created and cancelled, so no chunk can finish first.
    const batchQueue = server.runtime.queues.get(QueueName.batch);
    await batchQueue.pause();
    const created = await upload(jsonl(rows));
    expect(created.status).toBe(202);
    const cancelled = await api('POST', `/v1/batches/${created.body.id}/cancel`);
    await batchQueue.resume();
    expect(cancelled.status).toBe(200);
    expect(cancelled.body.state).toBe('cancelled');
    const st = await finished(created.body.id);
    expect(st.body.state).toBe('cancelled');
    expect((await api('GET', `/v1/batches/${created.body.id}/results`)).status).toBe(409);
    expect((await api('POST', `/v1/batches/${created.body.id}/cancel`)).body.state).toBe('cancelled');

    const notJsonl = await upload('hello\nworld\n');
    expect(notJsonl.status).toBe(400);
    expect(notJsonl.body.message).toContain('not JSONL');
    const big = await upload(jsonl([{ custom_id: 'x', query: 'q', candidates: [{ text: 'y'.repeat(450_000) }] }]));
    expect(big.status).toBe(413);
    expect(big.body.message).toContain('BATCH_MAX_BYTES (400000 bytes)');
    expect((await upload(jsonl(rows), '?topK=5')).status).toBe(400);
    const unknownModel = await upload(jsonl(rows), '?model=nope-model');
    expect(unknownModel.status).toBe(400);
    expect(unknownModel.body.message).toContain("'nope-model'");
    expect((await api('GET', '/v1/batches/batch-none')).status).toBe(404);
    // `wait` on a batch's status: a bad value is a 400 naming it and its limit; a finished batch answers at once.
    for (const bad of ['abc', '-1', String(config.RERANK_MAX_WAIT_SECONDS + 1)]) {
      const res = await api('GET', `/v1/batches/${created.body.id}?wait=${bad}`);
      expect(res.status, bad).toBe(400);
      expect(res.body.message).toContain('RERANK_MAX_WAIT_SECONDS');
      expect(JSON.stringify(res.body.details)).toContain('wait');
    }
    const t = Date.now();
    expect((await api('GET', `/v1/batches/${created.body.id}?wait=20`)).body.state).toBe('cancelled');
    expect(Date.now() - t).toBeLessThan(5000);
  });

  it('a batch that names an upload runs over a collection with id candidates', async () => {
    const put = await fetch(`${server.url}/v1/uploads/by-key.jsonl`, {
      method: 'PUT',
      headers: { 'content-type': 'application/jsonl' },
      body: jsonl(queries.map((q, i) => ({ custom_id: `k${i}`, query: q.text, candidates: docs.map((d) => d.id) }))),
    });
    expect(put.status).toBe(201);
    expect(put.headers.get('location')).toBe('/v1/uploads/by-key.jsonl');
    const created = await api('POST', '/v1/batches', { input: 'by-key.jsonl', collection: 'c', topK: 3 });
    expect(created.status, JSON.stringify(created.body)).toBe(202);
    const st = await finished(created.body.id);
    expect(st.body.state, JSON.stringify(st.body)).toBe('completed');
    const lines = (await (await fetch(`${server.url}/v1/batches/${created.body.id}/results`)).text()).trim().split('\n').map((l) => JSON.parse(l));
    const ref = await api('POST', '/v1/rerank?wait=60', { collection: 'c', topK: 3, queries: queries.map(byId) });
    lines.forEach((l, i) => expect(l.hits).toEqual(ref.body.result.results[i].hits));
    // a well-formed name of an upload the caller does not have: 404
    expect((await api('POST', '/v1/batches', { input: 'none.jsonl', collection: 'c' })).status).toBe(404);
    // an object key is not an upload name, even one that exists
    expect((await api('POST', '/v1/batches', { input: 'tenants/default/uploads/by-key.jsonl', collection: 'c' })).status).toBe(400);
  });

  it('POST /v1/compat/cohere/rerank answers in Cohere\'s shape, the same order as /v1/rerank', async () => {
    const documents = docs.slice(0, 8).map((d, i) => (i % 2 ? d.text : { text: d.text, title: 'ignored' }));
    const res = await api('POST', '/v1/compat/cohere/rerank', { model: config.DEFAULT_MODEL, query: queries[0].text, documents, top_n: 3, return_documents: true });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(Object.keys(res.body).sort()).toEqual(['id', 'meta', 'results']);
    expect(res.body.results).toHaveLength(3);
    const ref = await api('POST', '/v1/rerank?wait=60', { model: config.DEFAULT_MODEL, topK: 3, queries: [{ id: 'q', text: queries[0].text, candidates: docs.slice(0, 8).map((d) => ({ text: d.text })) }] });
    const refHits = ref.body.result.results[0].hits as { id: string; score: number }[];
    res.body.results.forEach((r: { index: number; relevance_score: number; document: { text: string } }, k: number) => {
      expect(r.index).toBe(Number(refHits[k].id.slice(1)));
      expect(r.relevance_score).toBeCloseTo(refHits[k].score, 5);
      expect(r.document.text).toBe(docs[r.index].text);
    });
    const v2 = await api('POST', '/v1/compat/cohere/v2/rerank', { model: config.DEFAULT_MODEL, query: queries[0].text, documents: docs.slice(0, 8).map((d) => d.text) });
    expect(v2.status).toBe(200);
    expect(v2.body.results).toHaveLength(8);
    expect(v2.body.results[0].document).toBeUndefined();
    // Cohere's own model names map to the configured local model (COHERE_MODEL, else DEFAULT_MODEL), named in meta.model
    const cohereName = await api('POST', '/v1/compat/cohere/rerank', { model: 'rerank-english-v3.0', query: queries[0].text, documents: docs.slice(0, 8).map((d) => d.text), top_n: 3 });
    expect(cohereName.status, JSON.stringify(cohereName.body)).toBe(200);
    expect(cohereName.body.meta.model).toBe(config.DEFAULT_MODEL);
    expect(cohereName.body.results.map((r: { index: number }) => r.index)).toEqual(res.body.results.map((r: { index: number }) => r.index));
    expect(res.body.meta.model).toBe(config.DEFAULT_MODEL);
    const unknown = await api('POST', '/v1/compat/cohere/rerank', { model: 'english-v3.0', query: 'q', documents: ['a'] });
    expect(unknown.status).toBe(400);
    expect(unknown.body.message).toContain("'english-v3.0'");
    const empty = await api('POST', '/v1/compat/cohere/rerank', { model: config.DEFAULT_MODEL, query: 'q', documents: ['a', ''] });
    expect(empty.status).toBe(400);
    expect(JSON.stringify(empty.body.details)).toContain('documents.1');
    expect((await api('POST', '/v1/compat/cohere/rerank', { model: config.DEFAULT_MODEL, query: '', documents: ['a'] })).status).toBe(400);
    const doc = await api('GET', '/openapi.json');
    for (const p of ['/v1/batches', '/v1/batches/{id}', '/v1/batches/{id}/cancel', '/v1/batches/{id}/results', '/v1/compat/cohere/rerank']) expect(doc.body.paths[p], p).toBeDefined();
  });
});
