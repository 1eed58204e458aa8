import { mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { randomUUID } from 'node:crypto';
import { inject } from 'vitest';
import { loadConfig, type Config } from '@lateral/shared';

/** A configuration pointing at the run's real Redis and S3 servers, isolated by prefix and bucket. */
export function testConfig(overrides: Record<string, string> = {}): Config {
  const tag = randomUUID().slice(0, 8);
  return loadConfig({
    REDIS_URL: inject('redisUrl'),
    S3_ENDPOINT: inject('s3Endpoint'),
    S3_BUCKET: `test-${tag}`,
    REDIS_PREFIX: `t${tag}`,
    PORT: '0',
    LOG_LEVEL: 'warn',
    DATA_DIR: mkdtempSync(path.join(os.tmpdir(), 'lateral-data-')),
    MODELS_DIR: path.resolve('.cache/models'),
    // The plumbing tests run on the small GloVe model (fast on 2 cores); the pretrained model's
    // service path has its own test (test/pretrained-model.integration.spec.ts).
    DEFAULT_MODEL: 'glove-ctx-100d',
    // Background merges would change generations and segment keys under tests that count them;
    // merges are tested on their own (test/merge.integration.spec.ts turns this on where it tests it).
    MERGE_AFTER_COMMIT: 'false',
    ...overrides,
  });
}

/**
 * One request, its body parsed as JSON when it is JSON. No retry: the tests assert the answers,
 * 503s included. `send` replaces fetch (the fault harness passes the retrying client).
 */
export async function http(base: string, method: string, url: string, body?: unknown, headers: Record<string, string> = {}, send: (url: string, init: RequestInit) => Promise<Response> = fetch) {
  const init: RequestInit = { method, headers: { ...headers } };
  if (body !== undefined) {
    init.body = typeof body === 'string' ? body : JSON.stringify(body);
    if (!headers['content-type']) (init.headers as Record<string, string>)['content-type'] = 'application/json';
  }
  const res = await send(base + url, init);
  const text = await res.text();
  let json: unknown = null;
  try {
    json = text ? JSON.parse(text) : null;
  } catch {
    json = text;
  }
  return { status: res.status, headers: res.headers, body: json as Record<string, any> }; // eslint-disable-line @typescript-eslint/no-explicit-any
}

export async function until<T>(fn: () => Promise<T | undefined | null | false>, timeoutMs = 60_000, everyMs = 100): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`condition not met within ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, everyMs));
  }
}
