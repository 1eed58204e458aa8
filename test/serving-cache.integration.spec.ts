import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startServer, type Server } from '../apps/all-in-one/src/server';
import { loadCranfield } from '../scripts/lib/cranfield';
import { http, testConfig, until } from './helpers';

/**
 * Search and re-rank read the collection record and its current manifest from the serving cache
 * (libs/infra serving-cache.ts, issue 31 item 2), not from S3 each time. Read-your-writes through
 * the service: the first search or re-rank after an ingestion, a delete, a re-compression or a
 * collection deleted and created again is acknowledged sees that change, never the generation
 * before it. Every request here is made right after the acknowledgement, with a cache that has
 * just served the previous generation.
 */
describe('serving cache: read-your-writes (real Redis, real S3 server, real ONNX model)', () => {
  let server: Server;
  const config = testConfig({ ENCODE_BATCH_DOCUMENTS: '20' });
  const docs = loadCranfield(path.resolve('data/cranfield')).docs.filter((d) => d.text.length > 0).slice(0, 40);
  const api = (method: string, url: string, body?: unknown) => http(server.url, method, url, body);
  const ingest = async (items: { id: string; text: string }[]) => {
    const ing = await api('POST', '/v1/collections/rw/documents', items);
    expect(ing.status, JSON.stringify(ing.body)).toBe(202);
    await until(async () => (await api('GET', ing.body.status)).body.state === 'done', 120_000);
  };
  const search = async (mode: string, text: string) => {
    const r = await api('POST', '/v1/search?wait=60', { collection: 'rw', mode, topK: 100, queries: [{ id: 'q', text }] });
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    expect(r.body.status, JSON.stringify(r.body)).toBe('completed');
    return { generation: r.body.result.generation as number, ids: (r.body.result.results[0].hits as { id: string }[]).map((h) => h.id) };
  };
  const rerank = async (candidates: string[], text: string) => {
    const r = await api('POST', '/v1/rerank?wait=60', { collection: 'rw', topK: 100, queries: [{ id: 'q', text, candidates }] });
    expect(r.body.status, JSON.stringify(r.body)).toBe('completed');
    return r.body.result as { generation: number; results: { hits: { id: string }[]; missing: string[] }[] };
  };
  const generation = async () => (await api('GET', '/v1/collections/rw')).body.generation as number;

  beforeAll(async () => {
    server = await startServer(config, { quiet: true });
    expect((await api('POST', '/v1/collections', { id: 'rw', codec: { kind: 'eden', bits: 4 } })).status).toBe(201);
    await ingest(docs.slice(0, 20).map((d) => ({ id: d.id, text: d.text })));
  }, 180_000);
  afterAll(async () => {
    await server?.stop();
  });

  it('an acknowledged ingestion is seen by the next search and re-rank', async () => {
    const g = await generation();
    // The cache holds generation g (searched twice: the second from memory).
    for (let i = 0; i < 2; i++) expect((await search('bm25', 'flutter')).generation).toBe(g);
    const fresh = { id: 'rw-new', text: 'penguin penguin giraffe saxophone' };
    await ingest([fresh]);
    const g2 = await generation();
    expect(g2).toBeGreaterThan(g);
    const s = await search('bm25', 'penguin giraffe saxophone');
    expect(s.generation).toBe(g2);
    expect(s.ids[0]).toBe('rw-new');
    const xtr = await search('xtr', fresh.text);
    expect(xtr.generation).toBe(g2);
    expect(xtr.ids).toContain('rw-new');
    const rr = await rerank(['rw-new', docs[0].id], fresh.text);
    expect(rr.generation).toBe(g2);
    expect(rr.results[0].missing).toEqual([]);
  });

  it('an acknowledged delete is seen by the next search and re-rank', async () => {
    expect((await search('bm25', 'penguin giraffe saxophone')).ids[0]).toBe('rw-new');
    const del = await api('DELETE', '/v1/collections/rw/documents/rw-new');
    expect(del.status, JSON.stringify(del.body)).toBe(200);
    const s = await search('bm25', 'penguin giraffe saxophone');
    expect(s.generation).toBe(del.body.generation);
    expect(s.ids).not.toContain('rw-new');
    const rr = await rerank(['rw-new', docs[0].id], 'penguin giraffe saxophone');
    expect(rr.results[0].missing).toEqual(['rw-new']);
  });

  it('an acknowledged re-compression is seen by the next search (its generation, the new codec)', async () => {
    const before = await search('exhaustive', docs[3].text);
    const rc = await api('POST', '/v1/collections/rw/recompress', { codec: { kind: 'eden', bits: 2 } });
    expect(rc.status, JSON.stringify(rc.body)).toBe(202);
    const after = await until(async () => {
      const c = (await api('GET', '/v1/collections/rw')).body;
      return c.codecVersion === 2 && !c.pending ? c : null;
    }, 120_000);
    const s = await search('exhaustive', docs[3].text);
    expect(s.generation).toBe(after.generation);
    expect(s.generation).toBeGreaterThan(before.generation);
    expect(new Set(s.ids)).toEqual(new Set(before.ids));
  });

  it('a collection deleted and created again under the same id serves its new documents only', async () => {
    expect((await search('bm25', 'flutter')).ids.length).toBeGreaterThan(0);
    expect((await api('DELETE', '/v1/collections/rw')).status).toBeLessThan(300);
    expect((await api('POST', '/v1/search?wait=10', { collection: 'rw', queries: [{ id: 'q', text: 'flutter' }] })).status).toBe(404);
    expect((await api('POST', '/v1/collections', { id: 'rw' })).status).toBe(201);
    const empty = await search('bm25', 'flutter');
    expect(empty).toEqual({ generation: 0, ids: [] });
    await ingest([{ id: 'rw-again', text: 'flutter of a reborn collection' }]);
    const s = await search('exhaustive', 'flutter');
    expect(s.ids).toEqual(['rw-again']);
    expect(s.generation).toBe(await generation());
  });
});
