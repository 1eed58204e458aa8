/**
 * `npx tsx scripts/bench/warp-job-probe.ts --data DIR [--rounds 3]`: lateral's WARP search job in this
 * process (the all-in-one server on a `npm run bench -- peers --data DIR` folder, or a copy, its
 * search workers only), every Vaswani query `--rounds` times through HTTP, one at a time; prints
 * the job's p50 (timings.totalMs), without query encoding, the exact stage (timings.exactMs) and the
 * job less both (what issue 32's scan covers), and nDCG@10. Under `node --cpu-prof` (e.g.
 * `node --cpu-prof --import tsx scripts/bench/warp-job-probe.ts ...`) it profiles that job.
 */
import path from 'node:path';
import { QueueName, loadConfig } from '@lateral/shared';
import { startServer } from '../../apps/all-in-one/src/server';
import { search } from '../lib/client';
import { CliUsageError, intFlag, parseCliOrExit } from '../lib/cli';
import { hasRelevant } from '../lib/metrics';
import { loadRetrievalDataset } from '../lib/retrieval-dataset';
import { percentile, queryMetrics } from '../eval/retrieval';

const USAGE = 'usage: npx tsx scripts/bench/warp-job-probe.ts --data DIR [--rounds N]';

async function main() {
  const { dataDir, rounds } = parseCliOrExit('warp-job-probe', USAGE, process.argv.slice(2), { data: { type: 'string' }, rounds: { type: 'string' } }, {}, ({ values }) => {
    if (!values.data) throw new CliUsageError('--data DIR is required (a `npm run bench -- peers --data DIR` folder)');
    return { dataDir: values.data, rounds: intFlag('rounds', values.rounds ?? '3') };
  });
  const config = loadConfig({ ...process.env, PORT: '0', LOG_LEVEL: 'warn', DATA_DIR: dataDir, ORT_INTRA_OP_THREADS: process.env.ORT_INTRA_OP_THREADS ?? '1' });
  const server = await startServer(config, { quiet: true, queues: [QueueName.search] });
  try {
    const ds = loadRetrievalDataset(path.resolve('../shared/datasets/vaswani'));
    const judged = ds.queries.filter((q) => hasRelevant(ds.qrels.get(q.id)));
    const collection = 'peers-vaswani';
    const mode = { name: 'xtr', kPrime: 1000 };
    for (let w = 0; w < 3; w++) await search(server.url, { collection, mode, topK: 100, queries: [judged[w]!] });
    const total: number[] = [];
    const unenc: number[] = [];
    const exact: number[] = [];
    const rest: number[] = [];
    const ndcg: number[] = [];
    for (let r = 0; r < rounds; r++)
      for (const q of judged) {
        const got = await search(server.url, { collection, mode, topK: 100, queries: [q] });
        const t = got.timings ?? {};
        total.push(t.totalMs);
        unenc.push(t.totalMs - t.encodeQueriesMs);
        exact.push(t.exactMs ?? 0);
        rest.push(t.totalMs - t.encodeQueriesMs - (t.exactMs ?? 0));
        if (r === 0) ndcg.push(queryMetrics((got.results[0]?.hits ?? []).map((h) => h.id), ds.qrels.get(q.id)!).ndcg);
      }
    const p = (xs: number[], f = 0.5) => Math.round(percentile(xs, f) * 100) / 100;
    const mean = ndcg.reduce((a, x) => a + x, 0) / ndcg.length;
    console.log(JSON.stringify({ queries: judged.length, rounds, job_p50: p(total), job_p95: p(total, 0.95), unencoded_p50: p(unenc), exact_p50: p(exact), scan_p50: p(rest), scan_p95: p(rest, 0.95), 'ndcg@10': Math.round(mean * 10000) / 10000 }));
  } finally {
    await Promise.race([server.stop(), new Promise((r) => setTimeout(r, 5000))]);
  }
}

main().then(
  () => process.exit(0),
  (e) => {
    console.error(e);
    process.exit(1);
  },
);
