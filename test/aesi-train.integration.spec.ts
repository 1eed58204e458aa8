import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { deserializeArtifact } from '@lateral/codec';
import { s3Keys, trainingKeys } from '@lateral/shared';
import { startServer, type Server } from '../apps/all-in-one/src/server';
import { loadCranfield } from '../scripts/lib/cranfield';
import { http, testConfig, until } from './helpers';

/**
 * SDR's AESI through the service: a train job with head 'aesi' fits the autoencoder (TF.js) on a
 * collection's raw token vectors and the model's static embeddings, writes a trained codec with
 * its curve and held-out error beside it in S3, and POST .../recompress with `codec.trained`
 * re-codes the collection with it (EDEN over the AESI code); re-ranking then uses the decoder.
 * Small on purpose (60 documents, width 32): the test itself took 51 s on the shared 2-core machine at load 20.
 */
describe('AESI training and re-compression', () => {
  const config = testConfig({ ENCODE_BATCH_DOCUMENTS: '30' });
  const cran = loadCranfield(path.resolve('data/cranfield'));
  const docs = cran.docs.filter((d) => d.text).slice(0, 60);
  const queries = cran.queries.slice(0, 4);
  let server: Server;
  const api = (method: string, url: string, body?: unknown) => http(server.url, method, url, body);

  beforeAll(async () => {
    server = await startServer(config, { quiet: true });
    expect((await api('POST', '/v1/collections', { id: 'a', codec: { kind: 'fp16' } })).status).toBe(201);
    const ing = await api('POST', '/v1/collections/a/documents', docs);
    await until(async () => ((await api('GET', ing.body.status)).body.state === 'done' ? true : null), 60_000);
  });
  afterAll(async () => {
    await server?.stop();
  });

  async function rank() {
    const r = await api('POST', '/v1/rerank?wait=60', { collection: 'a', topK: docs.length, scorer: { name: 'maxsim' }, queries: queries.map((q) => ({ id: q.id, text: q.text, candidates: docs.map((d) => d.id) })) });
    expect(r.body.status, JSON.stringify(r.body)).toBe('completed');
    return r.body.result.results.map((x: { hits: { id: string; score: number }[] }) => new Map(x.hits.map((h) => [h.id, h.score])));
  }

  it('refuses head aesi for a model without a static embedding table: 400 naming the field', async () => {
    // the test transformer declares no staticEmbeddings: no side information to train with
    expect((await api('POST', '/v1/collections', { id: 'no-table', model: 'test-transformer', codec: { kind: 'fp16' } })).status).toBe(201);
    const t = await api('POST', '/v1/collections/no-table/train', { head: 'aesi', codeDims: 8, width: 32 });
    expect(t.status).toBe(400);
    expect(t.body.message).toMatch(/head 'aesi' needs a model with static input embeddings.*model 'test-transformer' declares no staticEmbeddings/);
    expect(t.body.details).toEqual([expect.objectContaining({ field: 'head' })]);
    // the collection itself exists with that model: the refusal is the model's, not a 404
    expect((await api('GET', '/v1/collections/no-table')).body).toMatchObject({ id: 'no-table', model: 'test-transformer' });
  });

  it('trains an AESI codec, stores it with its curve, and re-compresses the collection with it', async () => {
    const ref = await rank();
    const t = await api('POST', '/v1/collections/a/train', { head: 'aesi', codeDims: 8, width: 32, maxEpochs: 4, patience: 2, sampleTokens: 3000, batchTokens: 128, seed: 5 });
    expect(t.status, JSON.stringify(t.body)).toBe(202);
    expect(t.body).toMatchObject({ collection: 'a', judgmentsId: null, status: 'queued' });
    const done = await until(async () => {
      const s = (await api('GET', `/v1/train/${t.body.trainId}`)).body;
      if (s.status === 'failed') throw new Error(s.error);
      return s.status === 'completed' ? s : null;
    }, 50_000);
    const rep = done.result;
    expect(rep).toMatchObject({ head: 'aesi', collection: 'a', version: 1, trainedCodec: 'a.aesi-c8-h32.v1', codec: { kind: 'eden', dims: 8, sideInfo: true, trained: 'a.aesi-c8-h32.v1' } });
    expect(rep.curve.length).toBeGreaterThanOrEqual(1);
    expect(rep.curve.length).toBeLessThanOrEqual(4);
    expect(rep.heldOut.tokens).toBeGreaterThan(100);
    expect(rep.heldOut.relError).toBeGreaterThan(0);
    expect(rep.heldOut.relError).toBeLessThan(1);
    // the held-out error falls from the first epoch to the best one
    expect(rep.heldOut.mse).toBeLessThanOrEqual(rep.curve[0].valMse);
    // in S3: the trained codec (an artifact with the AESI weights) and its report
    const store = server.runtime.store;
    const bytes = await store.get(trainingKeys.trainedCodec(config.DEFAULT_TENANT, 'a', rep.trainedCodec));
    const trained = deserializeArtifact(bytes!);
    expect(trained).toMatchObject({ aesiWidth: 32, codedDims: 8, inputDims: 100, sideDims: 100 });
    expect(await store.getJson(trainingKeys.trainedCodecReport(config.DEFAULT_TENANT, 'a', rep.trainedCodec))).toMatchObject({ trainId: t.body.trainId, bestEpoch: rep.bestEpoch });

    // an unknown trained codec (409 naming codec.trained: the body is valid and the collection in the URL exists, so neither a 400 nor a 404), or settings that do not fit it (409, naming its dims)
    const unknown = await api('POST', '/v1/collections/a/recompress', { codec: { kind: 'eden', dims: 8, sideInfo: true, layout: 'cross', trained: 'nope' } });
    expect(unknown.status).toBe(409);
    expect(unknown.body.error).toBe('conflict');
    expect(unknown.body.message).toContain("codec.trained 'nope'");
    const wrongDims = await api('POST', '/v1/collections/a/recompress', { codec: { kind: 'eden', dims: 16, sideInfo: true, layout: 'cross', trained: rep.trainedCodec } });
    expect(wrongDims.status).toBe(409);
    expect(wrongDims.body.message).toContain('dims 8');
    const atCreate = await api('POST', '/v1/collections', { id: 'b', codec: { kind: 'eden', dims: 8, sideInfo: true, trained: rep.trainedCodec } });
    expect(atCreate.status).toBe(400);

    const codec = { kind: 'eden', bits: 8, dims: 8, layout: 'cross', sideInfo: true, trained: rep.trainedCodec };
    const rc = await api('POST', '/v1/collections/a/recompress', { codec });
    expect(rc.status, JSON.stringify(rc.body)).toBe(202);
    const after = await until(async () => {
      const c = (await api('GET', '/v1/collections/a')).body;
      return c.codecVersion === 2 && !c.pending ? c : null;
    }, 30_000);
    expect(after.codec).toMatchObject(codec);
    // the version's artifact: the trained weights under the request's settings (8 bits, not the run's 6)
    const v2 = deserializeArtifact((await store.get(s3Keys.codecArtifact(config.DEFAULT_TENANT, 'a', 2)))!);
    expect(v2.settings).toMatchObject(codec);
    expect(Array.from(v2.aesiDecoder!)).toEqual(Array.from(trained.aesiDecoder!));
    expect(v2.checksum).not.toBe(trained.checksum);
    // 8 code dims at 8 bits: a few bytes per token against fp16's 200
    expect(after.bytesPerToken).toBeLessThan(20);

    // re-ranking decodes through the AESI decoder with the static embeddings: same documents, finite scores that track fp16's
    const got = await rank();
    let agree = 0;
    let pairs = 0;
    got.forEach((m: Map<string, number>, qi: number) => {
      const ids = [...m.keys()];
      expect(ids.sort()).toEqual([...ref[qi].keys()].sort());
      for (const v of m.values()) expect(Number.isFinite(v)).toBe(true);
      // pairwise order agreement with fp16 on a sample of pairs
      for (let i = 0; i < ids.length; i += 3)
        for (let j = i + 1; j < ids.length; j += 7) {
          pairs++;
          if (Math.sign(m.get(ids[i])! - m.get(ids[j])!) === Math.sign(ref[qi].get(ids[i])! - ref[qi].get(ids[j])!)) agree++;
        }
    });
    expect(agree / pairs).toBeGreaterThan(0.6);
  }, 120_000);
});
