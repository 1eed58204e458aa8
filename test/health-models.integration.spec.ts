import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startServer, type Server } from '../apps/all-in-one/src/server';
import { http, testConfig } from './helpers';

/**
 * /v1/health reports a default model that is not built as not ready: 503, status 'degraded',
 * models.ok false naming it with a hint, no Retry-After (it needs a build, not a retry), while
 * Redis and S3 are fine and their queue counts are still there. The OpenAPI document says so.
 */
describe('health: the default model is part of readiness', () => {
  let missing: Server;
  let built: Server;

  beforeAll(async () => {
    missing = await startServer(testConfig({ DEFAULT_MODEL: 'no-such-model' }), { quiet: true });
    built = await startServer(testConfig(), { quiet: true });
  });
  afterAll(async () => {
    await missing?.stop();
    await built?.stop();
  });

  it('answers 503 degraded with models.missing and a hint when DEFAULT_MODEL is not under MODELS_DIR', async () => {
    const h = await http(missing.url, 'GET', '/v1/health');
    expect(h.status).toBe(503);
    expect(h.headers.get('retry-after')).toBeNull();
    expect(h.body).toMatchObject({
      status: 'degraded',
      redis: { ok: true },
      s3: { ok: true },
      models: { ok: false, default: 'no-such-model', missing: ['no-such-model'], hint: expect.stringContaining('npm run build-model') },
    });
    expect(h.body.queues).toHaveProperty('encode');
  });

  it('answers 200 ok with models.ok when the default model is built', async () => {
    const h = await http(built.url, 'GET', '/v1/health');
    expect(h.status).toBe(200);
    expect(h.body).toMatchObject({ status: 'ok', models: { ok: true, default: 'glove-ctx-100d', missing: [] } });
    expect(h.body.models).not.toHaveProperty('hint');
  });

  it('is documented in the OpenAPI document: both codes, the models field', async () => {
    const doc = (await http(built.url, 'GET', '/openapi.json')).body;
    const get = doc.paths['/v1/health'].get;
    expect(Object.keys(get.responses).sort()).toEqual(['200', '503']);
    const schema = get.responses['503'].content['application/json'].schema;
    expect(schema.required).toContain('models');
    expect(schema.properties.models.required).toEqual(['ok', 'default', 'missing']);
    expect(get.description).toMatch(/models\.ok/);
  });
});
