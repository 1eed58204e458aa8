import { existsSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { createHash } from 'node:crypto';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { QueueName, trainingKeys } from '@lateral/shared';
import { ScorerArtifactStore } from '@lateral/infra';
import { startServer, type Server } from '../apps/all-in-one/src/server';
import { HANDLED_QUEUES } from '@lateral/workers';
import { loadCranfield } from '../scripts/lib/cranfield';
import { http, testConfig, until } from './helpers';

/**
 * A trained head reaches every scorer: a K-NRM head trained by one server (its own SCORERS_DIR)
 * is served, after that server is gone, by another whose SCORERS_DIR is empty: the artifact comes
 * from S3 (checksum of the training report verified) and the re-rank scores are the trainer's.
 * An artifact that exists nowhere is a 404 naming it; a corrupted S3 copy is refused.
 */
describe('trained scorer artifacts from S3', () => {
  const dirA = mkdtempSync(path.join(os.tmpdir(), 'lateral-heads-a-'));
  const dirB = mkdtempSync(path.join(os.tmpdir(), 'lateral-heads-b-'));
  const base = testConfig({ SCORERS_DIR: dirA, ENCODE_BATCH_DOCUMENTS: '64' });
  // same Redis prefix and bucket, another scorer directory: "another machine"
  const configB = { ...base, SCORERS_DIR: dirB };
  const cran = loadCranfield(path.resolve('data/cranfield'));
  const judgedQueries = cran.queries.slice(0, 14);
  const relevant = new Set(judgedQueries.flatMap((q) => [...(cran.qrels.get(q.id)?.keys() ?? [])]));
  const docs = cran.docs.filter((d) => d.text && (relevant.has(d.id) || Number(d.id) % 25 === 0)).slice(0, 200);
  const inCollection = new Set(docs.map((d) => d.id));
  const judged = judgedQueries.map((q) => ({
    id: q.id,
    text: q.text,
    judgments: [...(cran.qrels.get(q.id) ?? new Map())].filter(([doc]) => inCollection.has(doc)).map(([doc, grade]) => ({ doc, grade })),
  })).filter((q) => q.judgments.length > 0);
  const q = judged[0];
  const rerankBody = (artifact: string) => ({ collection: 'c', scorer: { name: 'knrm', artifact }, topK: 20, queries: [{ id: q.id, text: q.text, candidates: docs.slice(0, 40).map((d) => d.id) }] });
  let a: Server | undefined;
  let b: Server | undefined;
  let scoresA: { id: string; score: number }[] = [];

  beforeAll(async () => {
    a = await startServer(base, { quiet: true });
    const api = (method: string, url: string, body?: unknown) => http(a!.url, method, url, body);
    await api('POST', '/v1/collections', { id: 'c' });
    const ing = await api('POST', '/v1/collections/c/documents', docs);
    await until(async () => ((await api('GET', ing.body.status)).body.state === 'done' ? true : null), 120_000);
    const set = await api('POST', '/v1/collections/c/judgments', judged);
    const res = await api('POST', '/v1/collections/c/train', { head: 'knrm', judgments: set.body.judgmentsId, maxEpochs: 3, seed: 3 });
    expect(res.status, JSON.stringify(res.body)).toBe(202);
    const done = await until(async () => {
      const st = await api('GET', `/v1/train/${res.body.trainId}`);
      return st.body.status === 'completed' || st.body.status === 'failed' ? st.body : null;
    }, 240_000, 500);
    expect(done.status, JSON.stringify(done)).toBe('completed');
    expect(done.result.artifact).toBe('c.knrm.v1');
    const rr = await api('POST', '/v1/rerank?wait=60', rerankBody('c.knrm.v1'));
    expect(rr.status, JSON.stringify(rr.body)).toBe(200);
    scoresA = rr.body.result.results[0].hits.map((h: { id: string; score: number }) => ({ id: h.id, score: h.score }));
    await a.stop();
    a = undefined;
    // B: every queue but train, an empty SCORERS_DIR
    b = await startServer(configB, { quiet: true, queues: HANDLED_QUEUES.filter((x) => x !== QueueName.train) });
  }, 600_000);
  afterAll(async () => {
    await a?.stop();
    await b?.stop();
  });

  it('a scorer with an empty SCORERS_DIR fetches the trained head from S3 and gives the trainer\'s scores', async () => {
    expect(readdirSync(dirB)).toEqual([]);
    const rr = await http(b!.url, 'POST', '/v1/rerank?wait=60', rerankBody('c.knrm.v1'));
    expect(rr.status, JSON.stringify(rr.body)).toBe(200);
    const scoresB = rr.body.result.results[0].hits.map((h: { id: string; score: number }) => ({ id: h.id, score: h.score }));
    expect(scoresA.length).toBe(20);
    expect(scoresB).toEqual(scoresA);
    // the copy B fetched is S3's object, with the checksum its training report records
    const cached = path.join(dirB, 'tenants', base.DEFAULT_TENANT, 'c.knrm.v1.onnx');
    expect(existsSync(cached)).toBe(true);
    const s3 = Buffer.from((await b!.runtime.store.get(trainingKeys.headArtifact(base.DEFAULT_TENANT, 'c', 'c.knrm.v1')))!);
    expect(readFileSync(cached).equals(s3)).toBe(true);
    const report = await b!.runtime.store.getJson<{ sha256: string }>(trainingKeys.headReport(base.DEFAULT_TENANT, 'c', 'c.knrm.v1'));
    expect(report?.sha256).toBe(createHash('sha256').update(s3).digest('hex'));
    // the trainer's own copy is in its tenant cache too (A's directory), never in B's top level
    expect(existsSync(path.join(dirA, 'tenants', base.DEFAULT_TENANT, 'c.knrm.v1.onnx'))).toBe(true);
    expect(existsSync(path.join(dirB, 'c.knrm.v1.onnx'))).toBe(false);
  });

  it('an artifact that exists nowhere is a 404 naming it, before anything is queued', async () => {
    const rr = await http(b!.url, 'POST', '/v1/rerank?wait=5', rerankBody('c.knrm.v9'));
    expect(rr.status).toBe(404);
    expect(rr.body.message).toContain("'c.knrm.v9'");
    expect(rr.body.message).toContain("collection 'c'");
    const search = await http(b!.url, 'POST', '/v1/search?wait=5', { collection: 'c', queries: [{ id: q.id, text: q.text }], topK: 5, rerank: { scorer: { name: 'knrm', artifact: 'c.knrm.v9' } } });
    expect(search.status, JSON.stringify(search.body)).toBe(404);
    expect(search.body.message).toContain("'c.knrm.v9'");
  });

  it('a copy whose bytes do not match the recorded checksum is refused, naming the artifact and both sums', async () => {
    const store = b!.runtime.store;
    const t = base.DEFAULT_TENANT;
    const good = Buffer.from((await store.get(trainingKeys.headArtifact(t, 'c', 'c.knrm.v1')))!);
    const report = await store.getJson<Record<string, unknown>>(trainingKeys.headReport(t, 'c', 'c.knrm.v1'));
    const bad = Buffer.from(good);
    bad[bad.length - 1] ^= 0xff;
    await store.putJson(trainingKeys.headReport(t, 'c', 'c.knrm.v5'), { ...report, artifact: 'c.knrm.v5' });
    await store.put(trainingKeys.headArtifact(t, 'c', 'c.knrm.v5'), bad);
    const dir = mkdtempSync(path.join(os.tmpdir(), 'lateral-heads-c-'));
    const artifacts = new ScorerArtifactStore(store, dir);
    const err = await artifacts.resolve(t, { name: 'knrm', artifact: 'c.knrm.v5' }).catch((e) => e);
    expect(err).toBeInstanceOf(Error);
    expect(err.message).toContain("'c.knrm.v5'");
    expect(err.message).toContain(String(report!.sha256));
    expect(existsSync(path.join(dir, 'tenants', t, 'c.knrm.v5.onnx'))).toBe(false);
    // a cached copy corrupted on disk is dropped and fetched again
    const file = await artifacts.resolve(t, { name: 'knrm', artifact: 'c.knrm.v1' });
    writeFileSync(file, bad);
    const again = new ScorerArtifactStore(store, dir);
    expect(readFileSync(await again.resolve(t, { name: 'knrm', artifact: 'c.knrm.v1' })).equals(good)).toBe(true);
  });
});
