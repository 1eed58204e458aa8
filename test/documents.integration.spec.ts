import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { getEncoder, type TokenEncoder } from '@lateral/model';
import { MAX_DOCUMENT_LIST_LIMIT, QueueName, TRUNCATED_IDS_SHOWN } from '@lateral/shared';
import { startServer, type Server } from '../apps/all-in-one/src/server';
import { loadCranfield } from '../scripts/lib/cranfield';
import { http, testConfig, until } from './helpers';

/**
 * Documents in, documents out, through the real service (HTTP, queues, S3, the ONNX model): a
 * document read back by id, the live id listing, `include` on re-rank and search hits, truncated
 * documents named by the ingestion status, passages of long documents grouped by parent, and
 * ingest with `wait`. Token counts are checked against the same model run in this process.
 */
describe('documents (real Redis, real S3 server, real ONNX model)', () => {
  let server: Server;
  let encoder: TokenEncoder;
  const config = testConfig({ ENCODE_BATCH_DOCUMENTS: '8' });
  const cran = loadCranfield(path.resolve('data/cranfield'));
  const docs = cran.docs.filter((d) => d.text.length > 0).slice(0, 30).map((d, i) => ({ id: `doc ${d.id}`, text: d.text, metadata: { year: 1950 + i, tags: ['cran', `n${i % 3}`] } }));
  // ~5 Cranfield abstracts in one: well over the GloVe model's 180 tokens
  const longText = cran.docs.slice(100, 106).map((d) => d.text).join(' ');
  const api = (method: string, url: string, body?: unknown, headers?: Record<string, string>) => http(server.url, method, url, body, headers);
  const MAX = 180; // glove-ctx-100d's maxDocTokens

  beforeAll(async () => {
    server = await startServer(config, { quiet: true });
    encoder = await getEncoder(path.resolve(config.MODELS_DIR, config.DEFAULT_MODEL), { executionProvider: 'cpu' });
    expect(encoder.manifest.maxDocTokens).toBe(MAX);
  }, 60_000);
  afterAll(async () => {
    await server?.stop();
  });

  const storedTokens = async (text: string) => (await encoder.encodeDocuments([text], { maxTokens: MAX }))[0];

  describe('a collection without passages', () => {
    let firstIngestion: Record<string, unknown>;

    beforeAll(async () => {
      expect((await api('POST', '/v1/collections', { id: 'docs' })).status).toBe(201);
      // body form with `wait`: 200 with the final status
      const r = await api('POST', '/v1/collections/docs/documents', { documents: [...docs, { id: 'long', text: longText, metadata: { kind: 'long' } }], wait: 60 });
      expect(r.status, JSON.stringify(r.body)).toBe(200);
      firstIngestion = r.body;
    }, 120_000);

    it('ingest with wait answers 200 with the final status, counting and naming the truncated documents', async () => {
      const full = encoder.countTokens(longText, 'doc');
      expect(full).toBeGreaterThan(MAX);
      const truncatedHere = [...docs.map((d) => d.text), longText].filter((t) => encoder.countTokens(t, 'doc') > MAX).length;
      expect(firstIngestion).toMatchObject({
        state: 'done',
        documents: 31,
        batches: 4,
        stages: { accepted: 31, encoded: 31, compressed: 31, indexed: 31, failed: 0 },
        encodedBatches: 4,
      });
      const truncated = firstIngestion.truncated as { documents: number; ids: string[] };
      expect(truncated.documents).toBe(truncatedHere);
      expect(truncated.ids).toContain('long');
      expect(truncated.ids.length).toBe(Math.min(truncatedHere, TRUNCATED_IDS_SHOWN));
      // GET answers the same
      const again = await api('GET', String(firstIngestion.status));
      expect(again.body).toMatchObject({ state: 'done', truncated });
    });

    it('reads a document back by id: text, metadata, stored tokens, truncation, generation and segment', async () => {
      const col = await api('GET', '/v1/collections/docs');
      const d = docs[3];
      const r = await api('GET', `/v1/collections/docs/documents/${encodeURIComponent(d.id)}`);
      expect(r.status).toBe(200);
      const enc = await storedTokens(d.text);
      expect(r.body).toMatchObject({ id: d.id, collection: 'docs', text: d.text, metadata: d.metadata, tokens: enc.length, truncated: enc.truncated, generation: col.body.generation });
      expect(r.body.segment.batchId.startsWith(String(firstIngestion.ingestionId))).toBe(true);
      expect(r.body.segment.key).toContain(r.body.segment.batchId);

      const long = await api('GET', '/v1/collections/docs/documents/long');
      const encLong = await storedTokens(longText);
      expect(encLong.truncated).toBe(true);
      expect(long.body).toMatchObject({ text: longText, metadata: { kind: 'long' }, truncated: true, tokens: encLong.length, originalTokens: encoder.countTokens(longText, 'doc') });
      expect(long.body.tokens).toBeLessThanOrEqual(MAX);
    });

    it('an unknown document id is a 404 naming it', async () => {
      const r = await api('GET', `/v1/collections/docs/documents/${encodeURIComponent('no such doc')}`);
      expect(r.status).toBe(404);
      expect(r.body.message).toContain("'no such doc'");
      expect((await api('GET', '/v1/collections/nope/documents/x')).status).toBe(404);
    });

    it('right after a 202 the new ingestion is reported as accepted, not as unknown; re-ingesting a document replaces it and the listing counts it once', async () => {
      const changed = { id: docs[0].id, text: 'supersonic flutter of a swept wing', metadata: { year: 2000 } };
      const r = await api('POST', '/v1/collections/docs/documents', [changed, { id: 'extra', text: 'heat transfer in a laminar boundary layer' }]);
      expect(r.status).toBe(202);
      expect(r.headers.get('location')).toBe(r.body.status);
      const st = await api('GET', r.body.status);
      expect(st.status).toBe(200);
      expect(['processing', 'done']).toContain(st.body.state);
      expect(st.body.stages.accepted).toBe(2);
      expect((await api('GET', `/v1/collections/docs/ingestions/ing-${'0'.repeat(8)}-0000-0000-0000-000000000000`)).status).toBe(404);
      // wait on it through the query parameter: the same 200 shape
      const w = await api('POST', '/v1/collections/docs/documents?wait=60', [{ id: 'extra2', text: 'shock wave interaction' }]);
      expect(w.status).toBe(200);
      expect(w.body).toMatchObject({ state: 'done', documents: 1, truncated: { documents: 0, ids: [] } });
      // ingestions finish in their own order: wait until the first one is in too
      const deadline = Date.now() + 60_000;
      while ((await api('GET', r.body.status)).body.state !== 'done' && Date.now() < deadline) await new Promise((res) => setTimeout(res, 100));

      const doc = await api('GET', `/v1/collections/docs/documents/${encodeURIComponent(changed.id)}`);
      expect(doc.body).toMatchObject({ text: changed.text, metadata: changed.metadata });
      expect(doc.body.segment.batchId.startsWith(r.body.ingestionId)).toBe(true);

      // every live id once, sorted, over pages of 7 with opaque cursors
      const seen: string[] = [];
      let cursor: string | undefined;
      let pages = 0;
      do {
        const page = await api('GET', `/v1/collections/docs/documents?limit=7${cursor ? `&cursor=${cursor}` : ''}`);
        expect(page.status).toBe(200);
        expect(page.body.documents.length).toBeLessThanOrEqual(7);
        seen.push(...page.body.documents);
        cursor = page.body.nextCursor;
        pages++;
      } while (cursor);
      const expected = [...new Set([...docs.map((d) => d.id), 'long', 'extra', 'extra2'])].sort();
      expect(seen).toEqual(expected);
      expect(pages).toBe(Math.ceil(expected.length / 7));
      const col = await api('GET', '/v1/collections/docs');
      expect(col.body.documents).toBe(expected.length);
      const all = await api('GET', '/v1/collections/docs/documents');
      expect(all.body).toMatchObject({ collection: 'docs', generation: col.body.generation, documents: expected });
      expect(all.body.nextCursor).toBeUndefined();
    }, 120_000);

    it('bad limit or cursor: 400 naming the field and the limit', async () => {
      for (const bad of ['0', '-1', '1.5', 'abc', String(MAX_DOCUMENT_LIST_LIMIT + 1)]) {
        const r = await api('GET', `/v1/collections/docs/documents?limit=${bad}`);
        expect(r.status, bad).toBe(400);
        expect(r.body.details[0].field).toBe('limit');
        expect(r.body.message).toContain(String(MAX_DOCUMENT_LIST_LIMIT));
      }
      for (const bad of ['%%%', 'bm90LWpzb24', Buffer.from('{"x":1}').toString('base64url')]) {
        const r = await api('GET', `/v1/collections/docs/documents?cursor=${bad}`);
        expect(r.status, bad).toBe(400);
        expect(r.body.details[0].field).toBe('cursor');
      }
      const w = await api('POST', '/v1/collections/docs/documents?wait=100000', [{ id: 'x', text: 'y' }]);
      expect(w.status).toBe(400);
      expect(w.body.details[0].field).toBe('wait');
      expect((await api('GET', '/v1/collections/docs/documents/x')).status).toBe(404); // nothing of that request was accepted
    });

    it('re-rank and search hits carry text and metadata with include; an unknown include value is a 400 naming it', async () => {
      const q = cran.queries[0];
      const candidates = [...docs.map((d) => d.id), 'long', 'missing-id'];
      const rr = await api('POST', '/v1/rerank?wait=60', { collection: 'docs', topK: 5, include: ['text', 'metadata'], queries: [{ id: q.id, text: q.text, candidates }] });
      expect(rr.status, JSON.stringify(rr.body)).toBe(200);
      const plain = await api('POST', '/v1/rerank?wait=60', { collection: 'docs', topK: 5, queries: [{ id: q.id, text: q.text, candidates }] });
      const hits = rr.body.result.results[0].hits as { id: string; score: number; text: string; metadata: unknown }[];
      // the same ranking and scores as without include, plus the fields
      expect(hits.map((h) => [h.id, h.score])).toEqual(plain.body.result.results[0].hits.map((h: { id: string; score: number }) => [h.id, h.score]));
      expect(plain.body.result.results[0].hits[0].text).toBeUndefined();
      expect(hits).toHaveLength(5);
      for (const h of hits) {
        const doc = (await api('GET', `/v1/collections/docs/documents/${encodeURIComponent(h.id)}`)).body;
        expect(h.text).toBe(doc.text);
        expect(h.metadata).toEqual(doc.metadata);
      }
      expect(rr.body.result.results[0].missing).toEqual(['missing-id']);
      expect(rr.body.result.results[0].pending).toBeUndefined();

      // include and group read the collection's documents: with text candidates in the request they are a 400 naming the field
      const mixed = await api('POST', '/v1/rerank?wait=60', { collection: 'docs', include: ['text'], queries: [{ id: q.id, text: q.text, candidates: [...candidates, { id: 'free', text: 'a free text candidate about wings' }] }] });
      expect(mixed.status, JSON.stringify(mixed.body)).toBe(400);
      expect(mixed.body.details[0].field).toBe('include');

      const only = await api('POST', '/v1/rerank?wait=60', { collection: 'docs', topK: 2, include: ['metadata'], queries: [{ id: q.id, text: q.text, candidates }] });
      for (const h of only.body.result.results[0].hits) {
        expect(h.text).toBeUndefined();
        expect(h).toHaveProperty('metadata');
      }

      const sr = await api('POST', '/v1/search?wait=60', { collection: 'docs', mode: 'bm25', topK: 3, include: ['text'], queries: [{ id: q.id, text: q.text }] });
      expect(sr.status, JSON.stringify(sr.body)).toBe(200);
      const shits = sr.body.result.results[0].hits as { id: string; text: string; metadata?: unknown }[];
      expect(shits.length).toBe(3);
      for (const h of shits) {
        expect(h.text).toBe((await api('GET', `/v1/collections/docs/documents/${encodeURIComponent(h.id)}`)).body.text);
        expect(h.metadata).toBeUndefined();
      }

      for (const [url, body] of [
        ['/v1/rerank', { collection: 'docs', include: ['text', 'vectors'], queries: [{ id: 'q', text: 'x', candidates: ['a'] }] }],
        ['/v1/search', { collection: 'docs', include: ['body'], queries: [{ id: 'q', text: 'x' }] }],
        ['/v1/search', { collection: 'docs', group: 'children', queries: [{ id: 'q', text: 'x' }] }],
      ] as const) {
        const r = await api('POST', url, body);
        expect(r.status, JSON.stringify(r.body)).toBe(400);
        expect(r.body.details.map((d: { field: string }) => d.field).join(' ')).toMatch(/include|group/);
        expect(r.body.message + JSON.stringify(r.body.details)).toMatch(/text, metadata|'parent'/);
      }
    }, 120_000);
  });

  describe('deletes', () => {
    it('a deleted document is not read back nor listed; ingested again, it is', async () => {
      const del = await api('DELETE', '/v1/collections/docs/documents/extra?wait=30');
      expect(del.status, JSON.stringify(del.body)).toBe(200);
      const gone = await api('GET', '/v1/collections/docs/documents/extra');
      expect(gone.status).toBe(404);
      expect(gone.body.message).toContain("'extra'");
      const list = await api('GET', '/v1/collections/docs/documents?limit=1000');
      expect(list.body.documents).not.toContain('extra');
      expect(list.body.documents).toContain('extra2');
      expect(list.body.documents.length).toBe((await api('GET', '/v1/collections/docs')).body.documents);
      const again = await api('POST', '/v1/collections/docs/documents?wait=60', [{ id: 'extra', text: 'a boundary layer again' }]);
      expect(again.status).toBe(200);
      expect((await api('GET', '/v1/collections/docs/documents/extra')).body).toMatchObject({ id: 'extra', text: 'a boundary layer again', metadata: null });
    }, 120_000);
  });

  describe('accepted, not live yet', () => {
    it('right after a 202, the ingestion answers 200 (not 404) and a document it accepted is a 404 naming that ingestion', async () => {
      const encode = server.runtime.queues.get(QueueName.encode);
      await encode.pause(); // deterministic: nothing of this ingestion is encoded until resumed
      let statusUrl = '';
      try {
        const r = await api('POST', '/v1/collections/docs/documents', [{ id: 'later', text: 'wing flutter at transonic speed' }]);
        statusUrl = r.body.status;
        expect(r.status).toBe(202);
        const st = await api('GET', r.body.status);
        expect(st.status).toBe(200);
        expect(st.body).toMatchObject({ state: 'processing', stages: { accepted: 1, encoded: 0, indexed: 0 }, encodedBatches: 0, truncated: { documents: 0, ids: [] } });
        const doc = await api('GET', '/v1/collections/docs/documents/later');
        expect(doc.status).toBe(404);
        expect(doc.body.message).toContain(`ingestion ${r.body.ingestionId} accepted it`);
        // re-rank: both are missing, the accepted one is also pending
        const rr = await api('POST', '/v1/rerank?wait=60', { collection: 'docs', queries: [{ id: 'q', text: 'wing flutter', candidates: ['later', 'never-sent', docs[1].id] }] });
        expect(rr.status, JSON.stringify(rr.body)).toBe(200);
        expect(rr.body.result.results[0]).toMatchObject({ missing: ['later', 'never-sent'], pending: ['later'] });
        expect(rr.body.result.results[0].hits.map((h: { id: string }) => h.id)).toEqual([docs[1].id]);
        const unknown = await api('GET', '/v1/collections/docs/documents/never-sent');
        expect(unknown.status).toBe(404);
        expect(unknown.body.message).not.toContain('accepted it');
        // a short wait answers 202 as without wait, the ingestion still in progress
        const w = await api('POST', '/v1/collections/docs/documents?wait=0.3', [{ id: 'later2', text: 'shock tube' }]);
        expect(w.status).toBe(202);
        expect(w.body.ingestionId).toMatch(/^ing-/);
      } finally {
        await encode.resume();
      }
      await until(async () => (await api('GET', statusUrl)).body.state === 'done', 60_000);
      expect((await api('GET', '/v1/collections/docs/documents/later')).body).toMatchObject({ id: 'later', text: 'wing flutter at transonic speed' });
    }, 120_000);
  });

  describe('a collection with passages', () => {
    const overlap = 16;
    const shortText = docs[5].text;
    let status: Record<string, unknown>;
    let passageIds: string[];

    beforeAll(async () => {
      const bad = await api('POST', '/v1/collections', { id: 'bad', passages: { overlap: 91 } });
      expect(bad.status).toBe(400);
      expect(bad.body.details[0].field).toBe('passages.overlap');
      expect(bad.body.message).toContain('180');
      expect((await api('POST', '/v1/collections', { id: 'long', passages: { overlap } })).status).toBe(201);
      const r = await api('POST', '/v1/collections/long/documents?wait=60', [
        { id: 'L', text: longText, metadata: { kind: 'long' } },
        { id: 'S', text: shortText, metadata: { kind: 'short' } },
      ]);
      expect(r.status, JSON.stringify(r.body)).toBe(200);
      status = r.body;
      const parent = await api('GET', '/v1/collections/long/documents/L');
      passageIds = parent.body.passages;
    }, 120_000);

    it('splits a long document into windows of the model maximum with the overlap, each a passage with its parent', async () => {
      const full = encoder.countTokens(longText, 'doc');
      expect(passageIds.length).toBeGreaterThanOrEqual(Math.ceil(full / MAX));
      expect(passageIds).toEqual(passageIds.map((_, n) => `L#${n}`));
      expect(status).toMatchObject({ state: 'done', truncated: { documents: 0, ids: [] }, split: { documents: 1, passages: passageIds.length } });

      const parent = (await api('GET', '/v1/collections/long/documents/L')).body;
      expect(parent).toMatchObject({ id: 'L', text: longText, metadata: { kind: 'long' }, truncated: false, originalTokens: full });
      const texts: string[] = [];
      let tokens = 0;
      for (const id of passageIds) {
        const p = await api('GET', `/v1/collections/long/documents/${encodeURIComponent(id)}`);
        expect(p.status).toBe(200);
        expect(p.body).toMatchObject({ id, parent: 'L', metadata: { kind: 'long' }, truncated: false });
        expect(encoder.countTokens(p.body.text, 'doc')).toBeLessThanOrEqual(MAX);
        expect(p.body.tokens).toBe((await storedTokens(p.body.text)).length);
        expect(longText.includes(p.body.text)).toBe(true);
        texts.push(p.body.text);
        tokens += p.body.tokens;
      }
      expect(parent.tokens).toBe(tokens);
      // the passages cover the text from its first word to its last, consecutive ones overlapping
      expect(longText.startsWith(texts[0])).toBe(true);
      expect(longText.trimEnd().endsWith(texts[texts.length - 1])).toBe(true);
      for (let i = 1; i < texts.length; i++) {
        const start = longText.indexOf(texts[i]);
        const prevEnd = longText.indexOf(texts[i - 1]) + texts[i - 1].length;
        expect(start).toBeLessThan(prevEnd);
        const shared = longText.slice(start, prevEnd);
        const sharedTokens = encoder.tokenizer.contentIds(shared).length;
        expect(sharedTokens).toBeGreaterThan(0);
        expect(sharedTokens).toBeLessThanOrEqual(overlap + 2);
      }
      const list = await api('GET', '/v1/collections/long/documents');
      expect(list.body.documents).toEqual([...passageIds, 'S'].sort());
      // '#' is reserved in this collection's ids: a well-formed id this collection's setting refuses (409, naming it)
      const hash = await api('POST', '/v1/collections/long/documents', [{ id: 'a#1', text: 'x y' }]);
      expect(hash.status).toBe(409);
      expect(hash.body.message).toContain('documents[0]');
    });

    it('re-rank: a parent candidate stands for its passages; group parent keeps each parent once with its best passage', async () => {
      const q = cran.queries[1];
      const byPassage = await api('POST', '/v1/rerank?wait=60', { collection: 'long', topK: 100, queries: [{ id: q.id, text: q.text, candidates: [...passageIds, 'S'] }] });
      const hits = byPassage.body.result.results[0].hits as { id: string; score: number; parent?: string }[];
      expect(hits).toHaveLength(passageIds.length + 1);
      for (const h of hits) expect(h.parent).toBe(h.id === 'S' ? undefined : 'L');
      const expanded = await api('POST', '/v1/rerank?wait=60', { collection: 'long', topK: 100, queries: [{ id: q.id, text: q.text, candidates: ['L', 'S'] }] });
      expect(expanded.body.result.results[0].hits).toEqual(hits);

      const grouped = await api('POST', '/v1/rerank?wait=60', { collection: 'long', topK: 10, group: 'parent', include: ['text', 'metadata'], queries: [{ id: q.id, text: q.text, candidates: ['L', 'S'] }] });
      expect(grouped.status, JSON.stringify(grouped.body)).toBe(200);
      const g = grouped.body.result.results[0].hits as { id: string; score: number; passage?: string; text: string; metadata: unknown }[];
      expect(g.map((h) => h.id).sort()).toEqual(['L', 'S']);
      const bestL = hits.filter((h) => h.id !== 'S')[0];
      const gl = g.find((h) => h.id === 'L')!;
      expect(gl).toMatchObject({ score: bestL.score, passage: bestL.id, metadata: { kind: 'long' } });
      expect(gl.text).toBe((await api('GET', `/v1/collections/long/documents/${encodeURIComponent(bestL.id)}`)).body.text);
      expect(g.find((h) => h.id === 'S')).toMatchObject({ score: hits.find((h) => h.id === 'S')!.score, text: shortText });
      const top1 = await api('POST', '/v1/rerank?wait=60', { collection: 'long', topK: 1, group: 'parent', queries: [{ id: q.id, text: q.text, candidates: ['L', 'S'] }] });
      expect(top1.body.result.results[0].hits).toEqual([{ id: g[0].id, score: g[0].score, ...(g[0].passage ? { passage: g[0].passage } : {}) }]);
    }, 120_000);

    it('search: group parent gives each document once with its best passage score', async () => {
      const q = cran.queries[1];
      const flat = await api('POST', '/v1/search?wait=60', { collection: 'long', mode: 'exhaustive', topK: 100, queries: [{ id: q.id, text: q.text }] });
      const hits = flat.body.result.results[0].hits as { id: string; score: number; parent?: string }[];
      expect(hits).toHaveLength(passageIds.length + 1);
      const grouped = await api('POST', '/v1/search?wait=60', { collection: 'long', mode: 'exhaustive', topK: 5, group: 'parent', queries: [{ id: q.id, text: q.text }] });
      expect(grouped.status, JSON.stringify(grouped.body)).toBe(200);
      const g = grouped.body.result.results[0].hits as { id: string; score: number; passage?: string }[];
      expect(g.map((h) => h.id).sort()).toEqual(['L', 'S']);
      const bestL = hits.find((h) => h.parent === 'L')!;
      expect(g.find((h) => h.id === 'L')).toMatchObject({ score: bestL.score, passage: bestL.id });
      expect(g.find((h) => h.id === 'S')!.score).toBe(hits.find((h) => h.id === 'S')!.score);
    }, 120_000);

    it('a document ingested again replaces all of its old passages: fewer passages, or whole', async () => {
      const shorter = longText.slice(0, Math.floor(longText.length / 2));
      const r1 = await api('POST', '/v1/collections/long/documents?wait=60', [{ id: 'L', text: shorter }]);
      expect(r1.status).toBe(200);
      const parent = (await api('GET', '/v1/collections/long/documents/L')).body;
      expect(parent.text).toBe(shorter);
      expect(parent.passages.length).toBeLessThan(passageIds.length);
      expect((await api('GET', '/v1/collections/long/documents')).body.documents).toEqual([...parent.passages, 'S'].sort());
      expect((await api('GET', `/v1/collections/long/documents/${encodeURIComponent(passageIds[passageIds.length - 1])}`)).status).toBe(404);

      const r2 = await api('POST', '/v1/collections/long/documents?wait=60', [{ id: 'L', text: 'a short flutter note' }]);
      expect(r2.status).toBe(200);
      expect((await api('GET', '/v1/collections/long/documents')).body.documents).toEqual(['L', 'S']);
      expect((await api('GET', '/v1/collections/long/documents/L')).body).toMatchObject({ text: 'a short flutter note', truncated: false });
      expect((await api('GET', '/v1/collections/long')).body.documents).toBe(2);
      const q = cran.queries[1];
      const sr = await api('POST', '/v1/search?wait=60', { collection: 'long', mode: 'exhaustive', topK: 10, queries: [{ id: q.id, text: q.text }] });
      expect(sr.body.result.results[0].hits.map((h: { id: string }) => h.id).sort()).toEqual(['L', 'S']);
    }, 120_000);
  });
});
