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
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { maxsim, maxsimBatch, maxsimOfSimilarities, xtrAggregate, LITE_DEFAULT, LITE_SMALL, type XtrRetrieved } from '@lateral/scoring';
import {
  assignNearest, benchWarp, benchXtrAccumulator, buildWarpLayout, exhaustiveSearch, exhaustiveSegmentSearch, fitIvfCentroids, fitWarpCodec, searchSegment, warpBenchFixture,
  warpLayoutLists, warpListSizes, warpResiduals, warpSearch, xtrProbe, type SegmentSource,
} from '@lateral/search';
import { TokenEncoder } from '@lateral/model';
import { loadCranfield } from '../lib/cranfield';
import { jsKernels, simdStatus, useKernels, wasmKernels, type Kernels, type ScoreRowsVariant } from '@lateral/simd';
import {
  createScorerSession, floatTensor, GemmMaxsim, GraphBuilder, int64Tensor, makeModel, makeValueInfo, OnnxIvfProbe, OnnxLite, randomLiteWeights, RotatedMaxsim, seededUniform,
  type RotatedImageSet,
} from '@lateral/kernels';
import { aesiDecode, aesiDecoderLength, aesiTwoLayerPerToken, createCodec, lloydMax, type EdenCodec } from '@lateral/codec';
import { buildMaxsimModel, OnnxMaxsim } from './maxsim-single-tensor';
import * as ort from 'onnxruntime-node';
import { CliUsageError, intFlag, parseCliOrExit } from '../lib/cli';

const C = 1000, M = 180, D = 128, N = 32;
const FLOPS = 2 * N * M * D * C;

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const h = s.length >> 1;
  return s.length % 2 ? s[h] : (s[h - 1] + s[h]) / 2;
}

async function timeIt(fn: () => unknown, reps: number, warmup = 2): Promise<number> {
  for (let i = 0; i < warmup; i++) await fn();
  const t: number[] = [];
  for (let i = 0; i < reps; i++) {
    const s = performance.now();
    await fn();
    t.push(performance.now() - s);
  }
  return median(t);
}

function randomUnit(r: () => number, rows: number, d: number): Float32Array {
  const a = new Float32Array(rows * d);
  for (let i = 0; i < rows; i++) {
    let s = 0;
    for (let k = 0; k < d; k++) { const v = r() - 0.5; a[i * d + k] = v; s += v * v; }
    const inv = 1 / Math.sqrt(s);
    for (let k = 0; k < d; k++) a[i * d + k] *= inv;
  }
  return a;
}

/** A 2048^3 MatMul session and its inputs: this machine's GEMM peak as ONNX Runtime reaches it. */
async function gemmPeakSession(threads: number): Promise<{ run: () => Promise<unknown>; release: () => Promise<void>; flops: number }> {
  const S = 2048;
  const g = new GraphBuilder();
  g.op('MatMul', ['a', 'b'], {}, 'c');
  const model = makeModel(g.build('gemm_peak', [makeValueInfo('a', 'FLOAT', [S, S]), makeValueInfo('b', 'FLOAT', [S, S])], [makeValueInfo('c', 'FLOAT', [S, S])]));
  const session = await createScorerSession(model, { intraOpThreads: threads });
  const r = seededUniform(99);
  const mk = () => new ort.Tensor('float32', Float32Array.from({ length: S * S }, () => r() - 0.5), [S, S]);
  const a = mk(), b = mk();
  return { run: () => session.run({ a, b }), release: () => session.release(), flops: 2 * S ** 3 };
}

/**
 * Times two workloads in alternation (a rounds, each one run of `a` then `perRound` runs of `b`),
 * so a load change on a shared machine hits both medians alike and their ratio stays meaningful.
 */
async function interleaved(a: () => Promise<unknown>, b: () => Promise<unknown>, rounds: number, perRound: number): Promise<[number, number]> {
  await a(); await b(); await b();
  const ta: number[] = [], tb: number[] = [];
  for (let r = 0; r < rounds; r++) {
    let s = performance.now();
    await a();
    ta.push(performance.now() - s);
    await b(); // untimed: the first run after a 2048^3 GEMM finds the caches full of its matrices
    for (let k = 0; k < perRound; k++) {
      s = performance.now();
      await b();
      tb.push(performance.now() - s);
    }
  }
  return [median(ta), median(tb)];
}

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

/** A uint16 graph input (the shared DataType table has no UINT16). */
function uint16Info(name: string, shape: (number | string)[]) {
  const info = makeValueInfo(name, 'UINT8', shape);
  info.type!.tensorType!.elemType = 4; // TensorProto.DataType.UINT16
  return info;
}


/**
 * The compressed case: the same candidates EDEN-coded (4 bits, token layout, d = p = 128: 64 B of
 * codes + a 4 B fp32 norm per token, one rotation per collection seed). Each way of scoring them
 * is timed in alternation with the pipeline's fp32 path, GemmMaxsim over fp32 candidates (the
 * same length-chunked padding, so both include the per-request candidate copy):
 * - image (what the pipeline does): RotatedMaxsim over the int8 rotated image that a scorer
 *   expands from the codes once, when it loads a generation (`compressed_image_ratio`; the
 *   expansion is timed separately as `compressed_image_build_ms`).
 * - codes (nothing prepared at load): one ONNX graph from the packed codes on every request:
 *   uint16 words (4 codes each) -> Gather of a 65,536 x 4 centroid table -> MatMul with the
 *   rotated query -> x norms -> max -> sum (`compressed_codes_ratio`).
 * - the library's JS scoreRotated, extrapolated from 100 candidates.
 * Both ONNX paths are checked against the library's exact rotated-domain scores.
 */
async function compressedCase(
  q: Float32Array, docs: Float32Array, offsets: Uint32Array, threads: number, quick: boolean, log: (m: string) => void,
): Promise<{ result: Record<string, number>; rows: [string, string][] }> {
  const BITS = 4;
  const P = 128;
  const W = (P * BITS) / 16; // uint16 words per token
  const codec = createCodec({ kind: 'eden', bits: BITS, layout: 'token', norms: 'fp32', sideInfo: false }) as EdenCodec;
  const seed = 7n;
  const keys = Array.from({ length: C }, (_, c) => ({ docId: `cand-${c}`, seed }));
  const t0 = performance.now();
  const enc = codec.encode(docs, offsets, D, keys);
  const encodeMs = performance.now() - t0;
  const bytesPerToken = (enc.codes.length + enc.norms.length) / (C * M);
  const codeBytes = (M * P * BITS) / 8;
  const docOf = (c: number) => ({ codes: enc.codes.subarray(c * codeBytes, (c + 1) * codeBytes), norms: enc.norms.subarray(c * M * 4, (c + 1) * M * 4) });

  // The scorer's load-time expansion and its per-request path.
  const image = new Uint8Array(C * M * P);
  const scales = new Float32Array(C * M);
  const buildImage = () => { for (let c = 0; c < C; c++) codec.rotatedImage(docOf(c), M, D, image, scales, c * M); };
  const imageBuildMs = await timeIt(buildImage, quick ? 1 : 3, 1);
  const set: RotatedImageSet = { codec, seed, dims: D, p: P, image, scales, offsets };
  const rows = Array.from({ length: C }, (_, c) => c);
  const queries = [{ vectors: q, length: N }];
  const gemm = await GemmMaxsim.create(threads);
  const rotated = await RotatedMaxsim.create(threads);
  const fp32Run = async () => (await gemm.score(queries, docs, offsets, D))[0];
  const imageRun = async () => (await rotated.score(queries, set, rows))[0];

  // From the packed codes on every request.
  const norms = new Float32Array(enc.norms.buffer.slice(enc.norms.byteOffset, enc.norms.byteOffset + enc.norms.byteLength));
  const codes16 = new Uint16Array(enc.codes.buffer.slice(enc.codes.byteOffset, enc.codes.byteOffset + enc.codes.byteLength));
  const cent = lloydMax(BITS).centroids;
  const quad = new Float32Array(65536 * 4);
  for (let v = 0; v < 65536; v++) for (let k = 0; k < 4; k++) quad[v * 4 + k] = cent[(v >> (4 * k)) & 15];
  const g = new GraphBuilder();
  const values = g.op('Gather', [g.constant(floatTensor('centroids4', [65536, 4], quad)), g.op('Cast', ['codes'], { to: 6 })], { axis: 0 }); // [C, L, W, 4]
  const flat = g.op('Reshape', [values, g.constant(int64Tensor('clp', [3], [0, 0, -1]))]); // [C, L, 128]
  const sims = g.op('Mul', [g.op('MatMul', [flat, 'query_t']), 'norms']);
  g.op('ReduceSum', [g.op('ReduceMax', [sims], { axes: [1], keepdims: 0 }), g.constant(int64Tensor('axis1', [1], [1]))], { keepdims: 0 }, 'scores');
  const codesSession = await createScorerSession(makeModel(g.build('eden_codes_maxsim', [
    uint16Info('codes', ['C', M, W]), makeValueInfo('norms', 'FLOAT', ['C', M, 1]), makeValueInfo('query_t', 'FLOAT', [P, N]),
  ], [makeValueInfo('scores', 'FLOAT', ['C'])])), { intraOpThreads: threads });
  const chunk = 100; // candidates per run: the looked-up values stay ~9 MB instead of 92 MB
  const codesRun = async () => {
    const rq = codec.rotateQuery(q, D, seed); // once per query: the rotation is shared by the collection
    const qT = new Float32Array(P * N);
    for (let i = 0; i < N; i++) for (let k = 0; k < P; k++) qT[k * N + i] = rq.rotated[i * P + k] / Math.sqrt(P);
    const qTensor = new ort.Tensor('float32', qT, [P, N]);
    const out = new Float32Array(C);
    for (let a = 0; a < C; a += chunk) {
      const k = Math.min(chunk, C - a);
      const res = await codesSession.run({
        codes: new ort.Tensor('uint16', codes16.subarray(a * M * W, (a + k) * M * W), [k, M, W]),
        norms: new ort.Tensor('float32', norms.subarray(a * M, (a + k) * M), [k, M, 1]),
        query_t: qTensor,
      });
      out.set(res.scores!.data as Float32Array, a);
    }
    return out;
  };

  // correctness: both ONNX paths against the library's exact rotated-domain MaxSim
  const sub = 100;
  const libRotated = () => {
    const rq = codec.rotateQuery(q, D, seed);
    const out = new Float64Array(sub);
    for (let c = 0; c < sub; c++) {
      out[c] = maxsimOfSimilarities(codec.scoreRotated(rq, docOf(c), M, D), N, M);
    }
    return out;
  };
  const fp32Scores = await fp32Run();
  const imageScores = await imageRun();
  const codesScores = await codesRun();
  const lib = libRotated();
  let imageDiff = 0;
  let codesDiff = 0;
  for (let c = 0; c < sub; c++) {
    imageDiff = Math.max(imageDiff, Math.abs(imageScores[c] - lib[c]));
    codesDiff = Math.max(codesDiff, Math.abs(codesScores[c] - lib[c]));
  }
  let quantErr = 0;
  let imageErr = 0;
  for (let c = 0; c < C; c++) {
    quantErr += Math.abs(codesScores[c] - fp32Scores[c]) / C;
    imageErr += Math.abs(imageScores[c] - fp32Scores[c]) / C;
  }

  const rounds = quick ? 3 : 9;
  log('score bench: compressed, rotated int8 image (interleaved with fp32 MaxSim)...');
  const [fp32A, imageMs] = await interleaved(fp32Run, imageRun, rounds, 1);
  log('score bench: compressed, from packed codes (interleaved with fp32 MaxSim)...');
  const [fp32B, codesMs] = await interleaved(fp32Run, codesRun, rounds, 1);
  // Against the fastest fp32 MaxSim of this bench (one tensor, equal lengths, no Gather), too.
  log('score bench: compressed, rotated int8 image (interleaved with single-tensor fp32 MaxSim)...');
  const single = await OnnxMaxsim.create({ intraOpThreads: threads, chunkFloats: C * M * D });
  const [singleMs, imageMs2] = await interleaved(() => single.score(q, N, docs, offsets, D), imageRun, rounds, 1);
  await single.release();
  const libRotatedMs = (await timeIt(libRotated, quick ? 1 : 2, 0)) * (C / sub);
  await codesSession.release();
  await rotated.release();
  await gemm.release();

  const fp32Ms = (fp32A + fp32B) / 2;
  const result: Record<string, number> = {
    compressed_bits: BITS,
    compressed_bytes_per_token: bytesPerToken,
    compressed_encode_ms: encodeMs,
    compressed_image_build_ms: imageBuildMs,
    compressed_fp32_maxsim_ms: fp32Ms,
    compressed_image_ms: imageMs,
    compressed_image_ratio: imageMs / fp32A,
    compressed_single_tensor_fp32_ms: singleMs,
    compressed_image_vs_single_tensor_ratio: imageMs2 / singleMs,
    compressed_codes_ms: codesMs,
    compressed_codes_ratio: codesMs / fp32B,
    compressed_library_rotated_ms: libRotatedMs,
    compressed_library_rotated_ratio: libRotatedMs / fp32Ms,
    compressed_image_vs_library_max_abs_diff: imageDiff,
    compressed_codes_vs_library_max_abs_diff: codesDiff,
    compressed_mean_abs_score_error_vs_fp32: quantErr,
    compressed_image_mean_abs_score_error_vs_fp32: imageErr,
  };
  const f = (x: number, p = 2) => x.toFixed(p);
  const rowsOut: [string, string][] = [
    [`Compressed EDEN ${BITS}b token (${f(bytesPerToken)} B/tok): int8 rotated image`, `${f(imageMs)} ms = ${f(imageMs / fp32A)}x fp32 MaxSim (GemmMaxsim ${f(fp32A)} ms alongside); image built at load in ${f(imageBuildMs)} ms; max |diff| vs exact ${imageDiff.toExponential(1)}`],
    ['Compressed: int8 image vs single-tensor fp32 MaxSim', `${f(imageMs2)} ms = ${f(imageMs2 / singleMs)}x (OnnxMaxsim, equal lengths, no Gather: ${f(singleMs)} ms alongside)`],
    ['Compressed: from packed codes every request (ONNX Gather)', `${f(codesMs)} ms = ${f(codesMs / fp32B)}x fp32 MaxSim (${f(fp32B)} ms alongside), max |diff| vs exact ${codesDiff.toExponential(1)}`],
    ['Compressed: library JS scoreRotated (extrapolated from 100)', `${f(libRotatedMs, 0)} ms (${f(libRotatedMs / fp32Ms, 1)}x)`],
    ['Compressed: mean |score - fp32 score|', `codes ${quantErr.toExponential(2)}, int8 image ${imageErr.toExponential(2)}`],
  ];
  return { result, rows: rowsOut };
}

/**
 * AESI codec math (the decode every read of an AESI-coded generation runs, and the write's encode):
 * d = s = 384 (MiniLM's contextual and static dims), c = 16, widths 384 and 1536 (the paper's),
 * 256 tokens; `aesiDecode` (tokens in blocks of AESI_TOKEN_BLOCK) timed in alternation with the
 * per-token loop it replaced, same inputs, results checked equal. Ratio = per-token / blocked.
 */
async function aesiCase(quick: boolean, log: (m: string) => void): Promise<{ result: Record<string, unknown>; rows: [string, string][] }> {
  const result: Record<string, unknown> = {};
  const rows: [string, string][] = [];
  const r = seededUniform(11);
  const m = 256, d = 384, c = 16;
  for (const width of [384, 1536]) {
    log(`score bench: AESI decode, width ${width}...`);
    const shape = { inputDims: d, sideDims: d, codeDims: c, width };
    const dec = Float32Array.from({ length: aesiDecoderLength(shape) }, () => (r() * 2 - 1) * 0.05);
    const z = Float32Array.from({ length: m * c }, () => r() * 2 - 1);
    const u = Float32Array.from({ length: m * d }, () => (r() * 2 - 1) * 0.1);
    const blocked = aesiDecode(shape, dec, z, u, m);
    const plain = aesiTwoLayerPerToken(dec, z, c, u, d, m, width, d);
    if (blocked.some((x, i) => x !== plain[i])) throw new Error(`AESI width ${width}: the blocked decode differs from the per-token loop`);
    const [blockedMs, plainMs] = await interleaved(async () => aesiDecode(shape, dec, z, u, m), async () => aesiTwoLayerPerToken(dec, z, c, u, d, m, width, d), quick ? 3 : 7, 1);
    const macs = m * ((c + d) * width + width * d);
    result[`aesi_decode_h${width}_tokens_per_s`] = (m / blockedMs) * 1000;
    result[`aesi_decode_h${width}_per_token_loop_tokens_per_s`] = (m / plainMs) * 1000;
    result[`aesi_decode_h${width}_speedup`] = plainMs / blockedMs;
    rows.push([`AESI decode (JS), d = s = 384, c = 16, h = ${width}, ${m} tokens`, `${((m / blockedMs) * 1000).toFixed(0)} tokens/s (${(macs / blockedMs / 1e6).toFixed(2)} GMAC/s), ${(plainMs / blockedMs).toFixed(2)}x the per-token loop (${((m / plainMs) * 1000).toFixed(0)} tokens/s)`]);
  }
  return { result, rows };
}

/**
 * The numeric kernels of @lateral/simd (simdCase): each workload run on the JavaScript kernels and
 * on the WebAssembly SIMD module in alternation (useKernels), the same inputs, results checked
 * equal bit for bit; ratio = JS / WASM. Workloads: scoring's maxsimBatch (re-rank: 200 candidates
 * x 180 tokens x 128 vs 32 query tokens), exhaustive search of one segment (500 documents x 100
 * tokens), k-means' assignNearest (2,048 points x 1,024 centroids x 128), and on benchWarp's
 * segment (100,000 tokens, K = 1,024, b = 4, 32 query tokens, nprobe 32): Q C^T, the lookup
 * tables, the lookup-sums over the probed lists, XTR's scoreRows over the same rows of float32
 * vectors, and the whole per-segment WARP and XTR searches. Then the scoreRows variants of the
 * module (rows gathered into its memory) against the JavaScript kernel on 32 x 3,000 rows of a
 * 65,536-row chunk (XTR's shape): the basis of the choice in docs/benchmarks.md.
 */
async function simdCase(quick: boolean, log: (m: string) => void): Promise<{ result: Record<string, unknown>; rows: [string, string][] }> {
  const wasm = wasmKernels();
  const status = simdStatus();
  if (!wasm) return { result: { simd_kind: status.kind, simd_reason: status.reason }, rows: [['@lateral/simd', `JavaScript kernels only: ${status.reason}`]] };
  const rounds = quick ? 3 : 9;
  const alternate = <T>(run: () => T) => alternateKernels(wasm, rounds, 2, run);
  const same = (a: ArrayLike<number>, b: ArrayLike<number>) => a.length === b.length && Array.prototype.every.call(a, (v: number, i: number) => Object.is(v, b[i]));
  const r = seededUniform(21);
  const result: Record<string, unknown> = { simd_kind: status.kind };
  const rows: [string, string][] = [];
  const f = (x: number, p = 2) => x.toFixed(p);
  const record = (key: string, label: string, m: { js: number; wasm: number }, equal: boolean | null) => {
    if (equal === false) throw new Error(`simd bench: ${label}: the WebAssembly result differs from the JavaScript one`);
    result[`simd_${key}_js_ms`] = m.js;
    result[`simd_${key}_wasm_ms`] = m.wasm;
    result[`simd_${key}_speedup`] = m.js / m.wasm;
    rows.push([`SIMD ${label}`, `JS ${f(m.js)} ms, WASM ${f(m.wasm)} ms: ${f(m.js / m.wasm)}x${equal ? ' (equal bit for bit)' : ''}`]);
  };

  log('score bench: @lateral/simd, MaxSim maxima (maxsimBatch, exhaustive, k-means)...');
  const Cb = 200;
  const q = randomUnit(r, N, D);
  const docs = randomUnit(r, Cb * M, D);
  const offsets = Uint32Array.from({ length: Cb + 1 }, (_, c) => c * M);
  const mb = alternate(() => maxsimBatch(q, N, docs, offsets, D));
  record('maxsim_batch', `maxsimBatch (re-rank), ${Cb} x ${M} x ${D} vs ${N}`, mb, same(mb.out[0], mb.out[1]));

  const docsN = 500, L = 100;
  const segVectors = randomUnit(r, docsN * L, D);
  const tokenOffsets = Uint32Array.from({ length: docsN + 1 }, (_, i) => i * L);
  const segment = searchSegment({
    name: 'simd-bench', documents: docsN, dims: D, docIds: Array.from({ length: docsN }, (_, i) => `d${i}`), tokenOffsets, tokenIds: new Int32Array(docsN * L), docVectors: null,
    metadata: () => null, decodeAll: () => segVectors,
  } as SegmentSource);
  const ex = alternate(() => exhaustiveSegmentSearch(segment, q, N, 100));
  record('exhaustive', `exhaustive search, ${docsN} documents x ${L} tokens x ${D} vs ${N}, top-100`, ex, same(ex.out[0].scores, ex.out[1].scores) && same(ex.out[0].docs, ex.out[1].docs));

  const points = randomUnit(r, 2048, D);
  const cents = randomUnit(r, 1024, D);
  const km = alternate(() => assignNearest(points, 2048, cents, 1024, D));
  record('kmeans_assign', `k-means assignNearest, 2048 points x 1024 centroids x ${D}`, km, same(km.out[0].similarity, km.out[1].similarity) && same(km.out[0].index, km.out[1].index));

  log('score bench: @lateral/simd, WARP kernels and searches on benchWarp\'s segment...');
  const fx = warpBenchFixture({});
  const { centroidScores, tables, lookups, float, warpSearch, xtrSearch } = fx.runs;
  record('warp_centroid_scores', `WARP Q C^T (${fx.shape.n} x ${fx.shape.centroids} x ${fx.shape.dims})`, alternate(centroidScores), null);
  record('warp_tables', `WARP lookup tables (${fx.shape.n} tokens, b = ${fx.shape.bits})`, alternate(tables), null);
  record('warp_lookups', `WARP lookup-sums over the probed lists (${fx.shape.scoredPerQuery} token scores)`, alternate(lookups), null);
  record('xtr_score_rows', 'XTR scoreRows over the same rows (float32 vectors)', alternate(float), null);
  const ws = alternate(warpSearch);
  record('warp_search', 'WARP whole segment search (query + segment, top-100)', ws, null);
  record('xtr_search', 'XTR whole segment search (probe + search, top-100)', alternate(xtrSearch), null);
  if (fx.sink() === 42.4242) console.log('');

  log('score bench: @lateral/simd, scoreRows variants...');
  const T = 65_536;
  const tokens = randomUnit(r, T, D);
  const list = Uint32Array.from({ length: 3000 }, (_, i) => Math.floor((i * T) / 3000));
  const out = new Float64Array(3000);
  const variants: ScoreRowsVariant[] = ['js', 'scalar', 'pairs', 'f32'];
  const vt: number[][] = variants.map(() => []);
  const runVariant = (v: ScoreRowsVariant) => { for (let i = 0; i < N; i++) wasm.scoreRowsWith(v, q, i * D, tokens, 0, D, list, 0, list.length, out); };
  variants.forEach(runVariant);
  for (let k = 0; k < rounds; k++) {
    variants.forEach((v, i) => {
      const s = performance.now();
      runVariant(v);
      vt[i].push(performance.now() - s);
    });
  }
  const vm = vt.map(median);
  variants.forEach((v, i) => { result[`simd_score_rows_${v}_ms`] = vm[i]; });
  rows.push(['SIMD scoreRows variants, 32 x 3000 rows of 65,536 x 128', variants.map((v, i) => `${v} ${f(vm[i])} ms (${f(vm[0] / vm[i])}x)`).join(', ')]);
  return { result, rows };
}

/**
 * End to end in process on real vectors (`--simd-cranfield`, simdCranfieldCase): Cranfield's
 * 1,400 documents and its queries encoded by glove-ctx-100d (d = 100; .cache/models), one segment.
 * Timed on the JavaScript kernels and the module in alternation, hits checked equal: an IVF fit
 * (k-means, K = 256 on 8,192 sampled tokens), exhaustive MaxSim over every document for the first
 * 50 queries, and WARP (b = 4 codec fitted on the residuals, layout built, nprobe 4 of 256) for the same
 * queries, top-100.
 */
async function simdCranfieldCase(quick: boolean, log: (m: string) => void): Promise<{ result: Record<string, unknown>; rows: [string, string][] }> {
  const wasm = wasmKernels();
  if (!wasm) return { result: {}, rows: [['@lateral/simd, Cranfield', `JavaScript kernels only: ${simdStatus().reason}`]] };
  log('score bench: @lateral/simd on Cranfield (glove-ctx-100d): encoding...');
  const data = loadCranfield(resolve('data/cranfield'));
  const enc = await TokenEncoder.load(resolve('.cache/models/glove-ctx-100d'), { executionProvider: 'cpu' });
  const d = enc.dims;
  const docs = await enc.encodeDocuments(data.docs.map((x) => x.text));
  const queries = await enc.encodeQueries(data.queries.map((x) => x.text));
  const D = docs.length;
  const tokenOffsets = new Uint32Array(D + 1);
  docs.forEach((e, i) => { tokenOffsets[i + 1] = tokenOffsets[i] + e.length; });
  const T = tokenOffsets[D];
  const vectors = new Float32Array(T * d);
  docs.forEach((e, i) => vectors.set(e.vectors, tokenOffsets[i] * d));
  const segment = searchSegment({
    name: 'cranfield', documents: D, dims: d, docIds: data.docs.map((x) => x.id), tokenOffsets, tokenIds: new Int32Array(T), docVectors: null,
    metadata: () => null, decodeAll: () => vectors,
  } as SegmentSource);
  const qs = queries.filter((q) => q.length > 0).slice(0, 50);
  const rounds = quick ? 2 : 5;
  const alternate = <T>(run: () => T) => alternateKernels(wasm, rounds, 1, run);
  const sameHits = (a: { doc: number; score: number }[][], b: { doc: number; score: number }[][]) => a.every((h, i) => h.length === b[i].length && h.every((x, j) => x.doc === b[i][j].doc && Object.is(x.score, b[i][j].score)));
  log(`score bench: @lateral/simd on Cranfield: ${D} documents, ${T} tokens, ${qs.length} queries...`);
  const fit = alternate(() => fitIvfCentroids(vectors, T, d, { seed: 1, k: 256, sampleSize: 8192 }));
  if (!Object.is(fit.out[0].centroids.reduce((x, y) => x + y, 0), fit.out[1].centroids.reduce((x, y) => x + y, 0))) throw new Error('simd bench: Cranfield IVF fit differs');
  const ex = alternate(() => qs.map((q) => exhaustiveSearch([{ segment }], q.vectors, q.length, 100)));
  if (!sameHits(ex.out[0], ex.out[1])) throw new Error('simd bench: Cranfield exhaustive hits differ');
  const { centroids, k } = fit.out[1];
  const assignment = assignNearest(vectors, T, centroids, k, d).index;
  const codec = fitWarpCodec(warpResiduals(vectors, T, d, centroids, assignment), T, d, 4);
  const layout = buildWarpLayout({ vectors, dims: d, tokenOffsets, centroids, codec, assignment });
  const lists = warpLayoutLists(layout);
  const sizes = warpListSizes([layout]);
  const nprobe = Math.min(4, k); // 4 of 256 lists (1/64) per query token
  const wp = alternate(() => qs.map((q) => warpSearch([{ documents: D, docBase: 0, lists }], q.vectors, q.length, centroids, codec, sizes, { nprobe, topN: 100 }).hits));
  if (!sameHits(wp.out[0], wp.out[1])) throw new Error('simd bench: Cranfield WARP hits differ');
  const f = (x: number, p = 1) => x.toFixed(p);
  const per = (ms: number) => f(ms / qs.length, 2);
  return {
    result: {
      simd_cranfield_tokens: T, simd_cranfield_centroids: k, simd_cranfield_queries: qs.length,
      simd_cranfield_ivf_fit_js_ms: fit.js, simd_cranfield_ivf_fit_wasm_ms: fit.wasm,
      simd_cranfield_exhaustive_js_ms_per_query: ex.js / qs.length, simd_cranfield_exhaustive_wasm_ms_per_query: ex.wasm / qs.length,
      simd_cranfield_warp_js_ms_per_query: wp.js / qs.length, simd_cranfield_warp_wasm_ms_per_query: wp.wasm / qs.length,
    },
    rows: [
      [`SIMD Cranfield IVF fit (k-means, 8,192 of ${T} tokens x ${d}, K = ${k})`, `JS ${f(fit.js)} ms, WASM ${f(fit.wasm)} ms: ${f(fit.js / fit.wasm, 2)}x (same centroids)`],
      [`SIMD Cranfield exhaustive MaxSim, ${D} documents, per query (${qs.length} queries)`, `JS ${per(ex.js)} ms, WASM ${per(ex.wasm)} ms: ${f(ex.js / ex.wasm, 2)}x (same hits)`],
      [`SIMD Cranfield WARP (b = 4, nprobe ${nprobe}), per query`, `JS ${per(wp.js)} ms, WASM ${per(wp.wasm)} ms: ${f(wp.js / wp.wasm, 2)}x (same hits)`],
    ],
  };
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
  one section alone: [--aesi-only | --simd-only | --simd-cranfield | --warp-only]
  --quick           fewer repetitions
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
      threads: { type: 'string', default: '2' },
      'warp-bits': { type: 'string', default: '4' },
      'warp-centroids': { type: 'string', default: '1024' },
      json: { type: 'boolean' },
    },
    {},
    ({ values: v }) => {
      const bits = Number(v['warp-bits']) as 2 | 4;
      if (bits !== 2 && bits !== 4) throw new CliUsageError(`--warp-bits must be 2 or 4, got ${v['warp-bits']}`);
      return { ...v, threads: intFlag('threads', v.threads), warp: { bits, centroids: intFlag('warp-centroids', v['warp-centroids'], 2) } };
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
  ];
  const w = Math.max(...rows.map(([k]) => k.length));
  console.log(rows.map(([k, v]) => `${k.padEnd(w)}  ${v}`).join('\n'));
  return result;
}

if (process.argv[1] && import.meta.url === pathToFileURL(resolve(process.argv[1])).href) {
  runScoreBench(process.argv.slice(2))
    .then((res) => { if (process.argv.includes('--json')) console.log(JSON.stringify(res)); })
    .catch((err: unknown) => {
      console.error(err instanceof Error ? err.stack : err);
      process.exit(1);
    });
}

/**
 * Median ms of run() on the JavaScript and the WebAssembly kernels, alternated round by round
 * after `warmRuns` untimed runs on each (the last one's result kept); and the two results.
 */
function alternateKernels<T>(wasm: Kernels, rounds: number, warmRuns: number, run: () => T): { js: number; wasm: number; out: T[] } {
  const sets: Kernels[] = [jsKernels, wasm];
  const out = sets.map((k) => {
    useKernels(k);
    for (let w = 1; w < warmRuns; w++) run();
    return run();
  });
  const t: number[][] = [[], []];
  for (let r = 0; r < rounds; r++) {
    sets.forEach((k, i) => {
      useKernels(k);
      const s = performance.now();
      run();
      t[i].push(performance.now() - s);
    });
  }
  useKernels(null);
  return { js: median(t[0]), wasm: median(t[1]), out };
}
