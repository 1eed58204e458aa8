/**
 * The pipeline honours the model's pooling (issue 13: `pooling: 'cls'` was once parsed and
 * ignored). A real encoder (the tiny transformer, run by ONNX Runtime) whose manifest says `cls`:
 * the encode job stores each document's dense vector as its normalised [CLS] vector, not the mean
 * of its token vectors, and the dense / ME-BERT scorers pool the query the same way. Expected
 * values are computed here from the encoder's raw outputs, not through `encoder.pool`.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Job } from 'bullmq';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { s3Keys, toNdjson, type Collection, type IngestDocument, type JobPayload, type QueueName } from '@lateral/shared';
import { readSegment } from '@lateral/codec';
import { TokenEncoder, writeTinyTransformer, type EncodedText } from '@lateral/model';
import type { ScorerResources } from '@lateral/kernels';
import type { Logger } from '@lateral/infra';
import { encodeProcessor, type EncodeDeps } from './encode.processor';
import { strictMock, takeStrictMockViolations } from '../testing/strict-mock';
import { scoreGroup, type CollectionView } from '@lateral/serving';

afterEach(() => expect(takeStrictMockViolations()).toEqual([]));

const D = 16;
const T = 't1';
const C = 'c1';
const BATCH = 'b-1';

const docs: IngestDocument[] = [
  { id: 'd1', text: 'supersonic flow over a swept wing.' },
  { id: 'd2', text: 'heat transfer in the laminar boundary layer, at high mach number' },
  { id: 'd3', text: 'the quick brown fox jumps over the lazy dog' },
];

function l2(v: Float32Array): Float32Array {
  let s = 0;
  for (const x of v) s += x * x;
  const n = Math.sqrt(s) || 1;
  return Float32Array.from(v, (x) => x / n);
}
function meanOfTokens(e: EncodedText): Float32Array {
  const out = new Float32Array(D);
  for (let t = 0; t < e.length; t++) for (let j = 0; j < D; j++) out[j] += e.vectors[t * D + j] / e.length;
  return l2(out);
}
const dot = (a: Float32Array, b: Float32Array) => a.reduce((s, x, i) => s + x * b[i], 0);
const maxAbsDiff = (a: ArrayLike<number>, b: ArrayLike<number>) => Array.from(a).reduce((m, x, i) => Math.max(m, Math.abs(x - b[i])), 0);

describe("pooling: 'cls' through the pipeline", () => {
  let dir: string;
  let encoder: TokenEncoder;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'lateral-cls-pooling-'));
    // The [CLS] vector is dropped from the stored tokens (skiplist) but kept aside for pooling.
    writeTinyTransformer(dir, { seed: 7, dims: D, manifest: { pooling: 'cls', skiplist: ['[CLS]', '.', ','] } });
    encoder = await TokenEncoder.load(dir, { executionProvider: 'cpu', intraOpThreads: 1 });
  });
  afterAll(async () => {
    await encoder?.release();
    rmSync(dir, { recursive: true, force: true });
  });

  it('the encode job stores the normalised [CLS] vector as each document vector, not the token mean', async () => {
    const collection: Collection = {
      tenantId: T,
      id: C,
      model: 'tiny-cls',
      dims: D,
      maxDocTokens: 64,
      codec: { kind: 'fp16', layout: 'token', norms: 'fp32', sideInfo: false },
      codecVersion: 1,
      createdAt: '2024-01-01T00:00:00.000Z',
    };
    const put = vi.fn(async (_key: string, _body: Uint8Array | string) => undefined);
    const deps: EncodeDeps = {
      store: strictMock<EncodeDeps['store']>('store', { get: vi.fn(async () => new TextEncoder().encode(toNdjson(docs))), put }),
      collections: strictMock<EncodeDeps['collections']>('collections', { get: vi.fn(async () => collection) }),
      encoders: vi.fn(async () => encoder),
      queues: strictMock<EncodeDeps['queues']>('queues', { add: vi.fn(async () => undefined) as unknown as EncodeDeps['queues']['add'] }),
      tokenBudget: 4096,
      logger: strictMock<Logger>('logger', { debug: vi.fn() }),
    };
    const payload: JobPayload<QueueName.encode> = {
      tenantId: T,
      collectionId: C,
      ingestionId: 'ing-1',
      batchId: BATCH,
      documentsKey: s3Keys.batchDocuments(T, C, BATCH),
      documents: docs.length,
    };
    await encodeProcessor(deps, payload, strictMock<Job>('job', { updateProgress: vi.fn(async () => undefined) }));

    const rawKey = s3Keys.rawVectors(T, C, BATCH);
    const written = put.mock.calls.find(([key]) => key === rawKey);
    expect(written).toBeDefined();
    const seg = readSegment(written![1] as Uint8Array, rawKey);
    const encoded = await encoder.encodeDocuments(docs.map((d) => d.text), { maxTokens: 64 });
    for (let i = 0; i < docs.length; i++) {
      const e = encoded[i];
      expect(e.cls).toBeDefined();
      const stored = seg.docVectors!.subarray(i * D, (i + 1) * D);
      expect(maxAbsDiff(stored, l2(e.cls!))).toBeLessThan(1e-6);
      // ... and clearly not what mean pooling would have stored
      expect(maxAbsDiff(stored, meanOfTokens(e))).toBeGreaterThan(0.05);
      // the stored token vectors hold no [CLS] position (skiplist), yet the pooled vector is the [CLS] one
      expect(Array.from(seg.tokenIds.subarray(seg.tokenOffsets[i], seg.tokenOffsets[i + 1]))).toEqual(Array.from(e.tokenIds));
    }
  });

  it('dense and ME-BERT pool the query with the [CLS] vector', async () => {
    const encodedDocs = await encoder.encodeDocuments(docs.map((d) => d.text), { maxTokens: 64 });
    const docVectors = new Float32Array(docs.length * D);
    encodedDocs.forEach((e, i) => docVectors.set(l2(e.cls!), i * D));
    const offsets = new Uint32Array(docs.length + 1);
    encodedDocs.forEach((e, i) => (offsets[i + 1] = offsets[i] + e.length));
    const tokens = new Float32Array(offsets[docs.length] * D);
    encodedDocs.forEach((e, i) => tokens.set(e.vectors, offsets[i] * D));
    const rows = [0, 1, 2];
    const view = strictMock<CollectionView>('view', {
      dims: D,
      docVectors,
      rotated: null,
      rowVectors: vi.fn(() => ({ docs: tokens, offsets })),
    });
    const queries = await encoder.encodeQueries(['supersonic wing', 'boundary layer heat']);
    const g = { view, encoder, queries, rows, firstStage: null, yieldEvery: async () => {} };
    const res = strictMock<ScorerResources>('resources');

    const denseScores = await scoreGroup(res, g, { name: 'dense' });
    const mebertScores = await scoreGroup(res, g, { name: 'mebert', m: 2 });
    queries.forEach((q, qi) => {
      // queries keep their [CLS] token: the pooled query is its (normalised) vector
      const qv = l2(q.cls!);
      expect(maxAbsDiff(qv, meanOfTokens(q))).toBeGreaterThan(0.05);
      for (const r of rows) {
        expect(denseScores[qi][r]).toBeCloseTo(dot(qv, docVectors.subarray(r * D, (r + 1) * D)), 5);
        // ME-BERT: the best of the document's first m token vectors against the pooled query
        const firstM = [0, 1].map((t) => dot(qv, tokens.subarray((offsets[r] + t) * D, (offsets[r] + t + 1) * D)));
        expect(mebertScores[qi][r]).toBeCloseTo(Math.max(...firstM), 5);
      }
    });
  });
});
