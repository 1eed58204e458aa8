import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startServer, type Server } from '../apps/all-in-one/src/server';
import { http, testConfig } from './helpers';

/** Every limit answers with a 4xx that names the field and the limit, and accepts nothing. */
describe('request limits', () => {
  const config = testConfig({ MAX_REQUEST_BYTES: '4096', MAX_BATCH_DOCUMENTS: '3', RERANK_MAX_WAIT_SECONDS: '5' });
  let server: Server;
  const api = (method: string, url: string, body?: unknown) => http(server.url, method, url, body);

  beforeAll(async () => {
    server = await startServer(config, { quiet: true });
    await api('POST', '/v1/collections', { id: 'c' });
  });
  afterAll(async () => {
    await server?.stop();
  });

  it('413 for a body over MAX_REQUEST_BYTES, naming the limit', async () => {
    const res = await api('POST', '/v1/collections/c/documents', [{ id: 'a', text: 'x'.repeat(5000) }]);
    expect(res.status).toBe(413);
    expect(res.body.message).toMatch(/MAX_REQUEST_BYTES \(4096 bytes\)/);
  });

  it('400 for more documents than MAX_BATCH_DOCUMENTS', async () => {
    const res = await api('POST', '/v1/collections/c/documents', [1, 2, 3, 4].map((i) => ({ id: `d${i}`, text: 'wing' })));
    expect(res.status).toBe(400);
    expect(res.body.message).toMatch(/MAX_BATCH_DOCUMENTS \(3\)/);
  });

  it('400 for unknown fields, non-object metadata and bad collection ids', async () => {
    const res = await api('POST', '/v1/collections/c/documents', [{ id: 'a', text: 'wing', body: 'x', metadata: [1] }]);
    expect(res.status).toBe(400);
    expect(res.body.message).toMatch(/unknown field 'body'/);
    expect(res.body.message).toMatch(/metadata must be a JSON object/);
    const bad = await api('POST', '/v1/collections', { id: 'no spaces allowed' });
    expect(bad.status).toBe(400);
    expect(bad.body.details[0].field).toBe('id');
  });

  it('400 for a wait over RERANK_MAX_WAIT_SECONDS, 404 for an unknown re-rank job', async () => {
    const wait = await api('POST', '/v1/rerank?wait=50', { collection: 'c', queries: [{ id: 'q', text: 'wing', candidates: ['a'] }] });
    expect(wait.status).toBe(400);
    expect(wait.body.message).toMatch(/RERANK_MAX_WAIT_SECONDS/);
    expect((await api('GET', '/v1/rerank/rr-unknown')).status).toBe(404);
    const empty = await api('POST', '/v1/rerank', { collection: 'c', queries: [] });
    expect(empty.status).toBe(400);
    expect(JSON.stringify(empty.body.details)).toMatch(/queries/);
  });
});
