import { describe, expect, it } from 'vitest';
import { QueueName, batchKeys, decodeBinaryChunk, isBinaryChunk, textHash, textJobIds, type ChunkTexts, type DecodedChunk } from '@lateral/shared';
import { BatchChunkWriter, batchFlow } from './batch-chunks';

/** The three store calls the writer makes, over a Map. */
function memoryStore() {
  const objects = new Map<string, string | Uint8Array>();
  return {
    objects,
    put: async (key: string, body: Uint8Array | string) => void objects.set(key, body),
    putJson: async (key: string, value: unknown) => void objects.set(key, JSON.stringify(value)),
    deletePrefix: async (prefix: string) => {
      let n = 0;
      for (const k of [...objects.keys()]) if (k.startsWith(prefix) && objects.delete(k)) n++;
      return n;
    },
  };
}

/** A chunk file the writer wrote, decoded (it must be a binary one). */
const chunkOf = (objects: Map<string, string | Uint8Array>, key: string): DecodedChunk => {
  const body = objects.get(key);
  if (!(body instanceof Uint8Array) || !isBinaryChunk(body)) throw new Error(`${key} is not a binary chunk file`);
  return decodeBinaryChunk(body);
};
const textsOf = (objects: Map<string, string | Uint8Array>, key: string) => JSON.parse(objects.get(key) as string) as ChunkTexts;

const row = (id: string, texts: string[]) => JSON.stringify({ custom_id: id, query: `q ${id}`, candidates: texts.map((text) => ({ text })) });

describe('BatchChunkWriter', () => {
  it('cuts lines into chunk files naming each distinct text once, with a texts file of texts and hashes; bad rows become their errors', async () => {
    const store = memoryStore();
    const w = new BatchChunkWriter(store as never, 't', 'b1', 2, { hasCollection: false, maxTextBytes: 100 });
    for (const l of [row('a', ['x', 'y']), '', row('b', ['y', 'z']), 'not json', row('a', ['x']), JSON.stringify({ custom_id: 'c', query: 'q', candidates: ['d1'] })]) await w.line(l);
    const planned = await w.finish();
    expect(planned).toEqual({ rows: 5, invalid: 3, withTexts: [true, false, false] });
    const chunk0 = chunkOf(store.objects, batchKeys.chunk('t', 'b1', 0));
    expect(chunk0.textHashes).toEqual(['x', 'y', 'z'].map(textHash));
    expect(chunk0.textsIn).toBeNull();
    expect(chunk0.entries).toEqual([
      { line: 1, custom_id: 'a', query: 'q a', list: 0 },
      { line: 3, custom_id: 'b', query: 'q b', list: 1 },
    ]);
    expect(chunk0.lists).toEqual([[{ t: 0 }, { t: 1 }], [{ t: 1 }, { t: 2 }]]);
    expect(textsOf(store.objects, batchKeys.chunkTexts('t', 'b1', 0))).toEqual({ textHashes: ['x', 'y', 'z'].map(textHash), texts: ['x', 'y', 'z'] });
    const chunk1 = chunkOf(store.objects, batchKeys.chunk('t', 'b1', 1));
    expect(chunk1.textHashes).toEqual([]);
    expect(chunk1.lists).toEqual([]);
    expect(chunk1.entries.map((e) => ('error' in e ? [e.line, e.custom_id, e.error.message] : e))).toEqual([
      [4, null, expect.stringContaining('line 4: not JSON')],
      [5, 'a', expect.stringContaining('duplicate custom_id (first at line 1)')],
    ]);
    const chunk2 = chunkOf(store.objects, batchKeys.chunk('t', 'b1', 2)).entries[0];
    expect('error' in chunk2 && chunk2.error.message).toContain('needs the batch to name a collection');
    expect(store.objects.has(batchKeys.chunkTexts('t', 'b1', 1))).toBe(false);
    await w.discard();
    expect(store.objects.size).toBe(0);
  });

  it("each distinct text of a batch is written once: a later chunk's header names the earlier chunk holding it (textsIn)", async () => {
    const store = memoryStore();
    const w = new BatchChunkWriter(store as never, 't', 'b4', 1, { hasCollection: false, maxTextBytes: 100 });
    for (const l of [row('a', ['x', 'y']), row('b', ['y', 'z']), row('c', ['x', 'y'])]) await w.line(l);
    expect(await w.finish()).toEqual({ rows: 3, invalid: 0, withTexts: [true, true, true] });
    const header = (n: number) => {
      const c = chunkOf(store.objects, batchKeys.chunk('t', 'b4', n));
      return c.textsIn ? { textHashes: c.textHashes, textsIn: c.textsIn } : { textHashes: c.textHashes };
    };
    const texts = (n: number) => textsOf(store.objects, batchKeys.chunkTexts('t', 'b4', n));
    expect(header(0)).toEqual({ textHashes: ['x', 'y'].map(textHash) });
    expect(texts(0)).toEqual({ textHashes: ['x', 'y'].map(textHash), texts: ['x', 'y'] });
    expect(header(1)).toEqual({ textHashes: ['y', 'z'].map(textHash), textsIn: [0, 1] });
    expect(texts(1)).toEqual({ textHashes: [textHash('z')], texts: ['z'] });
    // Every text in earlier files: a texts file of its own all the same (empty), which the encode-texts child reads and a re-plan finds.
    expect(header(2)).toEqual({ textHashes: ['x', 'y'].map(textHash), textsIn: [0, 0] });
    expect(texts(2)).toEqual({ textHashes: [], texts: [] });
  });

  it('lines given as bytes (ByteLineSplitter) write the same files as the same lines given as text, repeated lists and bad rows included', async () => {
    const long = (n: number) => Array.from({ length: 5 }, (_, i) => `text ${n}.${i} ${'é'.repeat(20)}`);
    const lines = [
      row('a', long(1)),
      row('b', long(1)),
      '  ',
      row('c', long(2)),
      row('d', long(1)),
      `${row('e', long(2)).slice(0, -1)},"topK":3}`,
      'not json',
      row('a', long(2)),
      row('f', [...long(1), 'x'.repeat(200)]),
      row('g', long(1)),
    ];
    const files = async (asBytes: boolean) => {
      const store = memoryStore();
      const w = new BatchChunkWriter(store as never, 't', 'b9', 3, { hasCollection: false, maxTextBytes: 150 });
      for (const l of lines) await w.line(asBytes ? Buffer.from(l, 'utf8') : l);
      return { planned: await w.finish(), objects: store.objects };
    };
    const text = await files(false);
    const bytes = await files(true);
    expect(bytes.planned).toEqual(text.planned);
    expect(text.planned).toEqual({ rows: 9, invalid: 3, withTexts: [true, true, true] });
    expect([...bytes.objects.keys()]).toEqual([...text.objects.keys()]);
    for (const [key, body] of text.objects) expect(bytes.objects.get(key), key).toEqual(body);
  });

  it('a text over maxTextBytes fails its row, counted in UTF-8 bytes', async () => {
    const store = memoryStore();
    const w = new BatchChunkWriter(store as never, 't', 'b2', 10, { hasCollection: false, maxTextBytes: 8 });
    await w.line(row('ok', ['abcdefgh']));
    await w.line(row('long', ['ééééé'])); // 5 characters, 10 bytes
    expect(await w.finish()).toEqual({ rows: 2, invalid: 1, withTexts: [true] });
    const long = chunkOf(store.objects, batchKeys.chunk('t', 'b2', 0)).entries[1];
    expect('error' in long && long.error.message).toContain('text is 10 bytes, over MAX_DOCUMENT_BYTES (8)');
  });
  it("a chunk's files are written while the next chunk is cut, one chunk in flight; a failed write is thrown by the next flush or by finish", async () => {
    const store = memoryStore();
    const gates: (() => void)[] = [];
    const started: string[] = [];
    const put = store.put;
    // Each chunk file's put waits for its gate.
    store.put = (key: string, body: Uint8Array | string) => {
      started.push(key);
      return new Promise<undefined>((resolve) => gates.push(() => resolve(put(key, body))));
    };
    const w = new BatchChunkWriter(store as never, 't', 'b3', 1, { hasCollection: false, maxTextBytes: 100 });
    await w.line(row('a', ['x'])); // chunk 0 full: its write starts, the line returns
    expect(started).toEqual([batchKeys.chunk('t', 'b3', 0)]);
    let second = false;
    const p = w.line(row('b', ['y'])).then(() => (second = true)); // chunk 1 full: waits for chunk 0's write
    await new Promise((r) => setTimeout(r, 20));
    expect(second).toBe(false);
    gates.shift()!();
    await p;
    expect(started).toEqual([batchKeys.chunk('t', 'b3', 0), batchKeys.chunk('t', 'b3', 1)]);
    const done = w.finish();
    gates.shift()!();
    expect(await done).toEqual({ rows: 2, invalid: 0, withTexts: [true, true] });
    expect(store.objects.has(batchKeys.chunk('t', 'b3', 1))).toBe(true);

    const failing = memoryStore();
    failing.put = async () => {
      throw new Error('S3 said no');
    };
    const f = new BatchChunkWriter(failing as never, 't', 'b4', 1, { hasCollection: false, maxTextBytes: 100 });
    await f.line(row('a', ['x']));
    await expect(f.finish()).rejects.toThrow('S3 said no');
    const g = new BatchChunkWriter(failing as never, 't', 'b5', 1, { hasCollection: false, maxTextBytes: 100 });
    await g.line(row('a', ['x']));
    await expect(g.line(row('b', ['y']))).rejects.toThrow('S3 said no');
  });
});

describe('batchFlow', () => {
  it('the finalize job over one chunk job per chunk, an encode-texts child where the chunk has texts', () => {
    const flow = batchFlow('t', 'b', [true, false], { model: 'm', maxTokens: 180, codec: null });
    expect(flow).toMatchObject({ queue: QueueName.batch, jobId: textJobIds.batchFinalize('t', 'b'), payload: { step: 'finalize', chunks: 2 } });
    expect(flow.children![0]).toMatchObject({ jobId: textJobIds.batchChunk('t', 'b', 0), payload: { step: 'chunk', chunk: 0 } });
    expect(flow.children![0].children).toEqual([
      { queue: QueueName.encodeTexts, jobId: textJobIds.batchChunkTexts('t', 'b', 0), payload: { tenantId: 't', model: 'm', maxTokens: 180, codec: null, textsKey: batchKeys.chunkTexts('t', 'b', 0), texts: 0, chunkKey: batchKeys.chunk('t', 'b', 0) } },
    ]);
    expect(flow.children![1].children).toBeUndefined();
  });
});
