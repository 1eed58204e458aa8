import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { ChunkColumns, PermanentJobError, batchKeys, textHash, type ChunkTexts } from '@lateral/shared';
import { KnownTexts, encodeTextsProcessor } from './encode-texts.processor';
import { modelVersion, textKey, type TextSpace } from './text-cache';

const dims = 4;

/** A model folder with the three files modelVersion hashes. */
function modelsDir(): string {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'encode-texts-spec-'));
  const m = path.join(dir, 'm');
  mkdirSync(m);
  for (const f of ['manifest.json', 'tokenizer.json', 'model.onnx']) writeFileSync(path.join(m, f), f);
  return dir;
}

/** An S3 over a Map that records every GET; HEADs of absent keys answer 404. */
function memoryStore(objects: Map<string, Uint8Array>) {
  const gets: string[] = [];
  return {
    gets,
    bucket: 'b',
    s3: { send: async () => Promise.reject(Object.assign(new Error('not found'), { name: 'NotFound' })) },
    get: async (key: string) => (gets.push(key), objects.get(key) ?? null),
    getJson: async (key: string) => {
      gets.push(key);
      const b = objects.get(key);
      return b ? JSON.parse(Buffer.from(b).toString('utf8')) : null;
    },
    put: async (key: string, body: Uint8Array | string) => void objects.set(key, typeof body === 'string' ? Buffer.from(body) : body),
  };
}

/** A fake encoder: one token a text, its vector filled with the text's length. */
function fakeEncoder(encodedTexts: string[]) {
  return {
    dims,
    manifest: { maxDocTokens: 16 },
    pool: (e: { vectors: Float32Array }) => e.vectors.slice(0, dims),
    encodeDocuments: async (texts: string[]) => {
      encodedTexts.push(...texts);
      return texts.map((t) => ({ tokenIds: Int32Array.of(1), vectors: new Float32Array(dims).fill(t.length), weights: null, length: 1, truncated: false }));
    },
  };
}

/** A binary chunk file of one row naming `texts` (as BatchChunkWriter writes it). */
function binaryChunk(texts: string[], textsIn: number[] | null = null): Uint8Array {
  const cols = new ChunkColumns();
  cols.add({ line: 1, custom_id: 'a', row: { custom_id: 'a', query: 'q', candidates: texts.map((text) => ({ text })) } });
  return cols.encode(cols.texts.texts.map(textHash), textsIn);
}

/** A batch chunk of `texts`: its chunk file (binary as BatchChunkWriter writes it, or JSONL as it wrote before: a header line of hashes, then a row) and its texts file. */
function chunk(texts: string[], format: 'binary' | 'jsonl' = 'binary') {
  const textHashes = texts.map(textHash);
  const objects = new Map<string, Uint8Array>();
  const chunkKey = batchKeys.chunk('t', 'b1', 0);
  const textsKey = batchKeys.chunkTexts('t', 'b1', 0);
  const jsonl = `${JSON.stringify({ textHashes })}\n${JSON.stringify({ line: 1, custom_id: 'a', row: { custom_id: 'a', query: 'q', candidates: texts.map((_, t) => ({ t })) } })}\n`;
  objects.set(chunkKey, format === 'binary' ? binaryChunk(texts) : Buffer.from(jsonl));
  objects.set(textsKey, Buffer.from(JSON.stringify({ textHashes, texts } satisfies ChunkTexts)));
  return { objects, chunkKey, textsKey, textHashes };
}

async function setup(texts: string[], cached: string[], format: 'binary' | 'jsonl' = 'binary') {
  const c = chunk(texts, format);
  const store = memoryStore(c.objects);
  const dir = modelsDir();
  const space: TextSpace = { tenantId: 't', model: 'm', modelVersion: await modelVersion(dir, 'm'), maxTokens: 16, codec: null };
  const known = new KnownTexts();
  for (const t of cached) known.set(textKey(space, textHash(t)), Date.now());
  const encoded: string[] = [];
  const deps = { store, collections: { get: async () => null }, codecs: { get: async () => undefined }, encoders: async () => fakeEncoder(encoded), modelsDir: dir, tokenBudget: 1000, ttlDays: 7, known } as never;
  const payload = { tenantId: 't', model: 'm', maxTokens: 16, codec: null, textsKey: c.textsKey, texts: 0, chunkKey: c.chunkKey };
  return { ...c, store, space, encoded, deps, payload };
}

describe('encodeTextsProcessor on a batch chunk', () => {
  it('a chunk whose texts are all cached reads its hashes from the chunk header and never its texts file', async () => {
    const s = await setup(['alpha', 'beta'], ['alpha', 'beta']);
    const out = await encodeTextsProcessor(s.deps, s.payload);
    expect(out).toMatchObject({ texts: 2, encoded: 0, reused: 2, tokens: 0 });
    expect(s.store.gets).toEqual([s.chunkKey]);
    expect(s.encoded).toEqual([]);
  });

  it('a JSONL chunk file (a batch cut before the binary format) is read by its header line alike; a corrupt binary one fails the job for good', async () => {
    const s = await setup(['alpha', 'beta', 'gamma'], ['alpha', 'beta'], 'jsonl');
    expect(await encodeTextsProcessor(s.deps, s.payload)).toMatchObject({ texts: 3, encoded: 1, reused: 2 });
    expect(s.store.gets).toEqual([s.chunkKey, s.textsKey]);
    expect(s.encoded).toEqual(['gamma']);
    const corrupt = Buffer.from(binaryChunk(['alpha']));
    corrupt[50] ^= 1;
    s.objects.set(s.chunkKey, corrupt);
    await expect(encodeTextsProcessor(s.deps, s.payload)).rejects.toThrow(PermanentJobError);
    await expect(encodeTextsProcessor(s.deps, s.payload)).rejects.toThrow(`batch chunk file ${s.chunkKey} cannot be read: checksum mismatch (corrupt)`);
  });

  it('a text not cached: the texts file is read and only that text is encoded and written', async () => {
    const s = await setup(['alpha', 'beta', 'gamma'], ['alpha', 'gamma']);
    const out = await encodeTextsProcessor(s.deps, s.payload);
    expect(out).toMatchObject({ texts: 3, encoded: 1, reused: 2, tokens: 1 });
    expect(s.store.gets).toEqual([s.chunkKey, s.textsKey]);
    expect(s.encoded).toEqual(['beta']);
    expect(s.objects.has(textKey(s.space, textHash('beta')))).toBe(true);
    expect(s.objects.has(textKey(s.space, textHash('alpha')))).toBe(false);
  });

  it('without chunkKey (a re-rank request, or a job queued before it existed) the texts file is the list, as before', async () => {
    const s = await setup(['alpha', 'beta'], ['alpha']);
    const out = await encodeTextsProcessor(s.deps, { ...s.payload, chunkKey: undefined });
    expect(out).toMatchObject({ texts: 2, encoded: 1, reused: 1 });
    expect(s.store.gets).toEqual([s.textsKey]);
    expect(s.encoded).toEqual(['beta']);
  });

  it("a text an earlier chunk's texts file holds (the header's textsIn) is read from there, and only the files of missing texts are read", async () => {
    const s = await setup(['alpha', 'beta', 'gamma'], ['alpha']);
    // Chunk 1 names alpha and beta (in chunk 0's file) and gamma (its own).
    const chunk1 = batchKeys.chunk('t', 'b1', 1);
    const texts1 = batchKeys.chunkTexts('t', 'b1', 1);
    s.objects.set(chunk1, binaryChunk(['alpha', 'beta', 'gamma'], [0, 0, 1]));
    s.objects.set(texts1, Buffer.from(JSON.stringify({ textHashes: [textHash('gamma')], texts: ['gamma'] } satisfies ChunkTexts)));
    const out = await encodeTextsProcessor(s.deps, { ...s.payload, chunkKey: chunk1, textsKey: texts1 });
    expect(out).toMatchObject({ texts: 3, encoded: 2, reused: 1 });
    expect(s.encoded.sort()).toEqual(['beta', 'gamma']);
    expect(s.store.gets).toEqual([chunk1, s.textsKey, texts1]);
    // Only gamma missing: chunk 0's file is not read.
    s.store.gets.length = 0;
    const known = new KnownTexts();
    for (const t of ['alpha', 'beta']) known.set(textKey(s.space, textHash(t)), Date.now());
    const again = await encodeTextsProcessor({ ...(s.deps as object), known } as never, { ...s.payload, chunkKey: chunk1, textsKey: texts1 });
    expect(again).toMatchObject({ encoded: 1, reused: 2 });
    expect(s.store.gets).toEqual([chunk1, texts1]);
    // A textsIn that does not match textHashes (a JSONL header) fails the job for good.
    s.objects.set(chunk1, Buffer.from(`${JSON.stringify({ textHashes: s.textHashes, textsIn: [0] })}\n`));
    await expect(encodeTextsProcessor(s.deps, { ...s.payload, chunkKey: chunk1, textsKey: texts1 })).rejects.toThrow(/textsIn/);
  });

  it('a texts file that lacks a text its chunk names fails the job for good; a chunk file without the header line (an older batch) reads the texts file', async () => {
    const s = await setup(['alpha', 'beta'], []);
    s.objects.set(s.textsKey, Buffer.from(JSON.stringify({ textHashes: [textHash('alpha')], texts: ['alpha'] })));
    await expect(encodeTextsProcessor(s.deps, s.payload)).rejects.toThrow(PermanentJobError);
    await expect(encodeTextsProcessor(s.deps, s.payload)).rejects.toThrow(/lacks text/);
    s.objects.set(s.chunkKey, Buffer.from('{"line":1,"custom_id":"a","row":{"custom_id":"a","query":"q","candidates":[{"text":"alpha"}]}}\n'));
    s.store.gets.length = 0;
    expect(await encodeTextsProcessor(s.deps, s.payload)).toMatchObject({ texts: 1, encoded: 1 });
    expect(s.store.gets).toEqual([s.chunkKey, s.textsKey]);
  });
});
