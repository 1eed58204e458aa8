import type { Job } from 'bullmq';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { PermanentJobError, QueueName, batchInfoKey, jobIds, s3Keys, toNdjson, type Collection, type IngestDocument, type JobPayload } from '@lateral/shared';
import { readSegment } from '@lateral/codec';
import { ModelShapeError, poolEncoded, type EncodeDocumentsOptions, type EncodedText, type TokenEncoder } from '@lateral/model';
import type { Logger } from '@lateral/infra';
import { encodeProcessor, type EncodeDeps } from './encode.processor';
import { UnstubbedMemberError, strictMock, takeStrictMockViolations } from '../testing/strict-mock';
import { RAW_CODEC } from '@lateral/serving';

afterEach(() => expect(takeStrictMockViolations()).toEqual([]));

const T = 't1';
const C = 'c1';
const BATCH = 'b-1';
const DIMS = 4;

const collection: Collection = {
  tenantId: T,
  id: C,
  model: 'fake-model',
  dims: DIMS,
  maxDocTokens: 64,
  codec: { kind: 'eden', bits: 4, layout: 'token', norms: 'fp32', sideInfo: false },
  codecVersion: 3,
  createdAt: '2024-01-01T00:00:00.000Z',
};

const payload: JobPayload<QueueName.encode> = {
  tenantId: T,
  collectionId: C,
  ingestionId: 'ing-1',
  batchId: BATCH,
  documentsKey: s3Keys.batchDocuments(T, C, BATCH),
  documents: 2,
};

const docs: IngestDocument[] = [
  { id: 'd1', text: 'swept wing flutter', metadata: { year: 1962 } },
  { id: 'd2', text: 'laminar boundary layer' },
];

/** Fixed encodings, every value exact in fp16: d1 has 2 tokens, d2 has 3. */
const encodings: EncodedText[] = [
  { tokenIds: Int32Array.from([11, 12]), vectors: Float32Array.from([1, 0, 0, 0, 0, 1, 0, 0]), weights: null, length: 2, truncated: false },
  { tokenIds: Int32Array.from([21, 22, 23]), vectors: Float32Array.from([0, 0, 3, 0, 0, 0, 0, 4, 0, 0, 0, -1]), weights: null, length: 3, truncated: false },
];

function setup(over: { collection?: Collection | null; body?: Uint8Array | null; encoderDims?: number; encoders?: EncodeDeps['encoders'] } = {}) {
  const encodeDocuments = vi.fn(async (_texts: string[], _opts?: EncodeDocumentsOptions) => encodings.map((e) => ({ ...e })));
  const pool = (e: EncodedText) => poolEncoded(e, over.encoderDims ?? DIMS, 'mean');
  const encoder = strictMock<TokenEncoder>('encoder', { dims: over.encoderDims ?? DIMS, encodeDocuments, pool });
  const get = vi.fn(async (_key: string) => (over.body === undefined ? new TextEncoder().encode(toNdjson(docs)) : over.body));
  const put = vi.fn(async (_key: string, _body: Uint8Array | string) => undefined);
  const collectionsGet = vi.fn(async (_t: string, _c: string) => (over.collection === undefined ? collection : over.collection));
  const encoders = vi.fn(over.encoders ?? (async (_model: string) => encoder));
  const add = vi.fn(async (..._args: unknown[]) => undefined);
  const debug = vi.fn();
  const deps: EncodeDeps = {
    store: strictMock<EncodeDeps['store']>('store', { get, put }),
    collections: strictMock<EncodeDeps['collections']>('collections', { get: collectionsGet }),
    encoders,
    queues: strictMock<EncodeDeps['queues']>('queues', { add: add as unknown as EncodeDeps['queues']['add'] }),
    tokenBudget: 1234,
    logger: strictMock<Logger>('logger', { debug }),
  };
  const updateProgress = vi.fn(async (_progress: unknown) => undefined);
  const job = strictMock<Job>('job', { updateProgress });
  return { deps, job, get, put, collectionsGet, encoders, encodeDocuments, add, debug, updateProgress };
}

describe('encodeProcessor', () => {
  it('encodes the batch NDJSON with the collection model, writes the raw fp16 segment and enqueues compress', async () => {
    const s = setup();
    const result = await encodeProcessor(s.deps, payload, s.job);

    expect(s.collectionsGet).toHaveBeenCalledExactlyOnceWith(T, C);
    expect(s.get).toHaveBeenCalledExactlyOnceWith(s3Keys.batchDocuments(T, C, BATCH));
    expect(s.encoders).toHaveBeenCalledExactlyOnceWith('fake-model');
    expect(s.encodeDocuments).toHaveBeenCalledExactlyOnceWith(['swept wing flutter', 'laminar boundary layer'], { maxTokens: 64, tokenBudget: 1234 });
    expect(s.updateProgress).toHaveBeenCalledExactlyOnceWith(80);

    const rawKey = s3Keys.rawVectors(T, C, BATCH);
    expect(rawKey).toBe('tenants/t1/collections/c1/raw/b-1.seg');
    // the raw vectors, then what each document became (tokens, truncation) beside the batch's documents
    expect(s.put).toHaveBeenCalledTimes(2);
    expect(s.put.mock.calls[1][0]).toBe(batchInfoKey(T, C, BATCH));
    expect(JSON.parse(s.put.mock.calls[1][1] as string)).toEqual({
      batchId: BATCH,
      documents: [
        { id: 'd1', line: 0, tokens: 2, truncated: false },
        { id: 'd2', line: 1, tokens: 3, truncated: false },
      ],
    });
    const [key, bytes] = s.put.mock.calls[0];
    expect(key).toBe(rawKey);
    const seg = readSegment(bytes as Uint8Array, key);
    expect(seg.codec).toEqual(RAW_CODEC.descriptor);
    expect(seg.codec.kind).toBe('fp16');
    expect(seg.dims).toBe(DIMS);
    expect(seg.docIds).toEqual(['d1', 'd2']);
    expect(Array.from(seg.tokenOffsets)).toEqual([0, 2, 5]);
    expect(Array.from(seg.tokenIds)).toEqual([11, 12, 21, 22, 23]);
    expect(Array.from(seg.decodeAll())).toEqual([1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 3, 0, 0, 0, 0, 4, 0, 0, 0, -1]);
    // Pooled document vectors: L2-normalised token means ([.5,.5,0,0] and [0,0,1,1]).
    const h = Math.SQRT1_2;
    expect(Array.from(seg.docVectors!)).toEqual([h, h, 0, 0, 0, 0, h, h].map((x) => expect.closeTo(x, 6)));
    expect(seg.metadata(0)).toEqual({ year: 1962 });
    expect(seg.metadata(1)).toBeNull();

    expect(s.add).toHaveBeenCalledExactlyOnceWith(QueueName.compress, jobIds.compress(T, C, BATCH, 3), {
      tenantId: T,
      collectionId: C,
      ingestionId: 'ing-1',
      batchId: BATCH,
      rawKey,
      codecVersion: 3,
      documents: 2,
    });
    expect(jobIds.compress(T, C, BATCH, 3)).toBe('t1~c1~compress~b-1~v3');
    // The enqueue comes after the write, so a crash between the two cannot lose the raw vectors.
    expect(s.put.mock.invocationCallOrder[0]).toBeLessThan(s.add.mock.invocationCallOrder[0]);
    expect(result).toEqual({ rawKey, documents: 2, tokens: 5, codecVersion: 3 });
    expect(s.debug).toHaveBeenCalledOnce();
    expect(s.debug.mock.calls[0][1]).toEqual({ batch: BATCH });
  });

  it('runs without a job (no progress reported)', async () => {
    const s = setup();
    await expect(encodeProcessor(s.deps, payload)).resolves.toMatchObject({ documents: 2, tokens: 5 });
  });

  it('is idempotent: a second run writes identical bytes to the same key and enqueues the same job id', async () => {
    const a = setup();
    const b = setup();
    const ra = await encodeProcessor(a.deps, payload, a.job);
    const rb = await encodeProcessor(b.deps, payload, b.job);
    expect(rb).toEqual(ra);
    expect(b.put.mock.calls[0][0]).toBe(a.put.mock.calls[0][0]);
    expect(Buffer.from(b.put.mock.calls[0][1] as Uint8Array).equals(Buffer.from(a.put.mock.calls[0][1] as Uint8Array))).toBe(true);
    expect(b.add.mock.calls).toEqual(a.add.mock.calls);
  });

  it('a missing collection is permanent and touches nothing else', async () => {
    const s = setup({ collection: null });
    await expect(encodeProcessor(s.deps, payload, s.job)).rejects.toThrow(PermanentJobError);
    await expect(encodeProcessor(s.deps, payload, s.job)).rejects.toThrow('collection t1/c1 no longer exists');
    expect(s.get).not.toHaveBeenCalled();
    expect(s.encoders).not.toHaveBeenCalled();
    expect(s.put).not.toHaveBeenCalled();
    expect(s.add).not.toHaveBeenCalled();
  });

  it('missing documents in S3 are permanent; nothing is encoded, written or enqueued', async () => {
    const s = setup({ body: null });
    const err = await encodeProcessor(s.deps, payload, s.job).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(PermanentJobError);
    expect((err as Error).message).toBe(`accepted documents are missing from S3: ${payload.documentsKey}`);
    expect(s.encoders).not.toHaveBeenCalled();
    expect(s.put).not.toHaveBeenCalled();
    expect(s.add).not.toHaveBeenCalled();
  });

  it('a model whose dims differ from the collection is permanent, before encoding', async () => {
    const s = setup({ encoderDims: 8 });
    const err = await encodeProcessor(s.deps, payload, s.job).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(PermanentJobError);
    expect((err as Error).message).toBe('model fake-model produces 8-d vectors but collection c1 was created with 4 dims');
    expect(s.encodeDocuments).not.toHaveBeenCalled();
    expect(s.put).not.toHaveBeenCalled();
    expect(s.add).not.toHaveBeenCalled();
  });

  it('a model that does not match its manifest is permanent; other encoder failures stay transient', async () => {
    const shape = setup({ encoders: async () => Promise.reject(new ModelShapeError('output has 3 dims, manifest says 4')) });
    await expect(encodeProcessor(shape.deps, payload, shape.job)).rejects.toThrow(PermanentJobError);
    const flaky = setup({ encoders: async () => Promise.reject(new Error('EMFILE')) });
    const err = await encodeProcessor(flaky.deps, payload, flaky.job).catch((e: unknown) => e);
    expect(err).not.toBeInstanceOf(PermanentJobError);
    expect((err as Error).message).toBe('EMFILE');
    expect(flaky.put).not.toHaveBeenCalled();
  });

  it('an S3 write error is transient and enqueues nothing', async () => {
    const s = setup();
    s.put.mockRejectedValueOnce(new Error('S3 503'));
    const err = await encodeProcessor(s.deps, payload, s.job).catch((e: unknown) => e);
    expect(err).not.toBeInstanceOf(PermanentJobError);
    expect(s.add).not.toHaveBeenCalled();
  });
});

describe('strictMock (the helper these specs rely on)', () => {
  interface Thing {
    a(x: number): number;
    b(): void;
    nested: { deep(): void };
    value: number;
  }

  it('has only the stubbed members; calling or reading into anything else throws, naming it', async () => {
    const a = vi.fn((x: number) => x + 1);
    const m = strictMock<Thing>('thing', { a, value: 7 });
    expect(m.a(1)).toBe(2);
    expect(a).toHaveBeenCalledWith(1);
    expect(m.value).toBe(7);
    expect(() => m.b()).toThrow(UnstubbedMemberError);
    expect(() => m.b()).toThrow('strict mock: thing.b is not stubbed (called)');
    expect(() => m.nested.deep()).toThrow('strict mock: thing.nested.deep is not stubbed (read)');
    expect(() => {
      m.value = 8;
    }).toThrow('thing.value is not stubbed (assigned)');
    expect('b' in m).toBe(false);
    expect(Object.keys(m)).toEqual(['a', 'value']);
    // Records what it threw, so a processor that swallows the error still fails the spec.
    expect(takeStrictMockViolations()).toEqual(['thing.b (called)', 'thing.b (called)', 'thing.nested.deep (read)', 'thing.value (assigned)']);
    // Awaitable and printable: `then` and symbols read as undefined.
    expect(await Promise.resolve(m)).toBe(m);
    expect(String(Object.prototype.toString.call(m))).toBe('[object Object]');
  });
});
