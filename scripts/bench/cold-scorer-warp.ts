/**
 * The WARP section of `npm run bench -- cold-scorer` (issue 32 item 3): a scorer with an empty disk
 * and an empty memory cache answers its first XTR query over a collection's WARP search layouts,
 * read through the real SegmentCache and DiskObjectCache from an in-memory object store that
 * charges each GET `--latency-ms` plus its bytes at `--mb-per-s` (S3's first byte and transfer).
 * Reported per collection size (`--warp-docs`, e.g. 20000,50000): the first query's time, GETs and
 * bytes fetched as a share of the collection's search-layout bytes, then the warm queries, both
 * with ranged GETs (this read path) and with whole objects fetched on first read (the read path
 * before it: a store that answers no ranged GET), alternately; the hits of the cold and warm
 * scorers compared; and the ranged reads per query with the segments the merge policy leaves,
 * with and without its segment bound (MERGE_WARP_MAX_SEGMENTS).
 *
 * The collection is synthetic but shaped like the real one: documents of about `--doc-tokens`
 * tokens ingested in batches of `--batch` and merged as the merge job would (chooseMerge after
 * every commit, the bound on), K = PLAID's rule on all tokens, each token in a uniformly drawn
 * centroid's list with random 4-bit codes (I/O and scoring do not depend on the codes' values),
 * and query tokens near random centroids. Real lists are skewed (popular centroids hold more),
 * which raises the bytes a probe reads: the share here is for uniform lists.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { Session } from 'node:inspector';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { DiskObjectCache } from '@lateral/infra';
import { chooseMerge, DEFAULT_MERGE_POLICY, DEFAULT_WARP_MAX_BYTES, DEFAULT_WARP_MAX_SEGMENTS, type MergePolicySettings } from '@lateral/pipeline';
import {
  centroidsChecksum,
  fitWarpCodec,
  ivfCentroidCount,
  normalizeRows,
  serializeWarpLayout,
  warpCodeBytes,
  warpCodecChecksum,
  warpCoalescedRanges,
  warpDirectoryBytes,
  warpListBytes,
  warpListSizes,
  warpProbedCentroids,
  warpQuery,
  type WarpCodec,
  type WarpDirectory,
  type WarpLayout,
} from '@lateral/search';
import { OnnxIvfProbe } from '@lateral/kernels';
import { SegmentCache, WARP_RANGE_GAP_BYTES, warpScan, type ObjectSource, type SearchPlan, type WarpScanOptions, type WarpScanQueryStats } from '@lateral/serving';
import { mulberry32, s3Keys, type CollectionManifest, type SegmentRef } from '@lateral/shared';
import { median, round } from './segment-cache';

const T = 'bench';
const C = 'warp';
/** Coded segment bytes per token (docs/scaling.md: 79.6 B/token measured at 1M documents), for the merge policy's byte caps. */
const SEGMENT_BYTES_PER_TOKEN = 80;

/** Segment sizes (documents) after ingesting `total` documents in batches of `batch`, merging after each commit. */
export function simulateMerges(total: number, batch: number, tokensPerDoc: number, policy: MergePolicySettings): { sizes: number[]; amplification: number } {
  let segs: SegmentRef[] = [];
  let written = 0;
  let id = 0;
  const ref = (documents: number): SegmentRef => ({ batchId: `b${id++}`, codecVersion: 1, key: '', documents, tokens: documents * tokensPerDoc, bytes: documents * tokensPerDoc * SEGMENT_BYTES_PER_TOKEN, checksum: '' });
  for (let d = 0; d < total; d += batch) {
    const n = Math.min(batch, total - d);
    segs.push(ref(n));
    written += n;
    for (let m = chooseMerge(segs, 1, policy); m; m = chooseMerge(segs, 1, policy)) {
      const merged = m.segments.reduce((a, i) => a + segs[i].documents, 0);
      written += merged;
      segs = segs.filter((_, i) => !m.segments.includes(i));
      segs.push(ref(merged));
    }
  }
  return { sizes: segs.map((s) => s.documents), amplification: written / total };
}

/** Per segment: token counts per document and each token's centroid (uniform), deterministic by seed. */
function segmentTokens(documents: number, tokensPerDoc: number, K: number, seed: number) {
  const r = mulberry32(seed);
  const offsets = new Uint32Array(documents + 1);
  for (let i = 0; i < documents; i++) offsets[i + 1] = offsets[i] + Math.max(1, Math.round(tokensPerDoc * (0.5 + r())));
  const tokens = offsets[documents];
  const assignment = new Uint32Array(tokens);
  for (let t = 0; t < tokens; t++) assignment[t] = Math.floor(r() * K);
  return { offsets, assignment, tokens };
}

/** The segment's layout built from its assignment with random codes (as buildWarpLayout orders it: by centroid, then document). */
function syntheticLayout(documents: number, tokensPerDoc: number, K: number, codec: WarpCodec, centroidSum: number, seed: number): Uint8Array {
  const { offsets, assignment, tokens } = segmentTokens(documents, tokensPerDoc, K, seed);
  const bpt = warpCodeBytes(codec.dims, codec.bits);
  const listOffsets = new Uint32Array(K + 1);
  for (let t = 0; t < tokens; t++) listOffsets[assignment[t] + 1]++;
  for (let c = 0; c < K; c++) listOffsets[c + 1] += listOffsets[c];
  const docs = documents <= 65536 ? new Uint16Array(tokens) : new Uint32Array(tokens);
  const cursor = listOffsets.slice(0, K);
  for (let doc = 0; doc < documents; doc++) for (let t = offsets[doc]; t < offsets[doc + 1]; t++) docs[cursor[assignment[t]]++] = doc;
  const codes = new Uint8Array(tokens * bpt);
  const words = new Uint32Array(codes.buffer, 0, codes.length >> 2);
  const r = mulberry32(seed ^ 0x5bd1e995);
  for (let i = 0; i < words.length; i++) words[i] = Math.floor(r() * 2 ** 32);
  const layout: WarpLayout = {
    dims: codec.dims, bits: codec.bits, centroidCount: K, documents, tokens, bytesPerToken: bpt, docIdBytes: documents <= 65536 ? 2 : 4,
    centroidsChecksum: centroidSum, codecChecksum: warpCodecChecksum(codec), listOffsets, docs, codes,
  };
  return serializeWarpLayout(layout);
}

/** A directory with the same counts as syntheticLayout's (no codes made): for counting ranged reads of other segment structures. */
function syntheticDirectory(documents: number, tokensPerDoc: number, K: number, bpt: number, seed: number): WarpDirectory {
  const { assignment, tokens } = segmentTokens(documents, tokensPerDoc, K, seed);
  const counts = new Uint32Array(K);
  for (let t = 0; t < tokens; t++) counts[assignment[t]]++;
  const w = documents <= 65536 ? 2 : 4;
  const offsets = new Float64Array(K + 1);
  offsets[0] = warpDirectoryBytes(K);
  for (let c = 0; c < K; c++) offsets[c + 1] = offsets[c] + warpListBytes(counts[c], w, bpt);
  return { name: 'synthetic', dims: 0, bits: 4, centroidCount: K, documents, tokens, bytesPerToken: bpt, docIdBytes: w, centroidsChecksum: 0, codecChecksum: 0, counts, checksums: new Uint32Array(K), offsets, byteLength: offsets[K] };
}

/** The WARP section's settings (cold-scorer.ts reads them from its command line: `--warp-docs`, `--doc-tokens`, ...). */
export interface ColdWarpOptions {
  /** Collection sizes in documents, one run each. */
  sizes: number[];
  docTokens: number;
  batch: number;
  queries: number;
  queryTokens: number;
  nprobe: number;
  bits: 2 | 4;
  dims: number;
  latencyMs: number;
  mbPerS: number;
  maxSegments: number;
  rangeGap: number;
  rounds: number;
  /**
   * Only the ranged read path (no scorer that fetches layouts whole): at 1,000,000 documents the
   * whole path copies every layout (~3.6 GB) through the disk cache, which the comparison does not need.
   */
  rangedOnly: boolean;
  /**
   * Warm rounds (0: none): after the cold scorers, one scorer with a 2 GiB memory cache reads every
   * query once (filling its memory and disk caches), then repeats every query this many times with
   * its lists in memory; then each query on a scorer whose memory holds only the directories (lists
   * from the warm disk cache). Centroid scores by ONNX Runtime's GEMM + TopK (`centroidTop`, as the
   * search job runs them), so the figures are the search job's warm scan (its exact stage aside).
   */
  warmRounds: number;
  /** A file for a CPU profile (.cpuprofile, the inspector's sampler) of the warm rounds from memory alone; absent: none. */
  profileTo?: string;
  /** A file name for CPU profiles of the timed queries from the disk cache, one per query (FILE-q.cpuprofile; the untimed runs that prepare each are left out); absent: none. */
  diskProfileTo?: string;
  /** A file for the warm scorer's hits of every query (JSON: one array per query), to compare the answers of two builds; absent: none. */
  hitsTo?: string;
}

/** The inspector's CPU sampler started now; the function it returns stops it and writes the profile to a file. */
async function startProfile(): Promise<(file: string) => Promise<void>> {
  const session = new Session();
  session.connect();
  const post = (method: string, params?: object) => new Promise<unknown>((res, rej) => session.post(method, params ?? {}, (err, out) => (err ? rej(err) : res(out))));
  await post('Profiler.enable');
  await post('Profiler.setSamplingInterval', { interval: 200 });
  await post('Profiler.start');
  return async (file) => {
    const { profile } = (await post('Profiler.stop')) as { profile: unknown };
    writeFileSync(file, JSON.stringify(profile));
    session.disconnect();
  };
}

/** The defaults of the WARP section (`quick`: a smaller run for a loaded machine). */
export function coldWarpDefaults(quick: boolean): ColdWarpOptions {
  return { sizes: quick ? [5000] : [20000, 50000], docTokens: 55, batch: 1024, queries: quick ? 3 : 6, queryTokens: 32, nprobe: 32, bits: 4, dims: 128, latencyMs: 10, mbPerS: 100, maxSegments: DEFAULT_WARP_MAX_SEGMENTS, rangeGap: WARP_RANGE_GAP_BYTES, rounds: quick ? 1 : 2, rangedOnly: false, warmRounds: 0 };
}

export async function runColdWarpBench(o: ColdWarpOptions): Promise<Record<string, unknown>> {
  const { sizes: totals, docTokens: L, batch, queries: Q, queryTokens: n, nprobe, bits, dims, latencyMs: latency, mbPerS, maxSegments, rangeGap: gap, rounds, rangedOnly, warmRounds, profileTo, diskProfileTo, hitsTo } = o;
  const policy: MergePolicySettings = { ...DEFAULT_MERGE_POLICY, maxSegments, searchMaxBytes: DEFAULT_WARP_MAX_BYTES };
  const results: Record<string, unknown>[] = [];
  for (const total of totals) results.push(await oneSize(total));
  return { latency_ms: latency, mb_per_s: mbPerS, doc_tokens: L, batch, queries: Q, query_tokens: n, nprobe, bits, dims, max_segments: maxSegments, range_gap: gap, rounds, warm_rounds: warmRounds, sizes: results };

  async function oneSize(total: number): Promise<Record<string, unknown>> {
    const t0 = Date.now();
    const bounded = simulateMerges(total, batch, L, policy);
    const unbounded = simulateMerges(total, batch, L, { ...policy, maxSegments: 0 });
    const K = ivfCentroidCount(total * L);
    const r = mulberry32(7);
    const centroids = normalizeRows(Float32Array.from({ length: K * dims }, () => r() * 2 - 1), K, dims);
    // A codec fitted on small residuals (its cutoffs and weights; the layouts' codes are random).
    const sample = Float32Array.from({ length: 2048 * dims }, () => (r() - 0.5) * 0.2);
    const codec = fitWarpCodec(sample, 2048, dims, bits);
    const csum = centroidsChecksum(centroids);
    const objects = new Map<string, Uint8Array>();
    const refs: SegmentRef[] = bounded.sizes.map((documents, i) => {
      const bytes = syntheticLayout(documents, L, K, codec, csum, 1000 + i);
      const ref: SegmentRef = { batchId: `b${i}`, codecVersion: 1, key: s3Keys.segment(T, C, `b${i}`, 1), documents, tokens: 0, bytes: 0, checksum: '0' };
      objects.set(s3Keys.searchLayout(T, C, ref.batchId, 1), bytes);
      return ref;
    });
    const layoutBytes = [...objects.values()].reduce((a, b) => a + b.byteLength, 0);
    const tokens = [...objects.values()].reduce((a, b) => a + new DataView(b.buffer, b.byteOffset).getUint32(24, true), 0);
    console.error(`${total} documents: ${refs.length} segments (${bounded.sizes.join(', ')} documents; without the bound ${unbounded.sizes.length}), ${tokens} tokens, K = ${K}, layouts ${round(layoutBytes / 2 ** 20)} MiB, built in ${Date.now() - t0} ms`);
    const manifest: CollectionManifest = { tenantId: T, collectionId: C, generation: 1, codecVersion: 1, committedAt: 'g1', segments: refs };
    const plan: SearchPlan = {
      parts: refs.map((ref, position) => ({ position, ref, live: undefined, index: () => Promise.reject(new Error('not read')), open: () => Promise.reject(new Error('not read')), docIds: () => Promise.reject(new Error('not read')) })),
      openAhead: 2,
      reversed: () => false,
      keep: () => {},
      unavailable: () => [],
    };
    const queries = Array.from({ length: Q }, () => {
      const v = new Float32Array(n * dims);
      for (let t = 0; t < n; t++) {
        const c = Math.floor(r() * K);
        for (let j = 0; j < dims; j++) v[t * dims + j] = centroids[c * dims + j] + (r() - 0.5) * 0.1;
      }
      return { vectors: normalizeRows(v, n, dims), n };
    });
    const scanOpts = { centroids, codec, nprobe, topN: 100, yieldEvery: async () => {} };
    let warmFigures: Record<string, unknown> | undefined;

    /** A scorer with an empty disk and memory over a store that charges each GET; ranged: the store answers ranged GETs. */
    const coldScorer = async (ranged: boolean) => {
      const log = { gets: 0, ranged: 0, bytes: 0 };
      const charge = (b: number) => new Promise((res) => setTimeout(res, latency + (b / (mbPerS * 1e6)) * 1000));
      const store = {
        async get(key: string) {
          const b = objects.get(key) ?? null;
          log.gets++;
          log.bytes += b?.byteLength ?? 0;
          await charge(b?.byteLength ?? 0);
          return b ? b.slice() : null;
        },
        ...(ranged
          ? {
              async getRange(key: string, offset: number, length: number) {
                const b = objects.get(key);
                log.ranged++;
                log.bytes += length;
                await charge(length);
                return b ? b.slice(offset, offset + length) : null;
              },
            }
          : {}),
      };
      const dir = mkdtempSync(path.join(tmpdir(), 'lateral-cold-warp-'));
      const disk = new DiskObjectCache(store, dir, 2 ** 40, 'bench');
      const source: ObjectSource = { get: (k) => disk.get(k), invalidate: (k) => disk.invalidate(k), readRanges: (k, rs, c) => disk.readRanges(k, rs, c), ranged: disk.ranged, getRanges: (k, rs) => disk.getRanges(k, rs) };
      const cache = new SegmentCache(source, { get: async () => Promise.reject(new Error('no codec artifact')) }, { forCollection: async () => Promise.reject(new Error('none')) }, { maxBytes: 2 * 2 ** 30, loadConcurrency: 4, scoreFromCodes: true, warpRangeGapBytes: gap });
      try {
        const t = performance.now();
        const cpu = process.cpuUsage();
        const first = await warpScan(cache, { tenantId: T, id: C }, manifest, plan, queries.slice(0, 1), scanOpts);
        const firstMs = performance.now() - t;
        // the process's CPU time over the first query (every thread: the scan, the GETs' handling, the disk cache's writes): less sensitive to the machine's load than its wall time
        const used = process.cpuUsage(cpu);
        const firstCpuMs = (used.user + used.system) / 1000;
        const firstLog = { ...log };
        const warmMs: number[] = [];
        const warm: Awaited<ReturnType<typeof warpScan>>[] = [];
        for (let q = 1; q < Q; q++) {
          const tw = performance.now();
          warm.push(await warpScan(cache, { tenantId: T, id: C }, manifest, plan, queries.slice(q, q + 1), scanOpts));
          warmMs.push(performance.now() - tw);
        }
        // the first query again on the now warm scorer: the same hits as cold
        const again = await warpScan(cache, { tenantId: T, id: C }, manifest, plan, queries.slice(0, 1), scanOpts);
        if (JSON.stringify(again.hits) !== JSON.stringify(first.hits)) throw new Error(`${ranged ? 'ranged' : 'whole'}: the warm scorer's hits differ from the cold one's`);
        if (first.failed.size > 0) throw new Error(`segments failed: ${[...first.failed.values()].map((e) => e.message).join('; ')}`);
        return { firstMs, firstCpuMs, first, firstLog, warmMs, warm, hits: first.hits, totalLog: { ...log } };
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    };

    /**
     * The warm scan (warmRounds > 0): a scorer with a 2 GiB memory cache reads every query once
     * (its lists fetched into the memory and disk caches, timed apart), then repeats each query
     * `warmRounds` times with no GET; then each query again on a scorer over the same warm disk
     * whose memory holds only the directories (read before the timing), so its lists are positioned
     * reads of the disk cache's copies. Per query: wall and process CPU time, bytes of the probed
     * lists scored, bytes fetched (0: all from memory), ranged reads, and the disk cache's counters.
     */
    const warmScorer = async () => {
      const probe = await OnnxIvfProbe.create(0);
      const centroidTop: WarpScanOptions['centroidTop'] = (q, qn, c, d, k) => probe.top(q, qn, c, d, k);
      const warmOpts = { ...scanOpts, centroidTop };
      const store = {
        async get(key: string) {
          const b = objects.get(key) ?? null;
          return b ? b.slice() : null;
        },
        async getRange(key: string, offset: number, length: number) {
          const b = objects.get(key);
          return b ? b.slice(offset, offset + length) : null;
        },
      };
      const dir = mkdtempSync(path.join(tmpdir(), 'lateral-warm-warp-'));
      const disk = new DiskObjectCache(store, dir, 2 ** 40, 'bench');
      const source: ObjectSource = { get: (k) => disk.get(k), invalidate: (k) => disk.invalidate(k), readRanges: (k, rs, c) => disk.readRanges(k, rs, c), ranged: disk.ranged, getRanges: (k, rs) => disk.getRanges(k, rs) };
      const scorer = () => new SegmentCache(source, { get: async () => Promise.reject(new Error('no codec artifact')) }, { forCollection: async () => Promise.reject(new Error('none')) }, { maxBytes: 2 * 2 ** 30, loadConcurrency: 4, scoreFromCodes: true, warpRangeGapBytes: gap });
      type Timed = { ms: number; cpuMs: number; stats: WarpScanQueryStats; hits: string; diskRangeHits: number; diskRangeGets: number };
      const timed = async (cache: SegmentCache, q: number): Promise<Timed> => {
        const d0 = disk.stats();
        const cpu = process.cpuUsage();
        const t = performance.now();
        const got = await warpScan(cache, { tenantId: T, id: C }, manifest, plan, queries.slice(q, q + 1), warmOpts);
        const ms = performance.now() - t;
        const used = process.cpuUsage(cpu);
        const d1 = disk.stats();
        if (got.failed.size > 0) throw new Error(`segments failed: ${[...got.failed.values()].map((e) => e.message).join('; ')}`);
        return { ms, cpuMs: (used.user + used.system) / 1000, stats: got.queries[0], hits: JSON.stringify(got.hits), diskRangeHits: d1.rangeHits - d0.rangeHits, diskRangeGets: d1.rangeGets - d0.rangeGets };
      };
      try {
        const cache = scorer();
        const fill: Timed[] = [];
        for (let q = 0; q < Q; q++) fill.push(await timed(cache, q));
        if (hitsTo) writeFileSync(hitsTo, `[${fill.map((f) => f.hits).join(',\n')}]\n`);
        const memory: Timed[] = [];
        const profiler = profileTo ? await startProfile() : null;
        for (let k = 0; k < warmRounds; k++)
          for (let q = 0; q < Q; q++) {
            const w = await timed(cache, q);
            if (w.hits !== fill[q].hits) throw new Error(`warm query ${q}: hits differ from its first run`);
            if (w.stats.bytesFetched !== 0) throw new Error(`warm query ${q} fetched ${w.stats.bytesFetched} bytes (its lists should be in memory)`);
            memory.push(w);
          }
        if (profiler && profileTo) await profiler(profileTo);
        console.error(`  warm from memory: ${memory.map((w) => round(w.ms)).join(', ')} ms`);
        // A fresh scorer coalesces a query's lists into other ranges than the filling one did (that
        // one already held some lists), so the gaps between them may not be on disk yet: each query
        // runs once on a fresh scorer first (untimed; its few GETs fill them), then on another that
        // has run the next query (its directories and whole small layouts in memory), timed.
        const fromDisk: Timed[] = [];
        for (let q = 0; q < Q; q++) {
          // every directory, and the layouts small enough to be read whole, in memory first (another query)
          await timed(scorer(), q);
          const c = scorer();
          await timed(c, (q + 1) % Q);
          const diskProfiler = diskProfileTo ? await startProfile() : null;
          const w = await timed(c, q);
          if (diskProfiler && diskProfileTo) await diskProfiler(diskProfileTo.replace(/(\.cpuprofile)?$/, `-${q}.cpuprofile`));
          if (w.hits !== fill[q].hits) throw new Error(`query ${q} from the disk cache: hits differ from its first run`);
          fromDisk.push(w);
        }
        return { fill, memory, fromDisk, memoryStats: cache.stats() };
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    };
    const warmRun = warmRounds > 0 ? await warmScorer() : null;
    if (warmRun) {
      const pct = (xs: number[], p: number) => {
        const s = [...xs].sort((a, b) => a - b);
        return s[Math.min(s.length - 1, Math.ceil((p / 100) * s.length) - 1)];
      };
      const sum = (xs: { ms: number; cpuMs: number; stats: WarpScanQueryStats; diskRangeHits: number; diskRangeGets: number }[]) => ({
        ms_p50: round(pct(xs.map((x) => x.ms), 50)),
        ms_p95: round(pct(xs.map((x) => x.ms), 95)),
        cpu_ms_p50: round(pct(xs.map((x) => x.cpuMs), 50)),
        list_mib_scored_p50: round(median(xs.map((x) => x.stats.bytesRead)) / 2 ** 20),
        mib_fetched_p50: round(median(xs.map((x) => x.stats.bytesFetched)) / 2 ** 20),
        ranged_reads_p50: median(xs.map((x) => x.stats.ranges)),
        disk_range_hits_p50: median(xs.map((x) => x.diskRangeHits)),
        disk_range_gets_p50: median(xs.map((x) => x.diskRangeGets)),
        probed_lists_p50: median(xs.map((x) => x.stats.probed)),
        queries: xs.length,
      });
      warmFigures = { fill: sum(warmRun.fill), memory: sum(warmRun.memory), disk: sum(warmRun.fromDisk), memory_cache: warmRun.memoryStats };
      console.error(`  warm (nprobe ${nprobe}): fill ${JSON.stringify(warmFigures.fill)}`);
      console.error(`  warm from memory: ${JSON.stringify(warmFigures.memory)}`);
      console.error(`  warm from the disk cache: ${JSON.stringify(warmFigures.disk)}`);
    }

    const ranged: Awaited<ReturnType<typeof coldScorer>>[] = [];
    const whole: Awaited<ReturnType<typeof coldScorer>>[] = [];
    for (let k = 0; k < rounds; k++) {
      if (rangedOnly) {
        ranged.push(await coldScorer(true));
        console.error(`  round ${k + 1}: first query ranged ${round(ranged[k].firstMs)} ms, ${round(ranged[k].firstCpuMs)} ms of CPU (${ranged[k].firstLog.ranged} ranged GETs, ${round(ranged[k].firstLog.bytes / 2 ** 20)} MiB)`);
        continue;
      }
      if (k % 2) {
        whole.push(await coldScorer(false));
        ranged.push(await coldScorer(true));
      } else {
        ranged.push(await coldScorer(true));
        whole.push(await coldScorer(false));
      }
      if (JSON.stringify(ranged[k].hits) !== JSON.stringify(whole[k].hits)) throw new Error('ranged and whole reads gave different hits');
      console.error(`  round ${k + 1}: first query ranged ${round(ranged[k].firstMs)} ms (${ranged[k].firstLog.ranged} ranged GETs, ${round(ranged[k].firstLog.bytes / 2 ** 20)} MiB), whole ${round(whole[k].firstMs)} ms (${whole[k].firstLog.gets} GETs, ${round(whole[k].firstLog.bytes / 2 ** 20)} MiB)`);
    }
    // Ranged reads per query on an empty memory cache, for both segment structures (the same queries' probes).
    const bpt = warpCodeBytes(dims, bits);
    const dirsOf = (sizes: number[]) => sizes.map((d, i) => syntheticDirectory(d, L, K, bpt, 1000 + i));
    const boundedDirs = dirsOf(bounded.sizes);
    const unboundedDirs = dirsOf(unbounded.sizes);
    const readsPerQuery = (dirs: WarpDirectory[]) => {
      const sizes = warpListSizes(dirs);
      return median(queries.map((q) => {
        const probed = warpProbedCentroids(warpQuery(q.vectors, q.n, centroids, codec, sizes, { nprobe }));
        return dirs.reduce((a, d) => a + warpCoalescedRanges(d, probed, gap).length, 0);
      }));
    };
    const first = ranged[0].first.queries[0];
    const rangedFirstBytes = median(ranged.map((x) => x.firstLog.bytes));
    const result = {
      documents: total,
      tokens,
      centroids: K,
      segments: refs.length,
      segment_documents: bounded.sizes,
      write_amplification: round(bounded.amplification),
      layout_mib: round(layoutBytes / 2 ** 20),
      directory_mib: round((refs.length * warpDirectoryBytes(K)) / 2 ** 20),
      first_query_ms: { ranged: round(median(ranged.map((x) => x.firstMs))), whole: round(median(whole.map((x) => x.firstMs))) },
      first_query_cpu_ms: { ranged: round(median(ranged.map((x) => x.firstCpuMs))), whole: round(median(whole.map((x) => x.firstCpuMs))) },
      ratio_whole_over_ranged: round(median(whole.map((x) => x.firstMs)) / median(ranged.map((x) => x.firstMs))),
      first_query_gets: { ranged: median(ranged.map((x) => x.firstLog.ranged + x.firstLog.gets)), whole: median(whole.map((x) => x.firstLog.gets)) },
      first_query_mib_fetched: { ranged: round(rangedFirstBytes / 2 ** 20), whole: round(median(whole.map((x) => x.firstLog.bytes)) / 2 ** 20) },
      first_query_share_of_layout_bytes: { ranged: round(rangedFirstBytes / layoutBytes, 4), whole: round(median(whole.map((x) => x.firstLog.bytes)) / layoutBytes, 4) },
      first_query_list_bytes_share: round(first.bytesRead / layoutBytes, 4),
      warm_query_ms: { ranged: round(median(ranged.flatMap((x) => x.warmMs))), whole: round(median(whole.flatMap((x) => x.warmMs))) },
      warm_query_mib_fetched: round(median(ranged.flatMap((x) => x.warm.map((w) => w.queries[0].bytesFetched))) / 2 ** 20),
      ranged_reads_per_query: { measured_first: first.ranges, bounded_segments: readsPerQuery(boundedDirs), without_bound: readsPerQuery(unboundedDirs), without_bound_segments: unbounded.sizes.length },
      probed_lists_per_query: first.probed,
      ...(warmFigures ? { warm: warmFigures } : {}),
    };
    console.log(
      `WARP cold scorer, ${total} documents (${refs.length} segments, K ${K}, ${result.layout_mib} MiB of layouts; ${latency} ms + ${mbPerS} MB/s per GET): first XTR query ${result.first_query_ms.ranged} ms by ranges ` +
        `(${result.first_query_gets.ranged} GETs, ${result.first_query_mib_fetched.ranged} MiB = ${round(100 * result.first_query_share_of_layout_bytes.ranged, 2)}% of the layout bytes)${rangedOnly ? '' : ` vs ${result.first_query_ms.whole} ms whole (${result.first_query_mib_fetched.whole} MiB): ${result.ratio_whole_over_ranged}x`}; ` +
        `ranged reads per query ${result.ranged_reads_per_query.bounded_segments} (without the segment bound: ${result.ranged_reads_per_query.without_bound} over ${unbounded.sizes.length} segments); warm query ${result.warm_query_ms.ranged} ms`,
    );
    return result;
  }
}
