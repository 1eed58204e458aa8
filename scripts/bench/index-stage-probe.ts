/**
 * `npx tsx scripts/bench/index-stage-probe.ts [--docs N (512)] [--rounds N (3)]`
 *
 * Where the index stage's time goes (issue 29): the `bench ingest` documents (the first N of
 * Cranfield) encoded once as the service encodes them, in encode jobs of ENCODE_BATCH_DOCUMENTS,
 * each written as an fp16 segment (cached under DATA_DIR/index-probe, keyed by N and the model),
 * then in every round a fresh collection's index work on those segments phase by phase, as
 * segmentSearchObjects (libs/pipeline/src/ingest/segment-indexer.ts) does it: segment read,
 * fp16 decode, the first segment's centroid fit (sample, normalisation, k-means in ONNX Runtime),
 * every token's nearest centroid (ONNX Runtime GEMM + ArgMax), segment index (IVF + BM25),
 * WARP codec fit (residual sample, per-dimension quantiles), WARP layout (residual codes) and
 * the serialisations. Per phase: wall ms and this process's CPU ms (all threads, ONNX Runtime's
 * pool included), summed over the segments; the median over rounds. The whole
 * segmentSearchObjects is timed too, in the same rounds, as a check that the phases add up.
 */
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { CreateCollectionSchema, loadConfig, mulberry32, type Collection } from '@lateral/shared';
import { createCodec, readSegment, writeSegment, type SegmentReader } from '@lateral/codec';
import { getEncoder } from '@lateral/model';
import { OnnxNearestCentroid, onnxSphericalKmeans } from '@lateral/kernels';
import { RAW_CODEC, assembleSegmentDocs, specialTokenIds } from '@lateral/serving';
import { analyzeTexts, buildSegmentIndex, buildWarpLayout, centroidsChecksum, distinctSample, fitWarpCodec, ivfCentroidCount, normalizeRows, searchSegment, serializeSegmentIndex, serializeWarpLayout } from '@lateral/search';
import { FIRST_FIT_ITERATIONS, SAMPLE_PER_CENTROID, WARP_CODEC_SAMPLE, encoderDir, segmentSearchObjects, type SegmentIndexerDeps } from '@lateral/pipeline';
import { loadCranfield, withPlaceholders } from '../lib/cranfield';
import { intFlag, parseCliOrExit } from '../lib/cli';

async function main() {
  const o = parseCliOrExit('index-stage-probe', 'usage: index-stage-probe [--docs N (512)] [--rounds N (3)]', process.argv.slice(2), { docs: { type: 'string', default: '512' }, rounds: { type: 'string', default: '3' } }, {}, ({ values: v }) => ({
    docs: intFlag('docs', v.docs),
    rounds: intFlag('rounds', v.rounds),
  }));
  const config = loadConfig({ ...process.env, PORT: '0', LOG_LEVEL: 'warn', DATA_DIR: process.env.DATA_DIR ?? '.data/bench' });
  const docs = withPlaceholders(loadCranfield(path.resolve('data/cranfield')).docs.slice(0, o.docs));
  const encoder = await getEncoder(encoderDir(config.MODELS_DIR, config.DEFAULT_MODEL, config.ENCODER_PRECISION, 'cpu'), { executionProvider: 'cpu' });
  const batch = config.ENCODE_BATCH_DOCUMENTS;
  const dir = path.resolve(config.DATA_DIR, 'index-probe', `${encoder.manifest.name}-${o.docs}-${batch}`);
  mkdirSync(dir, { recursive: true });
  const segments: { bytes: Uint8Array; texts: string[] }[] = [];
  const codec = createCodec({ kind: 'fp16', layout: 'token', norms: 'fp32', sideInfo: false });
  for (let i = 0, b = 0; i < docs.length; i += batch, b++) {
    const chunk = docs.slice(i, i + batch);
    const file = path.join(dir, `${b}.seg`);
    if (!existsSync(file)) {
      const enc = await encoder.encodeDocuments(chunk.map((d) => d.text), { maxTokens: encoder.manifest.maxDocTokens, tokenBudget: config.ENCODE_TOKEN_BUDGET });
      const r = readSegment(writeSegment(assembleSegmentDocs(chunk.map((d) => d.id), enc, encoder.dims), RAW_CODEC), 'probe');
      writeFileSync(file, writeSegment({ docIds: r.docIds, tokenOffsets: r.tokenOffsets, tokenIds: r.tokenIds, vectors: r.decodeAll(), dims: r.dims, docVectors: r.docVectors ?? undefined }, codec));
    }
    segments.push({ bytes: new Uint8Array(readFileSync(file)), texts: chunk.map((d) => d.text) });
  }
  const assigner = await OnnxNearestCentroid.create(config.ORT_INTRA_OP_THREADS);
  const settings = CreateCollectionSchema.parse({ id: 'probe', model: config.DEFAULT_MODEL });
  const collection: Collection = { ...settings, tenantId: 'probe', model: config.DEFAULT_MODEL, dims: encoder.dims, maxDocTokens: encoder.manifest.maxDocTokens, codecVersion: 1, createdAt: new Date(0).toISOString() };
  const bits = collection.search?.layout === 'warp' ? collection.search.bits : 4;
  const skip = specialTokenIds(encoder);
  const rounds: Record<string, { wall: number; cpu: number }>[] = [];
  for (let round = 0; round < o.rounds; round++) {
    const phases: Record<string, { wall: number; cpu: number }> = {};
    const timed = async <T>(name: string, f: () => T | Promise<T>): Promise<T> => {
      const c0 = process.cpuUsage();
      const t0 = performance.now();
      const out = await f();
      const c = process.cpuUsage(c0);
      const p = (phases[name] ??= { wall: 0, cpu: 0 });
      p.wall += performance.now() - t0;
      p.cpu += (c.user + c.system) / 1000;
      return out;
    };
    // Phase by phase, as segmentSearchObjects.
    let ivf: { k: number; centroids: Float32Array } | undefined;
    let warpCodec: ReturnType<typeof fitWarpCodec> | undefined;
    for (const s of segments) {
      const reader: SegmentReader = await timed('segment read (checksums)', () => readSegment(s.bytes, 'probe'));
      const terms = await timed('BM25 terms (english analyser)', () => analyzeTexts(s.texts));
      const seg = searchSegment(reader);
      const d = reader.dims;
      const T = reader.tokens;
      const tokens = await timed('fp16 decode', () => seg.tokens);
      if (!ivf) {
        const k = Math.min(T, config.IVF_CENTROIDS || ivfCentroidCount(T));
        const n = Math.min(T, Math.max(SAMPLE_PER_CENTROID * k, 4096));
        const x = await timed('first fit: sample + normalise', () => {
          const rows = distinctSample(T, n, mulberry32(1)).sort();
          const sample = new Float32Array(n * d);
          rows.forEach((r, i) => sample.set(tokens.subarray(r * d, r * d + d), i * d));
          return normalizeRows(sample, n, d);
        });
        const centroids = await timed('first fit: k-means (ONNX Runtime)', () => onnxSphericalKmeans(assigner, x, n, d, distinctSample(n, k, mulberry32(2)), FIRST_FIT_ITERATIONS));
        ivf = { k, centroids };
      }
      const { nearest } = await timed('nearest centroid of every token (ONNX Runtime)', () => assigner.assign(tokens, T, ivf!.centroids, ivf!.k, d));
      const index = await timed('segment index (IVF + BM25)', () => buildSegmentIndex(seg, ivf!.centroids, d, { assignments: nearest, bm25Terms: terms, ...(settings.bm25.analyzer === 'english' ? {} : { bm25Skip: (id: number) => skip.has(id) }) }));
      await timed('segment index serialise', () => serializeSegmentIndex(index));
      if (!warpCodec) {
        warpCodec = await timed('WARP codec fit', () => {
          const n = Math.min(T, WARP_CODEC_SAMPLE);
          const rows = distinctSample(T, n, mulberry32(3)).sort();
          const residuals = new Float32Array(n * d);
          const c = ivf!.centroids;
          rows.forEach((r, i) => {
            const a = nearest[r];
            for (let j = 0; j < d; j++) residuals[i * d + j] = tokens[r * d + j] - c[a * d + j];
          });
          return fitWarpCodec(residuals, n, d, bits);
        });
      }
      const cc = await timed('centroids checksum', () => centroidsChecksum(ivf!.centroids));
      const layout = await timed('WARP layout (residual codes)', () => buildWarpLayout({ vectors: tokens, dims: d, tokenOffsets: seg.tokenOffsets, centroids: ivf!.centroids, codec: warpCodec!, assignment: nearest, centroidsChecksum: cc }));
      await timed('WARP layout serialise', () => serializeWarpLayout(layout));
    }
    // The same work through segmentSearchObjects itself (fresh in-memory repositories).
    const inMemory = <T>() => {
      let held: Promise<T> | undefined;
      return { ensure: (_t: string, _c: string, _v: number, fit: () => T | Promise<T>) => (held ??= Promise.resolve().then(fit)) };
    };
    const deps: SegmentIndexerDeps = { ivf: inMemory(), warpCodecs: inMemory(), encoders: () => Promise.resolve(encoder), ivfCentroids: config.IVF_CENTROIDS, assigner: () => Promise.resolve(assigner) };
    for (const s of segments) await timed('(check) segmentSearchObjects, whole', async () => segmentSearchObjects(deps, collection, readSegment(s.bytes, 'probe'), 1, analyzeTexts(s.texts)));
    rounds.push(phases);
    console.log(`round ${round + 1}/${o.rounds} (load ${readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ')})`);
  }
  const names = Object.keys(rounds[0]);
  const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor((xs.length - 1) / 2)];
  const tokens = segments.reduce((s, x) => s + readSegment(x.bytes, 'probe').tokens, 0);
  console.log(`index stage of ${docs.length} documents (${segments.length} segments, ${tokens} tokens), medians of ${o.rounds} rounds: wall ms / CPU ms (this process, all threads)`);
  let wall = 0;
  let cpu = 0;
  for (const name of names) {
    const w = median(rounds.map((r) => r[name].wall));
    const c = median(rounds.map((r) => r[name].cpu));
    if (!name.startsWith('(check)')) {
      wall += w;
      cpu += c;
    }
    console.log(`  ${name.padEnd(52)} ${w.toFixed(0).padStart(7)} ${c.toFixed(0).padStart(7)}`);
  }
  console.log(`  ${'sum of the phases'.padEnd(52)} ${wall.toFixed(0).padStart(7)} ${cpu.toFixed(0).padStart(7)}`);
  await assigner.release();
}

void main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
