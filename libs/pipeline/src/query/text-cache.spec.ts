import { describe, expect, it } from 'vitest';
import { TextCacheReader, TextMemoryCache, mapLimit, packVectors, textHash, textKey, type TextSpace } from './text-cache';
import { textCodecTag, textKeys, validateRow } from '@lateral/shared';

const entry = (floats: number, encodedAt: number) => ({ vectors: new Float32Array(floats), length: 1, docVector: new Float32Array(0), tokenIds: new Int32Array(0), encodedAt });

describe('TextMemoryCache', () => {
  it('evicts the least recently used entries past its byte budget and refuses expired ones', () => {
    const c = new TextMemoryCache(1000);
    c.set('a', entry(100, 0)); // 400 bytes + key
    c.set('b', entry(100, 0));
    expect(c.get('a', 10, 5)).toBeDefined(); // a is now the most recent
    c.set('c', entry(100, 0)); // over 1000: b goes
    expect(c.get('b', 10, 5)).toBeUndefined();
    expect(c.get('a', 10, 5)).toBeDefined();
    expect(c.get('c', 10, 5)).toBeDefined();
    expect(c.get('a', 10, 11)).toBeUndefined(); // older than the TTL
    c.set('huge', entry(1000, 0)); // larger than the whole budget: not kept
    expect(c.get('huge', 10, 5)).toBeUndefined();
  });
});

describe('TextMemoryCache with packed vectors', () => {
  it('counts a shared vectors buffer once, from the first entry holding it to the last one dropped', () => {
    const packed = packVectors([entry(25, 0), entry(25, 0), entry(25, 0)], 1 << 20) as ReturnType<typeof entry>[];
    expect(packed[0].vectors.buffer).toBe(packed[2].vectors.buffer);
    const c = new TextMemoryCache(1000);
    c.set('a', packed[0]);
    expect(c.heldBytes).toBe(300 + 2); // the whole shared buffer (75 floats) and the key
    c.set('b', packed[1]);
    expect(c.heldBytes).toBe(300 + 4);
    c.set('x', entry(100, 0)); // 400 + 2: room for it
    expect(c.heldBytes).toBe(706);
    c.set('y', entry(100, 0)); // over: a goes (frees only its key: b holds the buffer), then b (frees the buffer)
    expect(c.get('a', 10, 5)).toBeUndefined();
    expect(c.get('b', 10, 5)).toBeUndefined();
    expect(c.heldBytes).toBe(804);
    c.set('b', packed[1]); // 804 + 302 > 1000: x goes
    expect(c.get('x', 10, 5)).toBeUndefined();
    expect(c.heldBytes).toBe(402 + 302);
  });

  it('packVectors copies runs of entries one after another into buffers of at most maxBytes, the values unchanged', () => {
    const e = (n: number, v: number) => ({ ...entry(n, 0), vectors: new Float32Array(n).fill(v) });
    const entries = [e(10, 1), null, e(10, 2), e(30, 3), e(10, 4), e(5, 5)];
    const out = packVectors(entries, 100); // 25 floats a buffer
    expect(out.map((x) => (x ? Array.from(new Set(x.vectors)) : null))).toEqual([[1], null, [2], [3], [4], [5]]);
    expect(out.map((x) => x?.vectors.length ?? null)).toEqual([10, null, 10, 30, 10, 5]);
    expect(out[0]!.vectors.buffer).toBe(out[2]!.vectors.buffer); // 20 floats
    expect(out[2]!.vectors.byteOffset).toBe(40);
    expect(out[3]).toBe(entries[3]); // larger than a buffer: kept
    expect(out[4]!.vectors.buffer).toBe(out[5]!.vectors.buffer);
    expect(out[0]!.vectors.buffer).not.toBe(out[4]!.vectors.buffer);
  });
});

describe('textKey', () => {
  it('is textKeys.vectors of the space and hash, built lately or not; a hash that is not a sha256 in hex is refused every time', () => {
    const space: TextSpace = { tenantId: 'default', model: 'm', modelVersion: '0123456789abcdef', maxTokens: 16, codec: { collectionId: 'c1', codecVersion: 2 } };
    const h = textHash('some text');
    const expected = textKeys.vectors('default', 'm', '0123456789abcdef', 16, textCodecTag(space.codec), h);
    expect(textKey(space, h)).toBe(expected);
    expect(textKey({ ...space }, h)).toBe(expected); // built lately, another space object
    expect(textKey({ ...space, maxTokens: 32 }, h)).toBe(textKeys.vectors('default', 'm', '0123456789abcdef', 32, textCodecTag(space.codec), h));
    for (const bad of [h.toUpperCase(), h.slice(1), `../${h.slice(3)}`]) expect(() => textKey(space, bad)).toThrow('text hash must be a sha256 in hex');
  });
});

describe('TextCacheReader', () => {
  it('answers texts in memory without S3 and reads only the others, in the order asked', async () => {
    const space: TextSpace = { tenantId: 'default', model: 'm', modelVersion: '0123456789abcdef', maxTokens: 16, codec: null };
    const [a, b, c] = ['a', 'b', 'c'].map(textHash);
    const memory = new TextMemoryCache(1 << 20);
    const now = Date.now();
    memory.set(textKey(space, a), entry(4, now));
    memory.set(textKey(space, c), entry(8, now));
    const asked: string[] = [];
    const reader = new TextCacheReader({
      store: { get: async (key: string) => (asked.push(key), null) },
      codecs: { get: async () => { throw new Error('no codec lookup for a space without a codec'); } },
      memory,
      ttlDays: 1,
    });
    const out = await reader.read(space, [a, b, c]);
    expect(out.map((e) => e?.vectors.length ?? null)).toEqual([4, null, 8]);
    expect(asked).toEqual([textKey(space, b)]);
  });
});

describe('textHash and mapLimit', () => {
  it('hashes UTF-8 text with sha256 and keeps order under a concurrency limit', async () => {
    expect(textHash('abc')).toBe('ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad');
    let inFlight = 0;
    let most = 0;
    const out = await mapLimit([5, 1, 4, 2, 3], 2, async (x) => {
      most = Math.max(most, ++inFlight);
      await new Promise((r) => setImmediate(r));
      inFlight--;
      return x * 10;
    });
    expect(out).toEqual([50, 10, 40, 20, 30]);
    expect(most).toBe(2);
  });
});

describe('validateRow', () => {
  const opts = { hasCollection: false, maxTextBytes: 10 };
  it('names the line and the custom_id of each bad row', () => {
    const seen = new Map<string, number>();
    expect(validateRow('{"custom_id":"a","query":"q","candidates":[{"text":"t"}]}', 1, seen, opts)).toMatchObject({ line: 1, custom_id: 'a', row: { query: 'q' } });
    expect(validateRow('{nope', 2, seen, opts)).toMatchObject({ line: 2, custom_id: null, error: { message: expect.stringContaining('line 2: not JSON') } });
    expect(validateRow('[1]', 3, seen, opts)).toMatchObject({ error: { message: 'line 3: not a JSON object' } });
    expect(validateRow('{"query":"q","candidates":[{"text":"t"}]}', 4, seen, opts)).toMatchObject({ custom_id: null, error: { message: expect.stringContaining('custom_id is missing') } });
    expect(validateRow('{"custom_id":"a","query":"q","candidates":[{"text":"t"}]}', 5, seen, opts)).toMatchObject({ custom_id: 'a', error: { message: expect.stringContaining('duplicate custom_id (first at line 1)') } });
    expect(validateRow('{"custom_id":"e","query":" ","candidates":[{"text":"t"}]}', 6, seen, opts).custom_id).toBe('e');
    expect(validateRow('{"custom_id":"e2","query":" ","candidates":[{"text":"t"}]}', 7, seen, opts)).toMatchObject({ error: { message: expect.stringContaining('query must not be empty') } });
    expect(validateRow('{"custom_id":"l","query":"q","candidates":[{"text":"01234567890"}]}', 8, seen, opts)).toMatchObject({
      error: { message: expect.stringContaining('candidates.0.text: text is 11 bytes, over MAX_DOCUMENT_BYTES (10)') },
    });
    expect(validateRow('{"custom_id":"i","query":"q","candidates":["d1"]}', 9, seen, opts)).toMatchObject({ error: { message: expect.stringContaining('needs the batch to name a collection') } });
    expect(validateRow('{"custom_id":"i2","query":"q","candidates":["d1"]}', 10, seen, { ...opts, hasCollection: true })).toHaveProperty('row');
    expect(validateRow('{"custom_id":"x","query":"q","candidates":[{"text":"t"}],"extra":1}', 11, seen, opts)).toMatchObject({ error: { message: expect.stringContaining('line 11 (custom_id "x")') } });
  });
});
