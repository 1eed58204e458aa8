/**
 * `npx tsx scripts/bench/warp-quality-probe.ts --data DATA_DIR [--exhaustive] [--nprobes 4,8,16,32]
 * [--tprimes 500,1000,4000,10000]`: WARP's quality variants in-process on the collection a
 * `npm run bench -- peers --data DATA_DIR` run kept (or a copy; only search reads, no workers):
 * nDCG@10 / recall@100 of WARP's rule at each nprobe and t', of two other imputations (reached
 * documents floored at m_i; m_i capped at the first unprobed centroid's score), and of WARP's top
 * 20 / 50 / 100 re-scored by exact MaxSim on the segments' decoded vectors (`exact`); --exhaustive
 * adds exhaustive MaxSim. Segments at the epoch holding most documents only. Writes
 * /tmp/warp-quality.json. docs/benchmarks.md, "WARP".
 */
import path from 'node:path';
import { writeFileSync } from 'node:fs';
import { s3Keys } from '@lateral/shared';
import { readSegment } from '@lateral/codec';
import { kernels } from '@lateral/simd';
import { openWarpLayout, warpListSizes, warpQuery, warpScoreList, warpCentroidScores, type WarpLayoutReader } from '@lateral/search';
import { openWarpProbeBed } from './warp-probe-bed';
import { CliUsageError, intListFlag, parseCliOrExit } from '../lib/cli';
import { hasRelevant } from '../lib/metrics';
import { loadRetrievalDataset } from '../lib/retrieval-dataset';
import { queryMetrics } from '../eval/retrieval';

const USAGE = 'usage: npx tsx scripts/bench/warp-quality-probe.ts --data DIR [--exhaustive] [--nprobes 4,8,16,32] [--tprimes 500,1000,4000,10000]';

async function main() {
  const opts = parseCliOrExit(
    'warp-quality-probe',
    USAGE,
    process.argv.slice(2),
    { data: { type: 'string' }, exhaustive: { type: 'boolean' }, nprobes: { type: 'string' }, tprimes: { type: 'string' } },
    {},
    ({ values }) => {
      if (!values.data) throw new CliUsageError('--data DIR is required (a `npm run bench -- peers --data DIR` folder)');
      return { dataDir: values.data, exhaustive: !!values.exhaustive, nprobes: intListFlag('nprobes', values.nprobes ?? '4,8,16,32'), tprimes: intListFlag('tprimes', values.tprimes ?? '500,1000,4000,10000') };
    },
  );
  const { dataDir } = opts;
  const { server, rt, tenant, collection, refs, docsAt, epoch, ivf, codec, encoder: openEncoder } = await openWarpProbeBed(dataDir);
  const ds0 = loadRetrievalDataset(path.resolve('../shared/datasets/vaswani'));
  console.error(`epochs ${JSON.stringify(docsAt)}: using ${epoch}`);
  const centroids = ivf.centroids;
  const d = codec.dims;
  const K = centroids.length / d;
  const layouts: WarpLayoutReader[] = [];
  const segVecs: Float32Array[] = [];
  const segOffsets: Uint32Array[] = [];
  const ids: string[] = [];
  const bases: number[] = [];
  for (const ref of refs) {
    const key = s3Keys.searchLayout(tenant, collection, ref.batchId, ref.codecVersion, ref.warpEpoch);
    layouts.push(openWarpLayout((await rt.store.get(key))!, key));
    const r = readSegment((await rt.store.get(ref.key))!, ref.key, await rt.codecs.get(tenant, collection, ref.codecVersion));
    bases.push(ids.length);
    ids.push(...r.docIds);
    segVecs.push(r.decodeAll());
    segOffsets.push(Uint32Array.from(r.tokenOffsets));
  }
  const keep = new Set(ids);
  const qrels = new Map([...ds0.qrels].map(([q, m]) => [q, new Map([...m].filter(([d]) => keep.has(d)))] as const));
  const ds = { ...ds0, qrels };
  const judged = ds.queries.filter((q) => hasRelevant(qrels.get(q.id)));
  console.error(`judged queries ${judged.length}`);
  const sizes = warpListSizes(layouts.map((l) => l.directory));
  let total = 0;
  for (const s of sizes) total += s;
  console.error(`K ${K} d ${d} tokens ${total} segments ${layouts.length} docs ${ids.length}`);
  const encoder = await openEncoder();
  const enc = await encoder.encodeQueries(judged.map((q) => q.text));
  const out: Record<string, unknown> = { K, tokens: total };

  // Exact MaxSim on the segments' decoded vectors, per (query, document), computed when asked.
  const segOf = (g: number) => {
    let s = bases.length - 1;
    while (bases[s] > g) s--;
    return s;
  };
  const exactCache = enc.map(() => new Map<number, number>());
  const prepared = enc.map((e) => kernels().prepare(e.vectors, e.length, d));
  const exactScore = (qi: number, g: number): number => {
    const hit = exactCache[qi].get(g);
    if (hit !== undefined) return hit;
    const n = enc[qi].length;
    const s = segOf(g);
    const doc = g - bases[s];
    const off = segOffsets[s];
    const best = new Float64Array(n).fill(-Infinity);
    prepared[qi].maxima(segVecs[s], off[doc] * d, off[doc + 1] - off[doc], best, null, 0);
    let sum = 0;
    for (let i = 0; i < n; i++) sum += best[i];
    exactCache[qi].set(g, sum / n);
    return sum / n;
  };
  const evalRank = (name: string, rank: (qi: number) => number[]) => {
    let nd = 0;
    let rc = 0;
    for (let qi = 0; qi < judged.length; qi++) {
      const m = queryMetrics(rank(qi).slice(0, 100).map((g) => ids[g]), ds.qrels.get(judged[qi].id)!);
      nd += m.ndcg;
      rc += m.recall;
    }
    const r = { ndcg: +(nd / judged.length).toFixed(4), recall: +(rc / judged.length).toFixed(4) };
    out[name] = r;
    console.error(name, JSON.stringify(r));
  };
  const topOf = (scores: ArrayLike<number>, keep?: (g: number) => boolean) =>
    Array.from({ length: scores.length }, (_, g) => g)
      .filter((g) => (keep ? keep(g) : true))
      .sort((a, b) => scores[b] - scores[a] || a - b);
  // Token scores per probed list, per query: WARP variants.
  const CS = enc.map((e) => warpCentroidScores(e.vectors, e.length, centroids, d));
  if (opts.exhaustive) evalRank('exhaustive', (qi) => topOf(Float64Array.from(ids, (_, g) => exactScore(qi, g))));
  const nprobes = opts.nprobes;
  const tps: (number | undefined)[] = [undefined, ...opts.tprimes];
  for (const nprobe of nprobes) {
    // per query: best[g][i] over the probed lists
    const bests: Map<number, Float64Array>[] = [];
    for (const e of enc) {
      const n = e.length;
      const q = warpQuery(e.vectors, n, centroids, codec, sizes, { nprobe, bound: 128 });
      const best = new Map<number, Float64Array>();
      for (let i = 0; i < n; i++) {
        for (let p = 0; p < nprobe; p++) {
          const c = q.probes[i * nprobe + p];
          for (const [s, l] of layouts.entries()) {
            const list = l.list(c);
            if (list.count === 0) continue;
            const sc = warpScoreList(q, i, q.probeScores[i * nprobe + p], list, new Float64Array(list.count));
            for (let k = 0; k < list.count; k++) {
              const g = bases[s] + list.docs[k];
              let b = best.get(g);
              if (!b) best.set(g, (b = new Float64Array(n).fill(-Infinity)));
              if (sc[k] > b[i]) b[i] = sc[k];
            }
          }
        }
      }
      bests.push(best);
    }
    for (const tp of tps) {
      const imputedOf = enc.map((e) => warpQuery(e.vectors, e.length, centroids, codec, sizes, { nprobe, bound: 128, tPrime: tp }).imputed);
      for (const rule of ['warp', 'floor', 'firstUnprobed']) {
        if (rule === 'firstUnprobed' && tp !== undefined) continue;
        const finals: number[][] = enc.map((e, qi) => {
          const n = e.length;
          const mi = Float64Array.from(imputedOf[qi]);
          if (rule === 'firstUnprobed') {
            for (let i = 0; i < n; i++) {
              const sorted = Array.from(CS[qi].subarray(i * K, (i + 1) * K)).sort((a, b) => b - a);
              mi[i] = Math.min(mi[i], sorted[Math.min(nprobe, K - 1)]);
            }
          }
          const scores = new Map<number, number>();
          for (const [g, b] of bests[qi]) {
            let sum = 0;
            for (let i = 0; i < n; i++) sum += b[i] === -Infinity ? mi[i] : rule === 'floor' ? Math.max(b[i], mi[i]) : b[i];
            scores.set(g, sum / n);
          }
          return [...scores.keys()].sort((a, b) => scores.get(b)! - scores.get(a)! || a - b);
        });
        const name = `np${nprobe}_t${tp ?? 'def'}_${rule}`;
        evalRank(name, (qi) => finals[qi]);
        if (rule === 'warp' && tp === undefined) {
          for (const N of [20, 50, 100]) evalRank(`${name}_rerank${N}`, (qi) => finals[qi].slice(0, N).map((g) => [g, exactScore(qi, g)] as const).sort((a, b) => b[1] - a[1] || a[0] - b[0]).map(([g]) => g).concat(finals[qi].slice(N)));
        }
      }
    }
  }
  writeFileSync('/tmp/warp-quality.json', JSON.stringify(out, null, 1));
  await server.stop();
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
