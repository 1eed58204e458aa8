/**
 * `npx tsx scripts/bench/warp-engine-ab.ts --data DATA_DIR [--nprobes 8,32]`: WARP's per-segment engine
 * (warpSegmentsSearchSteps, layouts in memory, top-100) with the resident WebAssembly scan
 * (Kernels.warpResident) and with the JavaScript path, alternated per query (order swapped every
 * query, two passes, the first three queries not timed), checking their hits are equal bit for
 * bit; also warpQuery (centroid GEMM in the dots kernel, probes, imputation). The query's lookup
 * tables are built by the path that reads them: the JavaScript path's time includes their build
 * (its first read of query.tables), the resident scan builds each token's in the module. On the
 * collection a `npm run bench -- peers --data DATA_DIR` run kept (or a copy; no workers run).
 */
import path from 'node:path';
import { s3Keys } from '@lateral/shared';
import { openWarpLayout, warpCodeBytes, warpListSizes, warpQuery, warpSegmentsSearchSteps, runSteps, type WarpLayoutReader, type WarpSegment, type WarpWorkspace } from '@lateral/search';
import { openWarpProbeBed } from './warp-probe-bed';
import { CliUsageError, intListFlag, parseCliOrExit } from '../lib/cli';
import { loadRetrievalDataset } from '../lib/retrieval-dataset';

const USAGE = 'usage: npx tsx scripts/bench/warp-engine-ab.ts --data DIR [--nprobes 8,32]';

async function main() {
  const { dataDir, nprobes } = parseCliOrExit('warp-engine-ab', USAGE, process.argv.slice(2), { data: { type: 'string' }, nprobes: { type: 'string' } }, {}, ({ values }) => {
    if (!values.data) throw new CliUsageError('--data DIR is required (a `npm run bench -- peers --data DIR` folder)');
    return { dataDir: values.data, nprobes: intListFlag('nprobes', values.nprobes ?? '8,32') };
  });
  const { server, rt, tenant, collection, refs, ivf, codec, encoder: openEncoder } = await openWarpProbeBed(dataDir);
  const layouts: WarpLayoutReader[] = [];
  const segs: WarpSegment[] = [];
  let base = 0;
  for (const ref of refs) {
    const key = s3Keys.searchLayout(tenant, collection, ref.batchId, ref.codecVersion, ref.warpEpoch);
    const l = openWarpLayout((await rt.store.get(key))!, key);
    layouts.push(l);
    segs.push({ documents: l.directory.documents, docBase: base, lists: l });
    base += l.directory.documents;
  }
  const sizes = warpListSizes(layouts.map((l) => l.directory));
  const ds = loadRetrievalDataset(path.resolve('../shared/datasets/vaswani'));
  const encoder = await openEncoder();
  const enc = await encoder.encodeQueries(ds.queries.map((q) => q.text));
  const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
  for (const nprobe of nprobes) {
    const t: Record<string, number[]> = { js: [], resident: [], query: [] };
    const workspaces: WarpWorkspace[] = [];
    let tables: Float32Array | undefined;
    for (let rep = 0; rep < 2; rep++)
      for (const [qi, e] of enc.entries()) {
        const t0 = performance.now();
        tables ??= new Float32Array(64 * warpCodeBytes(codec.dims, codec.bits) * 256);
        const q = warpQuery(e.vectors, e.length, ivf.centroids, codec, sizes, { nprobe, tables: e.length <= 64 ? tables : undefined });
        t.query.push(performance.now() - t0);
        const order = (qi + rep) % 2 === 0 ? ['js', 'resident'] : ['resident', 'js'];
        let ref: string | null = null;
        for (const mode of order) {
          const t1 = performance.now();
          const got = runSteps(warpSegmentsSearchSteps(q, segs, { topN: 100, workspaces, resident: mode === 'resident' }));
          if (rep > 0 || qi > 2) t[mode].push(performance.now() - t1);
          const sig = JSON.stringify(got.map((h) => [Array.from(h.docs), Array.from(h.scores)]));
          if (ref === null) ref = sig;
          else if (sig !== ref) throw new Error(`query ${qi}: resident and JavaScript hits differ`);
        }
      }
    console.log(`nprobe ${nprobe}: ${segs.length} segments, ${base} documents; per query median ms: warpQuery (GEMM in JS; tables built where the JavaScript path reads them) ${median(t.query).toFixed(2)}, engine JavaScript path ${median(t.js).toFixed(2)}, engine resident WebAssembly ${median(t.resident).toFixed(2)} (ratio ${(median(t.js) / median(t.resident)).toFixed(2)}x; ${t.js.length} queries each, alternated; hits equal bit for bit)`);
  }
  await server.stop();
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
