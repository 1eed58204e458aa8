import path from 'node:path';
import { Job } from 'bullmq';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { INLINE_JOB_BYTES, QueueName, jobIds, s3Keys } from '@lateral/shared';
import { startServer, type Server } from '../apps/all-in-one/src/server';
import { loadCranfield } from '../scripts/lib/cranfield';
import { http, testConfig, until } from './helpers';

/**
 * Small re-rank and search requests travel in the job's data and their small results in its
 * return value (no S3 objects); large ones keep S3 for both (INLINE_JOB_BYTES, issue 31 item 2).
 * Either way the answer is the same, POST ?wait and GET /{id} alike.
 */
describe('inline requests and results (real Redis, real S3 server, real ONNX model)', () => {
  let server: Server;
  const config = testConfig({ ENCODE_BATCH_DOCUMENTS: '50' });
  const docs = loadCranfield(path.resolve('data/cranfield')).docs.filter((d) => d.text.length > 0).slice(0, 60);
  const t = config.DEFAULT_TENANT;
  const api = (method: string, url: string, body?: unknown) => http(server.url, method, url, body);
  const exists = (key: string) => server.runtime.store.exists(key);
  const job = async (queue: QueueName, id: string) => (await Job.fromId(server.runtime.queues.get(queue), id))!;

  beforeAll(async () => {
    server = await startServer(config, { quiet: true });
    await api('POST', '/v1/collections', { id: 'inl' });
    const ing = await api('POST', '/v1/collections/inl/documents', docs.map((d) => ({ id: d.id, text: d.text })));
    await until(async () => (await api('GET', ing.body.status)).body.state === 'done', 120_000);
  }, 180_000);
  afterAll(async () => {
    await server?.stop();
  });

  it('a small search and re-rank: request in the job data, result in the return value, nothing in S3; GET answers the same', async () => {
    const sr = await api('POST', '/v1/search?wait=60', { collection: 'inl', mode: 'bm25', topK: 5, queries: [{ id: 'q', text: docs[0].text }] });
    expect(sr.body.status, JSON.stringify(sr.body)).toBe('completed');
    expect(sr.body.result.results[0].hits[0].id).toBe(docs[0].id);
    const sj = await job(QueueName.search, jobIds.search(t, sr.body.id));
    expect(sj.data.request).toBeDefined();
    expect(sj.returnvalue.result).toEqual(sr.body.result);
    expect(await exists(s3Keys.searchRequest(t, sr.body.id))).toBe(false);
    expect(await exists(s3Keys.searchResult(t, sr.body.id))).toBe(false);
    expect((await api('GET', `/v1/search/${sr.body.id}`)).body).toEqual(sr.body);

    const rr = await api('POST', '/v1/rerank?wait=60', { collection: 'inl', topK: 5, queries: [{ id: 'q', text: docs[1].text, candidates: docs.map((d) => d.id) }] });
    expect(rr.body.status, JSON.stringify(rr.body)).toBe('completed');
    expect(rr.body.result.results[0].hits[0].id).toBe(docs[1].id);
    const rj = await job(QueueName.rerank, jobIds.rerank(t, rr.body.id));
    expect(rj.data.request).toBeDefined();
    expect(await exists(s3Keys.rerankRequest(t, rr.body.id))).toBe(false);
    expect(await exists(s3Keys.rerankResult(t, rr.body.id))).toBe(false);
    expect((await api('GET', `/v1/rerank/${rr.body.id}?wait=5`)).body).toEqual(rr.body);
  });

  it('a large request and a large result go through S3, with the same hits as small ones', async () => {
    // Many queries: the request is over INLINE_JOB_BYTES, and so is the result (100 hits each).
    const queries = Array.from({ length: 40 }, (_, i) => ({ id: `q${i}`, text: docs[i % docs.length].text }));
    expect(Buffer.byteLength(JSON.stringify(queries))).toBeGreaterThan(INLINE_JOB_BYTES);
    const big = await api('POST', '/v1/search?wait=60', { collection: 'inl', mode: 'bm25', topK: 100, queries });
    expect(big.body.status, JSON.stringify(big.body).slice(0, 500)).toBe('completed');
    const bj = await job(QueueName.search, jobIds.search(t, big.body.id));
    expect(bj.data.request).toBeUndefined();
    expect(bj.returnvalue.result).toBeUndefined();
    expect(await exists(s3Keys.searchRequest(t, big.body.id))).toBe(true);
    expect(await exists(s3Keys.searchResult(t, big.body.id))).toBe(true);
    // The first query's hits equal a small search of that query alone.
    const one = await api('POST', '/v1/search?wait=60', { collection: 'inl', mode: 'bm25', topK: 100, queries: [queries[0]] });
    expect(big.body.result.results[0].hits).toEqual(one.body.result.results[0].hits);

    const rr = await api('POST', '/v1/rerank?wait=60', { collection: 'inl', topK: 60, queries: queries.map((q) => ({ ...q, candidates: docs.map((d) => d.id) })) });
    expect(rr.body.status, JSON.stringify(rr.body).slice(0, 500)).toBe('completed');
    expect(await exists(s3Keys.rerankRequest(t, rr.body.id))).toBe(true);
    expect(await exists(s3Keys.rerankResult(t, rr.body.id))).toBe(true);
    const small = await api('POST', '/v1/rerank?wait=60', { collection: 'inl', topK: 60, queries: [{ ...queries[2], candidates: docs.map((d) => d.id) }] });
    // Queries sharing a candidate list are scored as one group (one GEMM): the same scores up to float rounding.
    const a = rr.body.result.results[2].hits as { id: string; score: number }[];
    const b = small.body.result.results[0].hits as { id: string; score: number }[];
    expect(a.length).toBe(b.length);
    a.forEach((h, i) => expect(h.score).toBeCloseTo(b[i].score, 4));
    expect((await api('GET', `/v1/rerank/${rr.body.id}`)).body.result).toEqual(rr.body.result);
  });
});
