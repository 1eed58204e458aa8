import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ObjectStore } from '@lateral/infra';
import { getEncoder, type TokenEncoder } from '@lateral/model';
import { cleanupTextCache, decodeTextEntry, encodeTextEntry, modelVersion, textHash, textKey, type TextSpace } from '@lateral/pipeline';
import { testConfig } from './helpers';

/** The text cache's expiry against a real S3 server: reads refuse expired entries, the cleanup deletes them. */
describe('text cache expiry', () => {
  const config = testConfig();
  const store = ObjectStore.fromConfig(config);
  let encoder: TokenEncoder;
  let space: TextSpace;
  const DAY = 24 * 3600 * 1000;

  beforeAll(async () => {
    await store.ensureBucket();
    encoder = await getEncoder(path.resolve(config.MODELS_DIR, config.DEFAULT_MODEL), { executionProvider: 'cpu' });
    space = { tenantId: 't1', model: config.DEFAULT_MODEL, modelVersion: await modelVersion(config.MODELS_DIR, config.DEFAULT_MODEL), maxTokens: 64, codec: null };
  });
  afterAll(() => store.destroy());

  it('an entry decodes to the encoded vectors within the TTL and to null after it; the cleanup deletes only expired objects', async () => {
    const [e] = await encoder.encodeDocuments(['flutter of a swept wing'], { maxTokens: 64 });
    const now = Date.now();
    const key = textKey(space, textHash('flutter of a swept wing'));
    await store.put(key, encodeTextEntry(encoder, e, now, null, null));
    const other = textKey({ ...space, tenantId: 't2' }, textHash('other'));
    await store.put(other, encodeTextEntry(encoder, e, now, null, null));
    const bytes = (await store.get(key))!;
    const fresh = decodeTextEntry(bytes, key, undefined, 30 * DAY, now + DAY);
    expect(fresh!.length).toBe(e.length);
    fresh!.vectors.forEach((v, i) => expect(Math.abs(v - e.vectors[i])).toBeLessThan(2e-3)); // fp16
    expect(decodeTextEntry(bytes, key, undefined, 30 * DAY, now + 31 * DAY)).toBeNull();
    expect(await cleanupTextCache(store, 30, now + DAY)).toBe(0);
    expect(await store.exists(key)).toBe(true);
    expect(await cleanupTextCache(store, 30, now + 31 * DAY)).toBe(2);
    expect(await store.exists(key)).toBe(false);
    expect(await store.exists(other)).toBe(false);
  });
});
