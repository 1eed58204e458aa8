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
 */
import { createCodec, fitCodec, prefixRowBytes, type EdenCodec, type PrefixSection } from '@lateral/codec';
import { mebertSearch, prefixScanOf, searchSegment, type RowScorer, type SegmentSource } from '@lateral/search';
import { CodecSettingsSchema } from '@lateral/shared';
import { jsKernels, simdStatus, useKernels } from '@lateral/simd';
import { seededUniform } from '@lateral/kernels';
import { median, randomUnit } from './score-timing';

export interface MebertBenchOptions {
  documents: number;
  dims: number;
  segments: number;
  queries: number;
}

const ROWS = 4;
const WAYS = ['rows', 'batch', 'batch-js'] as const;
type Way = (typeof WAYS)[number];
const POOL_DOCS = 4096;

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
  const segments: { source: SegmentSource; docBase: number }[] = [];
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
  return { segments, rowBytes, bytes: docBase * ROWS * (rowBytes.codes + rowBytes.norms) };
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

export function mebertCase(o: MebertBenchOptions, quick: boolean, log: (m: string) => void): { result: Record<string, unknown>; rows: [string, string][] } {
  const { segments, rowBytes, bytes } = synthesise(o, log);
  const batchParts = segments.map((s) => ({ segment: searchSegment(s.source, s.docBase) }));
  const rowParts = segments.map((s) => ({ segment: searchSegment(rowsOnly(s.source), s.docBase) }));
  const r = seededUniform(43);
  const queries = Array.from({ length: o.queries }, () => randomUnit(r, 1, o.dims));
  const rounds = quick ? 1 : 3;
  const times: Record<Way, number[]> = { rows: [], batch: [], 'batch-js': [] };
  const cpu: Record<Way, number[]> = { rows: [], batch: [], 'batch-js': [] };
  let checked = 0;
  log(`score bench: ME-BERT prefix scan, ${o.documents.toLocaleString('en')} documents x ${ROWS} rows in ${segments.length} segments (${(bytes / 2 ** 20).toFixed(0)} MiB of prefix sections), ${o.queries} queries x ${rounds} rounds, alternated...`);
  // One warm-up query each (table build paths, JIT).
  mebertSearch(batchParts, queries[0], ROWS, 10);
  mebertSearch(rowParts, queries[0], ROWS, 10);
  useKernels(jsKernels);
  mebertSearch(batchParts, queries[0], ROWS, 10);
  useKernels(null);
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
    },
    rows: [
      [
        `ME-BERT prefix scan (${shape}, top-10; ${simd.kind} kernels)`,
        `rowMaxima kernel ${f(batchMs)} ms/query (${f(totalRows / batchMs / 1000, 1)}M rows/s), its JavaScript twin ${f(batchJsMs)} ms, vs row at a time ${f(rowsMs)} ms (${f(totalRows / rowsMs / 1000, 1)}M rows/s): ${f(rowsMs / batchMs, 2)}x and ${f(rowsMs / batchJsMs, 2)}x; ${checked} queries, hits equal bit for bit; process CPU per query ${f(cpuMs.batch)} / ${f(cpuMs.js)} / ${f(cpuMs.rows)} ms`,
      ],
    ],
  };
}
