/**
 * Scoring benchmark (`npm run bench -- score [--json]`).
 *
 * - Batched MaxSim (timed in alternation with the peak GEMM, so a shared machine's load hits both): 1,000 candidates x 180 tokens x 128 dims (fp32, in memory) vs a 32-token query,
 *   ONNX Runtime (intra-op 2, all graph optimisations, one GEMM [C*180,128]x[128,32] + ReduceMax +
 *   ReduceSum). Median ms, GFLOP/s at 2 n m d per candidate, fraction of this machine's GEMM peak
 *   measured in the same run (ORT MatMul 2048^3).
 * - The same work by the JS kernels (`maxsimBatch`, and the reference triple loop on a subset) and
 *   by numpy when `python3 -c "import numpy"` works, timed inside python.
 * - Separable LITE for 100 candidates at default and small sizes (ms per query, ONNX Runtime).
 * - XTR aggregation, n = 32, k' = 1,000 and 40,000 (ms per query).
 * - Compressed candidates: the same 1,000 x 180 x 128 stored EDEN-coded (4 bits, token layout,
 *   64 B codes + 4 B norm per token), scored from the codes by two ONNX graphs (see
 *   compressedCase): decode + MaxSim, and rotated-domain MaxSim. Each is timed in alternation with
 *   the fp32 ONNX MaxSim; `compressed_decode_ratio` / `compressed_rotated_ratio` are the ratios.
 *   The library's JS paths (EdenCodec.decode, rotateQuery + scoreRotated) are timed on 100
 *   candidates and extrapolated.
 *
 * - AESI decode (codec math): tokens in blocks vs the per-token loop, widths 384 and 1536 (aesiCase).
 * - WARP (SPEC 3.5, `benchWarp` in @lateral/search, warpCase): on one synthetic segment of
 *   100,000 tokens (d = 128, b = 4, K = 1,024, 32 query tokens, nprobe 32), the lookup-table
 *   build and the table sums over the probed lists' packed codes against XTR's float kernel
 *   (`scoreRows`) over the same rows of float32 vectors, timed in alternation in the same run;
 *   `warp_kernel_ratio` = float / (tables + lookups), and the whole per-segment searches
 *   (`warp_search_ratio` = XTR / WARP). Single-threaded JavaScript, both.
 *
 * - @lateral/simd (simdCase): every kernel and the searches built on them, on the JavaScript
 *   kernels and on the WebAssembly SIMD module in alternation, results checked equal;
 *   `simd_*_speedup` = JS / WASM.
 *
 * Options: --quick (fewer repetitions), --threads N (intra-op threads, default 2), --aesi-only,
 * --warp-only, --simd-only, --simd-cranfield (real vectors end to end, in process: see
 * simdCranfieldCase), --warp-centroids K (default 1,024), --warp-bits 2|4 (default 4).
 */
import { spawnSync } from 'node:child_process';
import { maxsim, maxsimBatch, xtrAggregate, LITE_DEFAULT, LITE_SMALL, type XtrRetrieved } from '@lateral/scoring';
import { benchWarp, benchXtrAccumulator, xtrProbe } from '@lateral/search';
import { createScorerSession, OnnxIvfProbe, OnnxLite, randomLiteWeights, seededUniform } from '@lateral/kernels';
import { buildMaxsimModel, OnnxMaxsim } from './maxsim-single-tensor';
import * as ort from 'onnxruntime-node';
import { CliUsageError, intFlag, intListFlag, parseCliOrExit } from '../lib/cli';
import { C, M, D, N, FLOPS, gemmPeakSession, timeIt, randomUnit, interleaved } from './score-timing';
import { aesiCase, compressedCase } from './score-compressed';
import { simdCase, simdCranfieldCase } from './score-simd';
import { mebertCase, type MebertBenchOptions } from './score-mebert';
import { runIfMain } from '../lib/command';

function numpyMaxsim(reps: number): { ms: number; threads: string } | null {
  const py = `
import time, json, os
import numpy as np
rng = np.random.default_rng(0)
D = rng.standard_normal((${C * M}, ${D}), dtype=np.float32)
q = rng.standard_normal((${N}, ${D}), dtype=np.float32)
f = lambda: (D @ q.T).reshape(${C}, ${M}, ${N}).max(1).sum(1)
f(); f()
t = []
for _ in range(${reps}):
    s = time.perf_counter(); f(); t.append((time.perf_counter() - s) * 1000)
t.sort()
print(json.dumps({"ms": t[len(t)//2], "threads": os.environ.get("OMP_NUM_THREADS", "default")}))
`;
  const res = spawnSync('python3', ['-c', py], { encoding: 'utf8', timeout: 300_000 });
  if (res.status !== 0 || !res.stdout) return null;
  try {
    return JSON.parse(res.stdout.trim().split('\n').pop() as string);
  } catch {
    return null;
  }
}

function xtrLists(r: () => number, n: number, kPrime: number, numDocs: number): XtrRetrieved[] {
  return Array.from({ length: n }, () => {
    const docs = new Uint32Array(kPrime);
    const scores = new Float32Array(kPrime);
    let s = 1;
    for (let j = 0; j < kPrime; j++) {
      docs[j] = Math.floor(r() * numDocs);
      s -= r() * (1 / kPrime);
      scores[j] = s;
    }
    return { docs, scores };
  });
}

/** WARP's kernels against XTR's float scoring on the same synthetic segment (benchWarp). */
function warpCase({ bits, centroids }: { bits: 2 | 4; centroids: number }, quick: boolean, log: (m: string) => void): { result: Record<string, unknown>; rows: [string, string][] } {
  log(`score bench: WARP tables + lookups vs XTR float scoring (100,000 tokens, K = ${centroids}, b = ${bits})...`);
  const b = benchWarp({ bits, centroids, repeats: quick ? 5 : 15 });
  const f = (x: number, p = 2) => x.toFixed(p);
  const shape = `${b.tokens} tokens x ${b.dims}, b = ${b.bits}, K = ${b.centroids}, n = ${b.n}, nprobe ${b.nprobe}: ${b.scoredPerQuery} token scores`;
  return {
    result: {
      warp_shape: { tokens: b.tokens, dims: b.dims, bits: b.bits, centroids: b.centroids, documents: b.documents, query_tokens: b.n, nprobe: b.nprobe, scored_per_query: b.scoredPerQuery },
      warp_centroid_scores_ms: b.centroidScoresMs,
      warp_table_ms: b.tableMs,
      warp_lookup_ms: b.lookupMs,
      warp_float_scoreRows_ms: b.floatMs,
      warp_kernel_ratio: b.kernelRatio,
      warp_search_ms: b.warpSearchMs,
      warp_xtr_search_ms: b.xtrSearchMs,
      warp_search_ratio: b.searchRatio,
      warp_xtr_top10_overlap: b.top10Overlap,
    },
    rows: [
      [`WARP kernels (${shape})`, `tables ${f(b.tableMs)} ms + lookup-sum ${f(b.lookupMs)} ms vs XTR scoreRows (float32) ${f(b.floatMs)} ms: ${f(b.kernelRatio)}x faster`],
      ['WARP whole segment search vs XTR (same probes, top-100)', `WARP ${f(b.warpSearchMs)} ms (Q C^T ${f(b.centroidScoresMs)} ms inside) vs XTR ${f(b.xtrSearchMs)} ms: ${f(b.searchRatio)}x faster; top-10 overlap ${f(b.top10Overlap, 1)}`],
    ],
  };
}

const USAGE = `usage: npm run bench -- score [--quick] [--threads N (2)] [--warp-bits 2|4 (4)] [--warp-centroids K (1024)] [--json]
  one section alone: [--aesi-only | --simd-only | --simd-cranfield | --warp-only | --mebert-only]
  --quick           fewer repetitions
  --mebert-docs N (1000000) --mebert-dims D (100) --mebert-segments S (12) --mebert-queries Q (5)
                    ME-BERT's prefix scan over synthesised segments (EDEN 4-bit codes, 4 rows a document)
  --mebert-centroids K (4096) --mebert-nprobe LIST (8,16,...,1024) --mebert-recall-docs N (50000, 0: none) [--mebert-no-real]
                    and its IVF beside it: ms/query per nprobe; recall@10 on N distinct random documents and on
                    Cranfield encoded by the model of that d (glove-ctx-100d, minilm-l6-384)
  --threads N       ONNX Runtime intra-op threads of the MaxSim and GEMM sessions
  --warp-bits       WARP's residual bits; --warp-centroids its centroids (K)`;

export async function runScoreBench(args: string[]): Promise<Record<string, unknown>> {
  const opts = parseCliOrExit(
    'bench score',
    USAGE,
    args,
    {
      quick: { type: 'boolean' },
      'aesi-only': { type: 'boolean' },
      'simd-only': { type: 'boolean' },
      'simd-cranfield': { type: 'boolean' },
      'warp-only': { type: 'boolean' },
      'mebert-only': { type: 'boolean' },
      'mebert-docs': { type: 'string', default: '1000000' },
      'mebert-dims': { type: 'string', default: '100' },
      'mebert-segments': { type: 'string', default: '12' },
      'mebert-queries': { type: 'string', default: '5' },
      'mebert-centroids': { type: 'string', default: '4096' },
      'mebert-nprobe': { type: 'string', default: '8,16,32,64,128,256,512,1024' },
      'mebert-recall-docs': { type: 'string', default: '50000' },
      'mebert-no-real': { type: 'boolean' },
      threads: { type: 'string', default: '2' },
      'warp-bits': { type: 'string', default: '4' },
      'warp-centroids': { type: 'string', default: '1024' },
      json: { type: 'boolean' },
    },
    {},
    ({ values: v }) => {
      const bits = Number(v['warp-bits']) as 2 | 4;
      if (bits !== 2 && bits !== 4) throw new CliUsageError(`--warp-bits must be 2 or 4, got ${v['warp-bits']}`);
      const mebert: MebertBenchOptions = {
        documents: intFlag('mebert-docs', v['mebert-docs']),
        dims: intFlag('mebert-dims', v['mebert-dims'], 8),
        segments: intFlag('mebert-segments', v['mebert-segments']),
        queries: intFlag('mebert-queries', v['mebert-queries']),
        ivfCentroids: intFlag('mebert-centroids', v['mebert-centroids']),
        ivfProbes: intListFlag('mebert-nprobe', String(v['mebert-nprobe'])),
        recallDocs: intFlag('mebert-recall-docs', v['mebert-recall-docs'], 0),
        realRecall: v['mebert-no-real'] !== true,
      };
      return { ...v, threads: intFlag('threads', v.threads), warp: { bits, centroids: intFlag('warp-centroids', v['warp-centroids'], 2) }, mebert };
    },
  );
  const quick = opts.quick === true;
  if (opts['aesi-only']) {
    const { result, rows } = await aesiCase(quick, (m) => process.stderr.write(`${m}\n`));
    console.log(rows.map(([k, v]) => `${k}  ${v}`).join('\n'));
    return result;
  }
  if (opts['simd-cranfield']) {
    const { result, rows } = await simdCranfieldCase(quick, (m) => process.stderr.write(`${m}\n`));
    console.log(rows.map(([k, v]) => `${k}  ${v}`).join('\n'));
    return result;
  }
  if (opts['simd-only']) {
    const { result, rows } = await simdCase(quick, (m) => process.stderr.write(`${m}\n`));
    console.log(rows.map(([k, v]) => `${k}  ${v}`).join('\n'));
    return result;
  }
  if (opts['mebert-only']) {
    const { result, rows } = await mebertCase(opts.mebert, quick, (m) => process.stderr.write(`${m}\n`));
    console.log(rows.map(([k, v]) => `${k}  ${v}`).join('\n'));
    return result;
  }
  if (opts['warp-only']) {
    const { result, rows } = warpCase(opts.warp, quick, (m) => process.stderr.write(`${m}\n`));
    console.log(rows.map(([k, v]) => `${k}  ${v}`).join('\n'));
    return result;
  }
  const threads = opts.threads;
  const reps = quick ? 5 : 30;
  const log = (m: string) => process.stderr.write(`${m}\n`);

  const r = seededUniform(1);
  const q = randomUnit(r, N, D);
  const docs = randomUnit(r, C * M, D);
  const offsets = Uint32Array.from({ length: C + 1 }, (_, c) => c * M);

  log(`score bench: MaxSim (ONNX Runtime) interleaved with a 2048^3 GEMM (${threads} threads)...`);
  const gemm = await gemmPeakSession(threads);
  const onnxMaxsim = await OnnxMaxsim.create({ intraOpThreads: threads, chunkFloats: C * M * D });
  const [peakMs, maxsimMs] = await interleaved(gemm.run, () => onnxMaxsim.score(q, N, docs, offsets, D), quick ? 3 : 9, Math.ceil(reps / (quick ? 3 : 9)));
  const peak = { ms: peakMs, gflops: gemm.flops / peakMs / 1e6 };
  const onnxScores = await onnxMaxsim.score(q, N, docs, offsets, D);
  await onnxMaxsim.release();

  // the general (ragged) graph with the padding bias, on the same data
  const masked = await createScorerSession(buildMaxsimModel('masked'), { intraOpThreads: threads });
  const qT = new Float32Array(D * N);
  for (let i = 0; i < N; i++) for (let k = 0; k < D; k++) qT[k * N + i] = q[i * D + k];
  const feeds = {
    docs: new ort.Tensor('float32', docs, [C, M, D]),
    query_t: new ort.Tensor('float32', qT, [D, N]),
    bias: new ort.Tensor('float32', new Float32Array(C * M), [C, M, 1]),
  };
  const [peakMs2, maskedMs] = await interleaved(gemm.run, () => masked.run(feeds), quick ? 3 : 9, Math.ceil(reps / (quick ? 3 : 9)));
  await masked.release();
  await gemm.release();

  // the full ragged path of OnnxMaxsim (padding copy included): the last candidate one token short
  const raggedOffsets = Uint32Array.from(offsets);
  raggedOffsets[C] -= 1;
  const raggedDocs = docs.subarray(0, (C * M - 1) * D);
  const ragged: Record<string, number> = {};
  for (const maskMode of ['gather', 'bias-column', 'bias-add'] as const) {
    log(`score bench: MaxSim ragged path (${maskMode})...`);
    const s = await OnnxMaxsim.create({ intraOpThreads: threads, chunkFloats: C * M * (D + 1), maskMode });
    ragged[maskMode] = await timeIt(() => s.score(q, N, raggedDocs, raggedOffsets, D), quick ? 3 : 10);
    await s.release();
  }

  log('score bench: MaxSim (JS kernels)...');
  let jsScores: Float32Array = new Float32Array(0);
  const jsMs = await timeIt(() => { jsScores = maxsimBatch(q, N, docs, offsets, D); }, quick ? 2 : 5, 1);
  const refSubset = 100;
  const jsRefMs = (await timeIt(() => {
    for (let c = 0; c < refSubset; c++) maxsim(q, N, docs.subarray(c * M * D, (c + 1) * M * D), M, D);
  }, quick ? 2 : 3, 1)) * (C / refSubset);
  let maxDiff = 0;
  for (let c = 0; c < C; c++) maxDiff = Math.max(maxDiff, Math.abs(onnxScores[c] - jsScores[c]));

  log('score bench: MaxSim (numpy)...');
  const np = numpyMaxsim(quick ? 5 : 20);

  log('score bench: separable LITE, 100 candidates...');
  const liteQ = randomUnit(r, N, D);
  const liteDocs = docs.subarray(0, 100 * M * D);
  const liteOffsets = offsets.subarray(0, 101);
  const lite = await OnnxLite.create(randomLiteWeights(1, LITE_DEFAULT), { intraOpThreads: threads });
  const liteMs = await timeIt(() => lite.score(liteQ, N, liteDocs, liteOffsets, D), quick ? 3 : 15);
  await lite.release();
  const liteSmall = await OnnxLite.create(randomLiteWeights(2, LITE_SMALL), { intraOpThreads: threads });
  const liteSmallMs = await timeIt(() => liteSmall.score(liteQ, N, liteDocs, liteOffsets, D), quick ? 3 : 15);
  await liteSmall.release();

  log('score bench: XTR aggregation...');
  const l1k = xtrLists(r, N, 1000, 100_000);
  const l40k = xtrLists(r, N, 40_000, 1_000_000);
  const xtr1k = await timeIt(() => xtrAggregate(l1k), quick ? 5 : 30);
  const xtr40k = await timeIt(() => xtrAggregate(l40k), quick ? 3 : 10);
  // The search path's per-segment aggregation: direct-addressed accumulators (@lateral/search).
  const seg = benchXtrAccumulator({ n: N, kPrime: 40_000, documents: 1_000_000, segments: 16, repeats: quick ? 3 : 9 });

  // XTR's IVF probe at Vaswani's shape with MiniLM (K = 8,192 centroids by PLAID's rule for
  // ~0.9M tokens, d = 384, 16 query tokens, nprobe 32): the JS loop vs one ORT GEMM + TopK.
  log('score bench: XTR IVF probe (JS vs ORT)...');
  const P = { n: 16, K: 8192, d: 384, nprobe: 32 };
  const probeQ = Float32Array.from({ length: P.n * P.d }, () => r() - 0.5);
  const probeC = Float32Array.from({ length: P.K * P.d }, () => r() - 0.5);
  const ortProbe = await OnnxIvfProbe.create(threads);
  await ortProbe.probe(probeQ, P.n, probeC, P.d, P.nprobe); // builds the transposed centroids once, as a scorer does per collection
  const probeOrtMs = await timeIt(() => ortProbe.probe(probeQ, P.n, probeC, P.d, P.nprobe), quick ? 5 : 20);
  const probeJsMs = await timeIt(() => xtrProbe(probeQ, P.n, probeC, P.d, P.nprobe), quick ? 2 : 5);
  await ortProbe.release();

  log('score bench: compressed candidates (EDEN 4-bit, token layout)...');
  const compressed = await compressedCase(q, docs, offsets, threads, quick, log);
  const aesi = await aesiCase(quick, log);
  const warp = warpCase(opts.warp, quick, log);
  const simd = await simdCase(quick, log);
  const mebert = await mebertCase(opts.mebert, quick, log);

  const maxsimGflops = FLOPS / maxsimMs / 1e6;
  const result: Record<string, unknown> = {
    threads,
    shape: { candidates: C, doc_tokens: M, dims: D, query_tokens: N },
    maxsim_ms: maxsimMs,
    maxsim_gflops: maxsimGflops,
    peak_gflops: peak.gflops,
    peak_gemm_ms: peak.ms,
    maxsim_fraction_of_peak: maxsimGflops / peak.gflops,
    maxsim_masked_ms: maskedMs,
    maxsim_masked_fraction_of_peak: FLOPS / maskedMs / 1e6 / (gemm.flops / peakMs2 / 1e6),
    peak_gflops_during_masked: gemm.flops / peakMs2 / 1e6,
    maxsim_ragged_ms: ragged.gather,
    maxsim_ragged_bias_column_ms: ragged['bias-column'],
    maxsim_ragged_bias_add_ms: ragged['bias-add'],
    js_ms: jsMs,
    js_reference_ms: jsRefMs,
    js_over_onnx: jsMs / maxsimMs,
    onnx_vs_js_max_abs_diff: maxDiff,
    numpy_ms: np ? np.ms : null,
    numpy_over_onnx: np ? np.ms / maxsimMs : null,
    lite_100_ms: liteMs,
    lite_small_100_ms: liteSmallMs,
    xtr_1000_ms: xtr1k,
    xtr_40000_ms: xtr40k,
    xtr_segmented_40000_ms: seg.seconds * 1000,
    xtr_segmented_updates_per_s: seg.updatesPerSecond,
    xtr_segmented_vs_hash_ratio: (seg.seconds * 1000) / xtr40k,
    xtr_segmented_total_40000_ms: seg.secondsTotal * 1000,
    xtr_probe_js_ms: probeJsMs,
    xtr_probe_ort_ms: probeOrtMs,
    xtr_probe_ort_gflops: (2 * P.n * P.K * P.d) / probeOrtMs / 1e6,
    xtr_probe_ort_fraction_of_peak: (2 * P.n * P.K * P.d) / probeOrtMs / 1e6 / peak.gflops,
    ...compressed.result,
    ...aesi.result,
    ...warp.result,
    ...simd.result,
    ...mebert.result,
  };

  const f = (x: number, p = 2) => x.toFixed(p);
  const rows: [string, string][] = [
    ['GEMM peak (ORT MatMul 2048^3)', `${f(peak.gflops, 1)} GFLOP/s (${f(peak.ms)} ms)`],
    ['MaxSim ONNX, 1000 x 180 x 128 vs 32', `${f(maxsimMs)} ms, ${f(maxsimGflops, 1)} GFLOP/s, ${f(100 * maxsimGflops / peak.gflops, 1)}% of peak`],
    ['MaxSim ONNX, masked (ragged) graph', `${f(maskedMs)} ms, ${f((100 * FLOPS) / maskedMs / 1e6 / (gemm.flops / peakMs2 / 1e6), 1)}% of peak (${f(gemm.flops / peakMs2 / 1e6, 1)} GFLOP/s alongside)`],
    ['MaxSim ONNX ragged path incl. padding copy', `gather (default) ${f(ragged.gather)} ms, bias column ${f(ragged['bias-column'])} ms, bias add ${f(ragged['bias-add'])} ms`],
    ['MaxSim JS maxsimBatch', `${f(jsMs, 1)} ms (${f(jsMs / maxsimMs, 1)}x ONNX), max |diff| ${maxDiff.toExponential(2)}`],
    ['MaxSim JS reference loop (extrapolated)', `${f(jsRefMs, 1)} ms (${f(jsRefMs / maxsimMs, 1)}x ONNX)`],
    ['MaxSim numpy', np ? `${f(np.ms)} ms (${f(np.ms / maxsimMs, 2)}x ONNX)` : 'n/a (python3 + numpy not importable)'],
    ['LITE default, 100 candidates', `${f(liteMs)} ms`],
    ['LITE small, 100 candidates', `${f(liteSmallMs)} ms`],
    ["XTR aggregation n=32 k'=1000", `${f(xtr1k, 3)} ms`],
    ["XTR aggregation n=32 k'=40000", `${f(xtr40k, 3)} ms`],
    ["XTR per-segment accumulators, n=32 k'=40000, 1M docs in 16 segments", `${f(seg.seconds * 1000, 3)} ms = ${f(seg.updatesPerSecond / 1e6, 0)} M updates/s (${f((seg.seconds * 1000) / xtr40k, 3)}x the hash-table aggregation); with zeroing + top-100 ${f(seg.secondsTotal * 1000, 3)} ms`],
    ['XTR IVF probe, 16 query tokens x 8192 centroids x 384, nprobe 32', `JS ${f(probeJsMs, 2)} ms, ORT GEMM + TopK ${f(probeOrtMs, 2)} ms (${f(probeJsMs / probeOrtMs, 1)}x faster, ${f((100 * (2 * P.n * P.K * P.d)) / probeOrtMs / 1e6 / peak.gflops, 1)}% of the GEMM peak)`],
    ...compressed.rows,
    ...aesi.rows,
    ...warp.rows,
    ...simd.rows,
    ...mebert.rows,
  ];
  const w = Math.max(...rows.map(([k]) => k.length));
  console.log(rows.map(([k, v]) => `${k.padEnd(w)}  ${v}`).join('\n'));
  return result;
}

runIfMain(import.meta.url, runScoreBench);
