/**
 * `npm run bench -- refit [--centroids K] [--dims D] [--tokens T] [--rounds R] [--threads N] [--json] [--help]`
 *
 * What a WARP refit (libs/pipeline/src/maintenance/warp-refit.ts) costs at K centroids, flat
 * against two-level, on one synthetic sample (unit rows around 2,000 random centres, seeded): the
 * k-means on 8 x K sampled rows (onnxSphericalKmeans against onnxTwoLevelKmeans, 4 Lloyd steps
 * each), and the assignment of T token rows to the fitted centroids (OnnxNearestCentroid.assign
 * against groupCentroids + assignGrouped with 8 probed groups, as a refit epoch's layouts are
 * built). Reports each time, the ratios flat / two-level (alternated over `--rounds`, medians),
 * the two fits' mean inner product of the sample with its nearest centroid, and the share of
 * tokens the grouped assignment gives their exact nearest centroid.
 */
import { mulberry32 } from '@lateral/shared';
import { distinctSample, normalizeRows } from '@lateral/search';
import { OnnxNearestCentroid, groupCentroids, onnxSphericalKmeans, onnxTwoLevelKmeans } from '@lateral/kernels';
import { GROUPED_ASSIGN_PROBES } from '@lateral/pipeline';
import { intFlag, parseCliOrExit } from '../lib/cli';

const USAGE = 'usage: npm run bench -- refit [--centroids K (4096)] [--dims D (100)] [--tokens T (200000)] [--rounds R (2)] [--threads N (0: all cores)] [--json]';

/** n unit rows around `centres` seeded random centres. */
function clustered(n: number, d: number, centres: Float32Array, rand: () => number): Float32Array {
  const gauss = () => Math.sqrt(-2 * Math.log(1 - rand())) * Math.cos(2 * Math.PI * rand());
  const count = centres.length / d;
  const x = new Float32Array(n * d);
  for (let i = 0; i < n; i++) {
    const c = Math.floor(rand() * count);
    for (let j = 0; j < d; j++) x[i * d + j] = centres[c * d + j] + 0.5 * gauss();
  }
  return normalizeRows(x, n, d);
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

export async function runRefitBench(argv: string[]): Promise<Record<string, unknown>> {
  const opts = parseCliOrExit('bench refit', USAGE, argv, {
    centroids: { type: 'string', default: '4096' },
    dims: { type: 'string', default: '100' },
    tokens: { type: 'string', default: '200000' },
    rounds: { type: 'string', default: '2' },
    threads: { type: 'string', default: '0' },
    json: { type: 'boolean', default: false },
    help: { type: 'boolean', short: 'h' },
  }, {}, ({ values }) => ({
    k: intFlag('centroids', values.centroids, 16),
    d: intFlag('dims', values.dims),
    tokens: intFlag('tokens', values.tokens),
    rounds: intFlag('rounds', values.rounds),
    threads: intFlag('threads', values.threads, 0),
  }));
  const { k, d, tokens, rounds } = opts;
  const n = 8 * k;
  const rand = mulberry32(1);
  const centres = new Float32Array(2000 * d).map(() => Math.sqrt(-2 * Math.log(1 - rand())) * Math.cos(2 * Math.PI * rand()));
  const sample = clustered(n, d, centres, rand);
  const rows = clustered(tokens, d, centres, rand);
  const assigner = await OnnxNearestCentroid.create(opts.threads);
  const pick = () => {
    const r = mulberry32(2);
    return (m: number, c: number) => distinctSample(m, c, r);
  };
  const t = { flatFit: [] as number[], twoFit: [] as number[], exact: [] as number[], grouped: [] as number[] };
  let fit = { flat: 0, two: 0 };
  let same = 0;
  for (let round = 0; round < rounds; round++) {
    let t0 = performance.now();
    const flat = await onnxSphericalKmeans(assigner, sample, n, d, pick()(n, k), 4);
    t.flatFit.push(performance.now() - t0);
    t0 = performance.now();
    const two = await onnxTwoLevelKmeans(assigner, sample, n, d, k, 4, pick());
    t.twoFit.push(performance.now() - t0);
    t0 = performance.now();
    const exact = await assigner.assign(rows, tokens, two.centroids, k, d);
    t.exact.push(performance.now() - t0);
    t0 = performance.now();
    const groups = await groupCentroids(assigner, two.centroids, k, d, 4, pick());
    const grouped = await assigner.assignGrouped(rows, tokens, two.centroids, k, d, groups, GROUPED_ASSIGN_PROBES);
    t.grouped.push(performance.now() - t0);
    const [fa, fb] = await Promise.all([assigner.assign(sample, n, flat, k, d), assigner.assign(sample, n, two.centroids, k, d)]);
    fit = { flat: fa.similarity.reduce((a, b) => a + b, 0) / n, two: fb.similarity.reduce((a, b) => a + b, 0) / n };
    same = 0;
    for (let i = 0; i < tokens; i++) if (grouped.nearest[i] === exact.nearest[i]) same++;
    console.log(`round ${round + 1}: k-means flat ${t.flatFit[round].toFixed(0)} ms, two-level ${t.twoFit[round].toFixed(0)} ms; assignment exact ${t.exact[round].toFixed(0)} ms, grouped ${t.grouped[round].toFixed(0)} ms`);
  }
  await assigner.release();
  const result = {
    centroids: k,
    dims: d,
    sampleRows: n,
    tokens,
    rounds,
    kmeansMs: { flat: median(t.flatFit), twoLevel: median(t.twoFit) },
    kmeansSpeedup: median(t.flatFit) / median(t.twoFit),
    meanSimilarity: fit,
    assignMs: { exact: median(t.exact), grouped: median(t.grouped) },
    assignSpeedup: median(t.exact) / median(t.grouped),
    groupedSameNearest: same / tokens,
  };
  console.log(
    `refit at K = ${k}, d = ${d}: k-means on ${n} rows ${result.kmeansSpeedup.toFixed(1)}x faster in two levels (mean similarity ${fit.two.toFixed(4)} against ${fit.flat.toFixed(4)}); assigning ${tokens} tokens ${result.assignSpeedup.toFixed(1)}x faster grouped (${(100 * result.groupedSameNearest).toFixed(2)}% given their exact nearest)`,
  );
  return result;
}
