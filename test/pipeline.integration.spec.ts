import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { roundToHalf } from '@lateral/codec';
import { getEncoder } from '@lateral/model';
import { maxsim } from '@lateral/scoring';
import { QueueName, jobIds } from '@lateral/shared';
import { startServer, type Server } from '../apps/all-in-one/src/server';
import { loadCranfield } from '../scripts/lib/cranfield';
import { http, testConfig, until } from './helpers';

/**
 * The whole pipeline on real services: HTTP -> S3 -> BullMQ/Redis -> ONNX encoder -> segments in
 * S3 -> manifest generations -> re-rank job -> result in S3, checked against MaxSim computed
 * directly in this process with the same model.
 */
describe('pipeline (real Redis, real S3 server, real ONNX model)', () => {
  let server: Server;
  const config = testConfig({ ENCODE_BATCH_DOCUMENTS: '64', JOB_ATTEMPTS: '3' });
  const cran = loadCranfield(path.resolve('data/cranfield'));
  const docs = cran.docs.slice(0, 300);

  beforeAll(async () => {
    server = await startServer(config, { quiet: true });
  });
  afterAll(async () => {
    await server?.stop();
  });

  const api = (method: string, url: string, body?: unknown, headers?: Record<string, string>) => http(server.url, method, url, body, headers);

  it('ingests 300 documents through HTTP and re-ranks exactly like in-process MaxSim', async () => {
    expect((await api('POST', '/v1/collections', { id: 'cran' })).status).toBe(201);
    const ndjson = docs.map((d) => JSON.stringify({ id: d.id, text: d.text, metadata: { source: 'cranfield' } })).join('\n');
    const ing = await api('POST', '/v1/collections/cran/documents', ndjson, { 'content-type': 'application/x-ndjson' });
    expect(ing.status).toBe(202);
    expect(ing.body.documents).toBe(300);
    expect(ing.body.batches).toBe(5);
    const status = await until(async () => {
      const s = await api('GET', ing.body.status);
      return s.body.state === 'done' ? s.body : null;
    }, 120_000);
    expect(status.stages).toMatchObject({ accepted: 300, encoded: 300, compressed: 300, indexed: 300, failed: 0 });
    const col = await api('GET', '/v1/collections/cran');
    expect(col.body).toMatchObject({ documents: 300, segments: 5, generation: 5 });
    expect(col.body.tokens).toBeGreaterThan(300 * 20);

    const queries = cran.queries.slice(0, 4);
    const candidates = [...docs.map((d) => d.id), 'no-such-doc'];
    const rr = await api('POST', '/v1/rerank?wait=60', {
      collection: 'cran',
      queries: queries.map((q) => ({ id: q.id, text: q.text, candidates })),
      scorer: 'maxsim',
      topK: 300,
    });
    expect(rr.status).toBe(200);
    expect(rr.body.status).toBe('completed');
    const results = rr.body.result.results as { queryId: string; hits: { id: string; score: number }[]; missing: string[] }[];

    // In-process reference: same model, same stored precision (raw vectors are kept at fp16).
    const collection = await server.runtime.collections.get(config.DEFAULT_TENANT, 'cran');
    const encoder = await getEncoder(path.resolve(config.MODELS_DIR, config.DEFAULT_MODEL), { executionProvider: 'cpu' });
    const encDocs = await encoder.encodeDocuments(docs.map((d) => d.text), { maxTokens: collection!.maxDocTokens });
    const encQueries = await encoder.encodeQueries(queries.map((q) => q.text));
    for (let qi = 0; qi < queries.length; qi++) {
      const q = encQueries[qi];
      const expected = docs
        .map((d, i) => ({ id: d.id, score: maxsim(q.vectors, q.length, roundToHalf(encDocs[i].vectors), encDocs[i].length, encoder.dims) }))
        .sort((a, b) => b.score - a.score || docs.findIndex((d) => d.id === a.id) - docs.findIndex((d) => d.id === b.id));
      const got = results[qi];
      expect(got.queryId).toBe(queries[qi].id);
      expect(got.missing).toEqual(['no-such-doc']);
      expect(got.hits.map((h) => h.id)).toEqual(expected.map((e) => e.id));
      for (let i = 0; i < expected.length; i++) expect(Math.abs(got.hits[i].score - expected[i].score)).toBeLessThan(1e-5);
    }

    const dense = await api('POST', '/v1/rerank', { collection: 'cran', queries: [{ id: 'q', text: queries[0].text, candidates }], scorer: 'dense', topK: 5 });
    expect(dense.status).toBe(202);
    const done = await api('GET', `/v1/rerank/${dense.body.id}?wait=30`);
    expect(done.body.status).toBe('completed');
    expect(done.body.result.results[0].hits).toHaveLength(5);
  });

  it('rejects bad documents with 400s that name the line or the documents, and accepts nothing', async () => {
    await api('POST', '/v1/collections', { id: 'bad' });
    const malformed = await api('POST', '/v1/collections/bad/documents', '{"id":"a","text":"ok"}\n{"id":"b",,}\n', { 'content-type': 'application/x-ndjson' });
    expect(malformed.status).toBe(400);
    expect(malformed.body.message).toMatch(/line 2/);
    const badJson = await api('POST', '/v1/collections/bad/documents', '[{"id": "a", "text": "x"},\n {"id": }]', { 'content-type': 'application/json' });
    expect(badJson.status).toBe(400);
    expect(badJson.body.message).toMatch(/line 2/);
    const invalid = await api('POST', '/v1/collections/bad/documents', [
      { id: 'empty', text: '   ' },
      { id: 'dup', text: 'a' },
      { id: 'dup', text: 'b' },
      { id: 'big', text: 'x'.repeat(config.MAX_DOCUMENT_BYTES + 1) },
    ]);
    expect(invalid.status).toBe(400);
    expect(invalid.body.message).toMatch(/"empty"/);
    expect(invalid.body.message).toMatch(/duplicate id/);
    expect(invalid.body.message).toMatch(/"big".*MAX_DOCUMENT_BYTES \(100000\)/);
    const col = await api('GET', '/v1/collections/bad');
    expect(col.body.stages.accepted ?? 0).toBe(0);
    expect((await api('POST', '/v1/collections/nope/documents', [{ id: 'a', text: 'b' }])).status).toBe(404);
    expect((await api('GET', '/v1/collections/nope')).status).toBe(404);
    const unknownScorer = await api('POST', '/v1/rerank', { collection: 'bad', queries: [{ id: 'q', text: 'x', candidates: ['a'] }], scorer: 'bm99' });
    expect(unknownScorer.status).toBe(400);
    expect(JSON.stringify(unknownScorer.body)).toMatch(/scorer/);
    expect((await api('POST', '/v1/rerank', { collection: 'nope', queries: [{ id: 'q', text: 'x', candidates: ['a'] }] })).status).toBe(404);
    expect((await api('POST', '/v1/collections', { id: 'bad' })).status).toBe(409);
    expect((await api('POST', '/v1/collections', { id: 'x', model: 'no-such-model' })).status).toBe(400);
  });

  it('fails a job whose model output does not match its manifest, without retry, naming both shapes', async () => {
    const { mkdtempSync, cpSync, readFileSync, writeFileSync } = await import('node:fs');
    const os = await import('node:os');
    // A model directory whose manifest lies about the output width.
    const modelsDir = path.resolve(config.MODELS_DIR);
    const liar = `liar-${Date.now()}`;
    cpSync(path.join(modelsDir, config.DEFAULT_MODEL), path.join(modelsDir, liar), { recursive: true });
    const m = JSON.parse(readFileSync(path.join(modelsDir, liar, 'manifest.json'), 'utf8'));
    writeFileSync(path.join(modelsDir, liar, 'manifest.json'), JSON.stringify({ ...m, name: liar, dims: 64 }));
    void mkdtempSync;
    void os;
    try {
      expect((await api('POST', '/v1/collections', { id: 'liar', model: liar })).status).toBe(201);
      const ing = await api('POST', '/v1/collections/liar/documents', [{ id: 'a', text: 'wing flutter at supersonic speed' }]);
      const status = await until(async () => {
        const s = await api('GET', ing.body.status);
        return s.body.state === 'failed' ? s.body : null;
      }, 30_000);
      expect(status.stages.failed).toBe(1);
      const job = await server.runtime.queues.get(QueueName.encode).getJob(jobIds.encode(config.DEFAULT_TENANT, 'liar', `${ing.body.ingestionId}-00000`));
      expect(job?.attemptsMade).toBe(1);
      expect(job?.failedReason).toMatch(/100/);
      expect(job?.failedReason).toMatch(/64/);
    } finally {
      const { rmSync } = await import('node:fs');
      rmSync(path.join(modelsDir, liar), { recursive: true, force: true });
    }
  });

  it('serves an OpenAPI document listing every route', async () => {
    const doc = await api('GET', '/openapi.json');
    expect(doc.status).toBe(200);
    expect(Object.keys(doc.body.paths)).toEqual(
      expect.arrayContaining(['/v1/collections', '/v1/collections/{id}', '/v1/collections/{id}/documents', '/v1/collections/{id}/ingestions/{ingestionId}', '/v1/rerank', '/v1/rerank/{id}', '/v1/health']),
    );
    const health = await api('GET', '/v1/health');
    expect(health.status).toBe(200);
    expect(health.body.redis.ok).toBe(true);
  });
});
