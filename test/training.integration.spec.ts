import { existsSync, mkdtempSync, readFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readLiteArtifact, writeLiteArtifact } from '@lateral/kernels';
import { MIN_TRAIN_QUERIES, trainingKeys } from '@lateral/shared';
import { startServer, type Server } from '../apps/all-in-one/src/server';
import { loadCranfield } from '../scripts/lib/cranfield';
import { http, testConfig, until } from './helpers';

/**
 * Learned heads through the service: judgments stored in S3 (JSON, NDJSON, TREC), a K-NRM head
 * trained by the train queue into a versioned artifact that re-rank requests then load, a
 * running LITE training cancelled, and the bad inputs (unknown documents listed, too few judged
 * queries -> 400 naming the minimum).
 */
describe('judgments and training through the API', () => {
  const scorersDir = mkdtempSync(path.join(os.tmpdir(), 'lateral-heads-'));
  const ADMIN = 'training-admin-token';
  const config = testConfig({ SCORERS_DIR: scorersDir, ENCODE_BATCH_DOCUMENTS: '64', ADMIN_TOKEN: ADMIN });
  const cran = loadCranfield(path.resolve('data/cranfield'));
  // Judged queries whose relevant documents are all in a small collection, plus unjudged fillers.
  const judgedQueries = cran.queries.slice(0, 16);
  const relevant = new Set(judgedQueries.flatMap((q) => [...(cran.qrels.get(q.id)?.keys() ?? [])]));
  const docs = cran.docs.filter((d) => d.text && (relevant.has(d.id) || Number(d.id) % 20 === 0)).slice(0, 260);
  const inCollection = new Set(docs.map((d) => d.id));
  const judged = judgedQueries.map((q) => ({
    id: q.id,
    text: q.text,
    judgments: [...(cran.qrels.get(q.id) ?? new Map())].filter(([doc]) => inCollection.has(doc)).map(([doc, grade]) => ({ doc, grade })),
  })).filter((q) => q.judgments.length > 0);
  let server: Server;
  const api = (method: string, url: string, body?: unknown, headers?: Record<string, string>) => http(server.url, method, url, body, headers);

  beforeAll(async () => {
    server = await startServer(config, { quiet: true });
    await api('POST', '/v1/collections', { id: 'c' });
    const ing = await api('POST', '/v1/collections/c/documents', docs);
    await until(async () => ((await api('GET', ing.body.status)).body.state === 'done' ? true : null), 120_000);
  });
  afterAll(async () => {
    await server?.stop();
  });

  it('stores judgments given as JSON, NDJSON or TREC qrels + topics, listing unknown documents', async () => {
    expect(judged.length).toBeGreaterThanOrEqual(MIN_TRAIN_QUERIES);
    const withUnknown = [{ ...judged[0], judgments: [...judged[0].judgments, { doc: 'no-such-doc', grade: 2 }] }, ...judged.slice(1)];
    const json = await api('POST', '/v1/collections/c/judgments', { queries: withUnknown });
    expect(json.status, JSON.stringify(json.body)).toBe(201);
    expect(json.body.queries).toBe(judged.length);
    expect(json.body.unknownDocuments).toEqual(['no-such-doc']);
    expect(json.body.trainableQueries).toBe(judged.length);
    const stored = await api('GET', `/v1/collections/c/judgments/${json.body.judgmentsId}`);
    expect(stored.body.queries[0].judgments.at(-1)).toEqual({ doc: 'no-such-doc', grade: 2 });
    // the set is in S3 under the collection
    const store = server.runtime.store;
    expect(await store.getJson(trainingKeys.judgments(config.DEFAULT_TENANT, 'c', json.body.judgmentsId))).toMatchObject({ judgmentsId: json.body.judgmentsId });

    const nd = await api('POST', '/v1/collections/c/judgments', judged.slice(0, 3).map((q) => JSON.stringify(q)).join('\n'), { 'content-type': 'application/x-ndjson' });
    expect(nd.status, JSON.stringify(nd.body)).toBe(201);
    expect(nd.body.queries).toBe(3);

    const qrels = judged.slice(0, 2).flatMap((q) => q.judgments.map((j) => `${q.id} 0 ${j.doc} ${j.grade}`)).concat(['1 0 ghost 1']).join('\n');
    const topics = judged.slice(0, 2).map((q) => `<top>\n<num>${q.id}</num><title>\n${q.text}\n</title>\n</top>`).join('\n');
    const trec = await api('POST', '/v1/collections/c/judgments', { qrels, topics });
    expect(trec.status, JSON.stringify(trec.body)).toBe(201);
    expect(trec.body.queries).toBe(2);
    expect(trec.body.unknownDocuments).toEqual(['ghost']);
    const bad = await api('POST', '/v1/collections/c/judgments', { qrels: '7 0 1 1', topics: '1\tsome text' });
    expect(bad.status).toBe(400);
    expect(bad.body.message).toContain("'7'");
  });

  it(`refuses to train on fewer than ${MIN_TRAIN_QUERIES} judged queries (409 naming the minimum: a well-formed request, the stored judgments are not enough)`, async () => {
    const few = await api('POST', '/v1/collections/c/judgments', judged.slice(0, MIN_TRAIN_QUERIES - 1));
    const res = await api('POST', '/v1/collections/c/train', { head: 'knrm', judgments: few.body.judgmentsId });
    expect(res.status).toBe(409);
    expect(res.body.message).toContain(`at least ${MIN_TRAIN_QUERIES} judged queries`);
    // a judgment set the collection does not have: 409 naming `judgments` (the collection in the URL exists, so not a 404)
    const unknownSet = await api('POST', '/v1/collections/c/train', { head: 'knrm', judgments: 'js-nope' });
    expect(unknownSet.status).toBe(409);
    expect(unknownSet.body.error).toBe('conflict');
    expect(unknownSet.body.message).toMatch(/^judgments: .*'js-nope'/);
    const badSize = await api('POST', '/v1/collections/c/train', { head: 'lite', size: 'huge' });
    expect(badSize.status).toBe(400);
    expect(JSON.stringify(badSize.body)).toContain('size');
  });

  it('trains K-NRM into a versioned artifact (S3 and SCORERS_DIR) with its curve and held-out figures, usable by re-rank', async () => {
    const set = await api('POST', '/v1/collections/c/judgments', judged);
    const res = await api('POST', '/v1/collections/c/train', { head: 'knrm', judgments: set.body.judgmentsId, maxEpochs: 4, seed: 5 });
    expect(res.status, JSON.stringify(res.body)).toBe(202);
    const done = await until(async () => {
      const st = await api('GET', `/v1/train/${res.body.trainId}`);
      return st.body.status === 'completed' || st.body.status === 'failed' ? st.body : null;
    }, 240_000, 500);
    expect(done.status, JSON.stringify(done)).toBe('completed');
    const report = done.result;
    expect(report.artifact).toBe('c.knrm.v1');
    expect(report.curve.length).toBeGreaterThanOrEqual(1);
    expect(report.curve[0]).toMatchObject({ epoch: 1 });
    expect(Number.isFinite(report.curve[0].trainLoss)).toBe(true);
    expect(report.heldOut.queries).toBeGreaterThanOrEqual(2);
    expect(report.data.trainQueries + report.data.valQueries).toBe(judged.length);
    // the trainer's local copy sits in its tenant's cache of S3 (SCORERS_DIR/tenants/{tenant}/)
    const file = path.join(scorersDir, 'tenants', config.DEFAULT_TENANT, 'c.knrm.v1.onnx');
    expect(existsSync(file)).toBe(true);
    expect(existsSync(path.join(scorersDir, 'tenants', config.DEFAULT_TENANT, 'c.knrm.v1.training.json'))).toBe(true);
    const store = server.runtime.store;
    expect(Buffer.from((await store.get(trainingKeys.headArtifact(config.DEFAULT_TENANT, 'c', 'c.knrm.v1')))!).equals(readFileSync(file))).toBe(true);

    const q = judged[0];
    const rr = await api('POST', '/v1/rerank?wait=60', { collection: 'c', scorer: { name: 'knrm', artifact: 'c.knrm.v1' }, topK: 5, queries: [{ id: q.id, text: q.text, candidates: docs.slice(0, 30).map((d) => d.id) }] });
    expect(rr.status, JSON.stringify(rr.body)).toBe(200);
    expect(rr.body.result.results[0].hits).toHaveLength(5);

    // a second run of the same head is the next version
    const again = await api('POST', '/v1/collections/c/train', { head: 'knrm', maxEpochs: 1 });
    const done2 = await until(async () => {
      const st = await api('GET', `/v1/train/${again.body.trainId}`);
      return st.body.status === 'completed' || st.body.status === 'failed' ? st.body : null;
    }, 240_000, 500);
    expect(done2.result?.artifact, JSON.stringify(done2)).toBe('c.knrm.v2');
  }, 600_000); // two runs of up to 240 s each (waits above) on a loaded machine

  it('trains a residual LITE on MaxSim whose re-rank scores are its MaxSim weight x MaxSim plus its LITE correction', async () => {
    const bad = await api('POST', '/v1/collections/c/train', { head: 'knrm', residual: true });
    expect(bad.status).toBe(400);
    expect(JSON.stringify(bad.body)).toContain('residual');
    const set = await api('POST', '/v1/collections/c/judgments', judged);
    const res = await api('POST', '/v1/collections/c/train', { head: 'lite', size: 'small', residual: true, maxEpochs: 2, patience: 2, seed: 3, judgments: set.body.judgmentsId });
    expect(res.status, JSON.stringify(res.body)).toBe(202);
    const done = await until(async () => {
      const st = await api('GET', `/v1/train/${res.body.trainId}`);
      return st.body.status === 'completed' || st.body.status === 'failed' ? st.body : null;
    }, 300_000, 500);
    expect(done.status, JSON.stringify(done)).toBe('completed');
    expect(done.result.artifact).toBe('c.lite-small-residual.v1');
    const file = path.join(scorersDir, 'tenants', config.DEFAULT_TENANT, 'c.lite-small-residual.v1.onnx');
    const report = JSON.parse(readFileSync(file.replace(/\.onnx$/, '.training.json'), 'utf8'));
    expect(report).toMatchObject({ head: 'lite', size: 'small', residual: true });
    // epoch 0 (MaxSim itself) is a candidate of early stopping: the kept weights rank the held-out queries no worse
    expect(report.heldOut.ndcg10).toBeGreaterThanOrEqual(report.heldOut.maxsimNdcg10 - 1e-9);
    const weights = readLiteArtifact(file);
    expect(Number.isFinite(weights.maxsimWeight)).toBe(true);
    // The same weights without the residual, as an operator artifact: the LITE correction alone.
    const { maxsimWeight, ...plain } = weights;
    writeLiteArtifact(path.join(scorersDir, 'residual-part.onnx'), plain);

    const q = judged[1];
    const candidates = docs.slice(0, 40).map((d) => d.id);
    const rerank = async (scorer: unknown) => {
      const rr = await api('POST', '/v1/rerank?wait=60', { collection: 'c', scorer, topK: candidates.length, queries: [{ id: q.id, text: q.text, candidates }] });
      expect(rr.status, JSON.stringify(rr.body)).toBe(200);
      return new Map<string, number>(rr.body.result.results[0].hits.map((h: { id: string; score: number }) => [h.id, h.score]));
    };
    const residual = await rerank({ name: 'lite', artifact: 'c.lite-small-residual.v1' });
    const maxsim = await rerank({ name: 'maxsim', normalize: false });
    const part = await rerank({ name: 'lite', artifact: 'residual-part' });
    expect(residual.size).toBe(candidates.length);
    let corrected = 0;
    for (const id of candidates) {
      const want = maxsimWeight! * maxsim.get(id)! + part.get(id)!;
      expect(Math.abs(residual.get(id)! - want)).toBeLessThan(1e-4 * Math.max(1, Math.abs(want)));
      if (Math.abs(part.get(id)!) > 1e-6) corrected++;
    }
    // a best epoch past 0 carries a correction; epoch 0 is MaxSim's ranking exactly
    if (report.bestEpoch > 0) expect(corrected).toBeGreaterThan(0);
    else expect(corrected).toBe(0);
  }, 600_000);

  it('reports epochs, loss and ETA while LITE trains, and a DELETE cancels the run', async () => {
    const set = await api('POST', '/v1/collections/c/judgments', judged);
    const res = await api('POST', '/v1/collections/c/train', { head: 'lite', size: 'small', maxEpochs: 200, patience: 50, judgments: set.body.judgmentsId });
    expect(res.status, JSON.stringify(res.body)).toBe(202);
    const running = await until(async () => {
      const st = await api('GET', `/v1/train/${res.body.trainId}`);
      if (st.body.status === 'failed' || st.body.status === 'completed') throw new Error(JSON.stringify(st.body));
      // epoch 0 is LITE's MaxSim warm start (300 steps), then the ranking epochs: either is a training step with a loss
      return st.body.status === 'running' && st.body.progress?.stage === 'training' && st.body.progress.loss !== undefined ? st.body : null;
    }, 240_000, 200);
    expect(running.progress.epoch).toBeGreaterThanOrEqual(0);
    expect(running.progress.step).toBeGreaterThanOrEqual(1);
    expect(running.progress.step).toBeLessThanOrEqual(running.progress.stepsPerEpoch);
    expect(running.progress.maxEpochs).toBe(200);
    expect(Number.isFinite(running.progress.loss)).toBe(true);
    expect(running.progress.etaSeconds).toBeGreaterThanOrEqual(0);
    // Training runs in a worker thread: this process (API, queues, Redis health check) keeps its
    // event loop turning. Measured over 3 s of training (the run is still training at the end);
    // on the main thread one LITE step held it for up to seconds.
    const delay = monitorEventLoopDelay({ resolution: 10 });
    delay.enable();
    await new Promise((r) => setTimeout(r, 3000));
    delay.disable();
    const still = await api('GET', `/v1/train/${res.body.trainId}`);
    expect(still.body.status).toBe('running');
    expect(still.body.progress?.stage).toBe('training');
    console.log(`event-loop delay while LITE trains: max ${(delay.max / 1e6).toFixed(1)} ms`);
    expect(delay.max / 1e6).toBeLessThan(500);
    // the operations overview (the dashboard's data) lists the run with the same progress fields
    const listed = await until(async () => {
      const o = await api('GET', '/v1/admin/overview', undefined, { authorization: `Bearer ${ADMIN}` });
      expect(o.status).toBe(200);
      const t = (o.body.training as { trainId: string; state: string; epoch: number | null }[]).find((x) => x.trainId === res.body.trainId);
      return t && t.state === 'running' && t.epoch !== null ? t : null;
    }, 60_000, 300);
    expect(listed).toMatchObject({ collection: 'c', stage: 'training', maxEpochs: 200 });
    expect(Number.isFinite((listed as unknown as { loss: number }).loss)).toBe(true);
    expect((listed as unknown as { etaSeconds: number }).etaSeconds).toBeGreaterThanOrEqual(0);
    const del = await api('DELETE', `/v1/train/${res.body.trainId}`);
    expect(del.status).toBe(202);
    expect(del.body.status).toBe('cancelling');
    const end = await until(async () => {
      const st = await api('GET', `/v1/train/${res.body.trainId}`);
      return st.body.status === 'cancelled' || st.body.status === 'failed' || st.body.status === 'completed' ? st.body : null;
    }, 120_000, 200);
    expect(end.status, JSON.stringify(end)).toBe('cancelled');
    expect(end.error).toMatch(/cancelled in epoch \d+/);
    expect(existsSync(path.join(scorersDir, 'tenants', config.DEFAULT_TENANT, 'c.lite-small.v1.onnx'))).toBe(false);
  }, 600_000);
});
