import { describe, expect, it } from 'vitest';
import { s3Keys, type CollectionManifest, type SegmentRef } from '@lateral/shared';
import { buildBm25Postings, deserializeBm25Stats, documentsBm25Stats, serializeSegmentIndex, sumBm25Stats, type Bm25Stats, type SegmentIndex } from '@lateral/search';
import { writeBm25GenerationStats } from './bm25-generation-stats';

const T = 't', C = 'c';
/** Documents as term lists; a segment's index from some of them. */
const docsOf = (seed: number, n: number) => Array.from({ length: n }, (_, i) => Array.from({ length: 1 + ((i * 7 + seed) % 6) }, (_, j) => ((i + 3) * (j + seed)) % 23 - 5));
function indexOf(docs: number[][]): SegmentIndex {
  const offsets = new Uint32Array(docs.length + 1);
  docs.forEach((d, i) => (offsets[i + 1] = offsets[i] + d.length));
  return { documents: docs.length, tokens: 0, dims: 1, centroidCount: 1, centroidsCrc: 0, ivf: { listOffsets: new Uint32Array(2), rows: new Uint32Array(0) }, bm25: buildBm25Postings(Int32Array.from(docs.flat()), offsets) };
}
const plain = (s: Bm25Stats) => ({ documents: s.documents, totalLength: s.totalLength, terms: Array.from(s.terms), df: Array.from(s.df) });

function world() {
  const objects = new Map<string, Uint8Array>();
  const manifests = new Map<number, CollectionManifest>();
  const store = {
    get: async (k: string) => objects.get(k) ?? null,
    put: async (k: string, v: Uint8Array | string) => void objects.set(k, typeof v === 'string' ? new TextEncoder().encode(v) : v),
    list: async (prefix: string) => [...objects.keys()].filter((k) => k.startsWith(prefix)).map((key) => ({ key, size: objects.get(key)!.length })),
    delete: async (k: string) => void objects.delete(k),
  };
  const generations = { manifest: async (_t: string, _c: string, g?: number) => manifests.get(g ?? Math.max(...manifests.keys())) ?? null };
  const warnings: string[] = [];
  const logger = { warn: (m: string) => warnings.push(m), info: () => {}, debug: () => {}, error: () => {} } as never;
  const deps = { store, generations, logger };
  const segment = (batchId: string, docs: number[][], codecVersion = 1, tombstones?: number[]): SegmentRef => {
    objects.set(s3Keys.segmentIndex(T, C, batchId, codecVersion), serializeSegmentIndex(indexOf(docs)));
    return { batchId, codecVersion, key: `seg/${batchId}/v${codecVersion}`, documents: docs.length, tokens: 0, bytes: 0, checksum: '0', ...(tombstones ? { tombstones } : {}) };
  };
  const commit = (generation: number, segments: SegmentRef[]) => manifests.set(generation, { tenantId: T, collectionId: C, generation, codecVersion: 1, committedAt: '', segments });
  const stats = (g: number) => deserializeBm25Stats(objects.get(s3Keys.bm25Stats(T, C, g))!, 'x').stats;
  return { objects, deps, segment, commit, stats, warnings };
}

/** The statistics of the live documents, summed afresh. */
const truth = (parts: { docs: number[][]; dead?: number[] }[]) =>
  sumBm25Stats(parts.map((p) => documentsBm25Stats(indexOf(p.docs), p.docs.map((_, i) => i).filter((i) => !(p.dead ?? []).includes(i)))));

describe('BM25 statistics per generation', () => {
  it('are carried through commits, deletes, a merge and a re-compression, equal to the sums over the live documents', async () => {
    const w = world();
    const a = docsOf(1, 12), b = docsOf(2, 8);
    const A = w.segment('a', a);
    w.commit(1, [A]);
    expect(await writeBm25GenerationStats(w.deps, T, C, 1)).toBe(true);
    expect(plain(w.stats(1))).toEqual(plain(truth([{ docs: a }])));
    const B = w.segment('b', b);
    w.commit(2, [A, B]);
    await writeBm25GenerationStats(w.deps, T, C, 2);
    expect(plain(w.stats(2))).toEqual(plain(truth([{ docs: a }, { docs: b }])));
    // deletes: documents 0 and 5 of a, 7 of b
    w.commit(3, [{ ...A, tombstones: [0, 5] }, { ...B, tombstones: [7] }]);
    await writeBm25GenerationStats(w.deps, T, C, 3);
    expect(plain(w.stats(3))).toEqual(plain(truth([{ docs: a, dead: [0, 5] }, { docs: b, dead: [7] }])));
    // a merge: the live documents in one segment; then 2 of them deleted
    const merged = [...a.filter((_, i) => i !== 0 && i !== 5), ...b.slice(0, 7)];
    const M = w.segment('merge-1', merged);
    w.commit(4, [M]);
    await writeBm25GenerationStats(w.deps, T, C, 4);
    expect(plain(w.stats(4))).toEqual(plain(w.stats(3)));
    w.commit(5, [{ ...M, tombstones: [1, 16] }]);
    await writeBm25GenerationStats(w.deps, T, C, 5);
    expect(plain(w.stats(5))).toEqual(plain(truth([{ docs: merged, dead: [1, 16] }])));
    // re-compressed: same batch and documents at codec v2 (the statistics do not move)
    const M2 = w.segment('merge-1', merged, 2, [1, 16]);
    w.commit(6, [M2]);
    await writeBm25GenerationStats(w.deps, T, C, 6);
    expect(plain(w.stats(6))).toEqual(plain(w.stats(5)));
    // older objects go, the last ones stay; writing again changes nothing
    const kept = [...w.objects.keys()].filter((k) => k.includes('/bm25-stats/')).sort();
    expect(kept).toEqual([4, 5, 6].map((g) => s3Keys.bm25Stats(T, C, g)));
    expect(await writeBm25GenerationStats(w.deps, T, C, 6)).toBe(true);
    expect(w.warnings).toEqual([]);
  });

  it('without usable earlier statistics (none, corrupt, or an input index gone) they are summed over every segment', async () => {
    const w = world();
    const a = docsOf(3, 10), b = docsOf(4, 6);
    const A = w.segment('a', a);
    w.commit(1, [A]);
    await writeBm25GenerationStats(w.deps, T, C, 1);
    const bytes = w.objects.get(s3Keys.bm25Stats(T, C, 1))!;
    bytes[40] ^= 0xff;
    const B = w.segment('b', b);
    w.commit(2, [A, { ...B, tombstones: [2] }]);
    await writeBm25GenerationStats(w.deps, T, C, 2);
    expect(w.warnings).toHaveLength(1);
    expect(w.warnings[0]).toMatch(/corrupt/);
    expect(plain(w.stats(2))).toEqual(plain(truth([{ docs: a }, { docs: b, dead: [2] }])));
    // the manifest of a generation that is gone: nothing written
    expect(await writeBm25GenerationStats(w.deps, T, C, 9)).toBe(false);
  });
});
