/**
 * The score bench's compressed-scoring and AESI cases (score.ts: --aesi-only and the default run).
 */
import { maxsimOfSimilarities } from '@lateral/scoring';
import { createScorerSession, floatTensor, GemmMaxsim, GraphBuilder, int64Tensor, makeModel, makeValueInfo, RotatedMaxsim, seededUniform, type RotatedImageSet } from '@lateral/kernels';
import { aesiDecode, aesiDecoderLength, aesiTwoLayerPerToken, createCodec, lloydMax, type EdenCodec } from '@lateral/codec';
import { OnnxMaxsim } from './maxsim-single-tensor';
import * as ort from 'onnxruntime-node';
import { C, M, D, N, timeIt, interleaved } from './score-timing';

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
export async function compressedCase(
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
export async function aesiCase(quick: boolean, log: (m: string) => void): Promise<{ result: Record<string, unknown>; rows: [string, string][] }> {
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
