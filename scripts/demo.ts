/**
 * `npm run demo [-- --once] [-- --full] [-- --model <dir>] [-- --keep-data] [-- --help]`
 *
 * On a fresh clone (after the one-time install and model build, which print their own progress):
 * starts Redis (from PATH, unless REDIS_URL is reachable) and the in-process S3 server (unless
 * S3_ENDPOINT is set), the API and the workers, and then, through the HTTP API as any user would:
 *
 * default (about 2 minutes on an idle 2-core machine): the default model only. Ingests Cranfield
 * (1,400 documents) with a live progress line per pipeline stage, re-ranks every document for all
 * 225 queries (MaxSim and dense), searches the whole collection in every mode (xtr, bm25, dense,
 * mebert, hybrid with 50 of the queries; exhaustive, the slowest, with 5), re-compresses the collection to EDEN 4-bit from its stored raw vectors (no
 * re-encoding) and re-ranks again from the codes, and prints nDCG@10 (linear gain) for each and
 * the dashboard URL.
 *
 * --full: the complete comparison: every built-in model (all-MiniLM-L6-v2 fp32 and int8 when its
 * PyPI package could be fetched, and the two GloVe models) ingested and re-ranked, the four
 * search modes with all 225 queries, and the default model ingested again stored EDEN 4-bit
 * (about half an hour on the same machine).
 *
 * With --once the last line is one JSON object and the demo's data directory is removed (unless
 * --keep-data or DATA_DIR is given: then its size and location are printed); otherwise the
 * server keeps running and the data's location is printed.
 */
import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, rmSync, statSync, symlinkSync } from 'node:fs';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { loadConfig } from '@lateral/shared';
import { freePort, runMain, stopOnSignal } from '@lateral/infra';
import { startServer } from '../apps/all-in-one/src/server';
import { loadCranfield, withPlaceholders } from './lib/cranfield';
import { ndcgAt } from './lib/metrics';
import { getCollection, ingest, recreateCollection, rerank, search } from './lib/client';

const USAGE = `usage: npm run demo [-- options]

Starts lateral (API, workers, Redis, an S3 server) and runs Cranfield (1,400 documents, 225
queries) through the HTTP API: ingest, re-rank, search in every mode, a compressed comparison.

  --once         exit when done; the last line is one JSON object (default: keep serving)
  --full         the complete comparison: every built-in model, each ingested and re-ranked, and
                 the default model ingested again stored EDEN 4-bit (about 30 minutes on 2 cores;
                 the default run takes about 3)
  --model <dir>  also evaluate this model directory (repeatable; with --full)
  --keep-data    with --once: keep the demo's data directory (default: removed at the end)
  -h, --help     this text

Environment: PORT (default 8080, or a free port), DATA_DIR (default .data/demo; a DATA_DIR you set
is never removed), DEFAULT_MODEL, REDIS_URL, S3_ENDPOINT, ADMIN_TOKEN (default: a random one for
this run, printed with the dashboard URL).`;

/** Every model build-model makes, in the order the --full comparison reports them. */
const BUILT_IN_MODELS = ['minilm-l6-384', 'minilm-l6-384-int8', 'glove-ctx-100d', 'glove-static-100d'];
const DEMO_DATA_DIR = '.data/demo';
/** Queries the default run searches with in each mode (the first judged ones). */
const SEARCH_QUERIES = 50;
/** Queries of the exhaustive search (the slowest mode: every document scored per query). */
const EXHAUSTIVE_QUERIES = 5;

function parseCli(argv: string[]) {
  try {
    return parseArgs({
      args: argv,
      strict: true,
      allowPositionals: false,
      options: {
        once: { type: 'boolean', default: false },
        full: { type: 'boolean', default: false },
        model: { type: 'string', multiple: true, default: [] },
        'keep-data': { type: 'boolean', default: false },
        help: { type: 'boolean', short: 'h', default: false },
      },
    }).values;
  } catch (err) {
    console.error(`demo: ${(err as Error).message} (npm run demo -- --help lists the options)`);
    process.exit(2);
  }
}

const opts = parseCli(process.argv.slice(2));
if (opts.help) {
  console.log(USAGE);
  process.exit(0);
}
if (opts.model.length && !opts.full) {
  console.error('demo: --model needs --full (the default run evaluates the default model only)');
  process.exit(2);
}
const once = opts.once;

type Cranfield = ReturnType<typeof loadCranfield>;
type Base = string;
const collectionId = (name: string) => `cranfield-${name}`.replace(/[^A-Za-z0-9_.-]/g, '-');
const elapsed = (t0: number) => `${((performance.now() - t0) / 1000).toFixed(1)} s`;

async function main() {
  const t0 = performance.now();
  // The default run needs the default models only (a no-op when they are built); --full every one.
  const build = spawnSync(process.execPath, ['--import', 'tsx', 'scripts/build-model.ts', '--quiet', ...(opts.full ? ['--all'] : [])], { stdio: 'inherit' });
  if (build.status !== 0) throw new Error('building the default models failed');

  const env = { ...process.env };
  const dataDirGiven = Boolean(env.DATA_DIR);
  const adminToken = env.ADMIN_TOKEN ?? randomBytes(12).toString('hex');
  const config = loadConfig({
    ...env,
    PORT: env.PORT ?? String(once ? 0 : 8080),
    LOG_LEVEL: env.LOG_LEVEL ?? 'warn',
    DATA_DIR: env.DATA_DIR ?? DEMO_DATA_DIR,
    ADMIN_TOKEN: adminToken,
    // --full compares the models by name (minilm-l6-384 vs minilm-l6-384-int8): each must run its own graph
    ...(opts.full && !env.ENCODER_PRECISION ? { ENCODER_PRECISION: 'fp32' } : {}),
  });
  if (!once && !env.PORT && !(await portFree(8080))) config.PORT = await freePort();

  if (!existsSync(path.resolve(config.MODELS_DIR, config.DEFAULT_MODEL, 'manifest.json')) && config.DEFAULT_MODEL === 'minilm-l6-384' && !env.DEFAULT_MODEL) {
    console.log(`note: the default model ${config.DEFAULT_MODEL} is not built (its PyPI package could not be fetched); the demo runs on glove-ctx-100d`);
    config.DEFAULT_MODEL = 'glove-ctx-100d';
  }

  const server = await startServer(config, { quiet: true });
  const base = server.url;
  console.log(`lateral is up in ${elapsed(t0)}: API ${base}  (Redis ${server.runtime.services.redisUrl}, S3 ${server.runtime.services.s3Endpoint ?? 'AWS'}, data in ${config.DATA_DIR})`);

  const raw = loadCranfield(path.resolve('data/cranfield'));
  const empty = raw.docs.filter((d) => d.text.length === 0);
  if (empty.length) console.log(`note: ${empty.length} Cranfield records have no text (${empty.map((d) => d.id).join(', ')}); they are ingested with a placeholder`);
  const cran: Cranfield = { ...raw, docs: withPlaceholders(raw.docs) };

  const summary = opts.full ? await fullComparison(base, cran, config.DEFAULT_MODEL, config.MODELS_DIR) : await quickTour(base, cran, config.DEFAULT_MODEL);
  const dashboard = `${base}/dashboard`;
  console.log(`\ndashboard: ${dashboard}  (sign in with the admin token ${adminToken})`);
  console.log(`OpenAPI:   ${base}/docs  (the document itself: ${base}/docs/openapi.json)`);
  console.log(`demo finished its run in ${elapsed(t0)}`);
  const result = { ...summary, seconds: round((performance.now() - t0) / 1000, 1) };

  if (once) {
    await server.stop();
    const dir = path.resolve(config.DATA_DIR);
    const size = formatBytes(dirBytes(dir));
    if (!dataDirGiven && !opts['keep-data']) {
      rmSync(dir, { recursive: true, force: true });
      console.log(`removed the demo's data: ${config.DATA_DIR} (${size})`);
    } else console.log(`the demo's data is kept: ${dir} (${size}); remove it with: rm -rf ${config.DATA_DIR}`);
    console.log(JSON.stringify(result));
    process.exit(0);
  }
  console.log(`\nServing. API ${base}   docs ${base}/docs   dashboard ${dashboard}   (Ctrl-C to stop)`);
  console.log(`the demo's data: ${path.resolve(config.DATA_DIR)} (${formatBytes(dirBytes(path.resolve(config.DATA_DIR)))} now); it is kept: remove it with rm -rf ${config.DATA_DIR}`);
  stopOnSignal(() => server.stop());
}

/** The default run: one model, every step of the product once. */
async function quickTour(base: Base, cran: Cranfield, model: string) {
  const judged = cran.queries.filter((q) => (cran.qrels.get(q.id)?.size ?? 0) > 0);
  const id = collectionId(model);

  console.log(`\n1/4 ingest ${cran.docs.length} Cranfield documents with ${model} (encode -> compress -> index -> commit)`);
  await recreateCollection(base, id, model);
  const ing = await ingest(base, id, cran.docs, { label: model, stages: true });
  const fp16 = await getCollection(base, id);
  console.log(`    ${cran.docs.length} documents, ${ing.tokens} token vectors, ${fp16.segments} segments, generation ${fp16.generation}, in ${ing.seconds.toFixed(1)} s`);

  console.log(`\n2/4 re-rank: every one of the ${cran.docs.length} documents for each of the ${cran.queries.length} queries, one job per scorer`);
  const reranked: Record<string, { 'ndcg@10': number; seconds: number }> = {};
  for (const scorer of ['maxsim', 'dense'] as const) {
    const r = await rerankAll(base, cran, judged, id, scorer);
    reranked[scorer] = { 'ndcg@10': round(r.ndcg), seconds: round(r.seconds, 2) };
    console.log(`    ${scorer.padEnd(10)} nDCG@10 ${r.ndcg.toFixed(4)}  in ${r.seconds.toFixed(1)} s`);
  }

  // Searching is per query (xtr and exhaustive cost about as much as a re-rank of every document
  // each): the default run searches with the first SEARCH_QUERIES judged queries; --full with all.
  const sample = judged.slice(0, SEARCH_QUERIES);
  console.log(`\n3/4 search the whole collection (no candidates given), every mode, ${sample.length} of the judged queries in one request each (--full: all ${cran.queries.length})`);
  const modes: Record<string, unknown> = {
    xtr: { name: 'xtr', kPrime: 1000, nprobe: 32 },
    bm25: 'bm25',
    dense: 'dense',
    mebert: 'mebert',
    hybrid: { name: 'hybrid', base: 'xtr', fusion: 'linear', lambda: 0.5, normalization: 'minmax' },
  };
  const searched = await searchModes(base, { ...cran, queries: sample }, sample, id, modes, model, '    ');
  // exhaustive (exact MaxSim over every document, scored in JavaScript on the scorer's event loop)
  // is the reference the other modes approximate: searched with a few queries only, since one job
  // of 50 of them held its worker past its job lock on a loaded machine (step 2's MaxSim re-rank of
  // every document gives its ranking for all of them).
  const fewer = sample.slice(0, EXHAUSTIVE_QUERIES);
  const exhaustive = await searchModes(base, { ...cran, queries: fewer }, fewer, id, { exhaustive: 'exhaustive' }, model, '    ');
  Object.assign(searched, { exhaustive: { ...exhaustive.exhaustive, queries: fewer.length } });

  console.log(`\n4/4 compressed: re-compress the collection to EDEN 4-bit from its stored raw fp16 vectors (no re-encoding), re-rank again`);
  const codec = { kind: 'eden', bits: 4 };
  const tc = performance.now();
  const rc = await fetch(`${base}/v1/collections/${id}/recompress`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ codec }) });
  if (rc.status !== 202) throw new Error(`recompress -> ${rc.status}: ${await rc.text()}`);
  const { codecVersion } = (await rc.json()) as { codecVersion: number };
  let eden = await getCollection(base, id);
  while (eden.pending || eden.codecVersion !== codecVersion) {
    await new Promise((r) => setTimeout(r, 250));
    eden = await getCollection(base, id);
  }
  const recompressSeconds = (performance.now() - tc) / 1000;
  const cr = await rerankAll(base, cran, judged, id, 'maxsim');
  const compressed = {
    codec,
    bytes_per_token: round(eden.bytesPerToken, 2),
    fp16_bytes_per_token: round(fp16.bytesPerToken, 2),
    'ndcg@10': { maxsim: round(cr.ndcg), fp16_maxsim: reranked.maxsim['ndcg@10'] },
    scored_from: cr.vectors,
    recompress_seconds: round(recompressSeconds, 2),
    rerank_seconds: round(cr.seconds, 2),
  };
  console.log(`    fp16         ${compressed.fp16_bytes_per_token} B/token  MaxSim nDCG@10 ${reranked.maxsim['ndcg@10'].toFixed(4)}`);
  console.log(`    EDEN 4-bit   ${compressed.bytes_per_token} B/token  MaxSim nDCG@10 ${cr.ndcg.toFixed(4)}  (scored from ${cr.vectors}; re-compressed in ${recompressSeconds.toFixed(1)} s, re-rank ${cr.seconds.toFixed(1)} s)`);

  return {
    run: 'default',
    documents: cran.docs.length,
    queries: cran.queries.length,
    judged_queries: judged.length,
    model,
    'ndcg@10': { maxsim: reranked.maxsim['ndcg@10'], dense: reranked.dense['ndcg@10'] },
    ingest_seconds: round(ing.seconds, 2),
    rerank_seconds: reranked.maxsim.seconds,
    search: { queries: sample.length, modes: searched },
    compressed,
  };
}

/** `--full`: every built-in model ingested and re-ranked, the four search modes, EDEN 4-bit ingested. */
async function fullComparison(base: Base, cran: Cranfield, defaultModel: string, modelsDir: string) {
  const judged = cran.queries.filter((q) => (cran.qrels.get(q.id)?.size ?? 0) > 0);
  const models = [...new Set([defaultModel, ...BUILT_IN_MODELS])].filter((m) => m === defaultModel || existsSync(path.resolve(modelsDir, m, 'manifest.json')));
  for (const m of BUILT_IN_MODELS) if (!models.includes(m)) console.log(`note: model ${m} is not built (its package could not be fetched); it is left out`);
  // Any other model directory is served by linking it under MODELS_DIR.
  for (const dir of opts.model) {
    const name = path.basename(path.resolve(dir));
    const link = path.resolve(modelsDir, name);
    if (path.resolve(dir) !== link) {
      mkdirSync(modelsDir, { recursive: true });
      rmSync(link, { force: true, recursive: false });
      symlinkSync(path.resolve(dir), link);
    }
    if (!existsSync(path.join(link, 'manifest.json'))) throw new Error(`--model ${dir}: no manifest.json there`);
    models.push(name);
  }

  const perModel: Record<string, { 'ndcg@10': { maxsim: number; dense: number }; ingest_seconds: number; rerank_seconds: { maxsim: number; dense: number }; tokens: number }> = {};
  for (const model of models) {
    const id = collectionId(model);
    await recreateCollection(base, id, model);
    const ing = await ingest(base, id, cran.docs, { label: `ingest ${model}`, stages: true });
    const ndcg: Record<string, number> = {};
    const seconds: Record<string, number> = {};
    for (const scorer of ['maxsim', 'dense'] as const) ({ ndcg: ndcg[scorer], seconds: seconds[scorer] } = await rerankAll(base, cran, judged, id, scorer));
    perModel[model] = {
      'ndcg@10': { maxsim: round(ndcg.maxsim), dense: round(ndcg.dense) },
      ingest_seconds: round(ing.seconds, 2),
      rerank_seconds: { maxsim: round(seconds.maxsim, 2), dense: round(seconds.dense, 2) },
      tokens: ing.tokens,
    };
    console.log(
      `${model.padEnd(20)} nDCG@10 maxsim ${ndcg.maxsim.toFixed(4)}  dense ${ndcg.dense.toFixed(4)}  | ingest ${cran.docs.length} docs (${ing.tokens} tokens) in ${ing.seconds.toFixed(1)} s, re-rank 225 x 1400 in ${seconds.maxsim.toFixed(1)} s (maxsim) / ${seconds.dense.toFixed(1)} s (dense)`,
    );
  }

  const searched = await searchModes(
    base,
    cran,
    judged,
    collectionId(defaultModel),
    {
      xtr: { name: 'xtr', kPrime: 1000, nprobe: 32 },
      bm25: 'bm25',
      dense: 'dense',
      'hybrid (xtr + bm25, lambda 0.5 untuned)': { name: 'hybrid', base: 'xtr', fusion: 'linear', lambda: 0.5, normalization: 'minmax' },
    },
    defaultModel,
    '',
  );

  // The default model again, stored EDEN 4-bit (token layout): scored from its codes.
  const cid = collectionId(`${defaultModel}-eden4`);
  const codec = { kind: 'eden', bits: 4 };
  await recreateCollection(base, cid, defaultModel, { codec });
  const cing = await ingest(base, cid, cran.docs, { label: `ingest ${defaultModel} eden-4b`, stages: true });
  const { ndcg: cNdcg, ...cr } = await rerankAll(base, cran, judged, cid, 'maxsim');
  const compressed = {
    codec,
    bytes_per_token: round((await getCollection(base, cid)).bytesPerToken, 2),
    fp16_bytes_per_token: round((await getCollection(base, collectionId(defaultModel))).bytesPerToken, 2),
    'ndcg@10': { maxsim: round(cNdcg) },
    scored_from: cr.vectors,
    ingest_seconds: round(cing.seconds, 2),
    rerank_seconds: round(cr.seconds, 2),
  };
  console.log(
    `${`${defaultModel} eden-4b`.padEnd(20)} nDCG@10 maxsim ${cNdcg.toFixed(4)}  | ${compressed.bytes_per_token} B/token on disk (fp16: ${compressed.fp16_bytes_per_token}), scored from ${cr.vectors}, re-rank 225 x 1400 in ${cr.seconds.toFixed(1)} s`,
  );

  const main = perModel[defaultModel];
  return {
    run: 'full',
    documents: cran.docs.length,
    queries: cran.queries.length,
    judged_queries: judged.length,
    model: defaultModel,
    'ndcg@10': main['ndcg@10'],
    ingest_seconds: main.ingest_seconds,
    rerank_seconds: main.rerank_seconds.maxsim,
    models: perModel,
    search: searched,
    compressed,
  };
}

/** Re-ranks every document for all 225 queries in one job; mean nDCG@10 over the judged ones. */
async function rerankAll(base: Base, cran: Cranfield, judged: Cranfield['queries'], collection: string, scorer: string) {
  const candidates = cran.docs.map((d) => d.id);
  const r = await rerank(base, { collection, queries: cran.queries.map((q) => ({ id: q.id, text: q.text, candidates })), scorer, topK: 10 });
  const byId = new Map(r.results.map((x) => [x.queryId, x.hits.map((h) => h.id)]));
  return { ndcg: judged.reduce((s, q) => s + ndcgAt(byId.get(q.id) ?? [], cran.qrels.get(q.id)!, 10), 0) / judged.length, seconds: r.seconds, vectors: r.vectors };
}

/** Searches the whole collection (no candidates) with every query, once per mode. */
async function searchModes(base: Base, cran: Cranfield, judged: Cranfield['queries'], collection: string, modes: Record<string, unknown>, model: string, indent: string) {
  const searched: Record<string, { 'ndcg@10': number; seconds: number }> = {};
  for (const [label, mode] of Object.entries(modes)) {
    const r = await search(base, { collection, mode, topK: 10, queries: cran.queries.map((q) => ({ id: q.id, text: q.text })) });
    const byId = new Map(r.results.map((x) => [x.queryId, x.hits.map((h) => h.id)]));
    const ndcg = judged.reduce((acc, q) => acc + ndcgAt(byId.get(q.id) ?? [], cran.qrels.get(q.id)!, 10), 0) / judged.length;
    searched[label] = { 'ndcg@10': round(ndcg), seconds: round(r.ms / 1000, 2) };
    console.log(`${indent}${`search ${label}`.padEnd(20)} nDCG@10 ${ndcg.toFixed(4)}  | ${cran.queries.length} queries over all ${cran.docs.length} documents in ${(r.ms / 1000).toFixed(1)} s (${model})`);
  }
  return searched;
}

function round(x: number, digits = 4): number {
  return Number(x.toFixed(digits));
}

function dirBytes(dir: string): number {
  if (!existsSync(dir)) return 0;
  let total = 0;
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = path.join(dir, e.name);
    if (e.isDirectory()) total += dirBytes(p);
    else if (e.isFile()) total += statSync(p).size;
  }
  return total;
}

function formatBytes(n: number): string {
  return n >= 1e9 ? `${(n / 1e9).toFixed(2)} GB` : n >= 1e6 ? `${(n / 1e6).toFixed(1)} MB` : `${(n / 1e3).toFixed(0)} kB`;
}

async function portFree(port: number): Promise<boolean> {
  const net = await import('node:net');
  return new Promise((resolve) => {
    const s = net.createServer();
    s.once('error', () => resolve(false));
    s.listen(port, '127.0.0.1', () => s.close(() => resolve(true)));
  });
}

runMain(main, 'demo failed: ');
