/**
 * `npx tsx scripts/bench/warp-exact-ab.ts --data DATA_DIR [--exact 32] [--rounds 2]`: WARP's exact
 * final stage in-process, the new path (SegmentCache.documentScores: the candidates' codes scored
 * in the WebAssembly module) against the old one (documentRows: rows decoded in JavaScript, then
 * one ONNX Runtime GEMM MaxSim, 1 thread), alternated per query (order swapped every query), on
 * each query's first `exact` WARP hits (nprobe 32, top 100) of the collection a `npm run bench --
 * peers --data DATA_DIR` run kept (or a copy; no workers run). Candidates read by ranges of the
 * disk cache's local copies, as the scorer reads them; the first round warms the copies and is
 * not timed. Checks the scores agree within 1e-5 (relative) and the re-ranked order is the same.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { s3Keys, type SegmentRef } from '@lateral/shared';
import { DiskObjectCache } from '@lateral/infra';
import { GemmMaxsim } from '@lateral/kernels';
import { SegmentCache } from '@lateral/serving';
import { openWarpLayout, runSteps, warpListSizes, warpQuery, warpSegmentsSearchSteps, type WarpSegment } from '@lateral/search';
import { openWarpProbeBed } from './warp-probe-bed';
import { CliUsageError, parseCliOrExit } from '../lib/cli';
import { loadRetrievalDataset } from '../lib/retrieval-dataset';

const USAGE = 'usage: npx tsx scripts/bench/warp-exact-ab.ts --data DIR [--exact 32] [--rounds 2]';

async function main() {
  const { dataDir, exact, rounds } = parseCliOrExit('warp-exact-ab', USAGE, process.argv.slice(2), { data: { type: 'string' }, exact: { type: 'string' }, rounds: { type: 'string' } }, {}, ({ values }) => {
    if (!values.data) throw new CliUsageError('--data DIR is required (a `npm run bench -- peers --data DIR` folder)');
    return { dataDir: values.data, exact: Number(values.exact ?? 32), rounds: Number(values.rounds ?? 2) };
  });
  const { server, rt, tenant, collection, refs, ivf, codec, encoder: openEncoder } = await openWarpProbeBed(dataDir);
  const segs: WarpSegment[] = [];
  const dirs = [];
  let base = 0;
  for (const ref of refs) {
    const key = s3Keys.searchLayout(tenant, collection, ref.batchId, ref.codecVersion, ref.warpEpoch);
    const l = openWarpLayout((await rt.store.get(key))!, key);
    dirs.push(l.directory);
    segs.push({ documents: l.directory.documents, docBase: base, lists: l });
    base += l.directory.documents;
  }
  const sizes = warpListSizes(dirs);
  const ds = loadRetrievalDataset(path.resolve('../shared/datasets/vaswani'));
  const encoder = await openEncoder();
  const enc = await encoder.encodeQueries(ds.queries.map((q) => q.text));
  const dir = mkdtempSync(path.join(tmpdir(), 'lateral-exact-ab-'));
  const objects = new DiskObjectCache(rt.store, dir, 8 * 2 ** 30, 'exact-ab');
  const cache = new SegmentCache(objects, rt.codecs, { forCollection: async () => Promise.reject(new Error('no side information')) }, { maxBytes: 2 * 2 ** 30, loadConcurrency: 2, scoreFromCodes: true, rangeReads: true });
  const gemm = await GemmMaxsim.create(1);
  const coll = { tenantId: tenant, id: collection, model: (await rt.collections.get(tenant, collection))!.model };
  console.error(`warp-exact-ab: ${enc.length} queries encoded; WARP's candidates next`);
  const wheres = enc.map((e) => {
    const q = warpQuery(e.vectors, e.length, ivf.centroids, codec, sizes, { nprobe: 32 });
    const hits = runSteps(warpSegmentsSearchSteps(q, segs, { topN: 100 }));
    const all: [number, number, number][] = [];
    hits.forEach((h, s) => h.docs.forEach((d, k) => all.push([s, d, h.scores[k]])));
    all.sort((a, b) => b[2] - a[2]);
    return all.slice(0, exact).map(([s, d]) => [refs[s], d] as readonly [SegmentRef, number]);
  });
  console.error('warp-exact-ab: timing');
  const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
  const t: Record<'old' | 'new', number[]> = { old: [], new: [] };
  let worst = 0;
  let orderDiffers = 0;
  for (let rep = 0; rep < rounds; rep++)
    for (const [qi, e] of enc.entries()) {
      const query = { vectors: e.vectors, length: e.length };
      const got: Record<string, Float32Array> = {};
      for (const mode of (qi + rep) % 2 === 0 ? ['old', 'new'] : ['new', 'old']) {
        const t0 = performance.now();
        if (mode === 'new') got.new = (await cache.documentScores(coll, wheres[qi], query))!.scores;
        else {
          const rows = await cache.documentRows(coll, wheres[qi]);
          got.old = (await gemm.score([query], rows.docs, rows.offsets, rows.dims, { normalize: true }))[0];
        }
        if (rep > 0) t[mode as 'old' | 'new'].push(performance.now() - t0);
      }
      got.old.forEach((s, i) => (worst = Math.max(worst, Math.abs(s - got.new[i]) / (1 + Math.abs(s)))));
      const order = (s: Float32Array) => JSON.stringify([...s.keys()].sort((a, b) => s[b] - s[a] || a - b));
      if (order(got.old) !== order(got.new)) orderDiffers++;
    }
  console.log(
    `exact stage, ${exact} candidates, ${t.old.length} queries each (alternated): old (JS decode + ORT GEMM) median ${median(t.old).toFixed(3)} ms, new (codes in WebAssembly) ${median(t.new).toFixed(3)} ms, ratio ${(median(t.old) / median(t.new)).toFixed(2)}x; worst relative score difference ${worst.toExponential(2)}; queries whose order differs ${orderDiffers}`,
  );
  await gemm.release();
  rmSync(dir, { recursive: true, force: true });
  await server.stop();
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
