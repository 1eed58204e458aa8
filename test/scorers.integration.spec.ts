import { mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { roundToHalf } from '@lateral/codec';
import { getEncoder, type EncodedText } from '@lateral/model';
import { LITE_SMALL, knrm, liteReference, maxsim, maxsimTopK, meanPool, mebert, negationWeights, signedMaxsim, hybridLinear } from '@lateral/scoring';
import type { z } from 'zod';
import type { ScorerSchema } from '@lateral/shared';
import { randomKnrmWeights, randomLiteWeights, writeKnrmArtifact, writeLiteArtifact } from '@lateral/kernels';
import { startServer, type Server } from '../apps/all-in-one/src/server';
import { loadCranfield } from '../scripts/lib/cranfield';
import { http, testConfig, until } from './helpers';

/**
 * Every scorer selected per request through the HTTP API and computed by the scorer worker from
 * the vectors stored in S3, checked against the scoring library's reference implementations run
 * in this process on the same (fp16-rounded) vectors.
 */
describe('scorers through the re-rank API', () => {
  const scorersDir = mkdtempSync(path.join(os.tmpdir(), 'lateral-scorers-'));
  const config = testConfig({ SCORERS_DIR: scorersDir, ENCODE_BATCH_DOCUMENTS: '32' });
  const cran = loadCranfield(path.resolve('data/cranfield'));
  const docs = cran.docs.filter((d) => d.text).slice(0, 60);
  const queries = cran.queries.slice(0, 3);
  const liteW = randomLiteWeights(7, LITE_SMALL);
  const knrmW = randomKnrmWeights(11);
  let server: Server;
  let encDocs: EncodedText[];
  let encQueries: EncodedText[];
  let d: number;
  const api = (method: string, url: string, body?: unknown) => http(server.url, method, url, body);

  beforeAll(async () => {
    writeLiteArtifact(path.join(scorersDir, 'lite-small.onnx'), liteW);
    writeKnrmArtifact(path.join(scorersDir, 'knrm.onnx'), knrmW);
    server = await startServer(config, { quiet: true });
    await api('POST', '/v1/collections', { id: 'c' });
    const ing = await api('POST', '/v1/collections/c/documents', docs);
    await until(async () => ((await api('GET', ing.body.status)).body.state === 'done' ? true : null), 120_000);
    const encoder = await getEncoder(path.resolve(config.MODELS_DIR, config.DEFAULT_MODEL), { executionProvider: 'cpu' });
    d = encoder.dims;
    encDocs = (await encoder.encodeDocuments(docs.map((x) => x.text))).map((e) => ({ ...e, vectors: roundToHalf(e.vectors) }));
    encQueries = await encoder.encodeQueries(queries.map((q) => q.text));
  });
  afterAll(async () => {
    await server?.stop();
  });

  async function run(scorer: z.input<typeof ScorerSchema> | string, withScores = false) {
    const first = (i: number) => 100 - i;
    const res = await api('POST', '/v1/rerank?wait=60', {
      collection: 'c',
      scorer,
      topK: docs.length,
      queries: queries.map((q) => ({ id: q.id, text: q.text, candidates: docs.map((x, i) => (withScores ? { id: x.id, score: first(i) } : x.id)) })),
    });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(res.body.status, JSON.stringify(res.body)).toBe('completed');
    return res.body.result.results as { queryId: string; hits: { id: string; score: number }[] }[];
  }

  function expectScores(results: Awaited<ReturnType<typeof run>>, ref: (q: EncodedText, e: EncodedText, i: number, qi: number) => number, tol: number) {
    results.forEach((r, qi) => {
      const byId = new Map(r.hits.map((h) => [h.id, h.score]));
      docs.forEach((x, i) => expect(Math.abs(byId.get(x.id)! - ref(encQueries[qi], encDocs[i], i, qi)), `${x.id}`).toBeLessThan(tol));
    });
  }

  it('maxsim-topk, mebert, signed-maxsim (heuristic) and knrm equal their references', async () => {
    expectScores(await run({ name: 'maxsim-topk', k: 4, reduce: 'mean' }), (q, e) => maxsimTopK(q.vectors, q.length, e.vectors, e.length, d, 4, 'mean'), 1e-5);
    expectScores(await run({ name: 'mebert', m: 3 }), (q, e) => mebert(meanPool(q.vectors, q.length, d), e.vectors, e.length, d, 3), 1e-5);
    const encoder = await getEncoder(path.resolve(config.MODELS_DIR, config.DEFAULT_MODEL), { executionProvider: 'cpu' });
    expectScores(
      await run({ name: 'signed-maxsim', weights: 'heuristic' }),
      (q, e) => signedMaxsim(q.vectors, negationWeights(Array.from(q.tokenIds, (id) => encoder.tokenizer.decode([id]))), q.length, e.vectors, new Float32Array(e.length).fill(1), e.length, d),
      1e-5,
    );
    expectScores(await run({ name: 'knrm', artifact: 'knrm' }), (q, e) => knrm(q.vectors, q.length, e.vectors, e.length, d, knrmW), 1e-4);
  });

  it('lite from an ONNX artifact equals the reference forward pass to 1e-4', async () => {
    expectScores(await run({ name: 'lite', artifact: 'lite-small' }), (q, e) => liteReference(q.vectors, q.length, e.vectors, e.length, d, liteW), 1e-4);
  });

  it('xtr with k\' covering every candidate token equals maxsim / n', async () => {
    expectScores(await run({ name: 'xtr', kPrime: 1_000_000 }), (q, e) => maxsim(q.vectors, q.length, e.vectors, e.length, d) / q.length, 1e-5);
  });

  it('hybrid combines the candidates\' first-stage scores with an explicit lambda and normalisation', async () => {
    const lambda = 0.3;
    const results = await run({ name: 'hybrid', base: 'maxsim', lambda, normalization: 'minmax' }, true);
    const first = Float64Array.from(docs, (_, i) => 100 - i);
    const expected = encQueries.map((q) => hybridLinear(Float64Array.from(encDocs, (e) => maxsim(q.vectors, q.length, e.vectors, e.length, d)), first, lambda, 'minmax'));
    expectScores(results, (_q, _e, i, qi) => expected[qi][i], 1e-5);
    expect((await run({ name: 'hybrid', fusion: 'rrf', lambda: 0 }, true))[0].hits).toHaveLength(docs.length);
  });

  it('rejects unknown scorers, missing artifacts and hybrid without first-stage scores with 400s naming them', async () => {
    const body = (scorer: unknown, candidates: unknown[] = ['1']) => ({ collection: 'c', scorer, queries: [{ id: 'q', text: 'wing', candidates }] });
    const unknown = await api('POST', '/v1/rerank', body('bm99'));
    expect(unknown.status).toBe(400);
    expect(JSON.stringify(unknown.body)).toMatch(/scorer/);
    const missing = await api('POST', '/v1/rerank', body({ name: 'lite', artifact: 'nope' }));
    expect(missing.status).toBe(400);
    expect(missing.body.message).toMatch(/nope\.onnx.*SCORERS_DIR/);
    const noScores = await api('POST', '/v1/rerank', body({ name: 'hybrid', lambda: 0.5 }));
    expect(noScores.status).toBe(400);
    expect(JSON.stringify(noScores.body)).toMatch(/first-stage score/);
    const noLambda = await api('POST', '/v1/rerank', body({ name: 'hybrid' }, [{ id: '1', score: 1 }]));
    expect(noLambda.status).toBe(400);
    expect(JSON.stringify(noLambda.body)).toMatch(/lambda/);
  });
});
