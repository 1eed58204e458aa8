import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { s3Keys } from '@lateral/shared';
import { deserializeBm25Stats } from '@lateral/search';
import { startServer, type Server } from '../apps/all-in-one/src/server';
import { http, testConfig, until } from './helpers';

/**
 * BM25's analyser (SPEC 3.6) through HTTP, queues, S3 and the workers: a collection's
 * `bm25.analyzer` is fixed at creation ('english' by default: words, stop words, Porter stems;
 * 'pieces': the encoder's sub-word tokens), a bad one is a 400 naming the field, and search and
 * merges use the collection's analyser.
 */
describe('BM25 analysers (real Redis, real S3 server, real ONNX model)', () => {
  let server: Server;
  const config = testConfig({ ENCODE_BATCH_DOCUMENTS: '2' });
  const docs = [
    { id: 'runs', text: 'The runner was running in the races.' },
    { id: 'wings', text: 'Aircraft wings were tested in the wind tunnel.' },
    { id: 'layers', text: 'Boundary layers of supersonic flows.' },
    { id: 'cats', text: "The cat's whiskers and the dogs' tails." },
  ];
  const api = (method: string, url: string, body?: unknown) => http(server.url, method, url, body);
  const ingest = async (collection: string) => {
    const ing = await api('POST', `/v1/collections/${collection}/documents`, docs);
    expect(ing.status, JSON.stringify(ing.body)).toBe(202);
    await until(async () => (await api('GET', ing.body.status)).body.state === 'done', 120_000);
  };
  const bm25 = async (collection: string, text: string) => {
    const r = await api('POST', '/v1/search?wait=60', { collection, mode: 'bm25', topK: 10, queries: [{ id: 'q', text }] });
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    return r.body.result.results[0] as { hits: { id: string; score: number }[]; reason?: string };
  };

  beforeAll(async () => {
    server = await startServer(config, { quiet: true });
    expect((await api('POST', '/v1/collections', { id: 'words' })).status).toBe(201);
    expect((await api('POST', '/v1/collections', { id: 'pieces', bm25: { analyzer: 'pieces' } })).status).toBe(201);
    await ingest('words');
    await ingest('pieces');
  }, 240_000);
  afterAll(async () => {
    await server?.stop();
  });

  it("names the analyser in the collection: 'english' by default, 'pieces' when asked", async () => {
    expect((await api('GET', '/v1/collections/words')).body.bm25).toEqual({ analyzer: 'english' });
    expect((await api('GET', '/v1/collections/pieces')).body.bm25).toEqual({ analyzer: 'pieces' });
  });

  it('a bad analyser is a 400 naming bm25.analyzer', async () => {
    for (const bm25 of [{ analyzer: 'french' }, { analyzer: 3 }, { analyser: 'english' }]) {
      const r = await api('POST', '/v1/collections', { id: 'bad', bm25 });
      expect(r.status).toBe(400);
      expect(JSON.stringify(r.body)).toMatch(/bm25/);
    }
    const r = await api('POST', '/v1/collections', { id: 'bad', bm25: { analyzer: 'french' } });
    expect(r.body.details).toEqual([expect.objectContaining({ field: 'bm25.analyzer', message: expect.stringMatching(/english, pieces/) })]);
    expect((await api('GET', '/v1/collections/bad')).status).toBe(404);
  });

  it("'english' matches inflections by their stem and ignores stop words; 'pieces' matches surface tokens", async () => {
    // "runs" / "running" / "runner": Porter stems "run", "run", "runner"
    const words = await bm25('words', 'runs');
    expect(words.hits.map((h) => h.id)).toEqual(['runs']);
    expect((await bm25('words', 'wing tests')).hits.map((h) => h.id)).toEqual(['wings']);
    expect((await bm25('words', 'cats')).hits.map((h) => h.id)).toEqual(['cats']);
    // only stop words: nothing to search
    const stop = await bm25('words', 'the and of');
    expect(stop).toMatchObject({ hits: [], reason: expect.stringMatching(/no searchable terms/) });
    // the sub-word pieces of "the and of" are words of the documents: 'pieces' finds them
    expect((await bm25('pieces', 'the')).hits.length).toBeGreaterThan(0);
  });

  it("each committed generation has its live documents' BM25 statistics in S3, corrected by a delete", async () => {
    const g = (await api('GET', '/v1/collections/words')).body.generation as number;
    const read = async (generation: number) => {
      let bytes: Uint8Array | null = null;
      await until(async () => (bytes = await server.runtime.store.get(s3Keys.bm25Stats('default', 'words', generation))) !== null, 30_000);
      return deserializeBm25Stats(bytes!, 'stats').stats;
    };
    const before = await read(g);
    expect(before.documents).toBe(4);
    const del = await api('POST', '/v1/collections/words/documents/delete', { ids: ['wings'] });
    expect(del.status, JSON.stringify(del.body)).toBeLessThan(300);
    const after = await read((await api('GET', '/v1/collections/words')).body.generation);
    expect(after.documents).toBe(3);
    // "aircraft wings were tested in the wind tunnel": 6 analysed words left the sums
    expect(after.totalLength).toBe(before.totalLength - 6);
    expect((await bm25('words', 'wing tests')).hits).toEqual([]);
  });
});
