import { mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import Ajv from 'ajv';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openApiDocument } from '@lateral/http-api';
import { startServer, type Server } from '../apps/all-in-one/src/server';
import { testConfig, until } from './helpers';

/**
 * The OpenAPI document against the live service (issue 16 item 4): every operation the document
 * lists is called on the real service (HTTP, queues, workers, S3, the GloVe ONNX model), and every
 * answer must carry a status code the operation declares and a body valid against the schema
 * declared for that code and content type. The operations come from the document itself: one it
 * lists that the table below does not call fails the test, naming it.
 */
type Content = Record<string, { schema: unknown }>;
type Doc = { paths: Record<string, Record<string, { requestBody?: { content: Content }; responses: Record<string, { content?: Content; headers?: Record<string, unknown> }> }>>; components: Record<string, unknown> };
const doc = openApiDocument('live') as unknown as Doc;
const METHODS = ['get', 'post', 'put', 'patch', 'delete'];
const operations = Object.entries(doc.paths).flatMap(([p, ops]) => Object.keys(ops).filter((m) => METHODS.includes(m)).map((m) => `${m.toUpperCase()} ${p}`));

interface Answer {
  op: string;
  url: string;
  status: number;
  contentType: string;
  body: unknown;
  headers: Headers;
  /** The request's body as sent (parsed when JSON) and its content type. */
  request?: { contentType: string; body: unknown };
}

const ADMIN = 'live-admin-token';
/** The operator credential (ADMIN_TOKEN) of /v1/admin/overview and the job retry. */
const operator = { authorization: `Bearer ${ADMIN}` };
/** AUTH=keys (key management answers 403 without it): the bootstrap admin key of DEFAULT_TENANT, sent on every other call. */
const KEY = 'live-bootstrap-admin-key-0123456789abcdef';
const admin = { authorization: `Bearer ${KEY}` };

describe('OpenAPI document vs the live service', () => {
  const config = testConfig({ ADMIN_TOKEN: ADMIN, AUTH: 'keys', ADMIN_API_KEY: KEY, RATE_LIMIT_PER_SECOND: '0', SCORERS_DIR: mkdtempSync(path.join(os.tmpdir(), 'lateral-heads-')), ENCODE_BATCH_DOCUMENTS: '8' });
  let server: Server;
  const answers: Answer[] = [];

  /** Calls `url` as operation `op` (`METHOD /template`) and records the answer. */
  async function call(op: string, url: string, body?: unknown, headers: Record<string, string> = admin): Promise<{ status: number; body: any }> { // eslint-disable-line @typescript-eslint/no-explicit-any
    const method = op.split(' ')[0];
    const init: RequestInit = { method, headers: { ...headers } };
    if (body !== undefined) {
      init.body = typeof body === 'string' ? body : JSON.stringify(body);
      if (!headers['content-type']) (init.headers as Record<string, string>)['content-type'] = 'application/json';
    }
    const res = await fetch(server.url + url, init);
    const text = await res.text();
    const contentType = (res.headers.get('content-type') ?? '').split(';')[0].trim();
    let parsed: unknown = text;
    if (contentType === 'application/json') parsed = JSON.parse(text);
    const sent = body === undefined ? undefined : { contentType: ((init.headers as Record<string, string>)['content-type'] ?? '').split(';')[0], body };
    answers.push({ op, url, status: res.status, headers: res.headers, contentType, body: text === '' ? undefined : parsed, ...(sent ? { request: sent } : {}) });
    return { status: res.status, body: parsed };
  }

  const docs = [
    { id: 'd1', text: 'supersonic flow over a swept wing at high angle of attack', metadata: { year: 1961, tags: ['wing'] } },
    { id: 'd2', text: 'heat transfer in laminar boundary layers with suction', metadata: { year: 1958 } },
    { id: 'd3', text: 'shock wave interaction with a turbulent boundary layer' },
    { id: 'd4', text: 'flutter of thin panels in supersonic flow' },
    { id: 'punct', text: '!!! ... ??? ;;; --- ,,,', metadata: { kind: 'punctuation only' } },
    { id: 'd5', text: 'buckling of cylindrical shells under axial compression' },
    { id: 'd6', text: 'slender body theory for pointed bodies of revolution' },
    { id: 'd7', text: 'viscous hypersonic flow past a flat plate' },
    { id: 'd8', text: 'pressure distribution on a delta wing' },
    { id: 'd9', text: 'transition to turbulence in a wind tunnel' },
  ];

  /** How each operation is called: in order, later steps using ids the earlier ones returned. */
  async function exercise() {
    await call('GET /v1/health', '/v1/health');
    await call('GET /v1/models', '/v1/models');
    expect((await call('GET /v1/health/ready', '/v1/health/ready')).body.status).toBe('ok');
    expect((await call('GET /v1/health/live', '/v1/health/live', undefined, {})).status).toBe(200); // no key: public

    // collections
    expect((await call('POST /v1/collections', '/v1/collections', { id: 'c' })).status).toBe(201);
    await call('POST /v1/collections', '/v1/collections', { id: 'c' }); // 409: already exists
    await call('POST /v1/collections', '/v1/collections', { id: 'bad id' }); // 400
    await call('POST /v1/collections', '/v1/collections', { id: 'empty', codec: { kind: 'int8' } });
    expect((await call('POST /v1/collections', '/v1/collections', { id: 'ivf', search: { layout: 'ivf' } })).status).toBe(201);
    await call('POST /v1/collections', '/v1/collections', { id: 'bad', search: { layout: 'ivf', bits: 4 } }); // 400
    await call('GET /v1/collections', '/v1/collections');
    await call('GET /v1/collections', '/v1/collections', undefined, {}); // 401: no key
    await call('GET /v1/collections/{id}', '/v1/collections/c');
    await call('GET /v1/collections/{id}', '/v1/collections/nope'); // 404

    // ingest: the object form with body wait, the array form, NDJSON with query wait, errors
    // (a 503 is the documented answer to a transient S3 read, e.g. an object being written: retried as its Retry-After says)
    let ing = await call('POST /v1/collections/{id}/documents', '/v1/collections/c/documents', { documents: docs.slice(0, 8), wait: 60 });
    for (let i = 0; i < 3 && ing.status === 503; i++) {
      await new Promise((r) => setTimeout(r, 1000));
      ing = await call('POST /v1/collections/{id}/documents', '/v1/collections/c/documents', { documents: docs.slice(0, 8), wait: 60 });
    }
    expect(ing.status, JSON.stringify(ing.body)).toBe(200);
    const ing2 = await call('POST /v1/collections/{id}/documents', '/v1/collections/c/documents', docs.slice(8));
    expect(ing2.status).toBe(202);
    await call('POST /v1/collections/{id}/documents', '/v1/collections/c/documents?wait=60', JSON.stringify({ id: 'n1', text: 'an ndjson line about wings' }) + '\n', { ...admin, 'content-type': 'application/x-ndjson' });
    await call('POST /v1/collections/{id}/documents', '/v1/collections/c/documents', [{ id: 'x', text: '' }]); // 400
    await call('POST /v1/collections/{id}/documents', '/v1/collections/nope/documents', [{ id: 'x', text: 'y' }]); // 404
    await call('POST /v1/collections/{id}/documents', '/v1/collections/c/documents', '<doc/>', { ...admin, 'content-type': 'text/xml' }); // 415
    await until(async () => (await call('GET /v1/collections/{id}/ingestions/{ingestionId}', `/v1/collections/c/ingestions/${ing2.body.ingestionId}`)).body.state === 'done', 60_000, 250);
    await call('GET /v1/collections/{id}/ingestions/{ingestionId}', '/v1/collections/c/ingestions/ing-nope'); // 404
    await call('GET /v1/collections/{id}', '/v1/collections/c');

    // documents
    const page = await call('GET /v1/collections/{id}/documents', '/v1/collections/c/documents?limit=3');
    expect(page.body.nextCursor).toBeTruthy();
    await call('GET /v1/collections/{id}/documents', `/v1/collections/c/documents?limit=1000&cursor=${encodeURIComponent(page.body.nextCursor)}`);
    await call('GET /v1/collections/{id}/documents', '/v1/collections/c/documents?limit=0'); // 400
    await call('GET /v1/collections/{id}/documents/{docId}', '/v1/collections/c/documents/d1');
    await call('GET /v1/collections/{id}/documents/{docId}', '/v1/collections/c/documents/punct');
    await call('GET /v1/collections/{id}/documents/{docId}', '/v1/collections/c/documents/nope'); // 404

    // a collection with passages: a long document split, read back whole and by passage, hits grouped by parent
    expect((await call('POST /v1/collections', '/v1/collections', { id: 'p', passages: { overlap: 16 } })).status).toBe(201);
    const longText = Array.from({ length: 60 }, (_, i) => `the swept wing panel ${i} flutters in supersonic flow`).join('. ');
    const pIng = await call('POST /v1/collections/{id}/documents', '/v1/collections/p/documents', { documents: [{ id: 'long', text: longText, metadata: { kind: 'long' } }, { id: 'short', text: 'a short note on shells' }], wait: 60 });
    expect(pIng.body.split?.documents).toBe(1);
    await call('GET /v1/collections/{id}/documents/{docId}', '/v1/collections/p/documents/long');
    await call('GET /v1/collections/{id}/documents/{docId}', `/v1/collections/p/documents/${encodeURIComponent('long#1')}`);
    const grouped = await call('POST /v1/rerank', '/v1/rerank?wait=30', { collection: 'p', queries: [{ id: 'q', text: 'wing flutter', candidates: ['long#0', 'long#1', 'long#2', 'short'] }], group: 'parent', include: ['text'] });
    expect(grouped.body.result.results[0].hits.some((h: { passage?: string }) => h.passage)).toBe(true);
    await call('POST /v1/search', '/v1/search?wait=30', { collection: 'p', queries: [{ id: 'q', text: 'wing flutter' }], mode: 'exhaustive', group: 'parent', include: ['metadata'] });

    // re-rank: scorer shorthand, include, the null score of the punctuation-only document, a missing id
    const rrBody = { collection: 'c', queries: [{ id: 'q1', text: 'supersonic wing', candidates: ['d1', 'd2', 'punct', 'nope'] }], scorer: 'maxsim', include: ['text', 'metadata'] };
    const rr = await call('POST /v1/rerank', '/v1/rerank?wait=30', rrBody);
    expect(rr.status).toBe(200);
    expect(rr.body.result.results[0].hits.find((h: { id: string }) => h.id === 'punct').score).toBeNull();
    const rrQueued = await call('POST /v1/rerank', '/v1/rerank', { ...rrBody, scorer: { name: 'maxsim-topk', k: 2 } });
    expect(rrQueued.status).toBe(202);
    await call('GET /v1/rerank/{id}', `/v1/rerank/${rrQueued.body.id}?wait=30`);
    await call('GET /v1/rerank/{id}', '/v1/rerank/rr-nope'); // 404
    await call('POST /v1/rerank', '/v1/rerank', { collection: 'c', queries: [] }); // 400
    await call('POST /v1/rerank', '/v1/rerank', 'collection=c', { ...admin, 'content-type': 'application/x-www-form-urlencoded' }); // 415
    await call('POST /v1/rerank', '/v1/rerank', { collection: 'nope', queries: [{ id: 'q', text: 't', candidates: ['a'] }] }); // 404
    // text candidates (no collection)
    await call('POST /v1/rerank', '/v1/rerank?wait=30', { model: config.DEFAULT_MODEL, queries: [{ id: 'q', text: 'wing', candidates: [{ text: 'a wing' }, { id: 't2', text: 'a shell' }] }] });

    // search: mode shorthand, include, explain, a stop-word-only query
    const s = await call('POST /v1/search', '/v1/search?wait=30', { collection: 'c', queries: [{ id: 'q1', text: 'supersonic wing' }, { id: 'q2', text: '...' }], mode: 'exhaustive', include: ['text', 'metadata'], explain: true, rerank: { scorer: 'maxsim', depth: 5 } });
    expect(s.status).toBe(200);
    const sQueued = await call('POST /v1/search', '/v1/search', { collection: 'c', queries: [{ id: 'q1', text: 'wing' }], mode: 'bm25' });
    await call('GET /v1/search/{id}', `/v1/search/${sQueued.body.id}?wait=30`);
    await call('GET /v1/search/{id}', '/v1/search/se-nope'); // 404
    await call('POST /v1/search', '/v1/search', { collection: 'c', queries: [{ id: 'q', text: 't' }], mode: 'nope' }); // 400
    await call('POST /v1/search', '/v1/search?wait=30', { collection: 'empty', queries: [{ id: 'q', text: 'wing' }] }); // generation 0

    // Cohere-compatible
    await call('POST /v1/compat/cohere/rerank', '/v1/compat/cohere/rerank', { model: config.DEFAULT_MODEL, query: 'wing', documents: ['a swept wing', { text: 'a cylindrical shell' }], top_n: 1, return_documents: true });
    await call('POST /v1/compat/cohere/rerank', '/v1/compat/cohere/rerank', { query: 'wing', documents: [] }); // 400
    for (const v of ['v1', 'v2']) await call(`POST /v1/compat/cohere/${v}/rerank`, `/v1/compat/cohere/${v}/rerank`, { model: config.DEFAULT_MODEL, query: 'wing', documents: ['a swept wing', 'a shell'] });

    // batches
    const jsonl = [
      { custom_id: 'r1', query: 'supersonic wing', candidates: ['d1', 'd2', 'nope'] },
      { custom_id: 'r2', query: 'heat transfer', candidates: [{ text: 'heat in boundary layers' }] },
      { custom_id: 'r1', query: '', candidates: [] },
    ].map((r) => JSON.stringify(r)).join('\n') + '\n';
    const batch = await call('POST /v1/batches', '/v1/batches?collection=c&scorer=maxsim&topK=2', jsonl, { ...admin, 'content-type': 'application/jsonl' });
    expect(batch.status, JSON.stringify(batch.body)).toBe(202);
    await until(async () => ['completed', 'failed'].includes((await call('GET /v1/batches/{id}', `/v1/batches/${batch.body.id}`)).body.state), 60_000, 250);
    await call('GET /v1/batches/{id}/results', `/v1/batches/${batch.body.id}/results`);
    await call('POST /v1/batches/{id}/cancel', `/v1/batches/${batch.body.id}/cancel`); // 409: completed
    await call('GET /v1/batches/{id}', '/v1/batches/batch-nope'); // 404
    await call('GET /v1/batches/{id}/results', '/v1/batches/batch-nope/results'); // 404
    await call('POST /v1/batches/{id}/cancel', '/v1/batches/batch-nope/cancel'); // 404
    await call('POST /v1/batches', '/v1/batches', { input: 'nope.jsonl' }); // 400: no collection or model
    const up = await call('PUT /v1/uploads/{name}', '/v1/uploads/rows.jsonl', jsonl, { ...admin, 'content-type': 'application/jsonl' });
    expect(up.status, JSON.stringify(up.body)).toBe(201);
    await call('PUT /v1/uploads/{name}', '/v1/uploads/empty.jsonl', '', { ...admin, 'content-type': 'application/jsonl' }); // 400: empty
    await call('PUT /v1/uploads/{name}', '/v1/uploads/x.jsonl', jsonl, { ...admin, 'content-type': 'text/plain' }); // 415
    const named = await call('POST /v1/batches', '/v1/batches', { input: 'rows.jsonl', collection: 'c', topK: 2 });
    expect(named.status, JSON.stringify(named.body)).toBe(202);
    await call('POST /v1/batches', '/v1/batches', { input: 'tenants/default/uploads/rows.jsonl', collection: 'c' }); // 400: a key, not an upload name

    // judgments and training (too few judged queries: 400 naming the minimum)
    const js = await call('POST /v1/collections/{id}/judgments', '/v1/collections/c/judgments', { queries: [{ id: 'q1', text: 'supersonic wing', judgments: [{ doc: 'd1', grade: 2 }, { doc: 'unknown-doc', grade: 1 }] }] });
    expect(js.status).toBe(201);
    await call('GET /v1/collections/{id}/judgments/{judgmentsId}', `/v1/collections/c/judgments/${js.body.judgmentsId}`);
    await call('GET /v1/collections/{id}/judgments/{judgmentsId}', '/v1/collections/c/judgments/js-nope'); // 404
    await call('POST /v1/collections/{id}/train', '/v1/collections/c/train', { head: 'knrm', maxEpochs: 1 }); // 409: too few trainable queries
    await call('POST /v1/collections/{id}/train', '/v1/collections/c/train', { head: 'nope' }); // 400
    // enough judged queries: a run queued, read, cancelled
    const judged = docs.filter((d) => d.id !== 'punct').map((d, i) => ({ id: `j${i}`, text: d.text.split(' ').slice(0, 4).join(' '), judgments: [{ doc: d.id, grade: 1 }] }));
    judged.push({ id: 'jn1', text: 'an ndjson line', judgments: [{ doc: 'n1', grade: 2 }] });
    expect((await call('POST /v1/collections/{id}/judgments', '/v1/collections/c/judgments', judged)).status).toBe(201);
    const train = await call('POST /v1/collections/{id}/train', '/v1/collections/c/train', { head: 'lite', size: 'small', maxEpochs: 1 });
    expect(train.status, JSON.stringify(train.body)).toBe(202);
    await call('GET /v1/train/{trainId}', `/v1/train/${train.body.trainId}`);
    await call('DELETE /v1/train/{trainId}', `/v1/train/${train.body.trainId}`);
    await until(async () => ['cancelled', 'completed', 'failed'].includes((await call('GET /v1/train/{trainId}', `/v1/train/${train.body.trainId}`)).body.status), 60_000, 250);
    await call('GET /v1/train/{trainId}', '/v1/train/tr-nope'); // 404
    await call('DELETE /v1/train/{trainId}', '/v1/train/tr-nope'); // 404
    // hybrid's fusion fitted on the judgments (200 with the grid), a bad field (400), an unknown set (409); DELETE: back to the defaults
    const fit = await call('POST /v1/collections/{id}/fusion/fit', '/v1/collections/c/fusion/fit', { base: 'dense', normalizations: ['minmax'], lambdas: [0.5] });
    expect(fit.status, JSON.stringify(fit.body)).toBe(200);
    await call('POST /v1/collections/{id}/fusion/fit', '/v1/collections/c/fusion/fit', { depth: 0 });
    await call('POST /v1/collections/{id}/fusion/fit', '/v1/collections/c/fusion/fit', { judgments: 'js-nope' });
    expect((await call('DELETE /v1/collections/{id}/fusion', '/v1/collections/c/fusion')).status).toBe(200);

    // deletes
    const del = await call('DELETE /v1/collections/{id}/documents/{docId}', '/v1/collections/c/documents/d9?wait=30');
    expect(del.status).toBe(200);
    await call('DELETE /v1/collections/{id}/documents/{docId}', '/v1/collections/c/documents/nope?wait=30'); // 404
    const many = await call('POST /v1/collections/{id}/documents/delete', '/v1/collections/c/documents/delete?wait=30', { ids: ['d8', 'nope'] });
    await call('POST /v1/collections/{id}/documents/delete', '/v1/collections/c/documents/delete', { ids: ['x'], filter: { must: [] } }); // 400
    await call('POST /v1/collections/{id}/documents/delete', '/v1/collections/c/documents/delete?wait=30', { ids: ['nothing-live'] }); // committed false
    await call('GET /v1/collections/{id}/deletes/{deleteId}', `/v1/collections/c/deletes/${many.body.deleteId}`);
    await call('GET /v1/collections/{id}/deletes/{deleteId}', '/v1/collections/c/deletes/del-nope'); // 404
    await call('POST /v1/collections/{id}/merge', '/v1/collections/c/merge?wait=30');
    await call('POST /v1/collections/{id}/merge', '/v1/collections/c/merge?wait=-1'); // 400
    await call('POST /v1/collections/{id}/merge', '/v1/collections/nope/merge'); // 404

    // re-compression: queued, then 409 while one runs, and 409 on a collection with nothing committed
    await call('POST /v1/collections/{id}/recompress', '/v1/collections/c/recompress', { codec: { kind: 'int8' } });
    await call('POST /v1/collections/{id}/recompress', '/v1/collections/c/recompress', { codec: { kind: 'fp32' } });
    await call('POST /v1/collections/{id}/recompress', '/v1/collections/empty/recompress', { codec: { kind: 'fp32' } });
    await call('POST /v1/collections/{id}/recompress', '/v1/collections/c/recompress', { codec: { kind: 'nope' } }); // 400
    await until(async () => (await call('GET /v1/collections/{id}', '/v1/collections/c')).body.codec?.kind === 'int8', 60_000, 250);

    // re-index to WARP layouts: queued on an IVF collection, 409 on a WARP one (the default), 400, 404
    expect((await call('POST /v1/collections/{id}/reindex', '/v1/collections/ivf/reindex', { search: { layout: 'warp', bits: 2 } })).status).toBe(202);
    expect((await call('POST /v1/collections/{id}/reindex', '/v1/collections/c/reindex', {})).status).toBe(409);
    expect((await call('POST /v1/collections/{id}/reindex', '/v1/collections/ivf/reindex', { search: { bits: 3 } })).status).toBe(400);
    expect((await call('POST /v1/collections/{id}/reindex', '/v1/collections/nope/reindex', {})).status).toBe(404);
    await until(async () => (await call('GET /v1/collections/{id}', '/v1/collections/ivf')).body.search?.layout === 'warp', 60_000, 250);

    // operators
    await call('GET /v1/admin/overview', '/v1/admin/overview', undefined, operator);
    await call('GET /v1/admin/overview', '/v1/admin/overview', undefined, {}); // 401
    await call('POST /v1/admin/jobs/{queue}/{jobId}/retry', '/v1/admin/jobs/rerank/nope/retry', undefined, operator); // 404
    await call('POST /v1/admin/jobs/{queue}/{jobId}/retry', '/v1/admin/jobs/nope/x/retry', undefined, operator); // 400

    // API keys
    const key = await call('POST /v1/admin/keys', '/v1/admin/keys', { tenant: 'acme', role: 'read', name: 'live test' });
    expect(key.status, JSON.stringify(key.body)).toBe(201);
    await call('POST /v1/admin/keys', '/v1/admin/keys', { tenant: 'acme', role: 'god' }); // 400
    await call('GET /v1/admin/keys', '/v1/admin/keys');
    await call('GET /v1/admin/keys', '/v1/admin/keys?tenant=acme');
    await call('GET /v1/admin/keys/{id}', `/v1/admin/keys/${key.body.id}`);
    await call('GET /v1/admin/keys/{id}', '/v1/admin/keys/nope'); // 404
    await call('POST /v1/admin/keys/{id}/rotate', `/v1/admin/keys/${key.body.id}/rotate`);
    await call('DELETE /v1/admin/keys/{id}', `/v1/admin/keys/${key.body.id}`);
    await call('POST /v1/admin/keys/{id}/rotate', `/v1/admin/keys/${key.body.id}/rotate`); // 400: revoked
    await call('DELETE /v1/admin/keys/{id}', '/v1/admin/keys/nope'); // 404

    // tenant quotas: the operator's view and change, a refusal by a quota, the caller's own view
    await call('GET /v1/admin/quotas/{tenant}', '/v1/admin/quotas/acme', undefined, operator);
    await call('GET /v1/admin/quotas/{tenant}', '/v1/admin/quotas/acme', undefined, {}); // 401
    await call('PUT /v1/admin/quotas/{tenant}', '/v1/admin/quotas/default', { maxDocuments: 1 }, operator);
    await call('PUT /v1/admin/quotas/{tenant}', '/v1/admin/quotas/default', { maxDocuments: -1 }, operator); // 400
    const refused = await call('POST /v1/collections/{id}/documents', '/v1/collections/empty/documents', [{ id: 'q1', text: 'over the quota' }]);
    expect(refused.status).toBe(403);
    await call('GET /v1/quota', '/v1/quota');
    await call('PUT /v1/admin/quotas/{tenant}', '/v1/admin/quotas/default', {}, operator); // back to the defaults

    // deleting a collection last
    await call('DELETE /v1/collections/{id}', '/v1/collections/empty');
    await call('DELETE /v1/collections/{id}', '/v1/collections/empty'); // 404
  }

  /** The document the service serves (/openapi.json: with its built models and artifacts), which answers are checked against. */
  let served: Doc;
  beforeAll(async () => {
    server = await startServer(config, { quiet: true });
    served = (await (await fetch(`${server.url}/openapi.json`)).json()) as Doc;
    expect(Object.keys(served.paths).sort()).toEqual(Object.keys(doc.paths).sort());
    await exercise();
  }, 300_000);
  afterAll(async () => {
    await server?.stop();
  });

  it('every operation the document lists was called', () => {
    const called = new Set(answers.map((a) => a.op));
    expect(operations.filter((op) => !called.has(op)), 'operations in the OpenAPI document that this test does not call').toEqual([]);
    expect([...called].filter((op) => !operations.includes(op)), 'operations called that the document does not list').toEqual([]);
  });

  const ajv = new Ajv({ allErrors: true, unknownFormats: 'ignore', schemaId: 'auto' });
  const validators = new Map<string, Ajv.ValidateFunction>();
  function validator(key: string, schema: unknown) {
    let v = validators.get(key);
    if (!v) {
      v = ajv.compile({ allOf: [schema], components: served.components });
      validators.set(key, v);
    }
    return v;
  }

  it("every /v1 route of the app's router is in the document", () => {
    const express = server.app.getHttpAdapter().getInstance() as { router?: { stack: unknown[] }; _router?: { stack: unknown[] } };
    const documented = new Set(operations.map((op) => op.replace(/\{(\w+)\}/g, ':$1')));
    const missing: string[] = [];
    for (const layer of ((express.router ?? express._router)?.stack ?? []) as { route?: { path: unknown; methods: Record<string, boolean> } }[]) {
      if (!layer.route || typeof layer.route.path !== 'string' || !layer.route.path.startsWith('/v1/')) continue;
      for (const [m, on] of Object.entries(layer.route.methods)) {
        const op = `${m.toUpperCase()} ${layer.route.path}`;
        if (on && m !== '_all' && !documented.has(op)) missing.push(op);
      }
    }
    expect(missing, 'routes the service answers that the OpenAPI document does not list').toEqual([]);
  });

  it('no JSON answer is documented as a bare object (every body says its fields)', () => {
    const bare: string[] = [];
    for (const op of operations) {
      const [method, p] = op.split(' ');
      for (const [code, r] of Object.entries(served.paths[p][method.toLowerCase()].responses)) {
        const s = r.content?.['application/json']?.schema as Record<string, unknown> | undefined;
        if (s && !s.$ref && !s.properties && !s.allOf && !s.anyOf && !s.oneOf) bare.push(`${op} ${code}`);
      }
    }
    expect(bare).toEqual([]);
  });

  it('the validator rejects bodies that break the declared schemas (so the checks above can fail)', () => {
    const rerank = served.paths['/v1/rerank/{id}'].get.responses['200'].content!['application/json'].schema;
    const ok = answers.find((a) => a.op === 'GET /v1/rerank/{id}' && a.status === 200)!.body as Record<string, unknown>;
    expect(validator('self-check rerank', rerank)(ok)).toBe(true);
    expect(validator('self-check rerank', rerank)({ ...ok, status: 'finished' })).toBe(false);
    expect(validator('self-check rerank', rerank)({ ...ok, result: { ...(ok.result as object), results: [{ queryId: 'q', hits: [{ id: 1, score: 'high' }] }] } })).toBe(false);
    const error = served.paths['/v1/rerank/{id}'].get.responses['404'].content!['application/json'].schema;
    expect(validator('self-check error', error)({ message: 'no error code' })).toBe(false);
  });

  it.each(operations)('%s: every answer has a declared status and a body valid against its schema', (op) => {
    const [method, p] = op.split(' ');
    const responses = served.paths[p][method.toLowerCase()].responses;
    const mine = answers.filter((a) => a.op === op);
    expect(mine.length).toBeGreaterThan(0);
    const problems: string[] = [];
    for (const a of mine) {
      const declared = responses[String(a.status)];
      if (!declared) {
        problems.push(`${a.url}: status ${a.status} not declared (declared: ${Object.keys(responses).join(', ')}); body ${JSON.stringify(a.body)?.slice(0, 300)}`);
        continue;
      }
      for (const h of Object.keys(declared.headers ?? {})) {
        // Retry-After is declared on every 503; Location on the 202s that name a status URL
        if (!a.headers.has(h)) problems.push(`${a.url}: ${a.status} declares header ${h}, not sent`);
      }
      if (!declared.content) {
        if (a.body !== undefined) problems.push(`${a.url}: ${a.status} declares no body but got ${JSON.stringify(a.body).slice(0, 200)}`);
        continue;
      }
      const media = declared.content[a.contentType];
      if (!media) {
        problems.push(`${a.url}: ${a.status} answered ${a.contentType || 'no content type'}, declared ${Object.keys(declared.content).join(', ')}`);
        continue;
      }
      const v = validator(`${op} ${a.status} ${a.contentType}`, media.schema);
      if (!v(a.body)) problems.push(`${a.url}: ${a.status} body does not match: ${ajv.errorsText(v.errors)}; body ${JSON.stringify(a.body).slice(0, 400)}`);
    }
    expect(problems).toEqual([]);
  });

  it.each(operations.filter((op) => doc.paths[op.split(' ')[1]][op.split(' ')[0].toLowerCase()].requestBody))(
    '%s: every request body the service accepted (2xx) is valid against the declared request schema (shorthand forms included)',
    (op) => {
      const [method, p] = op.split(' ');
      const content = served.paths[p][method.toLowerCase()].requestBody!.content;
      const accepted = answers.filter((a) => a.op === op && a.status < 300 && a.request);
      const problems: string[] = [];
      for (const a of accepted) {
        const media = content[a.request!.contentType];
        if (!media) {
          problems.push(`${a.url}: sent ${a.request!.contentType}, declared ${Object.keys(content).join(', ')}`);
          continue;
        }
        const v = validator(`request ${op} ${a.request!.contentType}`, media.schema);
        if (!v(a.request!.body)) problems.push(`${a.url}: request body rejected by the document: ${ajv.errorsText(v.errors)}; body ${JSON.stringify(a.request!.body).slice(0, 300)}`);
      }
      expect(problems).toEqual([]);
    },
  );
});
