import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readSegment } from '@lateral/codec';
import type { CollectionManifest } from '@lateral/shared';
import { startServer, type Server } from '../apps/all-in-one/src/server';
import { loadCranfield } from '../scripts/lib/cranfield';
import { http, testConfig, until } from './helpers';

/**
 * Token pooling at ingest (`codec.poolFactor`) through the real pipeline (embedded Redis and S3,
 * the real ONNX model): a pooled collection stores ceil(m / 2) vectors per document of m tokens,
 * counts its documents exactly, re-ranks, and answers BM25 exactly as the unpooled collection
 * does (postings from the raw batch's terms), also after a merge (which copies the pooled rows, the
 * raw rows and the postings of its inputs).
 * poolFactor 1 writes the same bytes as no pooling. Bad values are a 400 naming the field.
 */
describe('token pooling in the pipeline', () => {
  const config = testConfig({ ENCODE_BATCH_DOCUMENTS: '40', MERGE_FACTOR: '4' });
  const cran = loadCranfield(path.resolve('data/cranfield'));
  const docs = cran.docs.filter((d) => d.text).slice(0, 160);
  const queries = cran.queries.slice(0, 6);
  let server: Server;
  const api = (method: string, url: string, body?: unknown) => http(server.url, method, url, body);

  beforeAll(async () => {
    server = await startServer(config, { quiet: true });
  });
  afterAll(async () => {
    await server?.stop();
  });

  async function ingestInto(id: string, codec: unknown) {
    const created = await api('POST', '/v1/collections', { id, codec });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    const ing = await api('POST', `/v1/collections/${id}/documents`, docs);
    await until(async () => ((await api('GET', ing.body.status)).body.state === 'done' ? true : null), 180_000);
    return (await api('GET', `/v1/collections/${id}`)).body;
  }

  const manifest = async (collectionId: string) => (await server.runtime.generations.manifest('default', collectionId)) as CollectionManifest;
  /** docId -> stored rows, and the poolFactor each segment records. */
  async function storedRows(collectionId: string) {
    const rows = new Map<string, number>();
    const factors: (number | undefined)[] = [];
    for (const ref of (await manifest(collectionId)).segments) {
      const r = readSegment((await server.runtime.store.get(ref.key))!, ref.key, await server.runtime.codecs.get('default', collectionId, ref.codecVersion));
      factors.push(r.codec.poolFactor);
      r.docIds.forEach((id, i) => rows.set(id, r.tokenOffsets[i + 1] - r.tokenOffsets[i]));
    }
    return { rows, factors };
  }

  async function rerank(collectionId: string) {
    const r = await api('POST', '/v1/rerank?wait=60', {
      collection: collectionId, topK: docs.length, scorer: { name: 'maxsim' },
      queries: queries.map((q) => ({ id: q.id, text: q.text, candidates: docs.map((d) => d.id) })),
    });
    expect(r.body.status, JSON.stringify(r.body)).toBe('completed');
    return r.body.result.results as { hits: { id: string; score: number }[]; missing: string[] }[];
  }

  async function bm25(collectionId: string) {
    const r = await api('POST', '/v1/search?wait=60', { collection: collectionId, mode: 'bm25', topK: 20, queries: queries.map((q) => ({ id: q.id, text: q.text })) });
    expect(r.body.status, JSON.stringify(r.body)).toBe('completed');
    return (r.body.result.results as { hits: { id: string; score: number }[] }[]).map((x) => x.hits.map((h) => [h.id, h.score.toFixed(6)]));
  }

  const top10 = (hits: { id: string }[]) => new Set(hits.slice(0, 10).map((h) => h.id));

  it('stores ceil(m / 2) vectors per document, counts documents exactly, re-ranks and keeps BM25 exact, before and after a merge', async () => {
    const plain = await ingestInto('plain', { kind: 'fp16' });
    const pooled = await ingestInto('pooled', { kind: 'fp16', poolFactor: 2 });
    expect(pooled.codec.poolFactor).toBe(2);
    expect(plain.documents).toBe(docs.length);
    expect(pooled.documents).toBe(docs.length);

    const check = async () => {
      const p = await storedRows('plain');
      const q = await storedRows('pooled');
      expect(p.factors.every((f) => f === undefined)).toBe(true);
      expect(q.factors.every((f) => f === 2)).toBe(true);
      expect(q.rows.size).toBe(docs.length);
      let m = 0;
      let k = 0;
      for (const d of docs) {
        const orig = p.rows.get(d.id)!;
        expect(orig).toBeGreaterThan(0);
        expect(q.rows.get(d.id), d.id).toBe(Math.ceil(orig / 2));
        m += orig;
        k += Math.ceil(orig / 2);
      }
      const described = (await api('GET', '/v1/collections/pooled')).body;
      expect(described.documents).toBe(docs.length);
      expect(described.tokens).toBe(k);
      expect((await api('GET', '/v1/collections/plain')).body.tokens).toBe(m);
      // the document keeps its original token count (encode time), not its stored rows
      expect((await api('GET', `/v1/collections/pooled/documents/${docs[0].id}`)).body.tokens).toBe(p.rows.get(docs[0].id));

      const ref = await rerank('plain');
      const got = await rerank('pooled');
      let overlap = 0;
      got.forEach((x, qi) => {
        expect(x.missing).toEqual([]);
        expect(x.hits).toHaveLength(docs.length);
        for (const h of x.hits) expect(Number.isFinite(h.score)).toBe(true);
        const a = top10(ref[qi].hits);
        overlap += [...top10(x.hits)].filter((id) => a.has(id)).length / 10;
      });
      // pooling changes scores, not the ranking wholesale (TREC DL 2019 / MiniLM: 0.91 at factor 2)
      expect(overlap / got.length).toBeGreaterThanOrEqual(0.6);
      // BM25 counts the documents' own terms, not their pooled rows: same hits, same scores
      expect(await bm25('pooled')).toEqual(await bm25('plain'));
    };
    await check();

    expect((await manifest('pooled')).segments).toHaveLength(4);
    const r = await api('POST', '/v1/collections/pooled/merge?wait=60');
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    expect(r.body).toMatchObject({ status: 'merged', committed: true, index: 'copied' });
    expect((await manifest('pooled')).segments).toHaveLength(1);
    await check();
  }, 600_000);

  it('poolFactor 1 writes the same segment bytes as no pooling', async () => {
    await ingestInto('one', { kind: 'fp16', poolFactor: 1 });
    const plain = await manifest('plain');
    const one = await manifest('one');
    expect(one.segments).toHaveLength(4);
    // same batches of 40 documents: byte-identical segments (whole-object CRC32C; batches commit in any order)
    const sums = (m: CollectionManifest) => m.segments.map((s) => `${s.checksum}:${s.bytes}:${s.tokens}`).sort();
    expect(sums(one)).toEqual(sums(plain));
    expect((await storedRows('one')).factors.every((f) => f === undefined)).toBe(true);
  }, 600_000);

  it('re-compression pools from the raw vectors: poolFactor 3 on an unpooled collection, BM25 unchanged', async () => {
    const rc = await api('POST', '/v1/collections/one/recompress', { codec: { kind: 'fp16', poolFactor: 3 } });
    expect(rc.status, JSON.stringify(rc.body)).toBe(202);
    await until(async () => {
      const c = (await api('GET', '/v1/collections/one')).body;
      return c.codecVersion === 2 && !c.pending ? c : null;
    }, 180_000);
    const p = await storedRows('plain');
    const q = await storedRows('one');
    expect(q.factors.every((f) => f === 3)).toBe(true);
    for (const d of docs) expect(q.rows.get(d.id), d.id).toBe(Math.ceil(p.rows.get(d.id)! / 3));
    expect((await api('GET', '/v1/collections/one')).body.documents).toBe(docs.length);
    expect(await bm25('one')).toEqual(await bm25('plain'));
    const got = await rerank('one');
    for (const x of got) expect(x.hits).toHaveLength(docs.length);
  }, 600_000);

  it('refuses a bad poolFactor, and poolFactor with side information, with a 400 naming the fields', async () => {
    for (const poolFactor of [0, 17, 1.5, '2']) {
      const r = await api('POST', '/v1/collections', { id: 'bad-pool', codec: { kind: 'fp16', poolFactor } });
      expect(r.status, JSON.stringify(r.body)).toBe(400);
      expect(r.body.details).toEqual([expect.objectContaining({ field: 'codec.poolFactor' })]);
    }
    const big = await api('POST', '/v1/collections', { id: 'bad-pool', codec: { kind: 'fp16', poolFactor: 17 } });
    expect(JSON.stringify(big.body)).toMatch(/16/);
    const side = await api('POST', '/v1/collections', { id: 'bad-pool', codec: { kind: 'eden', bits: 4, dims: 32, layout: 'cross', sideInfo: true, poolFactor: 2 } });
    expect(side.status).toBe(400);
    expect(side.body.message).toMatch(/codec\.poolFactor 2 cannot be combined with codec\.sideInfo/);
    expect(side.body.details.map((x: { field: string }) => x.field)).toEqual(['codec.poolFactor', 'codec.sideInfo']);
    const rc = await api('POST', '/v1/collections/plain/recompress', { codec: { kind: 'eden', bits: 4, sideInfo: true, poolFactor: 3 } });
    expect(rc.status).toBe(400);
    expect(rc.body.details.map((x: { field: string }) => x.field)).toEqual(['codec.poolFactor', 'codec.sideInfo']);
    expect((await api('GET', '/v1/collections/bad-pool')).status).toBe(404);
  });
});
