/**
 * `npm run bench -- ingest [--json] [--docs N] [--metrics on|off|both] [--rounds N]`
 *
 * Cranfield end to end through the HTTP API, queues and S3 (documents/s, tokens/s), and in the
 * same run the bare compute of the same work in-process (tokenize + encode + write the raw and
 * the compressed segment), so the pipeline's overhead is a ratio rather than a wall-clock number
 * that depends on the machine.
 *
 * `--metrics both` measures the overhead of observability in the same run: the pipeline is run
 * with metrics off and logs at warn (`off`), and with metrics on, info-level JSON logs written to a
 * file and a /metrics scrape every 5 s (`on`), alternating `--rounds` times (default 1), each on a
 * fresh server and collection; the ratio of the two medians is the overhead. Default: `on`.
 */
import { createWriteStream, readFileSync, rmSync } from 'node:fs';
import path from 'node:path';
import { loadConfig } from '@lateral/shared';
import { createCodec, readSegment, writeSegment } from '@lateral/codec';
import { getEncoder } from '@lateral/model';
import { RAW_CODEC, assembleSegmentDocs } from '@lateral/serving';
import { encoderDir } from '@lateral/pipeline';
import { createLogger, setMetricsEnabled } from '@lateral/infra';
import { startServer } from '../../apps/all-in-one/src/server';
import { loadCranfield, withPlaceholders } from '../lib/cranfield';
import { CliUsageError, intFlag, parseCliOrExit } from '../lib/cli';
import { fetchRetrying, ingest, recreateCollection } from '../lib/client';

const USAGE = `usage: npm run bench -- ingest [--docs N (all of Cranfield)] [--metrics on|off|both (on)] [--rounds N (1, at most 20)] [--json]`;

export async function runIngestBench(args: string[]): Promise<Record<string, unknown>> {
  const { limit, metricsArg, rounds, json } = parseCliOrExit('bench ingest', USAGE, args, { docs: { type: 'string' }, metrics: { type: 'string', default: 'on' }, rounds: { type: 'string', default: '1' }, json: { type: 'boolean' } }, {}, ({ values: v }) => {
    if (!['on', 'off', 'both'].includes(v.metrics)) throw new CliUsageError(`--metrics: on, off or both (got ${v.metrics})`);
    const rounds = intFlag('rounds', v.rounds);
    if (rounds > 20) throw new CliUsageError('--rounds: an integer from 1 to 20');
    return { limit: v.docs === undefined ? undefined : intFlag('docs', v.docs), metricsArg: v.metrics, rounds, json: v.json === true };
  });
  const config = loadConfig({ ...process.env, PORT: '0', LOG_LEVEL: 'warn', DATA_DIR: process.env.DATA_DIR ?? '.data/bench' });
  const cran = loadCranfield(path.resolve('data/cranfield'));
  const docs = withPlaceholders(cran.docs.slice(0, limit));

  // Bare compute, in-process, same model, same batching budget, same segment writer.
  // the graph the service encodes with (ENCODER_PRECISION: int8 on the CPU provider by default)
  const encoder = await getEncoder(encoderDir(config.MODELS_DIR, config.DEFAULT_MODEL, config.ENCODER_PRECISION, 'cpu'), { executionProvider: 'cpu' });
  const codec = createCodec({ kind: 'fp16', layout: 'token', norms: 'fp32', sideInfo: false });
  await encoder.encodeDocuments(docs.slice(0, 32).map((d) => d.text)); // warm-up
  const batch = config.ENCODE_BATCH_DOCUMENTS;
  const t0 = performance.now();
  let bareTokens = 0;
  for (let i = 0; i < docs.length; i += batch) {
    const chunk = docs.slice(i, i + batch);
    const enc = await encoder.encodeDocuments(chunk.map((d) => d.text), { maxTokens: encoder.manifest.maxDocTokens, tokenBudget: config.ENCODE_TOKEN_BUDGET });
    const raw = writeSegment(assembleSegmentDocs(chunk.map((d) => d.id), enc, encoder.dims), RAW_CODEC);
    const r = readSegment(raw, 'bench');
    writeSegment({ docIds: r.docIds, tokenOffsets: r.tokenOffsets, tokenIds: r.tokenIds, vectors: r.decodeAll(), dims: r.dims, docVectors: r.docVectors ?? undefined }, codec);
    bareTokens += enc.reduce((s, e) => s + e.length, 0);
  }
  const bareSeconds = (performance.now() - t0) / 1000;

  // The pipeline: HTTP -> S3 -> encode -> S3 -> compress -> S3 -> index -> commit, per variant.
  const variants: ('on' | 'off')[] = metricsArg === 'both' ? Array.from({ length: rounds }, () => ['off', 'on'] as const).flat() : Array(rounds).fill(metricsArg);
  const runs: { variant: 'on' | 'off'; seconds: number; tokens: number }[] = [];
  const logFile = path.resolve(config.DATA_DIR, 'bench-ingest.log');
  rmSync(logFile, { force: true });
  for (const [i, variant] of variants.entries()) {
    setMetricsEnabled(variant === 'on');
    const logStream = variant === 'on' ? createWriteStream(logFile, { flags: 'a' }) : null;
    const logger = logStream ? createLogger('info', 'lateral', { json: true, destination: logStream }) : createLogger('warn', 'lateral');
    const server = await startServer(config, { logger });
    let scrapes = 0;
    // A scrape that fails (an overloaded machine resets connections) is not counted, and never stops the bench.
    const scrape = () =>
      fetchRetrying(`${server.url}/metrics`)
        .then((r) => r.text())
        .then(() => scrapes++)
        .catch(() => undefined);
    const scraper = variant === 'on' ? setInterval(() => void scrape(), 5000) : null;
    try {
      await recreateCollection(server.url, 'bench-ingest', config.DEFAULT_MODEL);
      const run = await ingest(server.url, 'bench-ingest', docs, { label: `pipeline (metrics and logs ${variant}, ${i + 1}/${variants.length})`, progress: !json });
      runs.push({ variant, ...run });
      if (variants.length > 1) console.log(`  run ${i + 1}/${variants.length} metrics and logs ${variant}: ${round(docs.length / run.seconds)} docs/s${scraper ? ` (${scrapes} scrapes)` : ''}`);
    } finally {
      if (scraper) clearInterval(scraper);
      await server.stop();
      await new Promise<void>((r) => (logStream ? logStream.end(() => r()) : r()));
    }
  }
  setMetricsEnabled(true);
  const median = (xs: number[]) => {
    const v = [...xs].sort((a, b) => a - b);
    return v.length % 2 ? v[(v.length - 1) / 2] : (v[v.length / 2 - 1] + v[v.length / 2]) / 2;
  };
  const secondsOf = (variant: 'on' | 'off') => runs.filter((r) => r.variant === variant).map((r) => r.seconds);
  const main = secondsOf(metricsArg === 'off' ? 'off' : 'on');
  const seconds = median(main);
  const tokens = runs[runs.length - 1].tokens;
  const out: Record<string, unknown> = {
    documents: docs.length,
    tokens,
    docs_per_s: round(docs.length / seconds),
    tokens_per_s: round(tokens / seconds),
    pipeline_seconds: round(seconds, 3),
    bare_seconds: round(bareSeconds, 3),
    bare_docs_per_s: round(docs.length / bareSeconds),
    overhead_ratio: round(seconds / bareSeconds, 2),
    bare_tokens: bareTokens,
    model: config.DEFAULT_MODEL,
    metrics: metricsArg,
  };
  console.log(`ingest ${out.documents} Cranfield documents (${out.tokens} tokens, ${out.model})`);
  console.log(`  pipeline (HTTP + Redis + S3 + workers${metricsArg === 'off' ? ', metrics and logs off' : ''}): ${out.pipeline_seconds} s = ${out.docs_per_s} docs/s, ${out.tokens_per_s} tokens/s${main.length > 1 ? ` (median of ${main.length})` : ''}`);
  console.log(`  bare compute (tokenize + encode + segments, in-process): ${out.bare_seconds} s = ${out.bare_docs_per_s} docs/s`);
  console.log(`  pipeline / bare = ${out.overhead_ratio}x`);
  if (metricsArg === 'both') {
    const off = median(secondsOf('off'));
    out.docs_per_s_metrics_off = round(docs.length / off);
    out.docs_per_s_metrics_on = round(docs.length / seconds);
    out.metrics_overhead_ratio = round(seconds / off, 3);
    out.runs = runs.map((r) => ({ variant: r.variant, docs_per_s: round(docs.length / r.seconds) }));
    out.log_lines_per_on_run = Math.round(readFileSync(logFile, 'utf8').split('\n').filter(Boolean).length / rounds);
    console.log(
      `  metrics and logs on / off (medians of ${rounds}): ${out.docs_per_s_metrics_on} vs ${out.docs_per_s_metrics_off} docs/s = ${out.metrics_overhead_ratio}x the time (on: ${out.log_lines_per_on_run} info JSON log lines per run to ${path.relative(process.cwd(), logFile)}, /metrics scraped every 5 s)`,
    );
  }
  return out;
}

function round(x: number, digits = 1): number {
  return Number(x.toFixed(digits));
}
