/**
 * The score bench's ME-BERT case (score.ts: --mebert-only, and a section of the whole bench):
 * ME-BERT's prefix scan at 1,000,000 documents without ingesting them. Segments are synthesised
 * in memory as the scorer holds them (`pfx:`, docs/segment-format.md "The prefix section"):
 * 4 rows a document of real EDEN codes (the codec fitted on random unit rows, a pool of rows
 * coded once and tiled over the documents), fp32 norms, `segments` segments of equal size. The
 * search is the serving path's: mebertSearch over searchSegment sources with prefixScanOf and the
 * query's EDEN table made once per query (queryLut), m = 4, top-10. Two ways, alternated, results
 * checked equal bit for bit:
 * - rows: the row scorer one row at a time (its `score` only: the scan before the batch kernel);
 * - batch: the row scorer's `maxRows` (per document, the max over its rows, a block of documents
 *   per call: the kernel of @lateral/simd when loaded, else its JavaScript twin).
 * Beside them, ME-BERT through an IVF over the prefix rows (libs/search mebert-ivf.ts): K
 * centroids (spherical k-means on the pool's decoded rows), each segment's lists (its rows' nearest
 * centroids, tiled with the pool), the query's nprobe best centroids, the candidates rescored
 * exactly; per nprobe, ms per query (wall, CPU; the probe included), candidates, and the top-10's
 * overlap with the scan's. The tiled pool repeats each pool document ~N / 4,096 times, so that
 * overlap measures the pool, not 1,000,000 distinct documents: recall@10 is measured apart, on
 * distinct rows (uniform random unit vectors coded with the same codec: the IVF's worst case, no
 * structure) and on real encoded vectors (Cranfield's 1,400 documents and 225 queries, the model
 * of the same d: glove-ctx-100d or minilm-l6-384), at the same fractions of the lists probed.
 */
import { existsSync } from 'node:fs';
import { createCodec, fitCodec, prefixRowBytes, type EdenCodec, type PrefixSection } from '@lateral/codec';
import {
  assignNearest, buildMebertLists, mebertIvfSearch, mebertIvfStats, mebertListSource, mebertProbe, mebertSearch, prefixScanOf, searchSegment, sphericalKmeans,
  type Hit, type MebertListSource, type RowScorer, type SegmentSource,
} from '@lateral/search';
import { TokenEncoder } from '@lateral/model';
import { CodecSettingsSchema } from '@lateral/shared';
import { jsKernels, simdStatus, useKernels } from '@lateral/simd';
import { seededUniform } from '@lateral/kernels';
import { median, randomUnit } from './score-timing';
import { loadCranfield } from '../lib/cranfield';
import { DEFAULT_CRANFIELD_DIR } from '../lib/cranfield-eval';

export interface MebertBenchOptions {
  documents: number;
  dims: number;
  segments: number;
  queries: number;
  /** the IVF's centroids at `documents` (default 4,096) */
  ivfCentroids?: number;
  /** nprobe values timed (default 8, 16, 32, 64, 128, 256, 512, 1024 at K = 4,096: 1/512 .. 1/4 of the lists) */
  ivfProbes?: number[];
  /** distinct documents of the synthetic recall (default 50,000; 0: none) */
  recallDocs?: number;
  /** the Cranfield recall with real encoded vectors (default true when the model of this d is there) */
  realRecall?: boolean;
}

const ROWS = 4;
const WAYS = ['rows', 'batch', 'batch-js'] as const;
type Way = (typeof WAYS)[number];
const POOL_DOCS = 4096;
/** The IVF's rows-first mode: the best RESCORE documents of a segment by their probed rows rescored exactly. */
const RESCORE = 100;

/** Synthesised segments: per segment, a prefix section of `documents / segments` documents of 4 rows each. */
function synthesise(o: MebertBenchOptions, log: (m: string) => void) {
  const d = o.dims;
  const r = seededUniform(41);
  const settings = CodecSettingsSchema.parse({ kind: 'eden', bits: 4 });
  const sample = randomUnit(r, 8192, d);
  const seed = 7n;
  const artifact = fitCodec(settings, sample, d, { seed });
  const codec = createCodec(settings, artifact) as EdenCodec;
  const rowBytes = prefixRowBytes(codec, d);
  if (!rowBytes) throw new Error('mebert bench: EDEN 4-bit token layout has no prefix rows');
  log(`score bench: ME-BERT, coding a pool of ${POOL_DOCS} x ${ROWS} rows (EDEN 4-bit, d = ${d}, ${rowBytes.codes} + ${rowBytes.norms} B a row)...`);
  const poolVecs = randomUnit(r, POOL_DOCS * ROWS, d);
  const poolCodes = new Uint8Array(POOL_DOCS * ROWS * rowBytes.codes);
  const poolNorms = new Uint8Array(POOL_DOCS * ROWS * rowBytes.norms);
  for (let i = 0; i < POOL_DOCS; i++) {
    const enc = codec.encodeDoc(poolVecs.subarray(i * ROWS * d, (i + 1) * ROWS * d), d, { docId: `p${i}`, seed });
    poolCodes.set(enc.codes, i * ROWS * rowBytes.codes);
    poolNorms.set(enc.norms, i * ROWS * rowBytes.norms);
  }
  const segments: { source: SegmentSource; docBase: number; section: PrefixSection }[] = [];
  const per = Math.ceil(o.documents / o.segments);
  const rc = ROWS * rowBytes.codes;
  const rn = ROWS * rowBytes.norms;
  let docBase = 0;
  for (let s = 0; s < o.segments; s++) {
    const D = Math.min(per, o.documents - docBase);
    if (D <= 0) break;
    const start = Uint32Array.from({ length: D + 1 }, (_, i) => i * ROWS);
    const codes = new Uint8Array(D * rc);
    const norms = new Uint8Array(D * rn);
    for (let i = 0; i < D; i++) {
      const p = (i * 2654435761 + s * 40503) % POOL_DOCS >>> 0;
      codes.set(poolCodes.subarray(p * rc, (p + 1) * rc), i * rc);
      norms.set(poolNorms.subarray(p * rn, (p + 1) * rn), i * rn);
    }
    const section: PrefixSection = { rows: ROWS, rowBytes, start, codes, norms };
    const tokenOffsets = Uint32Array.from({ length: D + 1 }, (_, i) => i * 6); // documents of 6 tokens, 4 in the section
    const scan = prefixScanOf(section, codec, d, (i) => ({ docId: `s${s}-${i}`, seed }), (q, _n, rows) => lutOf(q).rows(rows));
    segments.push({
      source: {
          name: `mebert-${s}`,
          documents: D,
          dims: d,
          docIds: Array.from({ length: D }, (_, i) => `s${s}-${i}`),
          tokenOffsets,
          tokenIds: new Int32Array(0),
          docVectors: null,
          metadata: () => null,
          decodeAll: () => {
            throw new Error('mebert bench: the code sections were read');
          },
          prefixScan: scan,
      },
      docBase,
      section,
    });
    docBase += D;
  }
  // The query's table, once per query (as the scorer's queryLut cache).
  const luts = new WeakMap<Float32Array, ReturnType<EdenCodec['queryLut']>>();
  function lutOf(q: Float32Array) {
    let l = luts.get(q);
    if (!l) luts.set(q, (l = codec.queryLut(q, d, seed)));
    return l;
  }
  const poolSection: PrefixSection = { rows: ROWS, rowBytes, start: Uint32Array.from({ length: POOL_DOCS + 1 }, (_, i) => i * ROWS), codes: poolCodes, norms: poolNorms };
  const poolScan = prefixScanOf(poolSection, codec, d, (i) => ({ docId: `p${i}`, seed }));
  /** Segment s's document i is pool document poolOf(s, i) (the tiling above). */
  const poolOf = (s: number, i: number) => (i * 2654435761 + s * 40503) % POOL_DOCS >>> 0;
  const scorer = (q: Float32Array, _n: number, rows: { codes: Uint8Array; norms: Uint8Array }) => lutOf(q).rows(rows);
  return { segments, rowBytes, bytes: docBase * ROWS * (rowBytes.codes + rowBytes.norms), codec, seed, poolRows: poolScan.decodePrefixes(0, POOL_DOCS, ROWS), poolOf, scorer };
}

/** The IVF over the tiled segments: centroids fitted on the pool's decoded rows, each segment's lists tiled from the pool rows' nearest centroids. */
function tiledIvf(syn: ReturnType<typeof synthesise>, K: number, d: number, log: (m: string) => void) {
  const n = POOL_DOCS * ROWS;
  const t0 = performance.now();
  const { centroids } = sphericalKmeans(syn.poolRows, n, d, K, { seed: 11, iterations: 1 });
  const near = assignNearest(syn.poolRows, n, centroids, K, d).index;
  const lists = syn.segments.map((seg, s) => {
    const D = seg.source.documents;
    const assignment = new Uint32Array(D * ROWS);
    for (let i = 0; i < D; i++) {
      const p = syn.poolOf(s, i);
      for (let j = 0; j < ROWS; j++) assignment[i * ROWS + j] = near[p * ROWS + j];
    }
    // the lists hold their rows' codes, list-major (WARP's layout, one "token" per prefix row)
    return mebertListSource(buildMebertLists({ start: seg.source.prefixScan!.start, assignment, centroidCount: K }), { ...seg.section, scorer: syn.scorer });
  });
  log(`score bench: ME-BERT IVF, K = ${K} centroids fitted on the pool's ${n} rows and the ${syn.segments.length} segments' lists built in ${((performance.now() - t0) / 1000).toFixed(1)} s`);
  return { centroids, lists };
}

/** One segment of distinct documents (4 rows each, `vectors`: D x 4 x d) coded with `codec`; its prefix scan scored from the codes with EDEN's table. */
function codedSegment(codec: EdenCodec, seed: bigint, d: number, vectors: Float32Array, start: Uint32Array, name: string) {
  const rowBytes = prefixRowBytes(codec, d)!;
  const D = start.length - 1;
  const R = start[D];
  const codes = new Uint8Array(R * rowBytes.codes);
  const norms = new Uint8Array(R * rowBytes.norms);
  for (let i = 0; i < D; i++) {
    if (start[i + 1] === start[i]) continue;
    const enc = codec.encodeDoc(vectors.subarray(start[i] * d, start[i + 1] * d), d, { docId: `${name}-${i}`, seed });
    codes.set(enc.codes, start[i] * rowBytes.codes);
    norms.set(enc.norms, start[i] * rowBytes.norms);
  }
  const section: PrefixSection = { rows: ROWS, rowBytes, start, codes, norms };
  const luts = new WeakMap<Float32Array, ReturnType<EdenCodec['queryLut']>>();
  const lutOf = (q: Float32Array) => {
    let l = luts.get(q);
    if (!l) luts.set(q, (l = codec.queryLut(q, d, seed)));
    return l;
  };
  const scorer = (q: Float32Array, _n: number, rows: { codes: Uint8Array; norms: Uint8Array }) => lutOf(q).rows(rows);
  const scan = prefixScanOf(section, codec, d, (i) => ({ docId: `${name}-${i}`, seed }), scorer);
  const segment = searchSegment({
    name, documents: D, dims: d, docIds: Array.from({ length: D }, (_, i) => `${name}-${i}`), tokenOffsets: start, tokenIds: new Int32Array(0), docVectors: null, metadata: () => null,
    decodeAll: () => {
      throw new Error('mebert bench: the code sections were read');
    },
    prefixScan: scan,
  });
  return { segment, section, scorer };
}

/**
 * recall@10 of the IVF against the exact scan on one segment of distinct documents: K centroids
 * (spherical k-means on every decoded prefix row, 4 steps), per nprobe the mean over the queries
 * of |IVF top-10 and exact top-10| / 10, and the mean share of documents scored.
 */
function ivfRecall(coded: ReturnType<typeof codedSegment>, d: number, K: number, probes: number[], queries: Float32Array[]): { nprobe: number; recall: number; recallRescore: number; scored: number }[] {
  const seg = coded.segment;
  const ps = seg.prefixScan!;
  const D = seg.documents;
  const R = ps.start[D];
  const rows = ps.decodePrefixes(0, D, ROWS);
  const { centroids } = sphericalKmeans(rows, R, d, K, { seed: 13, iterations: 4 });
  const near = assignNearest(rows, R, centroids, K, d).index;
  const parts = [{ segment: seg, lists: mebertListSource(buildMebertLists({ start: ps.start, assignment: near, centroidCount: K }), { ...coded.section, scorer: coded.scorer }) as MebertListSource | null }];
  const withRows = ps.start.reduce((a, _, i) => (i < D && ps.start[i + 1] > ps.start[i] ? a + 1 : a), 0);
  const exact = queries.map((q) => new Set(mebertSearch(parts, q, ROWS, 10).map((h) => h.key)));
  return probes.map((nprobe) => {
    let hit = 0;
    let hitRescore = 0;
    let scored = 0;
    queries.forEach((q, t) => {
      const stats = mebertIvfStats();
      const probed = mebertProbe(q, centroids, d, nprobe);
      const got = mebertIvfSearch(parts, probed, q, ROWS, 10, {}, stats);
      hit += got.filter((h) => exact[t].has(h.key)).length / Math.max(1, exact[t].size);
      const rescored = mebertIvfSearch(parts, probed, q, ROWS, 10, { rescore: RESCORE });
      hitRescore += rescored.filter((h) => exact[t].has(h.key)).length / Math.max(1, exact[t].size);
      scored += stats.candidates / withRows;
    });
    return { nprobe, recall: hit / queries.length, recallRescore: hitRescore / queries.length, scored: scored / queries.length };
  });
}

/** Cranfield's documents' first 4 token vectors and its queries' pooled vectors, encoded by the model of this d (null when none is here). */
async function cranfieldVectors(d: number, log: (m: string) => void): Promise<{ model: string; vectors: Float32Array; start: Uint32Array; queries: Float32Array[] } | null> {
  const model = d === 100 ? 'glove-ctx-100d' : d === 384 ? 'minilm-l6-384' : null;
  if (!model || !existsSync(`.cache/models/${model}`) || !existsSync(DEFAULT_CRANFIELD_DIR)) return null;
  const data = loadCranfield(DEFAULT_CRANFIELD_DIR);
  log(`score bench: ME-BERT recall on real vectors: encoding Cranfield (${data.docs.length} documents, ${data.queries.length} queries) with ${model}...`);
  const encoder = await TokenEncoder.load(`.cache/models/${model}`, { executionProvider: 'cpu' });
  try {
    const docs = await encoder.encodeDocuments(data.docs.map((x) => x.text));
    const queries = (await encoder.encodeQueries(data.queries.map((x) => x.text))).map((e) => encoder.pool(e));
    const start = new Uint32Array(docs.length + 1);
    docs.forEach((e, i) => (start[i + 1] = start[i] + Math.min(ROWS, e.length)));
    const vectors = new Float32Array(start[docs.length] * d);
    docs.forEach((e, i) => vectors.set(e.vectors.subarray(0, (start[i + 1] - start[i]) * d), start[i] * d));
    return { model, vectors, start, queries };
  } finally {
    await encoder.release();
  }
}

/** Hides the row scorer's batch method: the scan one row at a time (the path before it). */
function rowsOnly(source: SegmentSource): SegmentSource {
  const ps = source.prefixScan!;
  return {
    ...source,
    prefixScan: {
      ...ps,
      rowScorer: (q: Float32Array, n: number) => {
        const s = ps.rowScorer(q, n);
        return s ? ({ score: (i: number, r: number) => s.score(i, r) } satisfies RowScorer) : null;
      },
    },
  };
}

export async function mebertCase(o: MebertBenchOptions, quick: boolean, log: (m: string) => void): Promise<{ result: Record<string, unknown>; rows: [string, string][] }> {
  const syn = synthesise(o, log);
  const { segments, rowBytes, bytes } = syn;
  const batchParts = segments.map((s) => ({ segment: searchSegment(s.source, s.docBase) }));
  const rowParts = segments.map((s) => ({ segment: searchSegment(rowsOnly(s.source), s.docBase) }));
  const r = seededUniform(43);
  const queries = Array.from({ length: o.queries }, () => randomUnit(r, 1, o.dims));
  const rounds = quick ? 1 : 3;
  const times: Record<Way, number[]> = { rows: [], batch: [], 'batch-js': [] };
  const cpu: Record<Way, number[]> = { rows: [], batch: [], 'batch-js': [] };
  let checked = 0;
  const K = o.ivfCentroids ?? 4096;
  const probes = (o.ivfProbes ?? [8, 16, 32, 64, 128, 256, 512, 1024]).filter((n) => n >= 1 && n <= K);
  const ivf = tiledIvf(syn, K, o.dims, log);
  const ivfParts = batchParts.map((p, s) => ({ ...p, lists: ivf.lists[s] }));
  const MODES = ['rescore', 'exact'] as const;
  const per = () => probes.map(() => ({ rescore: [] as number[], exact: [] as number[] }));
  const ivfTimes = per();
  const ivfCpu = per();
  const ivfScored = per();
  const ivfRows = per();
  const ivfOverlap = per();
  log(`score bench: ME-BERT prefix scan, ${o.documents.toLocaleString('en')} documents x ${ROWS} rows in ${segments.length} segments (${(bytes / 2 ** 20).toFixed(0)} MiB of prefix sections), ${o.queries} queries x ${rounds} rounds, alternated...`);
  // One warm-up query each (table build paths, JIT).
  mebertSearch(batchParts, queries[0], ROWS, 10);
  mebertSearch(rowParts, queries[0], ROWS, 10);
  useKernels(jsKernels);
  mebertSearch(batchParts, queries[0], ROWS, 10);
  useKernels(null);
  mebertIvfSearch(batchParts.map((p) => ({ ...p, lists: null })), Uint32Array.of(0), queries[0], ROWS, 10);
  for (let round = 0; round < rounds; round++) {
    for (const q of queries) {
      const order = WAYS.map((_, k) => WAYS[(k + checked) % WAYS.length]);
      const got: Partial<Record<Way, ReturnType<typeof mebertSearch>>> = {};
      for (const way of order) {
        const parts = way === 'rows' ? rowParts : batchParts;
        if (way === 'batch-js') useKernels(jsKernels);
        const t0 = performance.now();
        const c0 = process.cpuUsage();
        got[way] = mebertSearch(parts, q, ROWS, 10, { explain: true });
        times[way].push(performance.now() - t0);
        const c = process.cpuUsage(c0);
        cpu[way].push((c.user + c.system) / 1000);
        useKernels(null);
      }
      // The IVF at each nprobe (the probe, the candidates' lists and their exact rescoring), beside the scan's answer.
      const exact10 = new Set(got.batch!.map((h) => h.key));
      probes.forEach((nprobe, k) => {
        for (const mode of checked % 2 ? [...MODES].reverse() : MODES) {
          const stats = mebertIvfStats();
          const t0 = performance.now();
          const c0 = process.cpuUsage();
          const hits: Hit[] = mebertIvfSearch(ivfParts, mebertProbe(q, ivf.centroids, o.dims, nprobe), q, ROWS, 10, { explain: true, rescore: mode === 'rescore' ? RESCORE : undefined }, stats);
          ivfTimes[k][mode].push(performance.now() - t0);
          const c = process.cpuUsage(c0);
          ivfCpu[k][mode].push((c.user + c.system) / 1000);
          ivfScored[k][mode].push(stats.candidates);
          ivfRows[k][mode].push(stats.rows);
          ivfOverlap[k][mode].push(hits.filter((h) => exact10.has(h.key)).length / Math.max(1, exact10.size));
        }
      });
      const want = got.rows!.map((h) => [h.key, h.score, h.explain!.rows[0]]);
      for (const way of ['batch', 'batch-js'] as const) {
        const b = got[way]!.map((h) => [h.key, h.score, h.explain!.rows[0]]);
        if (JSON.stringify(want) !== JSON.stringify(b) || !want.every((x, i) => Object.is(x[1], b[i][1]))) throw new Error(`mebert bench: the ${way} scan's hits differ from the row-at-a-time scan's`);
      }
      checked++;
    }
  }
  const rowsMs = median(times.rows);
  const batchMs = median(times.batch);
  const batchJsMs = median(times['batch-js']);
  const cpuMs = { rows: median(cpu.rows), batch: median(cpu.batch), js: median(cpu['batch-js']) };
  const totalRows = o.documents * ROWS;
  const simd = simdStatus();
  const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / Math.max(1, xs.length);
  const ivfTable = probes.map((nprobe, k) => ({
    nprobe, fraction: nprobe / K,
    ms: median(ivfTimes[k].rescore), cpu_ms: median(ivfCpu[k].rescore), rows: mean(ivfRows[k].rescore), tiled_overlap10: mean(ivfOverlap[k].rescore),
    exact_ms: median(ivfTimes[k].exact), exact_cpu_ms: median(ivfCpu[k].exact), exact_rows: mean(ivfRows[k].exact), exact_tiled_overlap10: mean(ivfOverlap[k].exact),
    candidates: mean(ivfScored[k].rescore),
    recall10_random: null as number | null, recall10_random_exact: null as number | null, recall10_real: null as number | null, recall10_real_exact: null as number | null,
  }));
  // recall@10 on distinct rows: uniform random (the worst case), then real encoded vectors; the same fractions of the lists.
  const recallDocs = o.recallDocs ?? 50_000;
  const recallQueries = quick ? 20 : 50;
  let recallK = 0;
  if (recallDocs > 0) {
    recallK = Math.max(16, 2 ** Math.round(Math.log2((K * recallDocs) / o.documents)));
    log(`score bench: ME-BERT IVF recall on ${recallDocs.toLocaleString('en')} distinct uniform random documents x ${ROWS} rows (K = ${recallK}, ${recallQueries} queries)...`);
    const rr = seededUniform(47);
    const start = Uint32Array.from({ length: recallDocs + 1 }, (_, i) => i * ROWS);
    const seg = codedSegment(syn.codec, syn.seed, o.dims, randomUnit(rr, recallDocs * ROWS, o.dims), start, 'recall');
    const rq = Array.from({ length: recallQueries }, () => randomUnit(rr, 1, o.dims));
    const rp = probes.map((n) => (n * recallK) / K);
    const got = ivfRecall(seg, o.dims, recallK, rp.filter((n) => Number.isInteger(n) && n >= 1), rq);
    for (const g of got) Object.assign(ivfTable[rp.indexOf(g.nprobe)], { recall10_random: g.recallRescore, recall10_random_exact: g.recall });
  }
  const realK = 64;
  let realModel: string | null = null;
  let realRows = 0;
  if (o.realRecall !== false) {
    const real = await cranfieldVectors(o.dims, log);
    if (real) {
      realModel = real.model;
      realRows = real.start[real.start.length - 1];
      const seg = codedSegment(syn.codec, syn.seed, o.dims, real.vectors, real.start, 'cran');
      const rp = probes.map((n) => (n * realK) / K);
      const got = ivfRecall(seg, o.dims, realK, rp.filter((n) => Number.isInteger(n) && n >= 1), real.queries);
      for (const g of got) Object.assign(ivfTable[rp.indexOf(g.nprobe)], { recall10_real: g.recallRescore, recall10_real_exact: g.recall });
    }
  }
  const shape = `${o.documents.toLocaleString('en')} docs x ${ROWS} rows, d = ${o.dims} (${rowBytes.codes} code B a row), ${segments.length} segments`;
  const f = (x: number, p = 1) => x.toFixed(p);
  return {
    result: {
      mebert_documents: o.documents,
      mebert_dims: o.dims,
      mebert_segments: segments.length,
      mebert_section_bytes: bytes,
      mebert_queries: checked,
      mebert_rows_ms: rowsMs,
      mebert_batch_ms: batchMs,
      mebert_batch_js_ms: batchJsMs,
      mebert_ratio: rowsMs / batchMs,
      mebert_js_ratio: rowsMs / batchJsMs,
      mebert_batch_rows_per_s: totalRows / (batchMs / 1000),
      mebert_rows_rows_per_s: totalRows / (rowsMs / 1000),
      mebert_rows_cpu_ms: cpuMs.rows,
      mebert_batch_cpu_ms: cpuMs.batch,
      mebert_batch_js_cpu_ms: cpuMs.js,
      mebert_kernels: simd.kind,
      mebert_ivf_centroids: K,
      mebert_ivf_rescore: RESCORE,
      mebert_ivf: ivfTable,
      mebert_ivf_recall_docs: recallDocs,
      mebert_ivf_recall_centroids: recallK,
      mebert_ivf_real_model: realModel,
      mebert_ivf_real_centroids: realModel ? realK : null,
      mebert_ivf_real_rows: realRows,
    },
    rows: [
      [
        `ME-BERT prefix scan (${shape}, top-10; ${simd.kind} kernels)`,
        `rowMaxima kernel ${f(batchMs)} ms/query (${f(totalRows / batchMs / 1000, 1)}M rows/s), its JavaScript twin ${f(batchJsMs)} ms, vs row at a time ${f(rowsMs)} ms (${f(totalRows / rowsMs / 1000, 1)}M rows/s): ${f(rowsMs / batchMs, 2)}x and ${f(rowsMs / batchJsMs, 2)}x; ${checked} queries, hits equal bit for bit; process CPU per query ${f(cpuMs.batch)} / ${f(cpuMs.js)} / ${f(cpuMs.rows)} ms`,
      ],
      ...ivfTable.map((r): [string, string] => {
        const g = (x: number | null) => (x === null ? '-' : f(x, 3));
        return [
          `ME-BERT IVF nprobe ${r.nprobe} of ${K} (${(100 * r.fraction).toFixed(2)}% of the lists)`,
          `rows first, ${RESCORE} rescored: ${f(r.ms)} ms/query wall, ${f(r.cpu_ms)} ms CPU, ${Math.round(r.rows).toLocaleString('en')} rows scored; every candidate rescored: ${f(r.exact_ms)} / ${f(r.exact_cpu_ms)} ms, ${Math.round(r.exact_rows).toLocaleString('en')} rows ` +
            `(scan: ${f(batchMs)} / ${f(cpuMs.batch)} ms, ${totalRows.toLocaleString('en')} rows); ${Math.round(r.candidates).toLocaleString('en')} candidates; top-10 overlap with the scan ${f(r.tiled_overlap10, 2)} / ${f(r.exact_tiled_overlap10, 2)} (tiled pool)` +
            `; recall@10 ${g(r.recall10_random)} / ${g(r.recall10_random_exact)} on ${recallDocs.toLocaleString('en')} distinct uniform random documents (K ${recallK})` +
            `; ${g(r.recall10_real)} / ${g(r.recall10_real_exact)} on Cranfield ${realModel ?? '(no model)'} (K ${realK})`,
        ];
      }),
    ],
  };
}
