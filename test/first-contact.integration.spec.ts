import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startApiOnly } from './api-only';
import { http, testConfig } from './helpers';

/**
 * What a newcomer meets first (issue 30 items 4 and 5): `/` says what this is and where to go;
 * GET /v1/models lists the models; a 400's top-level message names the field and the rule, and a
 * snake_case field (another API's spelling) gets a hint to the camelCase one.
 */
describe('first contact: landing page, models, error messages', () => {
  const config = testConfig({ COHERE_MODEL: 'glove-static-100d' });
  let server: Awaited<ReturnType<typeof startApiOnly>>;
  const api = (method: string, url: string, body?: unknown) => http(server.url, method, url, body);

  beforeAll(async () => {
    server = await startApiOnly(config);
  });
  afterAll(async () => {
    await server?.stop();
  });

  it('GET / is a landing page linking the dashboard, the API reference, models and health', async () => {
    const res = await fetch(`${server.url}/`);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^text\/html/);
    const html = await res.text();
    for (const href of ['/dashboard', '/docs', '/openapi.json', '/v1/models', '/v1/health']) expect(html).toContain(`href="${href}"`);
    expect(html).not.toMatch(/https?:\/\//); // nothing leaves the machine
  });

  it('GET /v1/models lists every built model with its shape, the default and the Cohere mapping', async () => {
    const res = await api('GET', '/v1/models');
    expect(res.status).toBe(200);
    const body = res.body as { default: string; cohere: string; models: { id: string; dims: number; default: boolean; cohere: boolean }[] };
    expect(body.default).toBe(config.DEFAULT_MODEL);
    expect(body.cohere).toBe('glove-static-100d');
    const ids = body.models.map((m) => m.id);
    expect(ids).toEqual([...ids].sort());
    expect(ids).toEqual(expect.arrayContaining(['glove-ctx-100d', 'glove-static-100d']));
    expect(body.models.find((m) => m.id === 'glove-ctx-100d')).toMatchObject({ dims: 100, default: config.DEFAULT_MODEL === 'glove-ctx-100d' });
    expect(body.models.filter((m) => m.default).map((m) => m.id)).toEqual([config.DEFAULT_MODEL]);
    expect(body.models.filter((m) => m.cohere).map((m) => m.id)).toEqual(['glove-static-100d']);
  });

  it("a 400 names the field and the rule at the top; snake_case gets a hint to the API's camelCase", async () => {
    const snake = await api('POST', '/v1/rerank', { model: config.DEFAULT_MODEL, top_k: 3, queries: [{ id: 'q', text: 'wing', candidates: [{ text: 'a' }] }] });
    expect(snake.status).toBe(400);
    expect(snake.body.message).toContain("top_k: unknown field 'top_k': fields are camelCase here, did you mean 'topK'?");
    expect(snake.body.details).toEqual([{ field: 'top_k', message: "unknown field 'top_k': fields are camelCase here, did you mean 'topK'?" }]);
    const empty = await api('POST', '/v1/rerank', { model: config.DEFAULT_MODEL, queries: [] });
    expect(empty.status).toBe(400);
    expect(empty.body.message).toMatch(/^invalid re-rank request: queries: /);
    // a typo inside a union (a candidate is an id, {id, score} or {text}) is one issue saying what each form wanted
    const typo = await api('POST', '/v1/rerank', { model: config.DEFAULT_MODEL, queries: [{ id: 'q', text: 'wing', candidates: [{ txt: 'a' }] }] });
    expect(typo.status).toBe(400);
    expect(typo.body.details).toEqual([{ field: 'queries.0.candidates.0', message: 'matches none of its forms: expected string, received object | id: required | text: required' }]);
    const many = await api('POST', '/v1/collections', { id: 'bad id', maxDocTokens: -1 });
    expect(many.status).toBe(400);
    expect(many.body.message).toMatch(/: id: .*\(and \d+ more in details\)$/);
  });
});
