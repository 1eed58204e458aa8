/**
 * `npm run demo [-- --once] [-- --model <dir>]`
 *
 * On a fresh clone: builds the default models if they are not cached, starts Redis (from PATH,
 * unless REDIS_URL is reachable) and the in-process S3 server (unless S3_ENDPOINT is set), starts
 * the API and the workers, ingests Cranfield (1,400 documents) through the HTTP API, runs all 225
 * queries as one asynchronous re-rank job over every document, per scorer, and prints nDCG@10
 * (linear gain) for MaxSim and dense, for every built-in model (all-MiniLM-L6-v2 fp32 and int8 when
 * its PyPI package could be fetched, and the two GloVe models), then for the default model stored
 * EDEN 4-bit and scored from its codes; then searches the default-model collection with every query
 * (xtr, bm25, dense, hybrid) and prints nDCG@10 per mode.
 * With --once the last line is one JSON object; otherwise the server keeps running.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, symlinkSync, rmSync } from 'node:fs';
import path from 'node:path';
import { loadConfig } from '@lateral/shared';
import { freePort, runMain, stopOnSignal } from '@lateral/infra';
import { startServer } from '../apps/all-in-one/src/server';
import { loadCranfield, withPlaceholders } from './lib/cranfield';
import { ndcgAt } from './lib/metrics';
import { getCollection, ingest, recreateCollection, rerank, search } from './lib/client';

const args = process.argv.slice(2);
/** Every model build-model makes, in the order the demo reports them. */
const BUILT_IN_MODELS = ['minilm-l6-384', 'minilm-l6-384-int8', 'glove-ctx-100d', 'glove-static-100d'];
const once = args.includes('--once');
const extraModels = args.flatMap((a, i) => (a === '--model' && args[i + 1] ? [args[i + 1]] : []));

async function main() {
  const build = spawnSync(process.execPath, ['--import', 'tsx', 'scripts/build-model.ts', '--all', '--quiet'], { stdio: 'inherit' });
  if (build.status !== 0) throw new Error('building the default models failed');

  const env = { ...process.env };
  const config = loadConfig({ ...env, PORT: env.PORT ?? String(once ? 0 : 8080), LOG_LEVEL: env.LOG_LEVEL ?? 'warn', DATA_DIR: env.DATA_DIR ?? '.data/demo' });
  if (!once && !env.PORT && !(await portFree(8080))) config.PORT = await freePort();

  // Any other model directory is served by linking it under MODELS_DIR.
  if (!existsSync(path.resolve(config.MODELS_DIR, config.DEFAULT_MODEL, 'manifest.json')) && config.DEFAULT_MODEL === 'minilm-l6-384' && !env.DEFAULT_MODEL) {
    console.log(`note: the default model ${config.DEFAULT_MODEL} is not built (its PyPI package could not be fetched); the demo runs on glove-ctx-100d`);
    config.DEFAULT_MODEL = 'glove-ctx-100d';
  }
  // The default model, the GloVe pair and the pretrained models that build-model could fetch.
  const models = [...new Set([config.DEFAULT_MODEL, ...BUILT_IN_MODELS])].filter((m) => m === config.DEFAULT_MODEL || existsSync(path.resolve(config.MODELS_DIR, m, 'manifest.json')));
  for (const m of BUILT_IN_MODELS) if (!models.includes(m)) console.log(`note: model ${m} is not built (its package could not be fetched); it is left out`);
  for (const dir of extraModels) {
    const name = path.basename(path.resolve(dir));
    const link = path.resolve(config.MODELS_DIR, name);
    if (path.resolve(dir) !== link) {
      mkdirSync(config.MODELS_DIR, { recursive: true });
      rmSync(link, { force: true, recursive: false });
      symlinkSync(path.resolve(dir), link);
    }
    if (!existsSync(path.join(link, 'manifest.json'))) throw new Error(`--model ${dir}: no manifest.json there`);
    models.push(name);
  }

  const server = await startServer(config, { quiet: true });
  const base = server.url;
  console.log(`lateral is up: API ${base}  (Redis ${server.runtime.services.redisUrl}, S3 ${server.runtime.services.s3Endpoint ?? 'AWS'})`);

  const raw = loadCranfield(path.resolve('data/cranfield'));
  const empty = raw.docs.filter((d) => d.text.length === 0);
  if (empty.length) console.log(`note: ${empty.length} Cranfield records have no text (${empty.map((d) => d.id).join(', ')}); they are ingested with a placeholder`);
  const cran = { ...raw, docs: withPlaceholders(raw.docs) };
  const judged = cran.queries.filter((q) => (cran.qrels.get(q.id)?.size ?? 0) > 0);
  const candidates = cran.docs.map((d) => d.id);
  const perModel: Record<string, { 'ndcg@10': { maxsim: number; dense: number }; ingest_seconds: number; rerank_seconds: { maxsim: number; dense: number }; tokens: number }> = {};
  const collectionId = (name: string) => `cranfield-${name}`.replace(/[^A-Za-z0-9_.-]/g, '-');
  /** Re-ranks every document for all 225 queries; mean nDCG@10 over the judged ones. */
  const rerankAll = async (collection: string, scorer: string) => {
    const r = await rerank(base, { collection, queries: cran.queries.map((q) => ({ id: q.id, text: q.text, candidates })), scorer, topK: 10 });
    const byId = new Map(r.results.map((x) => [x.queryId, x.hits.map((h) => h.id)]));
    return { ndcg: judged.reduce((s, q) => s + ndcgAt(byId.get(q.id) ?? [], cran.qrels.get(q.id)!, 10), 0) / judged.length, seconds: r.seconds, vectors: r.vectors };
  };

  for (const model of models) {
    const id = collectionId(model);
    await recreateCollection(base, id, model);
    const ing = await ingest(base, id, cran.docs, { label: `ingest ${model}` });
    const ndcg: Record<string, number> = {};
    const seconds: Record<string, number> = {};
    for (const scorer of ['maxsim', 'dense'] as const) ({ ndcg: ndcg[scorer], seconds: seconds[scorer] } = await rerankAll(id, scorer));
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

  // Search the whole default-model collection (no candidates given): all 225 queries per mode.
  const searchModes: Record<string, unknown> = {
    xtr: { name: 'xtr', kPrime: 1000, nprobe: 32 },
    bm25: 'bm25',
    dense: 'dense',
    'hybrid (xtr + bm25, lambda 0.5 untuned)': { name: 'hybrid', base: 'xtr', fusion: 'linear', lambda: 0.5, normalization: 'minmax' },
  };
  const searched: Record<string, { 'ndcg@10': number; seconds: number }> = {};
  for (const [label, mode] of Object.entries(searchModes)) {
    const r = await search(base, { collection: collectionId(config.DEFAULT_MODEL), mode, topK: 10, queries: cran.queries.map((q) => ({ id: q.id, text: q.text })) });
    const byId = new Map(r.results.map((x) => [x.queryId, x.hits.map((h) => h.id)]));
    const ndcg = judged.reduce((acc, q) => acc + ndcgAt(byId.get(q.id) ?? [], cran.qrels.get(q.id)!, 10), 0) / judged.length;
    searched[label] = { 'ndcg@10': round(ndcg), seconds: round(r.ms / 1000, 2) };
    console.log(`${`search ${label}`.padEnd(20)} nDCG@10 ${ndcg.toFixed(4)}  | 225 queries over all 1400 documents in ${(r.ms / 1000).toFixed(1)} s (${config.DEFAULT_MODEL})`);
  }

  // The default model again, stored EDEN 4-bit (token layout): scored from its codes.
  const cid = collectionId(`${config.DEFAULT_MODEL}-eden4`);
  const codec = { kind: 'eden', bits: 4 };
  await recreateCollection(base, cid, config.DEFAULT_MODEL, { codec });
  const cing = await ingest(base, cid, cran.docs, { label: `ingest ${config.DEFAULT_MODEL} eden-4b` });
  const { ndcg: cNdcg, ...cr } = await rerankAll(cid, 'maxsim');
  const compressed = {
    codec,
    bytes_per_token: round((await getCollection(base, cid)).bytesPerToken, 2),
    fp16_bytes_per_token: round((await getCollection(base, collectionId(config.DEFAULT_MODEL))).bytesPerToken, 2),
    'ndcg@10': { maxsim: round(cNdcg) },
    scored_from: cr.vectors,
    ingest_seconds: round(cing.seconds, 2),
    rerank_seconds: round(cr.seconds, 2),
  };
  console.log(
    `${`${config.DEFAULT_MODEL} eden-4b`.padEnd(20)} nDCG@10 maxsim ${cNdcg.toFixed(4)}  | ${compressed.bytes_per_token} B/token on disk (fp16: ${compressed.fp16_bytes_per_token}), scored from ${cr.vectors}, re-rank 225 x 1400 in ${cr.seconds.toFixed(1)} s`,
  );

  const main = perModel[config.DEFAULT_MODEL];
  const summary = {
    documents: cran.docs.length,
    queries: cran.queries.length,
    judged_queries: judged.length,
    model: config.DEFAULT_MODEL,
    'ndcg@10': main['ndcg@10'],
    ingest_seconds: main.ingest_seconds,
    rerank_seconds: main.rerank_seconds.maxsim,
    models: perModel,
    search: searched,
    compressed,
  };
  if (once) {
    await server.stop();
    console.log(JSON.stringify(summary));
    process.exit(0);
  }
  console.log(`\nServing. API ${base}   OpenAPI ${base}/openapi.json   docs ${base}/docs   (Ctrl-C to stop)`);
  stopOnSignal(() => server.stop());
}

function round(x: number, digits = 4): number {
  return Number(x.toFixed(digits));
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
