/**
 * `npx tsx scripts/bench/first-fit-retrieval.ts --raw DIR --dataset DIR [--first-tokens N] [--max-tokens N] [--variants 32x4,16x2] [--nprobes 8,32]`
 *
 * WARP retrieval with a collection's first centroid fit at several sample sizes and iteration
 * counts (issue 29: libs/pipeline/src/ingest/segment-indexer.ts, SAMPLE_PER_CENTROID and
 * FIRST_FIT_ITERATIONS), on real token vectors: the raw fp16 batches of a kept collection (DIR: an
 * s3rver folder's `raw/` of a `bench peers --data` run over a TREC or Glasgow dataset, e.g.
 * Vaswani). As the index job does it: the first batches up to `--first-tokens` are the first
 * segment, K by PLAID's rule on it, the variant's seeded sample normalised and fitted (spherical
 * k-means), that segment's tokens assigned, the WARP codec fitted on up to 65,536 of their
 * residuals; then every loaded document (up to `--max-tokens` tokens) goes into one layout at those
 * centroids and the dataset's judged queries are searched by WARP's rule (missing tokens imputed)
 * at each nprobe: nDCG@10 and recall@100 over the documents loaded, per variant.
 */
import { readFileSync, readdirSync } from 'node:fs';
import path from 'node:path';
import { mulberry32 } from '@lateral/shared';
import { readSegment } from '@lateral/codec';
import { getEncoder } from '@lateral/model';
import { buildWarpLayout, centroidsChecksum, distinctSample, fitWarpCodec, ivfCentroidCount, normalizeRows, openWarpLayout, serializeWarpLayout, warpListSizes, warpQuery, warpScoreList } from '@lateral/search';
import { OnnxNearestCentroid, onnxSphericalKmeans } from '@lateral/kernels';
import { CliUsageError, intFlag, intListFlag, parseCliOrExit } from '../lib/cli';
import { hasRelevant } from '../lib/metrics';
import { loadRetrievalDataset } from '../lib/retrieval-dataset';
import { queryMetrics } from '../eval/retrieval';

async function main() {
  const o = parseCliOrExit(
    'first-fit-retrieval',
    'usage: first-fit-retrieval --raw DIR --dataset DIR [--first-tokens N (45000)] [--max-tokens N (250000)] [--variants 32x4,16x2] [--nprobes 8,32] [--model DIR (.cache/models/minilm-l6-384)]',
    process.argv.slice(2),
    { raw: { type: 'string' }, dataset: { type: 'string' }, 'first-tokens': { type: 'string', default: '45000' }, 'max-tokens': { type: 'string', default: '250000' }, variants: { type: 'string', default: '32x4,16x2' }, nprobes: { type: 'string', default: '8,32' }, model: { type: 'string', default: '.cache/models/minilm-l6-384' } },
    {},
    ({ values: v }) => {
      if (!v.raw || !v.dataset) throw new CliUsageError('--raw DIR and --dataset DIR are required');
      const variants = v.variants.split(',').map((s) => {
        const m = /^(\d+)x(\d+)$/.exec(s.trim());
        if (!m) throw new CliUsageError(`--variants: PERxITERATIONS items, e.g. 32x4 (got ${s})`);
        return { per: Number(m[1]), iterations: Number(m[2]) };
      });
      return { raw: v.raw, dataset: v.dataset, first: intFlag('first-tokens', v['first-tokens']), max: intFlag('max-tokens', v['max-tokens']), variants, nprobes: intListFlag('nprobes', v.nprobes), model: v.model };
    },
  );
  const files = readdirSync(o.raw).filter((f) => f.endsWith('.seg._S3rver_object')).sort();
  let d = 0;
  const parts: Float32Array[] = [];
  const ids: string[] = [];
  const offsets: number[] = [0];
  let T = 0;
  let firstT = 0;
  for (const f of files) {
    const r = readSegment(new Uint8Array(readFileSync(path.join(o.raw, f))), f);
    if (T + r.tokens > o.max) break;
    d = r.dims;
    parts.push(r.decodeAll());
    for (let i = 0; i < r.documents; i++) {
      ids.push(r.docIds[i]);
      offsets.push(T + r.tokenOffsets[i + 1]);
    }
    T += r.tokens;
    if (firstT < o.first) firstT = T;
  }
  const X = new Float32Array(T * d);
  let at = 0;
  for (const p of parts) {
    X.set(p, at);
    at += p.length;
  }
  const tokenOffsets = Uint32Array.from(offsets);
  const ds0 = loadRetrievalDataset(path.resolve(o.dataset));
  const keep = new Set(ids);
  const qrels = new Map([...ds0.qrels].map(([q, m]) => [q, new Map([...m].filter(([doc]) => keep.has(doc)))] as const));
  const judged = ds0.queries.filter((q) => hasRelevant(qrels.get(q.id)));
  const k = Math.min(firstT, ivfCentroidCount(firstT));
  console.log(`${ids.length} documents, ${T} tokens (d ${d}); first segment ${firstT} tokens -> K ${k}; ${judged.length} judged queries`);
  const encoder = await getEncoder(path.resolve(o.model), { executionProvider: 'cpu' });
  const enc = await encoder.encodeQueries(judged.map((q) => q.text));
  const assigner = await OnnxNearestCentroid.create();
  const first = X.subarray(0, firstT * d);
  for (const v of o.variants) {
    const n = Math.min(firstT, Math.max(v.per * k, 4096));
    const rows = distinctSample(firstT, n, mulberry32(1)).sort();
    const sample = new Float32Array(n * d);
    rows.forEach((r, i) => sample.set(first.subarray(r * d, r * d + d), i * d));
    const t0 = performance.now();
    const centroids = await onnxSphericalKmeans(assigner, normalizeRows(sample, n, d), n, d, distinctSample(n, k, mulberry32(2)), v.iterations);
    const fitMs = performance.now() - t0;
    const { nearest: firstNearest } = await assigner.assign(first, firstT, centroids, k, d);
    const m = Math.min(firstT, 65_536);
    const cr = distinctSample(firstT, m, mulberry32(3)).sort();
    const residuals = new Float32Array(m * d);
    cr.forEach((r, i) => {
      for (let j = 0; j < d; j++) residuals[i * d + j] = first[r * d + j] - centroids[firstNearest[r] * d + j];
    });
    const codec = fitWarpCodec(residuals, m, d, 4);
    const { nearest } = await assigner.assign(X, T, centroids, k, d);
    const layout = openWarpLayout(serializeWarpLayout(buildWarpLayout({ vectors: X, dims: d, tokenOffsets, centroids, codec, assignment: nearest, centroidsChecksum: centroidsChecksum(centroids) })), 'probe');
    const sizes = warpListSizes([layout.directory]);
    const row: Record<string, unknown> = { sample: n, per_centroid: +(n / k).toFixed(1), iterations: v.iterations, fit_ms: Math.round(fitMs) };
    for (const nprobe of o.nprobes) {
      let nd = 0;
      let rc = 0;
      for (let qi = 0; qi < judged.length; qi++) {
        const e = enc[qi];
        const qn = e.length;
        const q = warpQuery(e.vectors, qn, centroids, codec, sizes, { nprobe, bound: 128 });
        const best = new Map<number, Float64Array>();
        for (let i = 0; i < qn; i++) {
          for (let p = 0; p < nprobe; p++) {
            const c = q.probes[i * nprobe + p];
            const list = layout.list(c);
            if (list.count === 0) continue;
            const sc = warpScoreList(q, i, q.probeScores[i * nprobe + p], list, new Float64Array(list.count));
            for (let j = 0; j < list.count; j++) {
              const g = list.docs[j];
              let b = best.get(g);
              if (!b) best.set(g, (b = new Float64Array(qn).fill(-Infinity)));
              if (sc[j] > b[i]) b[i] = sc[j];
            }
          }
        }
        const scores: [number, number][] = [];
        for (const [g, b] of best) {
          let s = 0;
          for (let i = 0; i < qn; i++) s += b[i] === -Infinity ? q.imputed[i] : b[i];
          scores.push([g, s / qn]);
        }
        scores.sort((a, b) => b[1] - a[1] || a[0] - b[0]);
        const met = queryMetrics(scores.slice(0, 100).map(([g]) => ids[g]), qrels.get(judged[qi].id)!);
        nd += met.ndcg;
        rc += met.recall;
      }
      row[`ndcg10_np${nprobe}`] = +(nd / judged.length).toFixed(4);
      row[`recall100_np${nprobe}`] = +(rc / judged.length).toFixed(4);
    }
    console.log(JSON.stringify(row));
  }
  await assigner.release();
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
