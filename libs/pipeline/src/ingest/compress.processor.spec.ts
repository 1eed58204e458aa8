import { afterEach, describe, expect, it, vi } from 'vitest';
import { MEBERT_PREFIX_ROWS, PermanentJobError, QueueName, jobIds, s3Keys, type CodecSettings, type Collection, type JobPayload } from '@lateral/shared';
import { createCodec, fitCodec, readSegment, writeSegment, type CodecArtifact } from '@lateral/codec';
import { staticEmbeddingsFromTable, type EncodedText, type StaticEmbeddings } from '@lateral/model';
import type { FitSample } from '@lateral/infra';
import { compressProcessor, type CompressDeps } from './compress.processor';
import { strictMock, takeStrictMockViolations } from '../testing/strict-mock';
import { RAW_CODEC, assembleSegmentDocs } from '@lateral/serving';

afterEach(() => expect(takeStrictMockViolations()).toEqual([]));

const T = 't1';
const C = 'c1';
const BATCH = 'b-1';
const DIMS = 8;
const SEED = 0x5eed_1234n;

const fp16: CodecSettings = { kind: 'fp16', layout: 'token', norms: 'fp32', sideInfo: false };
const eden4: CodecSettings = { kind: 'eden', bits: 4, layout: 'token', norms: 'fp32', sideInfo: false };
const edenSide: CodecSettings = { kind: 'eden', bits: 4, layout: 'token', norms: 'fp32', sideInfo: true };

const collectionWith = (codec: CodecSettings, codecVersion = 2, pending?: Collection['pending']): Collection => ({
  tenantId: T,
  id: C,
  model: 'fake-model',
  dims: DIMS,
  maxDocTokens: 64,
  codec,
  codecVersion,
  createdAt: '2024-01-01T00:00:00.000Z',
  ...(pending ? { pending } : {}),
});

const payload = (codecVersion = 2): JobPayload<QueueName.compress> => ({
  tenantId: T,
  collectionId: C,
  ingestionId: 'ing-1',
  batchId: BATCH,
  rawKey: s3Keys.rawVectors(T, C, BATCH),
  codecVersion,
  documents: 3,
});

/** A raw segment as the encode processor writes it: 3 documents of 3, 4 and 5 tokens, values exact in fp16. */
function rawSegment(tokenIdBase = 0): Uint8Array {
  const lengths = [3, 4, 5];
  let t = 0;
  const encoded: EncodedText[] = lengths.map((length) => {
    const vectors = new Float32Array(length * DIMS);
    const tokenIds = new Int32Array(length);
    for (let i = 0; i < length; i++, t++) {
      tokenIds[i] = tokenIdBase + t;
      for (let k = 0; k < DIMS; k++) vectors[i * DIMS + k] = (((t * 7 + k * 3) % 11) - 5) / 4;
    }
    return { tokenIds, vectors, weights: null, length, truncated: false };
  });
  return writeSegment(assembleSegmentDocs(['d1', 'd2', 'd3'], encoded, DIMS, [{ year: 1962 }, null, { tag: 'x' }]), RAW_CODEC);
}

const fit = (settings: CodecSettings, s: FitSample): CodecArtifact =>
  fitCodec(settings, s.vectors, s.dims, { seed: SEED, ...(s.staticEmbeddings ? { staticEmbeddings: s.staticEmbeddings, staticDims: s.staticDims } : {}) });

/** A 16-row, 4-d static table (token ids 0..15). */
const table = (): StaticEmbeddings => staticEmbeddingsFromTable(Float32Array.from({ length: 16 * 4 }, (_, i) => Math.sin(i + 1)), 4);

function setup(over: { collection?: Collection | null; raw?: Uint8Array | null; artifact?: (settings: CodecSettings, s: FitSample) => CodecArtifact; se?: StaticEmbeddings } = {}) {
  const raw = over.raw === undefined ? rawSegment() : over.raw;
  const get = vi.fn(async (_key: string) => raw);
  const put = vi.fn(async (_key: string, _body: Uint8Array | string) => undefined);
  const collectionsGet = vi.fn(async (_t: string, _c: string) => (over.collection === undefined ? collectionWith(eden4) : over.collection));
  const samples: FitSample[] = [];
  const artifacts: CodecArtifact[] = [];
  const ensure = vi.fn(async (_t: string, _c: string, _v: number, settings: CodecSettings, sample: () => FitSample) => {
    const s = sample();
    samples.push(s);
    const a = (over.artifact ?? fit)(settings, s);
    artifacts.push(a);
    return a;
  });
  const forCollection = vi.fn(async (_c: Pick<Collection, 'tenantId' | 'id' | 'model'>) => over.se ?? table());
  const add = vi.fn(async (..._args: unknown[]) => undefined);
  const deps: CompressDeps = {
    store: strictMock<CompressDeps['store']>('store', { get, put }),
    collections: strictMock<CompressDeps['collections']>('collections', { get: collectionsGet }),
    codecs: strictMock<CompressDeps['codecs']>('codecs', { ensure }),
    staticEmbeddings: strictMock<CompressDeps['staticEmbeddings']>('staticEmbeddings', { forCollection }),
    queues: strictMock<CompressDeps['queues']>('queues', { add: add as unknown as CompressDeps['queues']['add'] }),
  };
  return { deps, raw, get, put, collectionsGet, ensure, samples, artifacts, forCollection, add };
}

const written = (s: ReturnType<typeof setup>) => {
  expect(s.put).toHaveBeenCalledOnce();
  const [key, bytes] = s.put.mock.calls[0];
  return { key, bytes: bytes as Uint8Array };
};

describe('compressProcessor', () => {
  it('fits the codec through codecs.ensure on the raw vectors, writes the versioned segment and enqueues commit', async () => {
    const s = setup();
    const result = await compressProcessor(s.deps, payload());

    expect(s.collectionsGet).toHaveBeenCalledExactlyOnceWith(T, C);
    expect(s.get).toHaveBeenCalledExactlyOnceWith(s3Keys.rawVectors(T, C, BATCH));
    const raw = readSegment(s.raw!, 'raw');
    expect(s.ensure).toHaveBeenCalledExactlyOnceWith(T, C, 2, eden4, expect.any(Function));
    expect(s.samples).toHaveLength(1);
    expect(s.samples[0]).toEqual({ vectors: raw.decodeAll(), dims: DIMS });
    expect(s.forCollection).not.toHaveBeenCalled();

    const segmentKey = s3Keys.segment(T, C, BATCH, 2);
    expect(segmentKey).toBe('tenants/t1/collections/c1/segments/v2/b-1.seg');
    const { key, bytes } = written(s);
    expect(key).toBe(segmentKey);
    const artifact = s.artifacts[0];
    const seg = readSegment(bytes, key, artifact);
    expect(seg.codec).toMatchObject({ kind: 'eden', bits: 4, layout: 'token', artifact: { version: artifact.version, checksum: artifact.checksum } });
    expect(seg.seed).toBe(SEED);
    expect(seg.docIds).toEqual(['d1', 'd2', 'd3']);
    expect(seg.tokenOffsets).toEqual(raw.tokenOffsets);
    expect(seg.tokenIds).toEqual(raw.tokenIds);
    expect(seg.docVectors).toEqual(raw.docVectors);
    expect([0, 1, 2].map((i) => seg.metadata(i))).toEqual([{ year: 1962 }, null, { tag: 'x' }]);
    // 4-bit EDEN: close to the raw vectors, not equal.
    const a = raw.decodeAll();
    const b = seg.decodeAll();
    let err = 0;
    let norm = 0;
    for (let i = 0; i < a.length; i++) {
      err += (a[i] - b[i]) ** 2;
      norm += a[i] ** 2;
    }
    expect(err / norm).toBeLessThan(0.05);
    expect(err).toBeGreaterThan(0);
    // Without its artifact the segment cannot be read: it is bound to the version's fit.
    expect(() => readSegment(bytes, key)).toThrow(/artifact/);

    expect(s.add).toHaveBeenCalledExactlyOnceWith(QueueName.index, jobIds.index(T, C, BATCH, 2), {
      tenantId: T,
      collectionId: C,
      ingestionId: 'ing-1',
      batchId: BATCH,
      segmentKey,
      codecVersion: 2,
      documents: 3,
    });
    expect(jobIds.index(T, C, BATCH, 2)).toBe('t1~c1~index~b-1~v2');
    expect(s.put.mock.invocationCallOrder[0]).toBeLessThan(s.add.mock.invocationCallOrder[0]);
    expect(result).toEqual({ segmentKey, bytes: bytes.byteLength });
  });

  it('fp16: ensure returns the unfitted artifact fitCodec gives (no arrays) and the vectors stay exact', async () => {
    const s = setup({ collection: collectionWith(fp16) });
    await compressProcessor(s.deps, payload());
    expect(s.ensure).toHaveBeenCalledExactlyOnceWith(T, C, 2, fp16, expect.any(Function));
    expect(s.artifacts[0]).toMatchObject({ mean: null, components: null, centroids: null, settings: { kind: 'fp16' } });
    const { key, bytes } = written(s);
    const seg = readSegment(bytes, key);
    expect(seg.codec).toMatchObject({ kind: 'fp16', artifact: null });
    expect(seg.decodeAll()).toEqual(readSegment(s.raw!, 'raw').decodeAll());
  });

  it('fp16: the raw codes are stored as they are, the bytes that coding the decoded values gives; a batch with a NaN is coded again (its NaN quieted)', async () => {
    const viaValues = (rawBytes: Uint8Array) => {
      const raw = readSegment(rawBytes, 'raw');
      const metadata = [0, 1, 2].map((i) => raw.metadata(i));
      const docs = { docIds: raw.docIds, tokenOffsets: raw.tokenOffsets, tokenIds: raw.tokenIds, vectors: raw.decodeAll(), dims: DIMS, docVectors: raw.docVectors ?? undefined, metadata };
      return writeSegment(docs, createCodec(fp16), { seed: fit(fp16, { vectors: docs.vectors, dims: DIMS }).seed, prefixRows: MEBERT_PREFIX_ROWS });
    };
    const s = setup({ collection: collectionWith(fp16) });
    await compressProcessor(s.deps, payload());
    expect(s.samples[0]).toEqual({ vectors: readSegment(s.raw!, 'raw').decodeAll(), dims: DIMS });
    expect(Buffer.from(written(s).bytes).equals(Buffer.from(viaValues(s.raw!)))).toBe(true);
    // A signalling NaN with a payload in the raw codes: decoded and coded again it is 0x7e00, as before.
    const raw = readSegment(rawSegment(), 'raw');
    const codes = new Uint16Array(raw.codedVectors().codes.slice().buffer);
    codes[5] = 0xfd01;
    const docs = { docIds: raw.docIds, tokenOffsets: raw.tokenOffsets, tokenIds: raw.tokenIds, vectors: new Float32Array(0), dims: DIMS, docVectors: raw.docVectors ?? undefined, metadata: [0, 1, 2].map((i) => raw.metadata(i)) };
    const withNaN = writeSegment(docs, RAW_CODEC, { coded: { codes: new Uint8Array(codes.buffer), norms: new Uint8Array(0) } });
    const n = setup({ collection: collectionWith(fp16), raw: withNaN });
    await compressProcessor(n.deps, payload());
    const out = written(n).bytes;
    expect(Buffer.from(out).equals(Buffer.from(viaValues(withNaN)))).toBe(true);
    expect(new Uint16Array(readSegment(out, 'seg').codedVectors().codes.slice().buffer)[5]).toBe(0x7e00);
  });

  it('is idempotent: the same job twice writes identical bytes and enqueues the same commit job', async () => {
    const a = setup();
    const b = setup();
    await compressProcessor(a.deps, payload());
    await compressProcessor(b.deps, payload());
    expect(Buffer.from(written(b).bytes).equals(Buffer.from(written(a).bytes))).toBe(true);
    expect(b.add.mock.calls).toEqual(a.add.mock.calls);
  });

  it('a re-compression job uses the pending codec settings and writes under its own version', async () => {
    const pending = { codecVersion: 2, codec: eden4, batches: [BATCH], startedAt: '2024-01-02T00:00:00.000Z' };
    const s = setup({ collection: collectionWith(fp16, 1, pending) });
    await compressProcessor(s.deps, payload(2));
    expect(s.ensure).toHaveBeenCalledExactlyOnceWith(T, C, 2, eden4, expect.any(Function));
    expect(written(s).key).toBe(s3Keys.segment(T, C, BATCH, 2));
    expect(s.add.mock.calls[0][1]).toBe(jobIds.index(T, C, BATCH, 2));

    // A job of the current version during the re-compression keeps the current settings.
    const cur = setup({ collection: collectionWith(fp16, 1, pending) });
    await compressProcessor(cur.deps, payload(1));
    expect(cur.ensure).toHaveBeenCalledExactlyOnceWith(T, C, 1, fp16, expect.any(Function));
    expect(written(cur).key).toBe(s3Keys.segment(T, C, BATCH, 1));
  });

  it('a codec version neither current nor pending is permanent; nothing is fitted or written', async () => {
    const pending = { codecVersion: 3, codec: eden4, batches: [BATCH], startedAt: '2024-01-02T00:00:00.000Z' };
    const s = setup({ collection: collectionWith(fp16, 2, pending) });
    const err = await compressProcessor(s.deps, payload(5)).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(PermanentJobError);
    expect((err as Error).message).toBe('codec version 5 of c1 is neither current (2) nor being re-compressed');
    expect(s.ensure).not.toHaveBeenCalled();
    expect(s.put).not.toHaveBeenCalled();
    expect(s.add).not.toHaveBeenCalled();
  });

  it('corrupted or truncated raw bytes are permanent', async () => {
    const bad = rawSegment();
    bad[bad.length - 40] ^= 0xff;
    const s = setup({ raw: bad });
    const err = await compressProcessor(s.deps, payload()).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(PermanentJobError);
    expect((err as Error).message).toMatch(/segment "tenants\/t1\/collections\/c1\/raw\/b-1\.seg" is corrupt in section ".+": checksum mismatch/);
    expect(s.ensure).not.toHaveBeenCalled();
    expect(s.put).not.toHaveBeenCalled();

    const truncated = setup({ raw: rawSegment().subarray(0, 100) });
    await expect(compressProcessor(truncated.deps, payload())).rejects.toThrow(PermanentJobError);
    expect(truncated.put).not.toHaveBeenCalled();
  });

  it('missing raw vectors or a missing collection are permanent', async () => {
    const noRaw = setup({ raw: null });
    await expect(compressProcessor(noRaw.deps, payload())).rejects.toThrow(new PermanentJobError(`raw vectors are missing from S3: ${s3Keys.rawVectors(T, C, BATCH)}`));
    expect(noRaw.ensure).not.toHaveBeenCalled();

    const noCollection = setup({ collection: null });
    await expect(compressProcessor(noCollection.deps, payload())).rejects.toThrow(new PermanentJobError('collection t1/c1 no longer exists'));
    expect(noCollection.get).not.toHaveBeenCalled();
  });

  it('side information: fits on the static rows of the raw tokens from the collection model', async () => {
    const collection = collectionWith(edenSide);
    const se = table();
    const s = setup({ collection, se });
    await compressProcessor(s.deps, payload());
    expect(s.forCollection).toHaveBeenCalledExactlyOnceWith(collection);
    const raw = readSegment(s.raw!, 'raw');
    expect(s.samples[0]).toEqual({ vectors: raw.decodeAll(), dims: DIMS, staticEmbeddings: se.lookup(raw.tokenIds), staticDims: 4 });
    const { key, bytes } = written(s);
    const seg = readSegment(bytes, key, s.artifacts[0], { staticEmbeddings: (_doc, ids) => se.lookup(ids) });
    expect(seg.codec).toMatchObject({ kind: 'eden', sideInfo: true });
    expect(seg.decodeAll()).toHaveLength(raw.tokens * DIMS);
  });

  it('side information: a raw token outside the model table is permanent, before fitting', async () => {
    const s = setup({ collection: collectionWith(edenSide), raw: rawSegment(10) });
    const err = await compressProcessor(s.deps, payload()).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(PermanentJobError);
    expect((err as Error).message).toBe(`${s3Keys.rawVectors(T, C, BATCH)}: token id 16 is outside the static embedding table (16 rows)`);
    expect(s.ensure).not.toHaveBeenCalled();
    expect(s.put).not.toHaveBeenCalled();
  });

  it('an artifact fitted with side information for a job without it is permanent', async () => {
    const sideArtifact = (_settings: CodecSettings, sm: FitSample) => {
      const se = table();
      const raw = readSegment(rawSegment(), 'raw');
      return fitCodec(edenSide, sm.vectors, sm.dims, { seed: SEED, staticEmbeddings: se.lookup(raw.tokenIds), staticDims: 4 });
    };
    const s = setup({ artifact: sideArtifact });
    const err = await compressProcessor(s.deps, payload()).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(PermanentJobError);
    expect((err as Error).message).toBe('codec v2 of c1 uses side information but its job settings do not');
    expect(s.put).not.toHaveBeenCalled();
    expect(s.add).not.toHaveBeenCalled();
  });
});
