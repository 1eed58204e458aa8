/**
 * `npm run bench -- ingest [--json] [--docs N] [--metrics on|off|both] [--rounds N]`
 *
 * Cranfield end to end through the HTTP API, queues and S3 (documents/s, tokens/s), and in the
 * same run the bare compute of the same work in-process (tokenize + encode + write the raw and
 * the compressed segment), so the pipeline's overhead is a ratio rather than a wall-clock number
 * that depends on the machine. Each of the `--rounds` rounds runs the bare compute and the
 * pipeline back to back, in alternating order (bare first in odd rounds, last in even ones), and
 * the ratio is taken within each round: on a shared machine, phases minutes apart see different
 * loads, so only phases side by side are compared; the figure is the median of the rounds' ratios.
 *
 * A second comparator runs in every round between those two: the bare compute *with the index
 * stage's work* (each compressed segment read back and given its segment index and WARP layout by
 * segmentSearchObjects, the first one fitting the collection's centroids and WARP codec, in process,
 * one stage after the other on the same cores). `pipeline_vs_bare` (the issue 29 figure, the bare
 * encoding and segment writing alone) stays as it was; `pipeline_vs_bare_with_index` says what the
 * service costs beyond the work it has to do (HTTP, queues, S3, commits, refits, scheduling), where
 * above 1 the pipeline's overlap of stages gains more than its overheads cost.
 *
 * The profile of each pipeline run says where it loses time against the bare encoding: the
 * session.run seconds of the encoder in the pipeline (its compute threads' metrics) and in the
 * bare encoding (an inference observer), and from the BullMQ jobs' start and end times how long
 * the encode stage ran (union of its jobs), its gaps, the time before the first encode job started
 * (upload and pick-up) and after the last one ended (the last batch's compress, index, commit),
 * and the summed job time of every stage.
 *
 * `--metrics both` measures the overhead of observability in the same run: the pipeline is run
 * with metrics off and logs at warn (`off`), and with metrics on, info-level JSON logs written to a
 * file and a /metrics scrape every 5 s (`on`), both in every round, each on a fresh server and
 * collection; the ratio of the two medians is the overhead. Default: `on`.
 */
import { createWriteStream, readFileSync, readdirSync, rmSync } from 'node:fs';
import path from 'node:path';
import { CreateCollectionSchema, QueueName, loadConfig, type Collection } from '@lateral/shared';
import { createCodec, readSegment, writeSegment } from '@lateral/codec';
import { getEncoder, type TokenEncoder } from '@lateral/model';
import { OnnxNearestCentroid, setInferenceObserver } from '@lateral/kernels';
import { RAW_CODEC, assembleSegmentDocs } from '@lateral/serving';
import { analyzeTexts } from '@lateral/search';
import { encoderDir, segmentSearchObjects, type SegmentIndexerDeps } from '@lateral/pipeline';
import { createLogger, setMetricsEnabled } from '@lateral/infra';
import { startServer } from '../../apps/all-in-one/src/server';
import { loadCranfield, withPlaceholders } from '../lib/cranfield';
import { CliUsageError, intFlag, parseCliOrExit } from '../lib/cli';
import { fetchRetrying, ingest, recreateCollection } from '../lib/client';

/** How often the pipeline run reads its ingestions' status (the run's end is known to within it). */
const STATUS_POLL_MS = 1000;

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
  await encoder.encodeDocuments(docs.slice(0, 32).map((d) => d.text)); // warm-up

  const logFile = path.resolve(config.DATA_DIR, 'bench-ingest.log');
  rmSync(logFile, { force: true });
  const runs: PipelineRun[] = [];
  const bares: BareRun[] = [];
  const baresWithIndex: BareRun[] = [];
  const roundRatios: number[] = [];
  const roundRatiosWithIndex: number[] = [];
  // The index stage's nearest-centroid kernel, as a worker makes it (ORT_INTRA_OP_THREADS), one for the bench.
  let nearest: Promise<OnnxNearestCentroid> | undefined;
  const indexSetup: BareIndexSetup = { assigner: () => (nearest ??= OnnxNearestCentroid.create(config.ORT_INTRA_OP_THREADS)), encoder, ivfCentroids: config.IVF_CENTROIDS, model: config.DEFAULT_MODEL };
  let n = 0;
  for (let r = 0; r < rounds; r++) {
    // Bare first in odd rounds (1st, 3rd ...), last in even ones: a load that drifts over the run weighs on both sides.
    // The bare compute with the index stage's work sits between them in both orders.
    const variants: ('on' | 'off')[] = metricsArg === 'both' ? ['off', 'on'] : [metricsArg as 'on' | 'off'];
    const phases: ('bare' | 'bare+index' | 'on' | 'off')[] = r % 2 === 0 ? ['bare', 'bare+index', ...variants] : [...variants, 'bare+index', 'bare'];
    const pipelineOfRound: PipelineRun[] = [];
    let bareOfRound: BareRun | undefined;
    let bareWithIndexOfRound: BareRun | undefined;
    for (const phase of phases) {
      if (phase === 'bare') {
        bareOfRound = await bareCompute(encoder, docs, config.ENCODE_BATCH_DOCUMENTS, config.ENCODE_TOKEN_BUDGET);
        bares.push(bareOfRound);
        if (!json) console.log(`  round ${r + 1}/${rounds} bare: ${round(bareOfRound.seconds, 1)} s (session.run ${round(bareOfRound.runSeconds, 1)} s)`);
      } else if (phase === 'bare+index') {
        bareWithIndexOfRound = await bareCompute(encoder, docs, config.ENCODE_BATCH_DOCUMENTS, config.ENCODE_TOKEN_BUDGET, indexSetup);
        baresWithIndex.push(bareWithIndexOfRound);
        if (!json) console.log(`  round ${r + 1}/${rounds} bare with the index stage: ${round(bareWithIndexOfRound.seconds, 1)} s (session.run ${round(bareWithIndexOfRound.runSeconds, 1)} s, index ${round(bareWithIndexOfRound.indexSeconds, 1)} s)`);
      } else {
        const run = await pipelineRun(config, docs, phase, logFile, encoder.manifest.name, `pipeline (metrics and logs ${phase}, ${++n}/${rounds * variants.length})`, json);
        runs.push(run);
        pipelineOfRound.push(run);
        if (!json) console.log(`  round ${r + 1}/${rounds} pipeline (metrics and logs ${phase}): ${round(run.seconds, 1)} s = ${round(docs.length / run.seconds)} docs/s${phase === 'on' ? ` (${run.scrapes} scrapes)` : ''}; ${describeProfile(run.profile)}`);
      }
    }
    const main = pipelineOfRound.find((p) => p.variant === (metricsArg === 'off' ? 'off' : 'on'))!;
    roundRatios.push(main.seconds / bareOfRound!.seconds);
    roundRatiosWithIndex.push(main.seconds / bareWithIndexOfRound!.seconds);
  }
  await (await nearest)?.release();
  setMetricsEnabled(true);
  const secondsOf = (variant: 'on' | 'off') => runs.filter((r) => r.variant === variant).map((r) => r.seconds);
  const main = secondsOf(metricsArg === 'off' ? 'off' : 'on');
  const seconds = median(main);
  const bareSeconds = median(bares.map((b) => b.seconds));
  const tokens = runs[runs.length - 1].tokens;
  const overhead = median(roundRatios);
  const bareWithIndexSeconds = median(baresWithIndex.map((b) => b.seconds));
  const overheadWithIndex = median(roundRatiosWithIndex);
  const out: Record<string, unknown> = {
    documents: docs.length,
    tokens,
    docs_per_s: round(docs.length / seconds),
    tokens_per_s: round(tokens / seconds),
    pipeline_seconds: round(seconds, 3),
    bare_seconds: round(bareSeconds, 3),
    bare_docs_per_s: round(docs.length / bareSeconds),
    // pipeline time / bare time within each round, the median over rounds (< 1: the pipeline is faster)
    overhead_ratio: round(overhead, 2),
    // the same as docs/s: pipeline docs/s / bare docs/s (issue 29's target: >= 0.95)
    pipeline_vs_bare: round(1 / overhead, 2),
    // the bare compute with the index stage's work as well (in process, one stage after the other, same cores): what the service adds beyond the work itself
    bare_with_index_seconds: round(bareWithIndexSeconds, 3),
    bare_with_index_docs_per_s: round(docs.length / bareWithIndexSeconds),
    bare_index_seconds: round(median(baresWithIndex.map((b) => b.indexSeconds)), 3),
    // pipeline docs/s / bare-with-index docs/s, median of the rounds' ratios (no target; 1: the service costs nothing beyond its work)
    pipeline_vs_bare_with_index: round(1 / overheadWithIndex, 2),
    rounds: roundRatios.map((ratio, i) => ({
      bare_seconds: round(bares[i].seconds, 1),
      bare_run_seconds: round(bares[i].runSeconds, 1),
      pipeline_seconds: round(runs.filter((x) => x.variant === (metricsArg === 'off' ? 'off' : 'on'))[i].seconds, 1),
      pipeline_vs_bare: round(1 / ratio, 2),
      bare_with_index_seconds: round(baresWithIndex[i].seconds, 1),
      bare_index_seconds: round(baresWithIndex[i].indexSeconds, 1),
      pipeline_vs_bare_with_index: round(1 / roundRatiosWithIndex[i], 2),
    })),
    profiles: runs.map((r) => ({ variant: r.variant, seconds: round(r.seconds, 1), ...r.profile, cpu: r.cpu })),
    // CPU seconds per document, whatever the load: the bare encoding's and the pipeline's (this process's threads and its child processes, Redis among them)
    bare_cpu: bares.map((b) => b.cpu),
    bare_cpu_ms_per_doc: round((1000 * median(bares.map((b) => b.cpu.total_s))) / docs.length, 1),
    bare_with_index_cpu: baresWithIndex.map((b) => b.cpu),
    bare_with_index_cpu_ms_per_doc: round((1000 * median(baresWithIndex.map((b) => b.cpu.total_s))) / docs.length, 1),
    pipeline_cpu_ms_per_doc: round((1000 * median(runs.map((r) => r.cpu.total_s))) / docs.length, 1),
    bare_tokens: bares[0].tokens,
    model: config.DEFAULT_MODEL,
    metrics: metricsArg,
  };
  console.log(`ingest ${out.documents} Cranfield documents (${out.tokens} tokens, ${out.model}), ${rounds} round(s), bare and pipeline alternated`);
  console.log(`  pipeline (HTTP + Redis + S3 + workers${metricsArg === 'off' ? ', metrics and logs off' : ''}): ${out.pipeline_seconds} s = ${out.docs_per_s} docs/s, ${out.tokens_per_s} tokens/s${main.length > 1 ? ` (median of ${main.length})` : ''}`);
  console.log(`  bare compute (tokenize + encode + segments, in-process): ${out.bare_seconds} s = ${out.bare_docs_per_s} docs/s${bares.length > 1 ? ` (median of ${bares.length})` : ''}`);
  console.log(`  bare compute with the index stage (the above + centroid fit, assignment, segment index, WARP layout, in-process): ${out.bare_with_index_seconds} s = ${out.bare_with_index_docs_per_s} docs/s, of which index ${out.bare_index_seconds} s${baresWithIndex.length > 1 ? ` (medians of ${baresWithIndex.length})` : ''}`);
  console.log(`  CPU per document: bare ${out.bare_cpu_ms_per_doc} ms, bare with index ${out.bare_with_index_cpu_ms_per_doc} ms, pipeline ${out.pipeline_cpu_ms_per_doc} ms (this process's threads and its child processes; medians)`);
  console.log(`  pipeline / bare, docs/s = ${out.pipeline_vs_bare}x (time: ${out.overhead_ratio}x; ${rounds > 1 ? `median of the rounds' ${roundRatios.map((x) => round(1 / x, 2)).join(', ')}` : 'one round'})`);
  console.log(`  pipeline / bare with the index stage, docs/s = ${out.pipeline_vs_bare_with_index}x (${rounds > 1 ? `median of the rounds' ${roundRatiosWithIndex.map((x) => round(1 / x, 2)).join(', ')}` : 'one round'})`);
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

interface BareRun {
  seconds: number;
  /** Time inside session.run (the inference observer). */
  runSeconds: number;
  /** Of `seconds`, the index stage's work (bare with index only; 0 otherwise). */
  indexSeconds: number;
  tokens: number;
  cpu: CpuUse;
}

/**
 * What the bare compute needs to do the index stage's work too: the service's nearest-centroid
 * kernel (one per bench, as one per worker process) and settings. Each run fits its collection's
 * centroids and WARP codec afresh (in-memory repositories), as the pipeline's first index job does.
 */
interface BareIndexSetup {
  assigner: () => Promise<OnnxNearestCentroid>;
  encoder: TokenEncoder;
  ivfCentroids: number;
  model: string;
}

/**
 * The bare compute: the same documents, encode jobs of `batch` documents one after the other, each
 * written as a raw and an fp16 segment; with `index`, each compressed segment then read back and
 * given its search objects as the index stage makes them (segmentSearchObjects: BM25's analysed
 * terms, the first segment's centroid fit and WARP codec fit, every token's centroid assignment,
 * the segment index and the WARP layout, serialised), in process, without S3, queues or commits.
 */
async function bareCompute(encoder: TokenEncoder, docs: { id: string; text: string }[], batch: number, tokenBudget: number, index?: BareIndexSetup): Promise<BareRun> {
  const codec = createCodec({ kind: 'fp16', layout: 'token', norms: 'fp32', sideInfo: false });
  let runMs = 0;
  let indexMs = 0;
  const cpu0 = cpuSnapshot();
  const indexing = index ? bareIndexer(index) : undefined;
  // (startServer sets the service's own observer again; no server runs while this one is set)
  setInferenceObserver((e) => (runMs += e.ms));
  try {
    const t0 = performance.now();
    let tokens = 0;
    for (let i = 0; i < docs.length; i += batch) {
      const chunk = docs.slice(i, i + batch);
      const enc = await encoder.encodeDocuments(chunk.map((d) => d.text), { maxTokens: encoder.manifest.maxDocTokens, tokenBudget });
      const raw = writeSegment(assembleSegmentDocs(chunk.map((d) => d.id), enc, encoder.dims), RAW_CODEC);
      const r = readSegment(raw, 'bench');
      const segment = writeSegment({ docIds: r.docIds, tokenOffsets: r.tokenOffsets, tokenIds: r.tokenIds, vectors: r.decodeAll(), dims: r.dims, docVectors: r.docVectors ?? undefined }, codec);
      tokens += enc.reduce((s, e) => s + e.length, 0);
      if (indexing) {
        const t1 = performance.now();
        await indexing(segment, chunk.map((d) => d.text));
        indexMs += performance.now() - t1;
      }
    }
    return { seconds: (performance.now() - t0) / 1000, runSeconds: runMs / 1000, indexSeconds: indexMs / 1000, tokens, cpu: cpuSince(cpu0) };
  } finally {
    setInferenceObserver(undefined);
  }
}

/** A fresh collection's index stage in process: (compressed segment bytes, the batch's texts) -> its search objects, as indexProcessor computes them. */
function bareIndexer(setup: BareIndexSetup): (segment: Uint8Array, texts: string[]) => Promise<void> {
  const settings = CreateCollectionSchema.parse({ id: 'bench-ingest', model: setup.model });
  const collection: Collection = { ...settings, tenantId: 'bench', model: setup.model, dims: setup.encoder.dims, maxDocTokens: setup.encoder.manifest.maxDocTokens, codecVersion: 1, createdAt: new Date(0).toISOString() };
  // In-memory stand-ins for the S3 repositories' conditional writes (the first fit is the one kept).
  const inMemory = <T>() => {
    let held: Promise<T> | undefined;
    return { ensure: (_t: string, _c: string, _v: number, fit: () => T | Promise<T>) => (held ??= Promise.resolve().then(fit)) };
  };
  const deps: SegmentIndexerDeps = {
    ivf: inMemory(),
    warpCodecs: inMemory(),
    encoders: () => Promise.resolve(setup.encoder),
    ivfCentroids: setup.ivfCentroids,
    assigner: setup.assigner,
  };
  let batch = 0;
  return async (segment, texts) => {
    const reader = readSegment(segment, `bench/${batch++}`);
    // the `english` analyser's terms (the collection default), as batchBm25Terms reads them from the batch's texts
    const terms = settings.bm25.analyzer === 'english' ? analyzeTexts(texts) : undefined;
    await segmentSearchObjects(deps, collection, reader, collection.codecVersion, terms);
  };
}

interface PipelineProfile {
  /** The encoder's session.run seconds in the pipeline (from /metrics; null with metrics off). */
  encoder_run_s: number | null;
  /** Seconds from the first POST to the first encode job's start (upload, queueing, pick-up). */
  before_first_encode_s: number;
  /** Seconds during which at least one encode job ran. */
  encode_busy_s: number;
  /** Seconds between the first encode job's start and the last one's end with no encode job running. */
  encode_gaps_s: number;
  /** Seconds from the last encode job's end to the last document indexed and committed. */
  after_last_encode_s: number;
  /** Summed job time per stage (jobs of a stage may overlap each other and other stages). */
  stage_job_s: Record<string, number>;
  encode_jobs: number;
}

interface PipelineRun {
  variant: 'on' | 'off';
  seconds: number;
  tokens: number;
  scrapes: number;
  profile: PipelineProfile;
  cpu: CpuUse;
}

async function pipelineRun(config: ReturnType<typeof loadConfig>, docs: { id: string; text: string }[], variant: 'on' | 'off', logFile: string, graph: string, label: string, json: boolean): Promise<PipelineRun> {
  // The pipeline: HTTP -> S3 -> encode -> S3 -> compress -> S3 -> index -> commit.
  setMetricsEnabled(variant === 'on');
  const logStream = variant === 'on' ? createWriteStream(logFile, { flags: 'a' }) : null;
  const logger = logStream ? createLogger('info', 'lateral', { json: true, destination: logStream }) : createLogger('warn', 'lateral');
  const server = await startServer(config, { logger });
  let scrapes = 0;
  // A scrape that fails (an overloaded machine resets connections) is not counted, and never stops the bench.
  const scrape = () =>
    fetchRetrying(`${server.url}/metrics`)
      .then((r) => r.text())
      .then((text) => {
        scrapes++;
        return text;
      })
      .catch(() => undefined);
  const scraper = variant === 'on' ? setInterval(() => void scrape(), 5000) : null;
  try {
    await recreateCollection(server.url, 'bench-ingest', config.DEFAULT_MODEL);
    const startedAt = Date.now();
    const cpu0 = cpuSnapshot();
    // Status read once a second, as a client would: at 100 ms each ingestion's status was read 10 times a
    // second, and on this 2-core machine those reads (API and S3 threads) took as much CPU as one of the
    // encoder's threads, work the bare encoding does not do and the pipeline's documents do not need.
    const run = await ingest(server.url, 'bench-ingest', docs, { label, progress: !json, pollMs: STATUS_POLL_MS });
    const cpu = cpuSince(cpu0);
    const endedAt = startedAt + run.seconds * 1000;
    const metricsText = variant === 'on' ? await scrape() : undefined;
    const profile = await profileOf(server.runtime.queues, startedAt, endedAt, metricsText === undefined ? null : inferenceSeconds(metricsText, graph));
    return { variant, ...run, scrapes, profile, cpu };
  } finally {
    if (scraper) clearInterval(scraper);
    await server.stop();
    await new Promise<void>((r) => (logStream ? logStream.end(() => r()) : r()));
  }
}

/** The sum of lateral_onnx_inference_seconds_sum over the series of `graph` (the encoder's model name). */
function inferenceSeconds(text: string, graph: string): number | null {
  let sum = 0;
  let found = false;
  for (const line of text.split('\n')) {
    if (!line.startsWith('lateral_onnx_inference_seconds_sum{') || !line.includes(`graph="${graph}"`)) continue;
    sum += Number(line.slice(line.lastIndexOf(' ') + 1));
    found = true;
  }
  return found ? sum : null;
}

type Queues = Awaited<ReturnType<typeof startServer>>['runtime']['queues'];

/** Where the pipeline's time went, from the completed jobs' processedOn / finishedOn (see the module comment). */
async function profileOf(queues: Queues, startedAt: number, endedAt: number, encoderRunSeconds: number | null): Promise<PipelineProfile> {
  const spans = async (name: QueueName) =>
    (await queues.get(name).getJobs(['completed'], 0, -1))
      .filter((j) => (j.data as { collectionId?: string }).collectionId === 'bench-ingest' && (j.processedOn ?? 0) >= startedAt && j.finishedOn !== undefined)
      .map((j) => [j.processedOn!, j.finishedOn!] as const)
      .sort((a, b) => a[0] - b[0]);
  const stage_job_s: Record<string, number> = {};
  for (const name of [QueueName.encode, QueueName.compress, QueueName.index, QueueName.commit]) stage_job_s[name] = round((await spans(name)).reduce((s, [a, b]) => s + (b - a), 0) / 1000, 1);
  const enc = await spans(QueueName.encode);
  let busy = 0;
  let reach = -Infinity;
  for (const [a, b] of enc) {
    if (b <= reach) continue;
    busy += b - Math.max(a, reach);
    reach = b;
  }
  const first = enc.length ? enc[0][0] : startedAt;
  const last = enc.length ? Math.max(...enc.map(([, b]) => b)) : startedAt;
  return {
    encoder_run_s: encoderRunSeconds === null ? null : round(encoderRunSeconds, 1),
    before_first_encode_s: round((first - startedAt) / 1000, 1),
    encode_busy_s: round(busy / 1000, 1),
    encode_gaps_s: round((last - first - busy) / 1000, 1),
    after_last_encode_s: round((endedAt - last) / 1000, 1),
    stage_job_s,
    encode_jobs: enc.length,
  };
}

function describeProfile(p: PipelineProfile): string {
  const stages = Object.entries(p.stage_job_s).map(([k, v]) => `${k} ${v}`).join(', ');
  return `${p.encode_jobs} encode jobs; session.run ${p.encoder_run_s ?? '?'} s; before the first encode ${p.before_first_encode_s} s, encode stage busy ${p.encode_busy_s} s with ${p.encode_gaps_s} s gaps, after the last ${p.after_last_encode_s} s; job seconds ${stages}`;
}

function median(xs: number[]): number {
  const v = [...xs].sort((a, b) => a - b);
  return v.length % 2 ? v[(v.length - 1) / 2] : (v[v.length / 2 - 1] + v[v.length / 2]) / 2;
}

function round(x: number, digits = 1): number {
  return Number(x.toFixed(digits));
}

/** CPU seconds of a phase: this process (all its threads), its busiest threads by kernel id (the main thread is `main`), and its child processes (Redis). */
interface CpuUse {
  total_s: number;
  process_s: number;
  children_s: number;
  threads: Record<string, number>;
}

interface CpuSnapshot {
  process: NodeJS.CpuUsage;
  threads: Map<string, number>;
  children: Map<string, number>;
}

/** Ticks (utime + stime, USER_HZ 100) from a /proc stat line, or 0. */
function ticksOf(statPath: string): number {
  try {
    const text = readFileSync(statPath, 'utf8');
    const f = text.slice(text.lastIndexOf(')') + 2).split(' ');
    return Number(f[11]) + Number(f[12]);
  } catch {
    return 0;
  }
}

function cpuSnapshot(): CpuSnapshot {
  const threads = new Map<string, number>();
  const children = new Map<string, number>();
  if (process.platform === 'linux') {
    for (const t of readdirSync('/proc/self/task')) threads.set(t, ticksOf(`/proc/self/task/${t}/stat`));
    for (const p of readdirSync('/proc')) {
      if (!/^\d+$/.test(p)) continue;
      try {
        const text = readFileSync(`/proc/${p}/stat`, 'utf8');
        if (Number(text.slice(text.lastIndexOf(')') + 2).split(' ')[1]) === process.pid) children.set(p, ticksOf(`/proc/${p}/stat`));
      } catch {
        // gone meanwhile
      }
    }
  }
  return { process: process.cpuUsage(), threads, children };
}

function cpuSince(a: CpuSnapshot): CpuUse {
  const b = cpuSnapshot();
  const u = process.cpuUsage(a.process);
  const process_s = (u.user + u.system) / 1e6;
  let children = 0;
  for (const [p, t] of b.children) children += t - (a.children.get(p) ?? 0);
  const deltas = [...b.threads].map(([tid, t]) => [tid === String(process.pid) ? 'main' : tid, (t - (a.threads.get(tid) ?? 0)) / 100] as const).filter(([, s]) => s >= 0.5);
  deltas.sort((x, y) => y[1] - x[1]);
  const threads: Record<string, number> = {};
  for (const [tid, s2] of deltas.slice(0, 8)) threads[tid] = round(s2, 1);
  return { total_s: round(process_s + children / 100, 1), process_s: round(process_s, 1), children_s: round(children / 100, 1), threads };
}
