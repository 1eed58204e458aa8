import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startServer, type Server } from '../apps/all-in-one/src/server';
import { loadCranfield } from '../scripts/lib/cranfield';
import { http, testConfig, until } from './helpers';

/**
 * Deletes through the service (HTTP, the commit queue, S3 manifests with tombstones, the
 * scorers' segment cache): once a delete is acknowledged the document is never returned by
 * re-rank or search, `documents` counts live ids only, and an id ingested again is live again.
 */
describe('deletes (real Redis, real S3 server, real ONNX model)', () => {
  let server: Server;
  const config = testConfig({ ENCODE_BATCH_DOCUMENTS: '20' });
  const cran = loadCranfield(path.resolve('data/cranfield'));
  const docs = cran.docs.filter((d) => d.text.length > 0).slice(0, 60);
  const yearOf = (i: number) => 1950 + (i % 10);
  /** What the test expects to be live (ids), kept beside every delete and ingest it makes. */
  const live = new Set(docs.map((d) => d.id));

  const api = (method: string, url: string, body?: unknown) => http(server.url, method, url, body);
  const ingest = async (items: { id: string; text: string; metadata?: Record<string, unknown> }[]) => {
    const ing = await api('POST', '/v1/collections/del/documents', items);
    expect(ing.status, JSON.stringify(ing.body)).toBe(202);
    await until(async () => (await api('GET', ing.body.status)).body.state === 'done', 120_000);
  };
  const rerank = async (candidates: string[], text = docs[0].text) => {
    const r = await api('POST', '/v1/rerank?wait=60', { collection: 'del', scorer: 'maxsim', topK: 1000, queries: [{ id: 'q', text, candidates }] });
    expect(r.body.status, JSON.stringify(r.body)).toBe('completed');
    return r.body.result.results[0] as { hits: { id: string; score: number }[]; missing: string[] };
  };
  const search = async (mode: string, text: string) => {
    const r = await api('POST', '/v1/search?wait=60', { collection: 'del', mode, topK: 1000, queries: [{ id: 'q', text }] });
    expect(r.body.status, JSON.stringify(r.body)).toBe('completed');
    return (r.body.result.results[0].hits as { id: string }[]).map((h) => h.id);
  };
  const documents = async () => (await api('GET', '/v1/collections/del')).body.documents as number;
  /** Re-rank over every id ever ingested and an exhaustive and a BM25 search: they return the live ids, and only them. */
  const expectServing = async (probe: string) => {
    const all = docs.map((d) => d.id);
    const rr = await rerank(all);
    expect(new Set(rr.hits.map((h) => h.id))).toEqual(live);
    expect(rr.missing.sort()).toEqual(all.filter((id) => !live.has(id)).sort());
    const ex = await search('exhaustive', probe);
    expect(new Set(ex)).toEqual(live);
    for (const id of await search('bm25', probe)) expect(live.has(id), id).toBe(true);
    expect(await documents()).toBe(live.size);
  };

  beforeAll(async () => {
    server = await startServer(config, { quiet: true });
    await api('POST', '/v1/collections', { id: 'del' });
    await ingest(docs.map((d, i) => ({ id: d.id, text: d.text, metadata: { year: yearOf(i) } })));
  }, 180_000);
  afterAll(async () => {
    await server?.stop();
  });

  it('DELETE one document: acknowledged with a new generation, then never returned by re-rank or search; counts drop', async () => {
    const before = (await api('GET', '/v1/collections/del')).body.generation as number;
    expect(await documents()).toBe(60);
    const victim = docs[0].id;
    const r = await api('DELETE', `/v1/collections/del/documents/${encodeURIComponent(victim)}`);
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    expect(r.body).toMatchObject({ deleted: 1, notFound: [], committed: true, documents: 59 });
    expect(r.body.generation).toBeGreaterThan(before);
    live.delete(victim);
    // The query is the deleted document's own text: it would rank first if it were still there.
    const rr = await rerank([victim, docs[1].id]);
    expect(rr.hits.map((h) => h.id)).toEqual([docs[1].id]);
    expect(rr.missing).toEqual([victim]);
    expect(await search('exhaustive', docs[0].text)).not.toContain(victim);
    expect(await search('bm25', docs[0].text)).not.toContain(victim);
    expect(await search('xtr', docs[0].text)).not.toContain(victim);
    await expectServing(docs[2].text);
    // Deleting it again: 404 naming it; nothing committed.
    const again = await api('DELETE', `/v1/collections/del/documents/${encodeURIComponent(victim)}`);
    expect(again.status).toBe(404);
    expect(again.body.message).toContain(victim);
    expect((await api('GET', '/v1/collections/del')).body.generation).toBe(r.body.generation);
  });

  it('batch delete by ids: unknown ids are listed as not found, the others deleted', async () => {
    const ids = [docs[3].id, 'no-such-doc', docs[4].id, docs[0].id /* already deleted */, 'nope-2'];
    const r = await api('POST', '/v1/collections/del/documents/delete', { ids });
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    expect(r.body.deleted).toBe(2);
    expect(r.body.notFound).toEqual(['no-such-doc', docs[0].id, 'nope-2']);
    live.delete(docs[3].id);
    live.delete(docs[4].id);
    expect(r.body.documents).toBe(live.size);
    await expectServing(docs[3].text);
    // Only unknown ids: nothing to commit, still an answer.
    const none = await api('POST', '/v1/collections/del/documents/delete', { ids: ['ghost'] });
    expect(none.status).toBe(200);
    expect(none.body).toMatchObject({ deleted: 0, notFound: ['ghost'], committed: false });
  });

  it('delete by filter (the search filter language) removes every live document it accepts', async () => {
    const matching = docs.filter((_, i) => yearOf(i) <= 1951).map((d) => d.id);
    const expected = matching.filter((id) => live.has(id)).length;
    expect(expected).toBeGreaterThan(3);
    const r = await api('POST', '/v1/collections/del/documents/delete', { filter: { must: [{ key: 'year', range: { lte: 1951 } }] } });
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    expect(r.body).toMatchObject({ deleted: expected, notFound: [], committed: true });
    for (const id of matching) live.delete(id);
    expect(r.body.documents).toBe(live.size);
    await expectServing(docs[10].text);
    // The filter still applies at search time to what is left.
    const filtered = await api('POST', '/v1/search?wait=60', { collection: 'del', mode: 'bm25', topK: 100, filter: { must: [{ key: 'year', range: { lte: 1951 } }] }, queries: [{ id: 'q', text: docs[10].text }] });
    expect(filtered.body.result.results[0].hits).toEqual([]);
  });

  it('an id ingested again after its delete is live again, in its new version; ingesting a live id replaces it', async () => {
    const back = docs[3].id;
    const replaced = docs[5].id;
    await ingest([
      { id: back, text: 'supersonic flutter of a swept wing', metadata: { year: 2000 } },
      { id: replaced, text: 'heat transfer in a hypersonic boundary layer', metadata: { year: 2001 } },
    ]);
    live.add(back);
    expect(await documents()).toBe(live.size); // the replaced id counts once
    const rr = await rerank([back, replaced], 'supersonic flutter of a swept wing');
    expect(rr.hits.map((h) => h.id)).toEqual([back, replaced]);
    expect(rr.missing).toEqual([]);
    await expectServing('supersonic flutter of a swept wing');
    // The new version is the one searched: its new metadata filters, the old text no longer matches it.
    const byYear = await api('POST', '/v1/search?wait=60', { collection: 'del', mode: 'bm25', topK: 10, filter: { must: [{ key: 'year', range: { gte: 2000 } }] }, queries: [{ id: 'q', text: 'supersonic flutter heat transfer' }] });
    expect(byYear.body.result.results[0].hits.map((h: { id: string }) => h.id).sort()).toEqual([back, replaced].sort());
    const ex = await search('exhaustive', 'heat transfer in a hypersonic boundary layer');
    expect(ex.filter((id) => id === replaced)).toHaveLength(1);
    // and it can be deleted again
    const d = await api('DELETE', `/v1/collections/del/documents/${encodeURIComponent(back)}`);
    expect(d.body).toMatchObject({ deleted: 1 });
    live.delete(back);
    await expectServing('supersonic flutter of a swept wing');
  });

  it('wait=0 answers at once (202 with a status URL, or 200 if already committed); the status URL gives the result', async () => {
    const victim = docs[22].id; // year 1952: not taken by the filter delete above
    const r = await api('POST', '/v1/collections/del/documents/delete?wait=0', { ids: [victim] });
    expect([200, 202]).toContain(r.status);
    const url = `/v1/collections/del/deletes/${r.body.deleteId}`;
    if (r.status === 202) expect(r.body).toMatchObject({ status: expect.stringMatching(/^(queued|running)$/), statusUrl: url });
    const done = await until(async () => {
      const s = await api('GET', url);
      return s.status === 200 ? s.body : null;
    });
    expect(done).toMatchObject({ deleteId: r.body.deleteId, deleted: 1, notFound: [] });
    live.delete(victim);
    await expectServing(docs[22].text);
    expect((await api('GET', '/v1/collections/del/deletes/del-unknown')).status).toBe(404);
    const doc = (await api('GET', '/openapi.json')).body;
    expect(doc.paths['/v1/collections/{id}/documents/{docId}'].delete.responses).toHaveProperty('200');
    // exactly one of ids / filter: two closed forms
    const forms = doc.paths['/v1/collections/{id}/documents/delete'].post.requestBody.content['application/json'].schema.anyOf as { properties: object; required: string[]; additionalProperties: boolean }[];
    expect(forms.map((f) => [Object.keys(f.properties), f.required, f.additionalProperties])).toEqual([[['ids'], ['ids'], false], [['filter'], ['filter'], false]]);
    expect(doc.paths['/v1/collections/{id}/deletes/{deleteId}'].get.responses).toHaveProperty('202');
  });

  it('a delete racing an ingest of the same id: the one committed later wins', async () => {
    const id = 'racer';
    const ing = await api('POST', '/v1/collections/del/documents', [{ id, text: 'transonic buffet on a thin wing' }]);
    expect(ing.status).toBe(202);
    // Sent while the ingestion is still in the pipeline: it commits before or after the ingest's batch.
    const del = await api('POST', '/v1/collections/del/documents/delete', { ids: [id] });
    expect(del.status, JSON.stringify(del.body)).toBe(200);
    await until(async () => (await api('GET', ing.body.status)).body.state === 'done', 120_000);
    const ingestGeneration = (await api('GET', '/v1/collections/del')).body.generation as number;
    if (del.body.deleted === 1) {
      // the ingest committed first, then the delete: gone
      expect(del.body.generation).toBeGreaterThanOrEqual(ingestGeneration);
    } else {
      // the delete committed first (nothing live to delete), then the ingest: live
      expect(del.body.notFound).toEqual([id]);
      live.add(id);
    }
    const rr = await rerank([id], 'transonic buffet on a thin wing');
    expect(rr.hits.map((h) => h.id)).toEqual(live.has(id) ? [id] : []);
    expect(await documents()).toBe(live.size);
  });

  it('bad input: 400 naming the field; unknown collection: 404', async () => {
    const bad = async (body: unknown, field: RegExp) => {
      const r = await api('POST', '/v1/collections/del/documents/delete', body);
      expect(r.status, JSON.stringify(r.body)).toBe(400);
      expect(JSON.stringify(r.body)).toMatch(field);
    };
    await bad({}, /exactly one of ids/);
    await bad({ ids: ['a'], filter: { must: [] } }, /exactly one of ids/);
    await bad({ ids: [] }, /ids/);
    await bad({ ids: [''] }, /ids/);
    await bad({ filter: { must: [{ key: 'year', between: [1, 2] }] } }, /filter\.must\[0\]/);
    await bad({ ids: ['a'], extra: 1 }, /extra/);
    expect((await api('POST', '/v1/collections/nope/documents/delete', { ids: ['a'] })).status).toBe(404);
    expect((await api('DELETE', '/v1/collections/nope/documents/a')).status).toBe(404);
    expect(await documents()).toBe(live.size);
  });
});
