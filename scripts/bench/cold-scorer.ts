/**
 * `npm run bench -- cold-scorer [--json] [--section both|rerank|warp] [--quick] [--segments N] [--docs N] [--tokens N]
 *   [--dims N] [--candidates N] [--latency-ms N] [--mb-per-s N] [--rounds N]`
 * and for the WARP section (cold-scorer-warp.ts) `[--warp-docs N,N] [--doc-tokens N] [--batch N] [--queries N]
 *   [--query-tokens N] [--nprobe N] [--bits 2|4] [--max-segments N] [--range-gap N] [--ranged-only] [--warm-rounds N]`
 *
 * Section rerank:
 * What segment heads stored in S3 change for a scorer that starts with an empty disk (a new pod,
 * a replaced node): its first re-rank needs the generation's id table. Without stored heads it
 * reads every segment whole to make each head; with them it reads the heads (~30 B per document)
 * and then reads whole, once, only the segments holding candidates, to check them before reading
 * ranges of them. EDEN 4-bit segments are written with the real codec and read through the real
 * SegmentCache and DiskObjectCache (range reads, a fresh temporary folder per scorer) from an
 * in-memory object source that charges each GET `--latency-ms` plus its bytes at `--mb-per-s`
 * (an S3-like first byte and transfer). Reported: the first re-rank view's time, GETs and bytes
 * fetched, both ways, alternately in the same run, and their ratios.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { createCodec, fitCodec, readSegment, writeSegment, type CodecArtifact } from '@lateral/codec';
import { s3Keys, type CodecSettings, type CollectionManifest, type SegmentRef } from '@lateral/shared';
import { DiskObjectCache } from '@lateral/infra';
import { SegmentCache, assembleSegmentDocs, segmentHeadData, serializeSegmentHead, type ObjectSource } from '@lateral/serving';
import { docs, median, round } from './segment-cache';
import { coldWarpDefaults, runColdWarpBench, type ColdWarpOptions } from './cold-scorer-warp';
import { CliUsageError, numberFlag, parseCliOrExit } from '../lib/cli';

const USAGE = `usage: npm run bench -- cold-scorer [--json] [--section both|rerank|warp (both)] [--quick]
  rerank: [--segments N (400; --quick 60)] [--docs N (256)] [--tokens N (40)] [--dims N (128)] [--candidates N (100)]
    [--latency-ms N (10)] [--mb-per-s N (100)] [--rounds N (4; --quick 2)]
  warp: [--warp-docs N,N (20000,50000; --quick 5000)] [--doc-tokens N (55)] [--batch N (1024)] [--queries N (6; --quick 3)]
    [--query-tokens N (32)] [--nprobe N (32)] [--bits 2|4 (4)] [--dims N (128)] [--latency-ms N (10)] [--mb-per-s N (100)]
    [--max-segments N] [--range-gap N (32768: the scorer's default)] [--rounds N (2; --quick 1)] [--ranged-only]
    [--warm-rounds N (0): then every query repeated N times on a warm scorer, lists in memory, and once from the disk cache]
    [--warm-profile FILE: a CPU profile of the warm rounds from memory]
    [--disk-profile FILE: a CPU profile of the timed queries from the disk cache]
    [--hits-out FILE: the warm scorer's hits of every query, as JSON (to compare two builds' answers)]`;

/** The numeric flags of both sections (each a number of at least 0). */
const NUMBER_FLAGS = ['segments', 'docs', 'tokens', 'dims', 'candidates', 'latency-ms', 'mb-per-s', 'rounds', 'doc-tokens', 'batch', 'queries', 'query-tokens', 'nprobe', 'bits', 'max-segments', 'range-gap', 'warm-rounds'] as const;
const FLAGS = {
  json: { type: 'boolean' },
  quick: { type: 'boolean' },
  'ranged-only': { type: 'boolean' },
  section: { type: 'string', default: 'both' },
  'warp-docs': { type: 'string' },
  'warm-profile': { type: 'string' },
  'disk-profile': { type: 'string' },
  'hits-out': { type: 'string' },
  ...(Object.fromEntries(NUMBER_FLAGS.map((f) => [f, { type: 'string' }])) as Record<(typeof NUMBER_FLAGS)[number], { type: 'string' }>),
} as const;

/** The re-rank section's settings. */
interface ColdRerankOptions {
  segments: number;
  docs: number;
  tokens: number;
  dims: number;
  candidates: number;
  latencyMs: number;
  mbPerS: number;
  rounds: number;
}

export async function runColdScorerBench(args: string[]): Promise<Record<string, unknown>> {
  // The whole command line is read here, before either section starts: an unknown flag or a bad value exits 2.
  const { section, rerank, warp } = parseCliOrExit('bench cold-scorer', USAGE, args, FLAGS, {}, ({ values: v }) => {
    if (!['both', 'rerank', 'warp'].includes(v.section)) throw new CliUsageError(`--section must be both, rerank or warp, got ${v.section}`);
    const num = (f: (typeof NUMBER_FLAGS)[number], fallback: number) => (v[f] === undefined ? fallback : numberFlag(f, v[f]));
    for (const f of NUMBER_FLAGS) num(f, 0);
    if (v.bits !== undefined && v.bits !== '2' && v.bits !== '4') throw new CliUsageError(`--bits must be 2 or 4, got ${v.bits}`);
    const sizes = v['warp-docs']?.split(',').map(Number);
    if (sizes && !sizes.every((n) => Number.isInteger(n) && n > 0)) throw new CliUsageError(`--warp-docs must be positive integers, got ${v['warp-docs']}`);
    const quick = v.quick ?? false;
    const rerank: ColdRerankOptions = {
      segments: num('segments', quick ? 60 : 400),
      docs: num('docs', 256),
      tokens: num('tokens', 40),
      dims: num('dims', 128),
      candidates: num('candidates', 100),
      latencyMs: num('latency-ms', 10),
      mbPerS: num('mb-per-s', 100),
      rounds: num('rounds', quick ? 2 : 4),
    };
    const w = coldWarpDefaults(quick);
    const warp: ColdWarpOptions = {
      sizes: sizes ?? w.sizes,
      docTokens: num('doc-tokens', w.docTokens),
      batch: num('batch', w.batch),
      queries: num('queries', w.queries),
      queryTokens: num('query-tokens', w.queryTokens),
      nprobe: num('nprobe', w.nprobe),
      bits: num('bits', w.bits) as 2 | 4,
      dims: num('dims', w.dims),
      latencyMs: num('latency-ms', w.latencyMs),
      mbPerS: num('mb-per-s', w.mbPerS),
      maxSegments: num('max-segments', w.maxSegments),
      rangeGap: num('range-gap', w.rangeGap),
      rounds: num('rounds', w.rounds),
      rangedOnly: v['ranged-only'] ?? false,
      warmRounds: num('warm-rounds', w.warmRounds),
      ...(v['warm-profile'] ? { profileTo: v['warm-profile'] } : {}),
      ...(v['disk-profile'] ? { diskProfileTo: v['disk-profile'] } : {}),
      ...(v['hits-out'] ? { hitsTo: v['hits-out'] } : {}),
    };
    return { section: v.section, rerank, warp };
  });
  const out: Record<string, unknown> = {};
  if (section !== 'warp') out.rerank = await runColdRerank(rerank);
  if (section !== 'rerank') out.warp = await runColdWarpBench(warp);
  return out;
}

async function runColdRerank(o: ColdRerankOptions): Promise<Record<string, unknown>> {
  const { segments: S, docs: D, tokens: L, dims, candidates: C, latencyMs: latency, mbPerS, rounds } = o;
  const settings: CodecSettings = { kind: 'eden', bits: 4, layout: 'token', norms: 'fp32', sideInfo: false };
  const sample = docs(64, L, dims, 99);
  const artifact: CodecArtifact = fitCodec(settings, Float32Array.from(sample.flatMap((d) => Array.from(d.vectors))), dims, { seed: 5n });
  const codec = createCodec(settings, artifact);
  const segments = new Map<string, Uint8Array>();
  const heads = new Map<string, Uint8Array>();
  const refs: SegmentRef[] = [];
  const t0 = Date.now();
  for (let s = 0; s < S; s++) {
    const ids = Array.from({ length: D }, (_, i) => `s${s}-d${i}`);
    const bytes = writeSegment(assembleSegmentDocs(ids, docs(D, L, dims, s + 1), dims), codec);
    const ref: SegmentRef = { batchId: `b-${s}`, codecVersion: 1, key: s3Keys.segment('bench', 'c', `b-${s}`, 1), documents: D, tokens: 0, bytes: bytes.byteLength, checksum: '00000000' };
    segments.set(ref.key, bytes);
    // As the index stage writes it: from a checked read of the segment.
    heads.set(s3Keys.segmentHead('bench', 'c', ref.batchId, 1), serializeSegmentHead(segmentHeadData(readSegment(bytes, ref.key, artifact), bytes.byteLength)));
    refs.push(ref);
  }
  const segmentBytes = [...segments.values()].reduce((a, b) => a + b.byteLength, 0);
  const headBytes = [...heads.values()].reduce((a, b) => a + b.byteLength, 0);
  console.error(`wrote ${S} segments of ${D} documents x ~${L} tokens (d = ${dims}, EDEN 4-bit): ${round(segmentBytes / 2 ** 20)} MiB, heads ${round(headBytes / 2 ** 20)} MiB, in ${Date.now() - t0} ms`);
  // With stored heads the manifest marks them (SegmentRef.head, as commits and merges do); without, the scorer reads every segment whole (the code before heads were stored).
  const manifestOf = (head: boolean): CollectionManifest => ({ tenantId: 'bench', collectionId: 'c', generation: 1, codecVersion: 1, committedAt: 'g1', segments: refs.map((r) => (head ? { ...r, head: true } : r)) });
  const collection = { tenantId: 'bench', id: 'c', model: 'm' };

  /** A scorer with an empty disk cache over S3 with or without the stored heads: its first view of `ids`. */
  const firstView = async (withHeads: boolean, ids: string[]) => {
    let gets = 0;
    let bytes = 0;
    const s3: ObjectSource = {
      async get(key) {
        const b = segments.get(key) ?? heads.get(key) ?? null;
        gets++;
        bytes += b?.byteLength ?? 0;
        await new Promise((r) => setTimeout(r, latency + ((b?.byteLength ?? 0) / (mbPerS * 1e6)) * 1000));
        return b ? b.slice() : null;
      },
    };
    const dir = mkdtempSync(path.join(tmpdir(), 'lateral-cold-scorer-'));
    try {
      const disk = new DiskObjectCache(s3, dir, 2 ** 40, 'bench');
      const cache = new SegmentCache(disk, { get: async () => artifact }, { forCollection: async () => Promise.reject(new Error('no side information')) }, { maxBytes: 2 ** 34, loadConcurrency: 4, scoreFromCodes: true, rangeReads: true });
      const t = performance.now();
      const view = await cache.view(collection, manifestOf(withHeads), ids);
      const ms = performance.now() - t;
      if (view.docIds.length !== new Set(ids).size) throw new Error(`${withHeads ? 'stored heads' : 'no stored heads'}: candidates missing`);
      return { ms, gets, bytes, storedHeads: cache.stats().storedHeads };
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  };

  const withHeads: Awaited<ReturnType<typeof firstView>>[] = [];
  const without: Awaited<ReturnType<typeof firstView>>[] = [];
  for (let r = 0; r < rounds; r++) {
    // Candidates spread over the collection (deterministic per round); the two scorers alternate which runs first.
    const ids = Array.from({ length: C }, (_, i) => `s${(i * 7919 + r * 13) % S}-d${(i * 104729 + r) % D}`);
    const touched = new Set(ids.map((id) => id.split('-')[0])).size;
    if (r % 2) {
      without.push(await firstView(false, ids));
      withHeads.push(await firstView(true, ids));
    } else {
      withHeads.push(await firstView(true, ids));
      without.push(await firstView(false, ids));
    }
    console.error(`round ${r + 1}: ${touched} of ${S} segments hold the candidates; stored heads ${round(withHeads[r].ms)} ms, without ${round(without[r].ms)} ms`);
  }
  const m = (xs: { ms: number }[]) => median(xs.map((x) => x.ms));
  const result = {
    segments: S,
    documents: S * D,
    candidates: C,
    latency_ms: latency,
    mb_per_s: mbPerS,
    rounds,
    segment_mib: round(segmentBytes / 2 ** 20),
    head_mib: round(headBytes / 2 ** 20),
    first_view_ms: { stored_heads: round(m(withHeads)), no_stored_heads: round(m(without)) },
    ratio_without_over_with: round(m(without) / m(withHeads)),
    gets: { stored_heads: median(withHeads.map((x) => x.gets)), no_stored_heads: median(without.map((x) => x.gets)) },
    mib_fetched: { stored_heads: round(median(withHeads.map((x) => x.bytes)) / 2 ** 20), no_stored_heads: round(median(without.map((x) => x.bytes)) / 2 ** 20) },
    stored_heads_read: median(withHeads.map((x) => x.storedHeads)),
  };
  console.log(
    `first re-rank view of ${C} candidates on a scorer with an empty disk (${S} segments, ${S * D} documents, ${latency} ms + ${mbPerS} MB/s per GET): ` +
      `stored heads ${result.first_view_ms.stored_heads} ms (${result.gets.stored_heads} GETs, ${result.mib_fetched.stored_heads} MiB) vs ` +
      `no stored heads ${result.first_view_ms.no_stored_heads} ms (${result.gets.no_stored_heads} GETs, ${result.mib_fetched.no_stored_heads} MiB): ${result.ratio_without_over_with}x`,
  );
  return result;
}
