/**
 * `npx tsx scripts/bench/first-fit-probe.ts --raw DIR [--first-tokens N] [--eval-tokens N] [--per 32,16,8] [--iterations 4]`
 *
 * The first IVF/WARP centroid fit of a collection (libs/pipeline/src/ingest/segment-indexer.ts) at
 * several sample sizes per centroid, on real token vectors: the raw fp16 batches of a kept
 * collection (DIR: an s3rver folder's `raw/`, e.g. a `bench peers --data` run's). The first
 * batches up to `--first-tokens` stand for the first indexed segment (K by PLAID's rule on them);
 * every variant is fitted on a seeded sample of it, then `--eval-tokens` tokens of the later
 * batches (held out) are assigned to its centroids: the mean inner product with the nearest
 * centroid (the k-means objective on unseen tokens, what a WARP residual has to code), the largest
 * list against the mean, and the fit's time (wall and this process's CPU). Issue 29: how few sampled tokens the first fit needs.
 */
import { readFileSync, readdirSync } from 'node:fs';
import path from 'node:path';
import { mulberry32 } from '@lateral/shared';
import { readSegment } from '@lateral/codec';
import { distinctSample, ivfCentroidCount, normalizeRows } from '@lateral/search';
import { OnnxNearestCentroid, onnxSphericalKmeans } from '@lateral/kernels';
import { intFlag, intListFlag, parseCliOrExit } from '../lib/cli';

async function main() {
  const o = parseCliOrExit('first-fit-probe', 'usage: first-fit-probe --raw DIR [--first-tokens N] [--eval-tokens N] [--per 32,16,8] [--iterations 4]', process.argv.slice(2), {
    raw: { type: 'string' }, 'first-tokens': { type: 'string', default: '45000' }, 'eval-tokens': { type: 'string', default: '100000' }, per: { type: 'string', default: '32,16,8' }, iterations: { type: 'string', default: '4' },
  }, {}, ({ values: v }) => ({ raw: v.raw!, first: intFlag('first-tokens', v['first-tokens']), evalTokens: intFlag('eval-tokens', v['eval-tokens']), per: intListFlag('per', v.per), iterations: intFlag('iterations', v.iterations) }));
  const files = readdirSync(o.raw).filter((f) => f.endsWith('.seg._S3rver_object')).sort();
  let d = 0;
  const first: Float32Array[] = [];
  const later: Float32Array[] = [];
  let firstT = 0;
  let laterT = 0;
  for (const f of files) {
    const r = readSegment(new Uint8Array(readFileSync(path.join(o.raw, f))), f);
    d = r.dims;
    const v = r.decodeAll();
    if (firstT < o.first) {
      first.push(v);
      firstT += r.tokens;
    } else {
      later.push(v);
      laterT += r.tokens;
      if (laterT >= 4 * o.evalTokens) break;
    }
  }
  const cat = (xs: Float32Array[], t: number) => {
    const out = new Float32Array(t * d);
    let at = 0;
    for (const x of xs) {
      out.set(x, at);
      at += x.length;
    }
    return out;
  };
  const X = normalizeRows(cat(first, firstT), firstT, d);
  const L = cat(later, laterT);
  const m = Math.min(laterT, o.evalTokens);
  const evalRows = distinctSample(laterT, m, mulberry32(9)).sort();
  const E = new Float32Array(m * d);
  evalRows.forEach((r, i) => E.set(L.subarray(r * d, r * d + d), i * d));
  const En = normalizeRows(E, m, d);
  const T = firstT;
  const k = Math.min(T, ivfCentroidCount(T));
  console.log(`first segment ${T} tokens -> K ${k} (d ${d}); held-out ${m} of ${laterT} later tokens`);
  const assigner = await OnnxNearestCentroid.create();
  for (const per of o.per) {
    const n = Math.min(T, Math.max(per * k, 4096));
    const rows = distinctSample(T, n, mulberry32(1)).sort();
    const sample = new Float32Array(n * d);
    rows.forEach((r, i) => sample.set(X.subarray(r * d, r * d + d), i * d));
    const t0 = performance.now();
    const cpu0 = process.cpuUsage();
    const c = await onnxSphericalKmeans(assigner, sample, n, d, distinctSample(n, k, mulberry32(2)), o.iterations);
    const fitMs = performance.now() - t0;
    const cpu = process.cpuUsage(cpu0);
    const fitCpuMs = (cpu.user + cpu.system) / 1000;
    const { nearest, similarity } = await assigner.assign(En, m, c, k, d);
    let s = 0;
    for (const x of similarity) s += x;
    const sizes = new Uint32Array(k);
    for (const j of nearest) sizes[j]++;
    let max = 0;
    let empty = 0;
    for (const z of sizes) {
      max = Math.max(max, z);
      if (z === 0) empty++;
    }
    console.log(JSON.stringify({ per, sample: n, per_centroid: +(n / k).toFixed(1), iterations: o.iterations, fit_ms: Math.round(fitMs), fit_cpu_ms: Math.round(fitCpuMs), heldout_mean_similarity: +(s / m).toFixed(4), largest_list_vs_mean: +(max / (m / k)).toFixed(1), empty_lists: empty }));
  }
  await assigner.release();
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
