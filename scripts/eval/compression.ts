/**
 * Issue 4 evaluation, `npm run eval -- compression`: what each codec setting costs in bytes and in
 * ranking quality. Two sweeps:
 *
 *   --dataset DIR   the TREC-DL re-ranking sweep on any TREC-DL-format folder
 *                   (compression-trec-dl.ts; --quick, --plot out.svg, --run / --qrels FILE, ...)
 *   (no --dataset)  the Cranfield all-documents sweep (compression-cranfield.ts; --model DIR),
 *                   also `npx tsx scripts/eval/compression.ts`, used by docs/segment-format.md
 *
 * Shared collection helpers are in compression-collection.ts, the plot in compression-plot.ts,
 * the ranking metrics in scripts/lib/metrics.ts.
 */
import { writeFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { DEFAULT_CRANFIELD_DIR } from '../lib/cranfield-eval';
import { runCompressionEval } from './compression-cranfield';
import { compressionPlotSvg } from './compression-plot';
import { formatRerankTable, parseFlags, runRerankCompression } from './compression-trec-dl';
import { formatPoolingTable, parsePoolFactors, runPoolingCompression } from './compression-pooling';
import { parseAesiFlags } from './compression-aesi';
import { COMPRESSION_OPTIONS, COMPRESSION_USAGE } from './compression-flags';
import { parseCliOrExit } from '../lib/cli';

/**
 * `npm run eval -- compression --dataset DIR [--json] [--plot out.svg] [--quick]`: runs the sweep,
 * prints the table (stdout; progress on stderr), writes the plot, returns the JSON object.
 * Without --dataset it runs the Cranfield evaluation (`runCompressionEval`).
 * With --pool-factors 1,2,3,4 it runs the token pooling sweep instead (compression-pooling.ts;
 * --pool-codecs fp32,fp16,eden-4b-token; model default minilm-l6-384).
 * Other flags: --model DIR, --static-model DIR, --settings prefix,prefix, --docs-per-segment N (1000),
 * --sample-tokens N (20000), --seed N, --run FILE / --qrels FILE (when several files match).
 */
export async function runCompressionEvalCli(args: string[]): Promise<Record<string, unknown>> {
  // Every flag and value checked before anything runs: --help prints them, a bad one exits 2.
  const f = parseCliOrExit('eval compression', COMPRESSION_USAGE, args, COMPRESSION_OPTIONS, {}, () => {
    parseAesiFlags(args);
    parsePoolFactors(args);
    return parseFlags(args);
  });
  if (!f.dataset) {
    const res = await runCompressionEval({ dataDir: DEFAULT_CRANFIELD_DIR, modelDir: f.modelGiven ? f.model : undefined, log: (l) => console.log(l) });
    return res as unknown as Record<string, unknown>;
  }
  if (parsePoolFactors(args)) {
    // the token pooling sweep (compression-pooling.ts): nDCG@10 and bytes per token per codec.poolFactor
    const pooled = await runPoolingCompression(args);
    console.log(formatPoolingTable(pooled));
    return pooled;
  }
  const res = await runRerankCompression(args);
  console.log(formatRerankTable(res));
  if (f.plot) {
    writeFileSync(f.plot, compressionPlotSvg(res));
    console.log(`plot written to ${f.plot}`);
  }
  return res;
}

async function main(): Promise<void> {
  const args = process.argv.slice(2);
  const res = await runCompressionEvalCli(args);
  if (parseFlags(args).json) console.log(JSON.stringify(res));
}

if (import.meta.url === pathToFileURL(resolve(process.argv[1] ?? '')).href) {
  main().catch((err) => {
    console.error(err);
    process.exit(1);
  });
}
