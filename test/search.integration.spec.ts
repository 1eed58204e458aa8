import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { roundToHalf } from '@lateral/codec';
import { DEFAULT_HYBRID_LAMBDA } from '@lateral/shared';
import { getEncoder, type EncodedText, type TokenEncoder } from '@lateral/model';
import { dense, maxsim, mebert } from '@lateral/scoring';
import { startServer, type Server } from '../apps/all-in-one/src/server';
import { loadCranfield } from '../scripts/lib/cranfield';
import { http, testConfig, until } from './helpers';

/**
 * POST /v1/search through HTTP, queues, S3 and the workers: every committed segment has a search
 * index (index job), and search over many segments equals the exact computation over all
 * documents done in this process with the same model.
 */
describe('search (real Redis, real S3 server, real ONNX model)', () => {
  let server: Server;
  let encoder: TokenEncoder;
  const config = testConfig({ ENCODE_BATCH_DOCUMENTS: '40' });
  const cran = loadCranfield(path.resolve('data/cranfield'));
  const docs = cran.docs.filter((d) => d.text.length > 0).slice(0, 160);
  const years = (i: number) => 1950 + (i % 20);
  let encDocs: EncodedText[];

  beforeAll(async () => {
    server = await startServer(config, { quiet: true });
    encoder = await getEncoder(path.resolve(config.MODELS_DIR, config.DEFAULT_MODEL), { executionProvider: 'cpu' });
    encDocs = await encoder.encodeDocuments(docs.map((d) => d.text));
    // The segment index's IVF path: this file checks that XTR probing every list equals exhaustive MaxSim exactly, which
    // WARP's packed residuals make approximate (its engine's own property specs cover it; test/warp-search.integration.spec.ts).
    await api('POST', '/v1/collections', { id: 'lib', search: { layout: 'ivf' } });
    const ing = await api('POST', '/v1/collections/lib/documents', docs.map((d, i) => ({ id: d.id, text: d.text, metadata: { year: years(i), kind: i % 2 ? 'report' : 'paper' } })));
    await until(async () => (await api('GET', ing.body.status)).body.state === 'done', 120_000);
  }, 180_000);
  afterAll(async () => {
    await server?.stop();
  });
  const api = (method: string, url: string, body?: unknown) => http(server.url, method, url, body);
  const search = async (body: Record<string, unknown>) => {
    const r = await api('POST', '/v1/search?wait=60', { collection: 'lib', ...body });
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    expect(r.body.status, JSON.stringify(r.body)).toBe('completed');
    return r.body.result as { generation: number; results: { queryId: string; hits: { id: string; score: number; scoredBy: string; explain?: unknown[] }[]; reason?: string }[] };
  };
  const queries = cran.queries.slice(0, 3);
  const reference = async (kind: 'maxsim' | 'dense', keep: (i: number) => boolean = () => true) => {
    const enc = await encoder.encodeQueries(queries.map((q) => q.text));
    return enc.map((q) =>
      docs
        .map((d, i) => ({ id: d.id, i }))
        .filter(({ i }) => keep(i))
        .map(({ id, i }) => ({
          id,
          score: kind === 'maxsim' ? maxsim(q.vectors, q.length, roundToHalf(encDocs[i].vectors), encDocs[i].length, encoder.dims) : dense(encoder.pool(q), roundToHalf(encoder.pool(encDocs[i]))),
        }))
        .sort((a, b) => b.score - a.score),
    );
  };

  it('has a search index beside every committed segment (4 segments)', async () => {
    const col = await api('GET', '/v1/collections/lib');
    expect(col.body).toMatchObject({ segments: 4, documents: 160 });
  });

  it('exhaustive equals MaxSim over every document; xtr probing every list with k\' over every token equals it too', async () => {
    const ref = await reference('maxsim');
    const ex = await search({ mode: 'exhaustive', topK: 10, queries: queries.map((q) => ({ id: q.id, text: q.text })) });
    const xtr = await search({ mode: { name: 'xtr', kPrime: 100_000, nprobe: 65_536 }, topK: 10, queries: queries.map((q) => ({ id: q.id, text: q.text })) });
    queries.forEach((_, qi) => {
      expect(ex.results[qi].hits.map((h) => h.id)).toEqual(ref[qi].slice(0, 10).map((x) => x.id));
      ex.results[qi].hits.forEach((h, r) => expect(Math.abs(h.score - ref[qi][r].score)).toBeLessThan(1e-3));
      expect(xtr.results[qi].hits.map((h) => h.id)).toEqual(ref[qi].slice(0, 10).map((x) => x.id));
      expect(ex.results[qi].hits[0].scoredBy).toBe('exhaustive');
    });
    // default XTR settings find most of the exhaustive top 10
    const approx = await search({ mode: 'xtr', topK: 10, queries: queries.map((q) => ({ id: q.id, text: q.text })) });
    const overlap = queries.reduce((s, _, qi) => s + approx.results[qi].hits.filter((h) => ref[qi].slice(0, 10).some((x) => x.id === h.id)).length, 0);
    expect(overlap / 30).toBeGreaterThan(0.5);
  });

  it('dense equals the pooled vectors; filters apply before ranking; a filter matching nothing gives no hits', async () => {
    const ref = await reference('dense', (i) => years(i) >= 1960 && i % 2 === 1);
    const res = await search({
      mode: 'dense',
      topK: 5,
      filter: { must: [{ key: 'year', range: { gte: 1960 } }, { key: 'kind', match: { value: 'report' } }] },
      queries: queries.map((q) => ({ id: q.id, text: q.text })),
    });
    queries.forEach((_, qi) => expect(res.results[qi].hits.map((h) => h.id)).toEqual(ref[qi].slice(0, 5).map((x) => x.id)));
    const none = await search({ mode: 'bm25', filter: { must: [{ key: 'year', range: { gt: 3000 } }] }, queries: [{ id: 'q', text: queries[0].text }] });
    expect(none.results[0].hits).toEqual([]);
  });

  it('mebert: each document\'s best of its first m rows, read from the segments\' prefix sections (m <= 4) or their codes (m > 4), the same answers', async () => {
    const enc = await encoder.encodeQueries(queries.map((q) => q.text));
    for (const m of [4, 2, 6]) {
      const res = await search({ mode: { name: 'mebert', m }, topK: 5, queries: queries.map((q) => ({ id: q.id, text: q.text })) });
      enc.forEach((q, qi) => {
        // fp16 segments: the stored rows are the fp16 vectors; the prefix section holds them unchanged.
        const ref = docs
          .map((d, i) => ({ id: d.id, score: mebert(encoder.pool(q), roundToHalf(encDocs[i].vectors), encDocs[i].length, encoder.dims, m) }))
          .sort((a, b) => b.score - a.score);
        // Documents whose first m rows are the same (GloVe's rows are per word) tie exactly; ties come back in either order.
        const tiedWith = (r: number) => ref.filter((x) => Math.abs(x.score - ref[r].score) < 1e-9).map((x) => x.id);
        res.results[qi].hits.forEach((h, r) => expect(tiedWith(r)).toContain(h.id));
        expect(new Set(res.results[qi].hits.map((h) => h.id)).size).toBe(5);
        res.results[qi].hits.forEach((h, r) => expect(Math.abs(h.score - ref[r].score)).toBeLessThan(1e-5));
        expect(res.results[qi].hits[0].scoredBy).toBe('mebert');
      });
    }
  });

  it('bm25 ranks documents holding the query terms; hybrid fuses; explain names the matched tokens; a second stage re-scores', async () => {
    const q = { id: 'q', text: 'boundary layer transition' };
    const bm = await search({ mode: 'bm25', topK: 5, queries: [q] });
    expect(bm.results[0].hits.length).toBe(5);
    for (const h of bm.results[0].hits) expect(docs.find((d) => d.id === h.id)!.text.toLowerCase()).toMatch(/boundary|layer|transition/);
    const hy = await search({ mode: { name: 'hybrid', base: 'exhaustive', lambda: 0.5 }, topK: 5, queries: [q] });
    expect(hy.results[0].hits.length).toBe(5);
    // no lambda: the default weight of its normalisation (DEFAULT_HYBRID_LAMBDA)
    const byDefault = await search({ mode: { name: 'hybrid', base: 'exhaustive' }, topK: 5, queries: [q] });
    const explicit = await search({ mode: { name: 'hybrid', base: 'exhaustive', lambda: DEFAULT_HYBRID_LAMBDA.minmax }, topK: 5, queries: [q] });
    expect(byDefault.results[0].hits).toEqual(explicit.results[0].hits);
    expect((await search({ mode: 'hybrid', topK: 5, queries: [q] })).results[0].hits[0].scoredBy).toBe('hybrid');
    const rr = await search({ mode: { name: 'hybrid', base: 'dense', fusion: 'rrf' }, topK: 5, queries: [q] });
    expect(rr.results[0].hits[0].scoredBy).toBe('hybrid');
    const ex = await search({ mode: 'exhaustive', topK: 3, explain: true, queries: [q] });
    const explain = ex.results[0].hits[0].explain as { queryToken: string; docToken: string; similarity: number }[];
    expect(explain.map((e) => e.queryToken)).toEqual(expect.arrayContaining(['boundary', 'layer', 'transition']));
    expect(explain.find((e) => e.queryToken === 'boundary')!.docToken).toBe('boundary');
    const second = await search({ mode: 'bm25', topK: 5, rerank: { scorer: 'maxsim', depth: 20 }, queries: [q] });
    expect(second.results[0].hits[0].scoredBy).toBe('rerank:maxsim');
  });

  it('bad input: 400 naming the field; stop words only -> empty hits with a reason; no generation -> generation 0', async () => {
    const bad = async (body: Record<string, unknown>, field: RegExp) => {
      const r = await api('POST', '/v1/search', { collection: 'lib', queries: [{ id: 'q', text: 'wing' }], ...body });
      expect(r.status).toBe(400);
      expect(JSON.stringify(r.body)).toMatch(field);
    };
    await bad({ mode: 'bm99' }, /mode/);
    await bad({ mode: { name: 'xtr', kPrime: 0 } }, /kPrime/);
    await bad({ mode: { name: 'hybrid', lambda: 'high' } }, /lambda/);
    await bad({ filter: { must: [{ key: 'year', between: [1, 2] }] } }, /filter\.must\[0\]/);
    expect((await api('POST', '/v1/search', { collection: 'nope', queries: [{ id: 'q', text: 'x' }] })).status).toBe(404);
    const stop = await search({ mode: 'bm25', queries: [{ id: 'q', text: '?!' }] });
    expect(stop.results[0]).toMatchObject({ hits: [], reason: expect.stringMatching(/no searchable terms/) });
    await api('POST', '/v1/collections', { id: 'empty' });
    const r = await api('POST', '/v1/search?wait=30', { collection: 'empty', queries: [{ id: 'q', text: 'wing' }] });
    expect(r.body.result).toMatchObject({ generation: 0, results: [{ hits: [] }] });
  });

  it('a document ingested again is found once, in its new version', async () => {
    const d = docs[3];
    const ing = await api('POST', '/v1/collections/lib/documents', [{ id: d.id, text: 'zeppelin airship mooring mast', metadata: { year: 1999 } }]);
    await until(async () => (await api('GET', ing.body.status)).body.state === 'done', 60_000);
    const res = await search({ mode: 'bm25', topK: 20, queries: [{ id: 'q', text: 'zeppelin airship' }] });
    expect(res.results[0].hits.filter((h) => h.id === d.id)).toHaveLength(1);
    expect(res.results[0].hits[0].id).toBe(d.id);
    const old = await search({ mode: 'exhaustive', topK: 160, queries: [{ id: 'q', text: d.text.slice(0, 200) }] });
    expect(old.results[0].hits.filter((h) => h.id === d.id)).toHaveLength(1);
  });
});
