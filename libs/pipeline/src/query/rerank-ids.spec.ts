import type { Job } from 'bullmq';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { PermanentJobError, QueueName, s3Keys, type Collection, type CollectionManifest, type JobPayload, type ModelManifest, type RerankResult } from '@lateral/shared';
import { poolEncoded, type EncodedText, type TokenEncoder } from '@lateral/model';
import type { RotatedImageSet } from '@lateral/kernels';
import { rerankByIds } from './rerank-ids';
import type { RerankDeps } from './query-deps';
import type { ScorerResources } from '@lateral/kernels';
import { strictMock, takeStrictMockViolations, type Stubs } from '../testing/strict-mock';
import type { CollectionView } from '@lateral/serving';

afterEach(() => expect(takeStrictMockViolations()).toEqual([]));

const T = 't1';
const C = 'c1';
const RR = 'rr-1';
const DIMS = 2;

const payload: JobPayload<QueueName.rerank> = { tenantId: T, rerankId: RR, requestKey: s3Keys.rerankRequest(T, RR) };

const collection: Collection = {
  tenantId: T,
  id: C,
  model: 'fake-model',
  dims: DIMS,
  maxDocTokens: 64,
  codec: { kind: 'fp16', layout: 'token', norms: 'fp32', sideInfo: false },
  codecVersion: 1,
  createdAt: '2024-01-01T00:00:00.000Z',
};

const manifest: CollectionManifest = { tenantId: T, collectionId: C, generation: 7, codecVersion: 1, committedAt: '2024-01-02T00:00:00.000Z', segments: [], documents: 3 };

const enc = (rows: number[][]): EncodedText => ({
  tokenIds: Int32Array.from(rows, (_, i) => i + 1),
  vectors: Float32Array.from(rows.flat()),
  weights: null,
  length: rows.length,
  truncated: false,
});

/** Pooled document vectors of a 3-document generation: d1 [.6,.8], d2 [1,0], d3 [0,1]. */
const viewStubs = (over: Stubs<CollectionView> = {}): Stubs<CollectionView> => ({
  generation: 7,
  dims: DIMS,
  vectors: null,
  rotated: null,
  offsets: Uint32Array.from([0, 1, 2, 3]),
  docVectors: Float32Array.from([0.6, 0.8, 1, 0, 0, 1]),
  rowOf: new Map([
    ['d1', 0],
    ['d2', 1],
    ['d3', 2],
  ]),
  docIds: ['d1', 'd2', 'd3'],
  tokens: 3,
  unavailable: [],
  unavailableIds: [],
  ...over,
});

function setup(opts: {
  request: unknown;
  collection?: Collection | null;
  manifest?: CollectionManifest | null;
  view?: Stubs<CollectionView>;
  queries?: EncodedText[];
  scorers?: Stubs<ScorerResources>;
  encoder?: Stubs<TokenEncoder>;
}) {
  const getJson = vi.fn(async (_key: string) => opts.request);
  const putJson = vi.fn(async (_key: string, _value: unknown) => undefined);
  const collectionsGet = vi.fn(async (_t: string, _c: string) => (opts.collection === undefined ? collection : opts.collection));
  const manifestFn = vi.fn(async (_t: string, _c: string) => (opts.manifest === undefined ? manifest : opts.manifest));
  const view = strictMock<CollectionView>('view', opts.view ?? viewStubs());
  const viewsGet = vi.fn(async (_c: Collection, _m: CollectionManifest, _ids: readonly string[]) => view);
  const encodeQueries = vi.fn(async (texts: string[]) => (opts.queries ?? texts.map(() => enc([[1, 0]]))).map((e) => ({ ...e })));
  const pool = (e: EncodedText) => poolEncoded(e, DIMS, 'mean');
  const encoder = strictMock<TokenEncoder>('encoder', { encodeQueries, pool, ...opts.encoder });
  const encoders = vi.fn(async (_model: string) => encoder);
  const updateProgress = vi.fn(async (_p: unknown) => undefined);
  const deps: RerankDeps = {
    store: strictMock<RerankDeps['store']>('store', { getJson: getJson as unknown as RerankDeps['store']['getJson'], putJson }),
    collections: strictMock<RerankDeps['collections']>('collections', { get: collectionsGet }),
    generations: strictMock<RerankDeps['generations']>('generations', { manifest: manifestFn }),
    encoders,
    views: strictMock<RerankDeps['views']>('views', opts.manifest === null ? {} : { view: viewsGet }),
    scorers: strictMock<ScorerResources>('scorers', opts.scorers ?? {}),
  };
  const job = strictMock<Pick<Job, 'updateProgress'>>('job', { updateProgress });
  return { deps, job, view, getJson, putJson, collectionsGet, manifestFn, viewsGet, encoders, encodeQueries, updateProgress };
}

const stored = (s: ReturnType<typeof setup>) => {
  expect(s.putJson).toHaveBeenCalledOnce();
  const [key, value] = s.putJson.mock.calls[0];
  return { key, result: value as RerankResult };
};

describe('rerankByIds', () => {
  it('parses the stored request, scores the known candidates, lists the unknown ones as missing and writes the result', async () => {
    const request = {
      collection: C,
      scorer: 'dense',
      topK: 10,
      queries: [
        { id: 'q1', text: 'alpha', candidates: ['d1', 'nope', 'd2', 'd1'] },
        { id: 'q2', text: 'beta', candidates: ['zzz'] },
        { id: 'q3', text: 'gamma', candidates: [{ id: 'd2', score: 3 }, 'd1'] },
      ],
    };
    const s = setup({
      request,
      queries: [
        enc([[1, 0]]),
        enc([[1, 1]]),
        enc([
          [0, 2],
          [0, 2],
        ]),
      ],
    });
    const out = await rerankByIds(s.deps, payload, s.job);

    expect(s.getJson).toHaveBeenCalledExactlyOnceWith(s3Keys.rerankRequest(T, RR));
    expect(s.collectionsGet).toHaveBeenCalledExactlyOnceWith(T, C);
    expect(s.manifestFn).toHaveBeenCalledExactlyOnceWith(T, C);
    // The view is asked for the request's distinct candidate ids only, in first-seen order.
    expect(s.viewsGet).toHaveBeenCalledExactlyOnceWith(collection, manifest, ['d1', 'nope', 'd2', 'zzz']);
    expect(s.encoders).toHaveBeenCalledExactlyOnceWith('fake-model');
    expect(s.encodeQueries).toHaveBeenCalledExactlyOnceWith(['alpha', 'beta', 'gamma']);

    const resultKey = s3Keys.rerankResult(T, RR);
    expect(resultKey).toBe('tenants/t1/rerank/rr-1/result.json');
    const { key, result } = stored(s);
    expect(key).toBe(resultKey);
    expect(result).toEqual({
      rerankId: RR,
      collection: C,
      scorer: { name: 'dense' },
      generation: 7,
      vectors: 'fp32',
      results: [
        // dense: cosine of the pooled query with each document vector; the repeated d1 is scored once.
        { queryId: 'q1', hits: [{ id: 'd2', score: 1 }, { id: 'd1', score: expect.closeTo(0.6, 6) }], missing: ['nope'] },
        { queryId: 'q2', hits: [], missing: ['zzz'] },
        { queryId: 'q3', hits: [{ id: 'd1', score: expect.closeTo(0.8, 6) }, { id: 'd2', score: 0 }], missing: [] },
      ],
      timings: { totalMs: expect.any(Number), encodeQueriesMs: expect.any(Number), scoreMs: expect.any(Number), loadMs: expect.any(Number) },
    });
    expect(out).toEqual({ resultKey, queries: 3, candidates: 4, missing: 2 });
    const progress = s.updateProgress.mock.calls.map((c) => c[0] as number);
    expect(progress.length).toBeGreaterThan(0);
    expect(progress.every((p, i) => p > 0 && p <= 100 && (i === 0 || p > progress[i - 1]))).toBe(true);
  });

  it('topK keeps the best hits only', async () => {
    const s = setup({ request: { collection: C, scorer: 'dense', topK: 1, queries: [{ id: 'q1', text: 'alpha', candidates: ['d1', 'd2', 'd3'] }] } });
    await rerankByIds(s.deps, payload);
    expect(stored(s).result.results).toEqual([{ queryId: 'q1', hits: [{ id: 'd2', score: 1 }], missing: [] }]);
  });

  it('maxsim: queries sharing a candidate list are scored in one GEMM call with their candidates tokens', async () => {
    const docs = Float32Array.from([1, 0, 0, 1, 0.6, 0.8]);
    const offsets = Uint32Array.from([0, 2, 3]);
    const rowVectors = vi.fn((_rows: number[]) => ({ docs, offsets }));
    const score = vi.fn(async (..._args: unknown[]) => [Float32Array.from([0.1, 0.9]), Float32Array.from([0.5, 0.2])]);
    const gemm = strictMock<Awaited<ReturnType<ScorerResources['gemm']>>>('gemm', { score: score as never });
    const gemmFn = vi.fn(async () => gemm);
    const queries = [enc([[1, 0]]), enc([[0, 1]])];
    const s = setup({
      request: {
        collection: C,
        scorer: { name: 'maxsim', normalize: true },
        queries: [
          { id: 'q1', text: 'alpha', candidates: ['d3', 'd1'] },
          { id: 'q2', text: 'beta', candidates: ['d3', 'd1'] },
        ],
      },
      view: viewStubs({ rowVectors }),
      queries,
      scorers: { gemm: gemmFn },
    });
    const out = await rerankByIds(s.deps, payload, s.job);
    expect(gemmFn).toHaveBeenCalledOnce();
    expect(rowVectors).toHaveBeenCalledExactlyOnceWith([2, 0]);
    expect(score).toHaveBeenCalledExactlyOnceWith(queries, docs, offsets, DIMS, { normalize: true, yieldEvery: expect.any(Function) });
    expect(stored(s).result.results).toEqual([
      { queryId: 'q1', hits: [{ id: 'd1', score: expect.closeTo(0.9, 6) }, { id: 'd3', score: expect.closeTo(0.1, 6) }], missing: [] },
      { queryId: 'q2', hits: [{ id: 'd3', score: expect.closeTo(0.5, 6) }, { id: 'd1', score: expect.closeTo(0.2, 6) }], missing: [] },
    ]);
    expect(stored(s).result.scorer).toEqual({ name: 'maxsim', normalize: true });
    expect(s.updateProgress).toHaveBeenCalledExactlyOnceWith(100);
    expect(out).toEqual({ resultKey: s3Keys.rerankResult(T, RR), queries: 2, candidates: 4, missing: 0 });
  });

  it('maxsim on a rotated int8 image scores from the codes (no fp32 gather)', async () => {
    const rotated = { dims: DIMS } as unknown as RotatedImageSet;
    const score = vi.fn(async (..._args: unknown[]) => [Float32Array.from([0.3])]);
    const rot = strictMock<Awaited<ReturnType<ScorerResources['rotated']>>>('rotated', { score: score as never });
    const s = setup({
      request: { collection: C, queries: [{ id: 'q1', text: 'alpha', candidates: ['d2'] }] },
      view: viewStubs({ rotated }),
      scorers: { rotated: vi.fn(async () => rot) },
    });
    await rerankByIds(s.deps, payload);
    expect(score).toHaveBeenCalledExactlyOnceWith([expect.objectContaining({ length: 1 })], rotated, [1], { normalize: false, yieldEvery: expect.any(Function) });
    const { result } = stored(s);
    expect(result.vectors).toBe('rotated-int8');
    expect(result.results[0].hits).toEqual([{ id: 'd2', score: expect.closeTo(0.3, 6) }]);
  });

  it('a collection with no generation yet: every candidate missing, no view loaded, generation 0', async () => {
    const s = setup({ request: { collection: C, queries: [{ id: 'q1', text: 'alpha', candidates: ['d1', 'd2'] }] }, manifest: null });
    const out = await rerankByIds(s.deps, payload, s.job);
    const { result } = stored(s);
    expect(result.generation).toBe(0);
    expect(result).not.toHaveProperty('vectors');
    expect(result.results).toEqual([{ queryId: 'q1', hits: [], missing: ['d1', 'd2'] }]);
    expect(out).toEqual({ resultKey: s3Keys.rerankResult(T, RR), queries: 1, candidates: 0, missing: 2 });
  });

  it('candidates held by an unreadable segment: listed unavailable (not missing), the result degraded and naming the segment', async () => {
    const broken = { key: 'tenants/t1/collections/c1/segments/v1/b9.seg', object: 'segment' as const, segment: 'tenants/t1/collections/c1/segments/v1/b9.seg', reason: 'segment "…b9.seg" is corrupt in section "CODE": checksum mismatch', documents: 20 };
    const s = setup({
      request: { collection: C, scorer: 'dense', topK: 10, queries: [{ id: 'q1', text: 'alpha', candidates: ['d1', 'gone', 'nope', 'd2'] }] },
      view: viewStubs({ unavailable: [broken], unavailableIds: ['gone'] }),
    });
    const out = await rerankByIds(s.deps, payload, s.job);
    const { result } = stored(s);
    expect(result.results).toEqual([{ queryId: 'q1', hits: [{ id: 'd2', score: 1 }, { id: 'd1', score: expect.closeTo(0.6, 6) }], missing: ['nope'], unavailable: ['gone'] }]);
    expect(out).toMatchObject({ candidates: 2, missing: 1 });
    expect(result.degraded).toBe(true);
    expect(result.unavailableSegments).toEqual([broken]);
  });

  it('a request missing from S3 is permanent and touches nothing else', async () => {
    const s = setup({ request: null });
    await expect(rerankByIds(s.deps, payload, s.job)).rejects.toThrow(new PermanentJobError(`re-rank request missing from S3: ${s3Keys.rerankRequest(T, RR)}`));
    expect(s.collectionsGet).not.toHaveBeenCalled();
    expect(s.encoders).not.toHaveBeenCalled();
    expect(s.putJson).not.toHaveBeenCalled();
  });

  it('an invalid stored request or a missing collection is permanent', async () => {
    const invalid = setup({ request: { collection: C, queries: [] } });
    const err = await rerankByIds(invalid.deps, payload).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(PermanentJobError);
    expect((err as Error).message).toMatch(/^invalid stored re-rank request tenants\/t1\/rerank\/rr-1\/request\.json: /);
    expect(invalid.collectionsGet).not.toHaveBeenCalled();

    const gone = setup({ request: { collection: C, queries: [{ id: 'q1', text: 'alpha', candidates: ['d1'] }] }, collection: null });
    await expect(rerankByIds(gone.deps, payload)).rejects.toThrow(new PermanentJobError('collection t1/c1 does not exist'));
    expect(gone.manifestFn).not.toHaveBeenCalled();
    expect(gone.putJson).not.toHaveBeenCalled();
  });

  it('a scorer that cannot run on the request (model weights without a token_weights output) is permanent', async () => {
    const s = setup({
      request: { collection: C, scorer: { name: 'signed-maxsim', weights: 'model' }, queries: [{ id: 'q1', text: 'alpha', candidates: ['d1'] }] },
      encoder: { manifest: { name: 'fake-model' } as ModelManifest },
    });
    const err = await rerankByIds(s.deps, payload).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(PermanentJobError);
    expect((err as Error).message).toMatch(/model fake-model has no token_weights output/);
    expect(s.putJson).not.toHaveBeenCalled();
  });
});
