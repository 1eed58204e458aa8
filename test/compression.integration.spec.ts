import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startServer, type Server } from '../apps/all-in-one/src/server';
import { loadCranfield } from '../scripts/lib/cranfield';
import { http, testConfig, until } from './helpers';

/**
 * Codecs in the pipeline: a collection compressed with EDEN (fitted on its own vectors, artifact
 * in S3) re-ranks close to fp16, and a re-compression from the stored raw vectors commits one new
 * generation with every segment at the new codec version. Side information (EDEN + the model's
 * static input embeddings) works end to end, and is refused with a 400 where it cannot work.
 */
describe('compression in the pipeline', () => {
  const config = testConfig({ ENCODE_BATCH_DOCUMENTS: '40' });
  const cran = loadCranfield(path.resolve('data/cranfield'));
  const docs = cran.docs.filter((d) => d.text).slice(0, 120);
  const queries = cran.queries.slice(0, 5);
  let server: Server;
  const api = (method: string, url: string, body?: unknown) => http(server.url, method, url, body);

  beforeAll(async () => {
    server = await startServer(config, { quiet: true });
  });
  afterAll(async () => {
    await server?.stop();
  });

  async function ingestInto(id: string, codec: unknown) {
    expect((await api('POST', '/v1/collections', { id, codec })).status).toBe(201);
    const ing = await api('POST', `/v1/collections/${id}/documents`, docs);
    await until(async () => ((await api('GET', ing.body.status)).body.state === 'done' ? true : null), 120_000);
    return (await api('GET', `/v1/collections/${id}`)).body;
  }

  const held = new Map<string, string>();
  async function rank(id: string, scorer: unknown = { name: 'maxsim' }) {
    const r = await api('POST', '/v1/rerank?wait=60', { collection: id, topK: docs.length, scorer, queries: queries.map((q) => ({ id: q.id, text: q.text, candidates: docs.map((d) => d.id) })) });
    expect(r.body.status).toBe('completed');
    held.set(id, r.body.result.vectors);
    return r.body.result.results.map((x: { hits: { id: string; score: number }[] }) => new Map(x.hits.map((h) => [h.id, h.score])));
  }

  const meanAbsError = (a: Map<string, number>[], b: Map<string, number>[]) => {
    let s = 0;
    let n = 0;
    a.forEach((m, qi) => m.forEach((v, id) => ((s += Math.abs(v - b[qi].get(id)!)), n++)));
    return s / n;
  };

  const meanScore = (a: Map<string, number>[]) => {
    let s = 0;
    let n = 0;
    a.forEach((m) => m.forEach((v) => ((s += Math.abs(v)), n++)));
    return s / n;
  };
  const top10 = (m: Map<string, number>) => new Set([...m.entries()].sort((x, y) => y[1] - x[1]).slice(0, 10).map((e) => e[0]));
  const top10Overlap = (a: Map<string, number>[], b: Map<string, number>[]) =>
    a.reduce((s, m, qi) => s + [...top10(m)].filter((id) => top10(b[qi]).has(id)).length / 10, 0) / a.length;

  it('EDEN segments are smaller than fp16 and rank almost the same; re-compression commits once, at the new version', async () => {
    const fp16 = await ingestInto('fp16', { kind: 'fp16' });
    const eden = await ingestInto('eden', { kind: 'eden', bits: 4, layout: 'cross' });
    expect(eden.bytesPerToken).toBeLessThan(fp16.bytesPerToken * 0.45);
    const ref = await rank('fp16');
    const e4 = await rank('eden');
    // Neither fp16 nor the cross-token layout can be scored in the rotated domain: decoded vectors.
    expect([held.get('fp16'), held.get('eden')]).toEqual(['fp32', 'fp32']);
    expect(meanAbsError(e4, ref)).toBeLessThan(0.05);

    const before = (await api('GET', '/v1/collections/eden')).body;
    const rc = await api('POST', '/v1/collections/eden/recompress', { codec: { kind: 'eden', bits: 2, layout: 'cross' } });
    expect(rc.status).toBe(202);
    expect(rc.body.codecVersion).toBe(2);
    expect((await api('POST', '/v1/collections/eden/recompress', { codec: { kind: 'fp16' } })).status).toBe(409);
    const after = await until(async () => {
      const c = (await api('GET', '/v1/collections/eden')).body;
      return c.codecVersion === 2 && !c.pending ? c : null;
    }, 120_000);
    expect(after.generation).toBe(before.generation + 1);
    expect(after.codecVersions).toEqual([2]);
    expect(after.documents).toBe(docs.length);
    expect(after.bytesPerToken).toBeLessThan(before.bytesPerToken);
    const e2 = await rank('eden');
    const err2 = meanAbsError(e2, ref);
    // Fewer bits, larger error (EDEN's per-coordinate MSE is 0.0095 at 4 bits, 0.1175 at 2).
    expect(err2).toBeGreaterThan(meanAbsError(e4, ref));
    // Relative to the scores themselves: 2-bit codes still stay within 10% of fp16 on average.
    expect(err2 / meanScore(ref)).toBeLessThan(0.1);
    expect(top10Overlap(e4, ref)).toBeGreaterThanOrEqual(0.8);
    expect(top10Overlap(e2, ref)).toBeGreaterThanOrEqual(0.5);
  });

  it('scores EDEN token-layout collections from their codes: the int8 rotated image agrees with exact MaxSim on the decoded vectors', async () => {
    const col = await ingestInto('eden-token', { kind: 'eden', bits: 4, layout: 'token' });
    expect(col.bytesPerToken).toBeGreaterThan(0);
    const image = await rank('eden-token');
    expect(held.get('eden-token')).toBe('rotated-int8');
    // maxsim-topk with k = 1 is MaxSim, computed on the candidates decoded from the same codes.
    const exact = await rank('eden-token', { name: 'maxsim-topk', k: 1, reduce: 'sum' });
    const err = meanAbsError(image, exact);
    expect(err).toBeGreaterThan(0); // two different computations (integer GEMM vs decoded fp32)
    expect(err / meanScore(exact)).toBeLessThan(0.01);
    expect(top10Overlap(image, exact)).toBeGreaterThanOrEqual(0.9);
    // 6 bits are still served from the image, 8 bits from decoded vectors (the int8 grid would cost precision).
    const e8 = await ingestInto('eden-token-8', { kind: 'eden', bits: 8, layout: 'token' });
    expect(e8.documents).toBe(docs.length);
    await rank('eden-token-8');
    expect(held.get('eden-token-8')).toBe('fp32');
  });

  it('EDEN with side information (static embeddings of the model) ingests, re-ranks close to fp16, and beats the same PCA without it', async () => {
    const side = { kind: 'eden', bits: 4, dims: 32, layout: 'cross', sideInfo: true };
    const created = await ingestInto('side', side);
    expect(created.codec).toMatchObject(side);
    expect(created.documents).toBe(docs.length);
    // The fp16 reference of the first test (created here when this test runs alone).
    if ((await api('GET', '/v1/collections/fp16')).status === 404) await ingestInto('fp16', { kind: 'fp16' });
    // 32 coded dims at 4 bits: a small fraction of fp16's 200 bytes per token.
    expect(created.bytesPerToken).toBeLessThan((await api('GET', '/v1/collections/fp16')).body.bytesPerToken * 0.2);
    const ref = await rank('fp16');
    const withSide = await rank('side');
    expect(top10Overlap(withSide, ref)).toBeGreaterThanOrEqual(0.8);
    expect(meanAbsError(withSide, ref) / meanScore(ref)).toBeLessThan(0.05);

    // The same PCA 32 / 4 bits without side information loses more (the predictor carries what PCA drops),
    // and re-compressing that collection to side information brings it to the side collection's ranking.
    await ingestInto('pca32', { kind: 'eden', bits: 4, dims: 32, layout: 'cross' });
    const noSide = await rank('pca32');
    expect(meanAbsError(withSide, ref)).toBeLessThan(meanAbsError(noSide, ref) * 0.5);
    const rc = await api('POST', '/v1/collections/pca32/recompress', { codec: side });
    expect(rc.status).toBe(202);
    const after = await until(async () => {
      const c = (await api('GET', '/v1/collections/pca32')).body;
      return c.codecVersion === 2 && !c.pending ? c : null;
    }, 120_000);
    expect(after.codecVersions).toEqual([2]);
    const recompressed = await rank('pca32');
    // Same settings, same raw vectors, a different collection seed: the same fidelity, not the same bits.
    expect(meanAbsError(recompressed, ref)).toBeLessThan(meanAbsError(noSide, ref) * 0.5);
    expect(top10Overlap(recompressed, ref)).toBeGreaterThanOrEqual(0.75);
  });

  it('rejects codec settings the pipeline cannot serve', async () => {
    // Side information needs a model that declares its static input embeddings (the test transformer does not) ...
    const noTable = await api('POST', '/v1/collections', { id: 'side-tt', model: 'test-transformer', codec: { kind: 'eden', bits: 4, sideInfo: true } });
    expect(noTable.status).toBe(400);
    expect(noTable.body.message).toMatch(/model 'test-transformer' declares no staticEmbeddings/);
    expect(noTable.body.details).toEqual([expect.objectContaining({ field: 'codec.sideInfo' })]);
    // ... and kind 'eden'.
    const residual = await api('POST', '/v1/collections', { id: 'side-res', codec: { kind: 'residual', bits: 2, sideInfo: true } });
    expect(residual.status).toBe(400);
    expect(residual.body.message).toMatch(/codec\.sideInfo needs codec\.kind 'eden' \(got 'residual'\)/);
    expect(residual.body.details).toEqual([expect.objectContaining({ field: 'codec.sideInfo' })]);
    expect((await api('GET', '/v1/collections/side-tt')).status).toBe(404);
    // Re-compression checks the same, against the collection's model: a conflict with the stored collection (409, naming codec.sideInfo).
    expect((await api('POST', '/v1/collections', { id: 'tt', model: 'test-transformer', codec: { kind: 'fp16' } })).status).toBe(201);
    const ing = await api('POST', '/v1/collections/tt/documents', docs.slice(0, 5));
    await until(async () => ((await api('GET', ing.body.status)).body.state === 'done' ? true : null), 60_000);
    const rc = await api('POST', '/v1/collections/tt/recompress', { codec: { kind: 'eden', bits: 4, sideInfo: true } });
    expect(rc.status).toBe(409);
    expect(rc.body.message).toContain('codec.sideInfo');
    expect((await api('GET', '/v1/collections/tt')).body.pending).toBeUndefined();

    const bits = await api('POST', '/v1/collections', { id: 'bits', codec: { kind: 'eden', bits: 9 } });
    expect(bits.status).toBe(400);
    expect(JSON.stringify(bits.body)).toMatch(/codec\.bits/);
  });
});
