/**
 * `npm run bench -- segment-cache [--json] [--quick] [--segments N] [--docs N] [--tokens N]
 *   [--dims N] [--candidates N] [--latency-ms N] [--codec fp16|eden4]`
 *
 * What the segment cache changes for a re-rank right after an ingest batch commits a new
 * generation (issue 10): segments are written with the real codec and read back through the real
 * SegmentCache from an in-memory object source that waits `--latency-ms` per GET (an S3-like
 * first-byte latency; default 10 ms). Per round a new 256-document segment is committed, then:
 * - after: the warm cache builds the view of `--candidates` ids (drawn from the older segments)
 *   on the new generation: it reads the new segment only (its id table) and reuses the rest;
 * - before (what CollectionViewCache did on every new generation): a fresh cache loads and
 *   decodes every segment of the new generation, and the candidates are gathered from it.
 * Reported as medians and their ratio, measured alternately in the same run; the MaxSim itself
 * (identical in both) is not included.
 */
import { createCodec, fitCodec, type CodecArtifact } from '@lateral/codec';
import { s3Keys, type CodecSettings, type CollectionManifest, type SegmentRef } from '@lateral/shared';
import { writeSegment } from '@lateral/codec';
import { SegmentCache, assembleSegmentDocs } from '@lateral/serving';
import type { EncodedText } from '@lateral/model';
import { CliUsageError, intFlag, numberFlag, parseCliOrExit } from '../lib/cli';

const USAGE = `usage: npm run bench -- segment-cache [--quick] [--segments N (60; --quick: 20)] [--docs N (256)] [--tokens N (40, at least 7)]
  [--dims N (128)] [--candidates N (1000)] [--latency-ms N (10)] [--codec fp16|eden4 (fp16)] [--json]`;

export const median = (xs: number[]) => {
  const v = [...xs].sort((a, b) => a - b);
  return v.length % 2 ? v[(v.length - 1) / 2] : (v[v.length / 2 - 1] + v[v.length / 2]) / 2;
};
export const round = (x: number, d = 2) => Math.round(x * 10 ** d) / 10 ** d;

/** Deterministic pseudo-random unit vectors (xorshift), `tokens` per document. */
export function docs(n: number, tokens: number, dims: number, seed: number): EncodedText[] {
  let x = (seed * 2654435761) >>> 0 || 1;
  const rnd = () => {
    x ^= x << 13;
    x >>>= 0;
    x ^= x >>> 17;
    x ^= x << 5;
    x >>>= 0;
    return x / 4294967296 - 0.5;
  };
  return Array.from({ length: n }, (_, d) => {
    const m = tokens - (d % 7);
    const v = Float32Array.from({ length: m * dims }, rnd);
    for (let t = 0; t < m; t++) {
      let s = 0;
      for (let k = 0; k < dims; k++) s += v[t * dims + k] ** 2;
      const inv = 1 / Math.sqrt(s);
      for (let k = 0; k < dims; k++) v[t * dims + k] *= inv;
    }
    return { tokenIds: Int32Array.from({ length: m }, (_, t) => 1000 + ((d + t) % 500)), vectors: v, weights: null, length: m, truncated: false };
  });
}

export async function runSegmentCacheBench(args: string[]): Promise<Record<string, unknown>> {
  const { quick, S, D, L, dims, C, latency, codecName } = parseCliOrExit(
    'bench segment-cache',
    USAGE,
    args,
    {
      quick: { type: 'boolean' },
      segments: { type: 'string' },
      docs: { type: 'string', default: '256' },
      tokens: { type: 'string', default: '40' },
      dims: { type: 'string', default: '128' },
      candidates: { type: 'string', default: '1000' },
      'latency-ms': { type: 'string', default: '10' },
      codec: { type: 'string', default: 'fp16' },
      json: { type: 'boolean' },
    },
    {},
    ({ values: v }) => {
      if (v.codec !== 'fp16' && v.codec !== 'eden4') throw new CliUsageError(`--codec: fp16 or eden4 (got ${v.codec})`);
      const quick = v.quick === true;
      return {
        quick,
        S: v.segments === undefined ? (quick ? 20 : 60) : intFlag('segments', v.segments),
        D: intFlag('docs', v.docs),
        L: intFlag('tokens', v.tokens, 7),
        dims: intFlag('dims', v.dims),
        C: intFlag('candidates', v.candidates),
        latency: numberFlag('latency-ms', v['latency-ms']),
        codecName: v.codec,
      };
    },
  );
  const rounds = quick ? 3 : 7;
  const settings: CodecSettings =
    codecName === 'eden4' ? { kind: 'eden', bits: 4, layout: 'token', norms: 'fp32', sideInfo: false } : { kind: 'fp16', layout: 'token', norms: 'fp32', sideInfo: false };
  const sample = docs(64, L, dims, 99);
  const artifact: CodecArtifact = fitCodec(settings, Float32Array.from(sample.flatMap((d) => Array.from(d.vectors))), dims, { seed: 5n });
  const codec = createCodec(settings, artifact);
  const objects = new Map<string, Uint8Array>();
  const refs: SegmentRef[] = [];
  const addSegment = (s: number) => {
    const ids = Array.from({ length: D }, (_, i) => `s${s}-d${i}`);
    const bytes = writeSegment(assembleSegmentDocs(ids, docs(D, L, dims, s + 1), dims), codec);
    const key = s3Keys.segment('bench', 'c', `b-${s}`, 1);
    objects.set(key, bytes);
    refs.push({ batchId: `b-${s}`, codecVersion: 1, key, documents: D, tokens: 0, bytes: bytes.byteLength, checksum: '00000000' });
  };
  const t0 = Date.now();
  for (let s = 0; s < S; s++) addSegment(s);
  console.error(`wrote ${S} segments of ${D} documents x ~${L} tokens (d = ${dims}, ${codecName}) in ${Date.now() - t0} ms`);
  let gets = 0;
  const source = {
    async get(key: string) {
      gets++;
      if (latency > 0) await new Promise((r) => setTimeout(r, latency));
      return objects.get(key) ?? null;
    },
  };
  const collection = { tenantId: 'bench', id: 'c', model: 'm' };
  const make = () =>
    new SegmentCache(source, { get: async () => artifact }, { forCollection: async () => Promise.reject(new Error('no side information')) }, { maxBytes: 2 ** 34, loadConcurrency: 4, scoreFromCodes: true });
  const manifest = (g: number): CollectionManifest => ({ tenantId: 'bench', collectionId: 'c', generation: g, codecVersion: 1, committedAt: `g${g}`, segments: [...refs] });
  // Candidates spread over the older segments (deterministic).
  const candidates = Array.from({ length: C }, (_, i) => `s${(i * 7919) % S}-d${(i * 104729) % D}`);

  const warm = make();
  await warm.view(collection, manifest(S), candidates);
  const after: number[] = [];
  const before: number[] = [];
  const afterGets: number[] = [];
  const beforeGets: number[] = [];
  for (let r = 0; r < rounds; r++) {
    addSegment(S + r); // an ingest batch commits generation g + 1
    const g = manifest(S + r + 1);
    // alternate the order so neither side always runs second
    const runAfter = async () => {
      const g0 = gets;
      const t = performance.now();
      const v = await warm.view(collection, g, candidates);
      after.push(performance.now() - t);
      afterGets.push(gets - g0);
      if (v.docIds.length !== new Set(candidates).size) throw new Error('after: candidates missing');
    };
    const runBefore = async () => {
      const g0 = gets;
      const t = performance.now();
      const fresh = make();
      const all = (await fresh.table(collection, g)).ids;
      const whole = await fresh.view(collection, g, all); // the whole generation loaded and decoded
      const rows = candidates.map((id) => whole.rowOf.get(id)!);
      const picked = whole.rotated ? rows : whole.rowVectors(rows);
      before.push(performance.now() - t);
      beforeGets.push(gets - g0);
      if (!picked) throw new Error('before: nothing gathered');
    };
    if (r % 2) {
      await runBefore();
      await runAfter();
    } else {
      await runAfter();
      await runBefore();
    }
  }
  const stats = warm.stats();
  const result = {
    segments: S + rounds,
    documents: (S + rounds) * D,
    dims,
    codec: codecName,
    candidates: C,
    latency_ms: latency,
    rounds,
    after_new_batch_ms: round(median(after)),
    generation_reload_ms: round(median(before)),
    ratio_reload_over_cache: round(median(before) / median(after)),
    gets_after: median(afterGets),
    gets_reload: median(beforeGets),
    cache: { bytes: stats.bytes, hitRatio: round(stats.hitRatio, 3), evictions: stats.evictions, loadPeak: stats.loadPeak },
  };
  console.log(
    `re-rank view of ${C} candidates after a new batch commit (${S + rounds} segments, ${(S + rounds) * D} documents, ${codecName}, ${latency} ms per GET): ` +
      `segment cache ${result.after_new_batch_ms} ms (${result.gets_after} GETs) vs generation reload ${result.generation_reload_ms} ms (${result.gets_reload} GETs): ${result.ratio_reload_over_cache}x`,
  );
  return result;
}
