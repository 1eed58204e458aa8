/**
 * `npm run bench -- scale [--json] [...]` (`--help`: every flag with its default; scale-flags.ts).
 *
 * A collection of `--docs` documents (default 1,000,000) built through the real pipeline, then
 * served (issue 10, item 6). Documents: the vendored corpora's passages with variations
 * (scale-docs.ts: sentence shuffles and word-model substitutions, deterministic from `--seed`).
 *
 * Processes, each its own, on loopback, as a deployment runs them: redis-server, the S3 server
 * (s3rver, scale-s3.ts), the API (apps/api), one ingest worker (apps/encoder-worker with
 * WORKER_QUEUES=encode,compress,index,commit,merge,refit,encode-texts: the fault suite's split, plus the
 * text candidates of the cold rounds' model warm-up) and one scorer
 * (WORKER_QUEUES=rerank,search, `SCORER_CACHE_BYTES` = `--cache-bytes`, default the configured
 * 2 GiB). Each runs with the glibc allocator settings the images set (`MALLOC_ARENA_MAX=2
 * MALLOC_MMAP_THRESHOLD_=1048576`, infra/Dockerfile) unless the environment sets them or
 * `--glibc-defaults` is given (then glibc's own defaults: a scorer cycling its cache keeps freed
 * buffers and passes its RSS target at 1,000,000 documents). This process is the client: it posts NDJSON requests of `--per-request` documents
 * (default 1,000), two at a time, never more than `--window` documents (default 16,000) accepted
 * and not yet committed, honouring 503 / 429 Retry-After, and counts accepted against committed
 * documents (an ingestion is committed when its status says done).
 *
 * Measured: ingest docs/s and tokens/s (first POST to the last ingestion done), S3 bytes per token
 * (segments, from the collection; and everything under the S3 folder), VmRSS of every process
 * sampled each second (peak, steady = median of the last third, and the medians of the second and
 * last quarters of ingest, which are equal when RSS is flat), re-rank latency p50 / p95 of 100 and
 * 1,000 id candidates with a warm cache (the same candidate set again, other queries) and a cold one
 * (a new scorer process, its query model loaded by a text re-rank first, then one re-rank: the
 * segments come from the local disk cache, not S3), search latency per mode, and a sweep of
 * re-ranks of random 1,000-candidate sets (every segment in turn) with the cache bound and with
 * half of it, RSS of the scorer in each. With --json the last line is one JSON object.
 *
 * Search, per mode: p50 / p95 through HTTP (POST until the completed answer) and of the search job
 * itself (`search_job_ms`: the result's timings.searchMs, first stage and merge after query
 * encoding, and totalMs); then the top 10 of `--overlap-queries` sampled queries (default 50, one
 * batched request per mode) against exhaustive MaxSim's (`overlap_with_exhaustive`).
 * `--layout warp [--bits 2|4]` (the default, as the service's) creates the collection with WARP's
 * centroid-major search layout (`search: { layout: 'warp', bits }`; mode xtr, hybrid's xtr part and
 * sharded searches run WARP's engine over it), `--layout ivf` with `search: { layout: 'ivf' }` (XTR
 * over the segment index's IVF); its WARP xtr searches also report what each query read (`search_reads`: bytes of
 * list ranges and ranged reads per query, from stats.warp) and `search_layout_bytes_per_token`.
 *
 * Where the scorer's memory goes: after the warm re-ranks, after each search mode and after each
 * sweep the bench reads the scorer's own gauges (its /metrics: resident set, V8 heap used and
 * total, memory outside the heap (array buffers), the segment cache's bytes), `scorer_memory` in
 * the JSON. RSS far above heap + external is memory the allocator holds and has not returned.
 * `--variant-env K=V,...` serves the same collection once more with a scorer started with those
 * environment variables added (the same re-ranks, searches and sweep, full bound), for a same-load
 * comparison (for example `MALLOC_ARENA_MAX=2`): `variant` in the JSON. `--heap-snapshot` has the
 * scorer write a V8 heap snapshot after the full-bound sweep (`--snapshot-dir`, default the
 * repository root): what holds its memory, array buffers' backing stores included.
 *
 * Building and serving apart: `--keep` leaves the run's folder (printed at the start) in place and,
 * once the ingest is done, records its figures there; `--reuse DIR` then serves that collection
 * again (a new Redis, the same S3 folder and local disk cache) without ingesting: a large collection
 * is built once (`--ingest-only --keep`) and served by later code or with other settings. With a
 * `--docs` above the kept count, `--reuse` first posts the rest (same generator and `--seed`): a
 * collection built over several runs, its figures summed and each run's in `ingest_parts`.
 */
import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import { CONFIG_KEYS, mulberry32 } from '@lateral/shared';
import { createRedis, freePort, startEmbeddedRedis, type EmbeddedRedis } from '@lateral/infra';
import { fetchRetrying } from '../lib/client';
import { DocumentGenerator, checkScaleResult, docId, loadSourceCorpus, percentile, round, summarizeRss, topOverlap } from './scale-docs';
import { SEARCH_MODES, scaleFlags } from './scale-flags';
import { api, duBytes, procCpuSeconds, procMem, resumedResult, ROOT, sleep, startProc, type Json, type Proc } from './scale-harness';

const DATASETS = path.resolve(ROOT, '..', 'shared', 'datasets');
const BUCKET = 'scale';

/** What a kept run records once its ingest is done, for `--reuse`. */
const INGEST_STATE = 'bench-ingest.json';

export async function runScaleBench(args: string[]): Promise<Record<string, unknown>> {
  const { N, model, codec, codecName, searchLayout, seed, perRequest, window, cacheBytes, rounds, coldRounds, ingestOnly, ingestLimitS, drainS, searchModes, searchTimeoutMs, overlapQueries, variantEnv, json, allocatorEnv, reuseDir, snapshotDir, keep } =
    scaleFlags(args);
  const say = (s: string) => (json ? console.error(s) : console.log(s));
  const t00 = performance.now();

  const corpus = loadSourceCorpus(DATASETS);
  const gen = new DocumentGenerator(corpus, seed);
  say(`source passages ${JSON.stringify(corpus.sources)}, ${corpus.words.length} words in the word model, ${corpus.queries.length} queries`);

  // --reuse DIR: serve the collection a kept run (--keep, or --ingest-only --keep) left in DIR: its S3
  // folder (collections, generations and segments live in S3 alone) and its ingest figures; a new Redis.
  // A kept folder without recorded figures (a run that stopped after its ingest) is served with its ingest figures unknown.
  const reuseUnrecorded = !!reuseDir && !existsSync(path.join(reuseDir, INGEST_STATE));
  if (reuseUnrecorded && !existsSync(path.join(reuseDir!, 's3'))) throw new Error(`--reuse: ${reuseDir} is not a kept run's folder (no s3/)`);
  const dir = reuseDir ?? mkdtempSync(path.join(process.env.SCALE_DIR ?? os.tmpdir(), 'lateral-bench-scale-'));
  const procs: Record<string, Proc | undefined> = {};
  let redis: EmbeddedRedis | undefined;
  const samples: Record<string, { t: number; phase: string; rss: number }[]> = {};
  const hwm: Record<string, number> = {};
  // CPU seconds by role and pid (a restarted scorer is a new pid): summed, what the work cost on a shared machine.
  const cpu: Record<string, Map<number, number>> = {};
  const cpuOf = (role: string) => [...(cpu[role]?.values() ?? [])].reduce((a, b) => a + b, 0);
  let phase = 'start';
  const pidOf = (role: string) => (role === 'redis' ? redis?.pid : procs[role]?.child.pid);
  const ROLES = ['api', 'ingest-worker', 'scorer', 's3', 'redis', 'bench'];
  const sample = () => {
    for (const role of ROLES) {
      const pid = role === 'bench' ? process.pid : pidOf(role);
      const m = procMem(pid);
      // A process on its way out (a scorer being restarted) has no VmRSS line any more: no sample.
      if (!m || !pid || !Number.isFinite(m.rss)) continue;
      const c = procCpuSeconds(pid);
      if (c !== null) (cpu[role] ??= new Map()).set(pid, c);
      (samples[role] ??= []).push({ t: (performance.now() - t00) / 1000, phase, rss: m.rss });
      // VmHWM is per process: a restarted scorer starts again from 0, so keep the highest seen.
      if (Number.isFinite(m.hwm)) hwm[role] = Math.max(hwm[role] ?? 0, m.hwm);
    }
  };
  const sampler = setInterval(sample, 1000);
  let counter: ReturnType<typeof createRedis> | null = null;
  try {
    // --reuse starts an empty Redis (its own folder): the kept run's Redis folder holds its queues, and a run stopped
    // during its ingest left jobs there that would encode, commit and merge (refits included) while this run serves.
    redis = await startEmbeddedRedis({ dir: path.join(dir, reuseDir ? `redis-reuse-${process.pid}` : 'redis') });
    const s3 = await startProc('s3', 'scripts/bench/scale-s3.ts', [path.join(dir, 's3'), BUCKET], { ...process.env }, /S3 (http:\/\/\S+)/);
    procs.s3 = s3;
    const port = await freePort();
    const base = `http://127.0.0.1:${port}`;
    const vars: NodeJS.ProcessEnv = {
      ...allocatorEnv,
      ...process.env,
      REDIS_URL: redis.url,
      S3_ENDPOINT: s3.match[1],
      S3_BUCKET: BUCKET,
      REDIS_PREFIX: `scale${randomBytes(3).toString('hex')}`,
      DATA_DIR: path.join(dir, 'data'),
      MODELS_DIR: path.resolve(ROOT, '.cache/models'),
      DEFAULT_MODEL: model,
      NODE_ENV: 'production',
      LOG_LEVEL: 'info',
      METRICS_PORT: '0',
      AUTH: 'none',
    };
    // Maintenance as ingest goes: merge jobs done and waiting, refit jobs waiting and running (BullMQ's keys).
    counter = createRedis(redis.url, 'producer');
    const maintenanceCounts = async () => {
      const k = (q: string, what: string) => `${vars.REDIS_PREFIX}:${q}:${what}`;
      const c = counter!;
      const [done, waiting, refitsWaiting, refitsActive] = await Promise.all([c.zcard(k('merge', 'completed')), c.llen(k('merge', 'wait')), c.llen(k('refit', 'wait')), c.llen(k('refit', 'active'))]);
      return { merges_done: done, merges_waiting: waiting, refits_waiting: refitsWaiting, refits_active: refitsActive, ...warpEpochs() };
    };
    // How far the WARP refits got (read from the S3 server's folder, as objects stored by s3rver): the
    // newest centroid epoch fitted, and the segments of the newest manifest by the epoch of their layout.
    const warpEpochs = (): { epoch_fitted: number; segments_by_epoch: Record<string, number> } => {
      const root = path.join(dir, 's3', BUCKET, 'tenants', 'default', 'collections', 'bench-scale');
      const files = (sub: string) => (existsSync(path.join(root, sub)) ? readdirSync(path.join(root, sub)).filter((f) => f.endsWith('._S3rver_object')) : []);
      const epoch_fitted = Math.max(0, ...files('ivf').map((f) => Number(/\.e(\d+)\.centroids/.exec(f)?.[1] ?? 0)));
      const segments_by_epoch: Record<string, number> = {};
      const newest = files('manifests').sort().at(-1);
      try {
        const m = newest ? (JSON.parse(readFileSync(path.join(root, 'manifests', newest), 'utf8')) as { segments: { warpEpoch?: number }[] }) : null;
        for (const sg of m?.segments ?? []) segments_by_epoch[`e${sg.warpEpoch ?? 0}`] = (segments_by_epoch[`e${sg.warpEpoch ?? 0}`] ?? 0) + 1;
      } catch {
        // a manifest being written or collected at that instant: none this sample
      }
      return { epoch_fitted, segments_by_epoch };
    };
    const segmentTrace: ({ s: number; committed: number; segments: number; generation: number } & Awaited<ReturnType<typeof maintenanceCounts>>)[] = [];
    procs.api = await startProc('api', 'apps/api/src/main.ts', [], { ...vars, PORT: String(port), HOST: '127.0.0.1' }, /API on http/);
    procs['ingest-worker'] = await startProc('ingest-worker', 'apps/encoder-worker/src/main.ts', [], { ...vars, WORKER_QUEUES: 'encode,compress,index,commit,merge,refit,encode-texts' }, /working on/);
    let scorerMetricsPort = 0;
    const startScorer = async (cache: number, extraEnv: NodeJS.ProcessEnv = {}) => {
      scorerMetricsPort = await freePort();
      procs.scorer = await startProc('scorer', 'apps/scorer-worker/src/main.ts', [], { ...vars, ...extraEnv, WORKER_QUEUES: 'rerank,search', SCORER_CACHE_BYTES: String(cache), METRICS_PORT: String(scorerMetricsPort) }, /working on/);
    };
    const restartScorer = async (cache: number, extraEnv: NodeJS.ProcessEnv = {}) => {
      await procs.scorer?.stop();
      await startScorer(cache, extraEnv);
    };
    // --heap-snapshot: the scorer writes a V8 heap snapshot on SIGUSR2 (taken after the full-bound sweep), into --snapshot-dir.
    await startScorer(cacheBytes, snapshotDir ? { NODE_OPTIONS: `${process.env.NODE_OPTIONS ?? ''} --heapsnapshot-signal=SIGUSR2 --diagnostic-dir=${snapshotDir}`.trim() } : {});
    say(`processes: ${ROLES.map((r) => `${r} ${pidOf(r) ?? process.pid}`).join(', ')}; data under ${dir}`);

    // ---- ingest
    const collection = 'bench-scale';
    let ingested!: number;
    let result!: Record<string, unknown>;
    let ingestRss!: Record<string, ReturnType<typeof summarizeRss>>;
    // A kept collection smaller than --docs is resumed: documents [kept, N) are posted (the same generator and seed), then all are served.
    type Saved = { ingested: number; result: Record<string, unknown>; ingestRss: typeof ingestRss };
    let resumed: Saved | null = null;
    if (reuseDir) {
      const saved: Saved = reuseUnrecorded
        ? await (async () => {
            const d = (await api(base, 'GET', `/v1/collections/${collection}`)).body as { documents: number; tokens: number; segments: number; generation: number; bytesPerToken: number; search?: { layout: string; bits: number } };
            say(`--reuse: ${reuseDir} holds no ${INGEST_STATE}: ingest figures unknown; documents 0 to ${d.documents - 1} taken as the collection`);
            return { ingested: d.documents, ingestRss: {}, result: { bench: 'scale', docs: d.documents, docs_requested: N, tokens: d.tokens, model, codec: codecName, search_layout: d.search ?? null, documents_source: `vendored corpora with variations (seed ${seed})`, ingest: null, ingest_docs_per_s: null, ingest_recorded: false, segments: d.segments, generation: d.generation, bytes_per_token: round(d.bytesPerToken, 3), scorer_cache_bytes: cacheBytes, cpus: os.cpus().length } };
          })()
        : (JSON.parse(readFileSync(path.join(reuseDir, INGEST_STATE), 'utf8')) as Saved);
      // null: a collection kept from before the layout was always named (the IVF path then).
      const savedLayout = (saved.result.search_layout as { layout: string; bits?: number } | null | undefined) ?? { layout: 'ivf' };
      if (JSON.stringify(savedLayout) !== JSON.stringify(searchLayout)) throw new Error(`--reuse: ${reuseDir} holds a collection with search layout ${JSON.stringify(savedLayout)}; pass ${savedLayout.layout === 'warp' ? `--layout warp --bits ${savedLayout.bits}` : '--layout ivf'}`);
      if (saved.result.model !== model || saved.result.codec !== codecName) throw new Error(`--reuse: ${reuseDir} holds a ${saved.result.model} / ${saved.result.codec} collection; pass --model ${saved.result.model} --codec ${saved.result.codec}`);
      const savedSeed = Number(/seed (\d+)\)/.exec(String(saved.result.documents_source))?.[1]);
      if (savedSeed !== seed) throw new Error(`--reuse: ${reuseDir} was built with --seed ${savedSeed}; pass it`);
      const desc = (await api(base, 'GET', `/v1/collections/${collection}`)).body as { documents: number; segments: number; generation: number };
      if (desc.documents !== saved.ingested) throw new Error(`--reuse: the kept collection has ${desc.documents} live documents, its ingest recorded ${saved.ingested}`);
      if (N > saved.ingested) {
        resumed = saved;
        say(`--reuse: ${saved.ingested} documents kept (${desc.segments} segments, generation ${desc.generation}); posting documents ${saved.ingested} to ${N} before serving`);
      } else {
        ({ ingested, result, ingestRss } = saved);
        say(`--reuse: serving the kept collection of ${ingested} documents (${desc.segments} segments, generation ${desc.generation}); ingest figures are those recorded when it was built`);
      }
      (resumed ?? saved).result.reused_from = reuseDir;
    }
    if (!reuseDir || resumed) {
      if (!resumed) await api(base, 'POST', '/v1/collections', JSON.stringify({ id: collection, model, codec, search: searchLayout }));
      phase = 'ingest';
      const retries = { n: 0 };
      const first = resumed?.ingested ?? 0;
      let next = first;
      let accepted = 0;
      let committed = 0;
      let failedDocs = 0;
      let postersDone = 0;
      const outstanding: { status: string; documents: number; since: number }[] = [];
      const tIngest = performance.now();
      let lastProgress = performance.now();
      let lastPrint = 0;
      const poster = async () => {
        while (next < N && !(ingestLimitS > 0 && (performance.now() - tIngest) / 1000 >= ingestLimitS)) {
          if (accepted - committed - failedDocs >= window) {
            await sleep(200);
            continue;
          }
          const from = next;
          const to = Math.min(N, from + perRequest);
          next = to;
          const lines: string[] = [];
          for (let i = from; i < to; i++) lines.push(JSON.stringify(gen.doc(i)));
          const r = await api(base, 'POST', `/v1/collections/${collection}/documents`, lines.join('\n'), 'application/x-ndjson', retries);
          if (r.body.documents !== to - from) throw new Error(`ingest: ${to - from} documents posted, ${r.body.documents} accepted`);
          accepted += r.body.documents;
          outstanding.push({ status: r.body.status, documents: r.body.documents, since: performance.now() });
        }
        postersDone++;
      };
      const poller = async () => {
        while (postersDone < 2 || outstanding.length) {
          await sleep(1000);
          const look = outstanding.slice(0, 24);
          const states = await Promise.all(look.map((o) => api(base, 'GET', o.status).then((r) => r.body as { state: string; stages: { failed: number } })));
          states.forEach((s, k) => {
            if (s.state === 'done' || s.state === 'failed') {
              const o = look[k];
              outstanding.splice(outstanding.indexOf(o), 1);
              if (s.state === 'done') committed += o.documents;
              else failedDocs += o.documents;
              lastProgress = performance.now();
            }
          });
          const secs = (performance.now() - tIngest) / 1000;
          if (secs - lastPrint >= 30) {
            lastPrint = secs;
            // The segment count as ingest goes (merges and WARP refits run beside it; docs/scaling.md, "The refit beside merges").
            const now = (await api(base, 'GET', `/v1/collections/${collection}`)).body as { segments?: number; generation?: number };
            const m = await maintenanceCounts();
            segmentTrace.push({ s: round(secs, 0), committed, segments: now.segments ?? 0, generation: now.generation ?? 0, ...m });
            say(`  ${round(secs, 0)} s: accepted ${accepted}, committed ${committed}, failed ${failedDocs} (${round(committed / secs)} docs/s); ${now.segments} segments, generation ${now.generation}; merge jobs done ${m.merges_done}, waiting ${m.merges_waiting}; refits waiting ${m.refits_waiting}, running ${m.refits_active}, epoch fitted ${m.epoch_fitted}, segments by epoch ${JSON.stringify(m.segments_by_epoch)}; RSS MB ${ROLES.map((r) => `${r} ${round(samples[r]?.at(-1)?.rss ?? NaN, 0)}`).join(', ')}`);
          }
          if (performance.now() - lastProgress > 900_000) throw new Error(`ingest: nothing committed for 15 minutes (accepted ${accepted}, committed ${committed}):\n${procs['ingest-worker']?.tail()}`);
        }
      };
      sample();
      const cpuBefore = Object.fromEntries(ROLES.map((r) => [r, cpuOf(r)]));
      await Promise.all([poster(), poster(), poller()]);
      const ingestSeconds = (performance.now() - tIngest) / 1000;
      // The documents posted (all N, or those posted before --ingest-seconds ran out): what is served below.
      ingested = next;
      if (ingested < N) say(`--ingest-seconds ${ingestLimitS}: posting stopped after ${ingested} of ${N} documents; serving those`);
      sample();
      const ingestCpu = Object.fromEntries(ROLES.map((r) => [r, round(cpuOf(r) - cpuBefore[r], 1)]));
      const pipelineCpu = ['api', 'ingest-worker', 's3', 'redis'].reduce((s, r) => s + ingestCpu[r], 0);
      const desc = (await api(base, 'GET', `/v1/collections/${collection}`)).body as { documents: number; tokens: number; segments: number; segmentBytes: number; bytesPerToken: number; generation: number };
      const s3Bytes = duBytes(path.join(dir, 's3'));
      const ingest = {
        seconds: round(ingestSeconds, 1),
        accepted,
        committed,
        failed: failedDocs,
        live_documents: desc.documents,
        jobs_lost: first + accepted - desc.documents,
        retried_requests: retries.n,
        cpu_seconds: ingestCpu,
      };
      // This run's documents (all of them, or those after a resumed collection's).
      const docs = ingested - first;
      const tokens = desc.tokens - Number(resumed?.result.tokens ?? 0);
      say(`ingest CPU seconds: ${JSON.stringify(ingestCpu)} = ${round(docs / pipelineCpu, 1)} docs per CPU second of the pipeline`);
      say(
        `ingest: ${docs} documents, ${tokens} tokens in ${ingest.seconds} s = ${round(docs / ingestSeconds)} docs/s, ${round(tokens / ingestSeconds, 0)} tokens/s; accepted ${accepted}, committed ${committed}, failed ${failedDocs}, live ${desc.documents}; ${desc.segments} segments, generation ${desc.generation}; ${round(desc.bytesPerToken, 2)} segment B/token, ${round(s3Bytes / desc.tokens, 1)} S3 B/token in all`,
      );
      ingestRss = Object.fromEntries(ROLES.map((r) => [r, summarizeRss((samples[r] ?? []).filter((s) => s.phase === 'ingest').map((s) => s.rss))]));

      result = {
        bench: 'scale',
        docs: ingested,
        docs_requested: N,
        tokens: desc.tokens,
        model,
        codec: codecName,
        search_layout: searchLayout,
        documents_source: `vendored corpora with variations (${Object.entries(corpus.sources).map(([k, v]) => `${k} ${v}`).join(', ')} passages; sentence shuffle + 15% word-model substitutions, seed ${seed})`,
        tokens_per_doc: round(desc.tokens / ingested, 1),
        ingest_docs_per_s: round(docs / ingestSeconds),
        ingest_tokens_per_s: round(tokens / ingestSeconds, 0),
        ingest,
        // CPU seconds of the API, ingest worker, S3 server and Redis per document: what the pipeline
        // costs, less sensitive than docs/s to the other work on a shared machine. On an idle
        // machine of `cpus` cores with this work spread over them: docs/s <= cpus / this.
        ingest_cpu_seconds_per_doc: round(pipelineCpu / docs, 5),
        ingest_docs_per_cpu_s: round(docs / pipelineCpu, 1),
        projection_1m_wall_hours_at_measured_rate: round(1e6 / (docs / ingestSeconds) / 3600, 2),
        projection_1m_hours_idle_machine: round((1e6 * pipelineCpu) / docs / os.cpus().length / 3600, 2),
        segments: desc.segments,
        generation: desc.generation,
        // every 30 s of the ingest: segments, generation, merge jobs done / waiting, refit jobs waiting / running
        segments_over_ingest: segmentTrace,
        maintenance_after_ingest: await maintenanceCounts(),
        bytes_per_token: round(desc.bytesPerToken, 3),
        s3_bytes_per_token: round(s3Bytes / desc.tokens, 2),
        s3_bytes: s3Bytes,
        rss_ingest_mb: ingestRss,
        scorer_cache_bytes: cacheBytes,
        // Configuration the bench's environment set for every process (ENCODE_BATCH_DOCUMENTS for a bulk load, say): the rest are the defaults.
        config_env: Object.fromEntries(CONFIG_KEYS.filter((k) => process.env[k] !== undefined && !/SECRET|PASSWORD|TOKEN|API_KEY/.test(k)).map((k) => [k, process.env[k]])),
        cpus: os.cpus().length,
        loadavg: os.loadavg().map((x) => round(x, 2)),
      };
      if (resumed) result = resumedResult(resumed.result, result, docs);
      if (drainS > 0) {
        // The maintenance left behind: how long the merge queue takes to empty after ingest (--drain-seconds at most), the merge jobs run meanwhile and the segments then.
        const t0 = performance.now();
        const k = (q: string, what: string) => `${vars.REDIS_PREFIX}:${q}:${what}`;
        const mergesLeft = async () => (await Promise.all([counter!.llen(k('merge', 'wait')), counter!.llen(k('merge', 'active')), counter!.zcard(k('merge', 'delayed'))])).reduce((a, b) => a + b, 0);
        const doneBefore = (await maintenanceCounts()).merges_done;
        let left = await mergesLeft();
        while (left > 0 && performance.now() - t0 < drainS * 1000) {
          await new Promise((r) => setTimeout(r, 2000));
          left = await mergesLeft();
        }
        const after = (await api(base, 'GET', `/v1/collections/${collection}`)).body as { segments: number; generation: number };
        const m = await maintenanceCounts();
        result.maintenance_drain = { seconds: round((performance.now() - t0) / 1000, 1), drained: left === 0, merges_left: left, merge_jobs_run: m.merges_done - doneBefore, segments: after.segments, generation: after.generation, ...m, loadavg: os.loadavg().map((x) => round(x, 2)) };
        say(`drain: ${JSON.stringify(result.maintenance_drain)}`);
      }
      if (keep) writeFileSync(path.join(dir, INGEST_STATE), JSON.stringify({ ingested, result, ingestRss }));
    }

    if (!ingestOnly) {
      // ---- re-rank
      const rng = mulberry32(seed * 7919 + 13);
      const randomIds = (k: number) => {
        const s = new Set<number>();
        while (s.size < Math.min(k, ingested)) s.add(Math.floor(rng() * ingested));
        return [...s].map(docId);
      };
      const queryAt = (i: number) => corpus.queries[i % corpus.queries.length];
      let qi = 0;
      const rerank = async (ids: string[]) => {
        const t0 = performance.now();
        const body = JSON.stringify({ collection, queries: [{ id: `q${qi}`, text: queryAt(qi++), candidates: ids }], topK: 10 });
        let st = (await api(base, 'POST', '/v1/rerank?wait=60', body)).body;
        while (st.status !== 'completed' && st.status !== 'failed') {
          if (performance.now() - t0 > 600_000) throw new Error(`re-rank ${st.id}: not done after 600 s (${st.status})`);
          st = (await api(base, 'GET', `/v1/rerank/${st.id}?wait=30`)).body;
        }
        if (st.status === 'failed') throw new Error(`re-rank failed: ${st.error}`);
        const missing = st.result.results[0].missing.length;
        if (missing) throw new Error(`re-rank: ${missing} of ${ids.length} candidates missing`);
        return { ms: performance.now() - t0, serverMs: st.result.timings?.totalMs as number, loadMs: st.result.timings?.loadMs as number };
      };
      const stats = (xs: { ms: number; serverMs: number; loadMs: number }[]) => ({
        p50: round(percentile(xs.map((x) => x.ms), 50)),
        p95: round(percentile(xs.map((x) => x.ms), 95)),
        server_p50: round(percentile(xs.map((x) => x.serverMs), 50)),
        load_p50: round(percentile(xs.map((x) => x.loadMs), 50)),
        n: xs.length,
      });
      const warmUpModel = () =>
        api(base, 'POST', '/v1/rerank?wait=60', JSON.stringify({ model, queries: [{ id: 'w', text: queryAt(0), candidates: [{ text: 'a warm-up candidate' }] }] })).then(async (r) => {
          let st = r.body;
          const t0 = performance.now();
          while (st.status !== 'completed' && st.status !== 'failed') {
            if (performance.now() - t0 > 300_000) throw new Error(`model warm-up re-rank ${st.id}: not done after 300 s (${st.status})`);
            st = (await api(base, 'GET', `/v1/rerank/${st.id}?wait=30`)).body;
          }
          if (st.status === 'failed') throw new Error(`model warm-up re-rank failed: ${st.error}`);
        });
      const metricsText = async () => {
        try {
          return await (await fetchRetrying(`http://127.0.0.1:${scorerMetricsPort}/metrics`)).text();
        } catch {
          return null;
        }
      };
      const cacheMetrics = async () => {
        const text = await metricsText();
        if (text === null) return null;
        return Object.fromEntries(
          text
            .split('\n')
            .filter((l) => l.startsWith('lateral_cache_') && l.includes('scorer-segments'))
            .map((l) => [l.split('{')[0], Number(l.split(' ').at(-1))]),
        );
      };
      // Where the scorer's memory is (its own gauges): resident set, V8 heap, outside the heap, cache.
      const scorerMemory: Record<string, unknown>[] = [];
      const memoryAt = async (at: string) => {
        const text = await metricsText();
        if (text === null) return;
        const lines = text.split('\n');
        const mb = (prefix: string) => {
          const line = lines.find((l) => l.startsWith(prefix));
          return line ? round(Number(line.split(' ').at(-1)) / 2 ** 20, 1) : null;
        };
        const m = {
          at,
          rss_mb: mb('process_resident_memory_bytes '),
          heap_used_mb: mb('nodejs_heap_size_used_bytes '),
          heap_total_mb: mb('nodejs_heap_size_total_bytes '),
          external_mb: mb('nodejs_external_memory_bytes '),
          cache_mb: mb('lateral_cache_bytes{cache="scorer-segments"}'),
        };
        scorerMemory.push(m);
        say(`scorer memory, ${at}: ${JSON.stringify(m)}`);
      };
      // One search request (its queries batched), polled until done: the client's wall time and the result.
      const searchRequest = async (name: string, mode: unknown, queries: { id: string; text: string }[], topK = 10) => {
        const t0 = performance.now();
        let st = (await api(base, 'POST', '/v1/search?wait=60', JSON.stringify({ collection, queries, mode, topK }))).body;
        while (st.status !== 'completed' && st.status !== 'failed') {
          if (performance.now() - t0 > searchTimeoutMs) throw new Error(`search ${name} ${st.id}: not done after ${searchTimeoutMs / 1000} s (${st.status})`);
          st = (await api(base, 'GET', `/v1/search/${st.id}?wait=30`)).body;
        }
        if (st.status === 'failed') throw new Error(`search ${name} failed: ${st.error}`);
        return { ms: performance.now() - t0, result: st.result as Json };
      };
      // Search, every mode, warm. A mode that fails (or does not finish within --search-timeout) is recorded and the bench goes on.
      // Per mode: the client's time through HTTP (POST to the completed answer) and the search job's own (timings.searchMs: the
      // first stage and merge, after query encoding; totalMs: the whole job), p50 / p95; WARP collections' xtr also what each
      // query read (stats.warp: bytes of list ranges, ranged reads).
      const searchEvery = async (label: string) => {
        const modes = Object.fromEntries(Object.entries(SEARCH_MODES).filter(([name]) => searchModes.includes(name)));
        const p50: Record<string, number> = {};
        const p95: Record<string, number> = {};
        const job: Record<string, { search_p50: number; search_p95: number; total_p50: number; total_p95: number; encode_p50: number }> = {};
        const reads: Record<string, { bytes_read_p50: number; bytes_read_p95: number; ranges_p50: number; probed_p50: number; segments: number; centroids: number; nprobe: number; layout_bytes: number }> = {};
        const errors: Record<string, string> = {};
        // Every mode asks the same queries (the warm-up one, then the timed ones), so the modes compare on equal terms.
        const first = qi;
        const n = Math.max(3, Math.round(rounds / 2));
        qi += n + 1;
        for (const [name, mode] of Object.entries(modes)) {
          let at = first;
          const one = async () => {
            const r = await searchRequest(name, mode, [{ id: `s${at}`, text: queryAt(at++) }]);
            return { ms: r.ms, timings: r.result.timings as { totalMs: number; searchMs: number; encodeQueriesMs: number }, warp: r.result.stats?.warp as Json };
          };
          const xs: Awaited<ReturnType<typeof one>>[] = [];
          try {
            await one();
            for (let r = 0; r < n; r++) xs.push(await one());
          } catch (err) {
            errors[name] = (err as Error).message;
            say(`${label}search ${name}: FAILED after ${xs.length} timed queries: ${errors[name]}`);
            continue;
          } finally {
            await memoryAt(`${label}after search ${name}`);
          }
          const pc = (f: (x: (typeof xs)[number]) => number, q: number) => round(percentile(xs.map(f), q));
          p50[name] = pc((x) => x.ms, 50);
          p95[name] = pc((x) => x.ms, 95);
          job[name] = { search_p50: pc((x) => x.timings.searchMs, 50), search_p95: pc((x) => x.timings.searchMs, 95), total_p50: pc((x) => x.timings.totalMs, 50), total_p95: pc((x) => x.timings.totalMs, 95), encode_p50: pc((x) => x.timings.encodeQueriesMs, 50) };
          const w = xs.filter((x) => x.warp);
          if (w.length > 0) {
            const per = (f: (q: { bytesRead: number; ranges: number; probed: number }) => number, q: number) => round(percentile(w.map((x) => f(x.warp.queries[0])), q), 0);
            const last = w.at(-1)!.warp;
            reads[name] = { bytes_read_p50: per((q) => q.bytesRead, 50), bytes_read_p95: per((q) => q.bytesRead, 95), ranges_p50: per((q) => q.ranges, 50), probed_p50: per((q) => q.probed, 50), segments: last.segments, centroids: last.centroids, nprobe: last.nprobe, layout_bytes: last.layoutBytes };
          }
          say(
            `${label}search ${name}: through HTTP p50 ${p50[name]} ms, p95 ${p95[name]} ms; search job p50 ${job[name].search_p50} ms, p95 ${job[name].search_p95} ms (job total p50 ${job[name].total_p50} ms) (${n} queries)` +
              (reads[name] ? `; WARP read per query p50 ${reads[name].bytes_read_p50} B in ${reads[name].ranges_p50} ranges (${reads[name].segments} segments, ${reads[name].centroids} centroids, nprobe ${reads[name].nprobe})` : ''),
          );
        }
        return { p50, p95, job, reads, errors };
      };
      // Top-10 agreement with exhaustive MaxSim on `--overlap-queries` sampled queries (one batched request per mode):
      // per query |top10(mode) ∩ top10(exhaustive)| / |top10(exhaustive)|, averaged.
      const overlapWithExhaustive = async () => {
        const nq = Math.min(overlapQueries, corpus.queries.length);
        if (nq === 0) return null;
        const pick = mulberry32(seed * 104729 + 7);
        const chosen = new Set<number>();
        while (chosen.size < nq) chosen.add(Math.floor(pick() * corpus.queries.length));
        const qs = [...chosen].map((i) => ({ id: `o${i}`, text: corpus.queries[i] }));
        const top = (r: Json) => new Map<string, string[]>(r.results.map((x: Json) => [x.queryId, x.hits.map((h: Json) => h.id)]));
        const t0 = performance.now();
        // An exhaustive job past --search-timeout (10 queries over 100,000 documents took more than 300 s while the
        // WARP refit ran beside it) costs the overlap, not the rest of the run's figures (sweeps, cold re-ranks, RSS).
        let ex: Awaited<ReturnType<typeof searchRequest>>;
        try {
          ex = await searchRequest('exhaustive', 'exhaustive', qs);
        } catch (err) {
          say(`overlap: exhaustive MaxSim: FAILED: ${(err as Error).message}; no overlap figure`);
          return { queries: nq, error: (err as Error).message, seconds: round((performance.now() - t0) / 1000, 1) };
        }
        const exTop = top(ex.result);
        say(`overlap: exhaustive MaxSim over ${nq} queries in one request: ${round(ex.ms / 1000, 1)} s (${round(ex.ms / nq)} ms per query)`);
        const out: Record<string, Json> = { queries: nq, exhaustive_ms_per_query: round(ex.ms / nq) };
        for (const name of searchModes.filter((m) => m !== 'exhaustive')) {
          try {
            const r = await searchRequest(name, SEARCH_MODES[name], qs);
            const o = topOverlap(exTop, top(r.result), 10);
            out[name] = { overlap_at_10: o ? round(o.mean, 3) : null, min: o ? round(o.min, 2) : null, queries: o?.queries ?? 0, ms_per_query: round(r.ms / nq) };
            say(`overlap: ${name} top 10 against exhaustive MaxSim: ${out[name].overlap_at_10} (min ${out[name].min}, ${out[name].queries} queries)`);
          } catch (err) {
            out[name] = { error: (err as Error).message };
            say(`overlap: ${name}: FAILED: ${(err as Error).message}`);
          }
        }
        out.seconds = round((performance.now() - t0) / 1000, 1);
        return out;
      };
      // Sweep: random 1,000-candidate sets (touching segment after segment).
      const sweep = async (label: string) => {
        const xs = [];
        for (let r = 0; r < rounds; r++) xs.push(await rerank(randomIds(1000)));
        const s = stats(xs);
        say(`re-rank sweep (${label}): random 1,000-candidate sets, p50 ${s.p50} ms, p95 ${s.p95} ms`);
        await memoryAt(`after sweep, ${label}`);
        return s;
      };
      // Warm re-ranks of 100 and 1,000 candidates (each set loaded once, then timed).
      const warmReranks = async (label: string) => {
        const out: Record<string, ReturnType<typeof stats>> = {};
        for (const k of [100, 1000]) {
          const ids = randomIds(k);
          await rerank(ids); // loads what the set needs
          const xs = [];
          for (let r = 0; r < rounds; r++) xs.push(await rerank(ids));
          out[`warm_${k}`] = stats(xs);
          say(`${label}re-rank ${k} candidates, warm cache: p50 ${out[`warm_${k}`].p50} ms, p95 ${out[`warm_${k}`].p95} ms (server p50 ${out[`warm_${k}`].server_p50} ms, ${rounds} rounds)`);
        }
        await memoryAt(`${label}after warm re-ranks`);
        return out;
      };
      phase = 'serve';
      const rr: Record<string, ReturnType<typeof stats>> = await warmReranks('');
      const searched = await searchEvery('');
      const searchP50 = searched.p50;
      const searchP95 = searched.p95;
      const searchErrors = searched.errors;
      const overlap = await overlapWithExhaustive();
      rr.sweep_1000 = await sweep(`cache ${cacheBytes} B`);
      const cacheFull = await cacheMetrics();
      if (snapshotDir) {
        const before = new Set(readdirSync(snapshotDir));
        procs.scorer!.child.kill('SIGUSR2');
        const t0 = performance.now();
        // Written once the scorer's event loop is free; the file grows until it is complete (the scorer's metrics answer again).
        let file: string | undefined;
        while (!(file = readdirSync(snapshotDir).find((f) => f.endsWith('.heapsnapshot') && !before.has(f))) && performance.now() - t0 < 300_000) await sleep(500);
        await metricsText();
        say(`scorer heap snapshot: ${file ? path.join(snapshotDir, file) : 'none written within 300 s'}`);
        result.scorer_heap_snapshot = file ? path.join(snapshotDir, file) : null;
      }
      // Cold: a new scorer process for each round (memory cache empty; local disk cache kept).
      phase = 'cold';
      for (const k of [100, 1000]) {
        const xs = [];
        for (let r = 0; r < coldRounds; r++) {
          await restartScorer(cacheBytes);
          await warmUpModel();
          xs.push(await rerank(randomIds(k)));
        }
        rr[`cold_${k}`] = stats(xs);
        say(`re-rank ${k} candidates, cold cache (new scorer, disk cache warm): p50 ${rr[`cold_${k}`].p50} ms, p95 ${rr[`cold_${k}`].p95} ms (${coldRounds} rounds)`);
      }
      const serveRss = summarizeRss((samples.scorer ?? []).filter((s) => s.phase === 'serve').map((s) => s.rss));
      // Half the cache bound.
      phase = 'half';
      await restartScorer(Math.floor(cacheBytes / 2));
      await warmUpModel();
      const halfIds = randomIds(1000);
      await rerank(halfIds);
      const halfWarm = [];
      for (let r = 0; r < rounds; r++) halfWarm.push(await rerank(halfIds));
      rr.half_warm_1000 = stats(halfWarm);
      rr.half_sweep_1000 = await sweep(`cache ${Math.floor(cacheBytes / 2)} B`);
      const cacheHalf = await cacheMetrics();
      const halfRss = summarizeRss((samples.scorer ?? []).filter((s) => s.phase === 'half').map((s) => s.rss));
      say(`scorer RSS: cache ${cacheBytes} B: peak ${serveRss?.peakMb} MB, steady ${serveRss?.steadyMb} MB; half: peak ${halfRss?.peakMb} MB, steady ${halfRss?.steadyMb} MB`);
      const ownPeak = Math.max(...(samples.scorer ?? []).filter((s) => s.phase !== 'variant').map((s) => s.rss));
      // The same serving sequence again (full bound), with the variant's environment added to the scorer's.
      let variant: Record<string, unknown> | null = null;
      if (variantEnv) {
        phase = 'variant';
        await restartScorer(cacheBytes, variantEnv);
        await warmUpModel();
        const label = `[variant ${Object.entries(variantEnv).map(([k, v]) => `${k}=${v}`).join(' ')}] `;
        const vr = await warmReranks(label);
        const vs = await searchEvery(label);
        vr.sweep_1000 = await sweep(`${label}cache ${cacheBytes} B`);
        const vRss = summarizeRss((samples.scorer ?? []).filter((s) => s.phase === 'variant').map((s) => s.rss));
        say(`${label}scorer RSS: peak ${vRss?.peakMb} MB, steady ${vRss?.steadyMb} MB (the base pass: peak ${serveRss?.peakMb} MB, steady ${serveRss?.steadyMb} MB)`);
        variant = { env: variantEnv, rerank_p50_ms: Object.fromEntries(Object.entries(vr).map(([k, v]) => [k, v.p50])), search_p50_ms: vs.p50, search_job_ms: vs.job, search_errors: vs.errors, scorer_rss_mb: vRss };
      }
      Object.assign(result, {
        rerank_p50_ms: Object.fromEntries(Object.entries(rr).map(([k, v]) => [k, v.p50])),
        rerank_p95_ms: Object.fromEntries(Object.entries(rr).map(([k, v]) => [k, v.p95])),
        rerank: rr,
        search_p50_ms: searchP50,
        search_p95_ms: searchP95,
        // The search job's own times per mode (timings.searchMs / totalMs of the result), beside the HTTP figures above.
        search_job_ms: searched.job,
        // WARP collections' xtr: bytes of list ranges and ranged reads per query (stats.warp), the layout's size.
        search_reads: searched.reads,
        search_layout_bytes_per_token: Object.values(searched.reads)[0] ? round((Object.values(searched.reads)[0] as { layout_bytes: number }).layout_bytes / Number(result.tokens), 2) : null,
        search_errors: searchErrors,
        overlap_with_exhaustive: overlap,
        serve_loadavg: os.loadavg().map((x) => round(x, 2)),
        scorer_rss_serve_mb: serveRss,
        scorer_rss_half_cache_mb: halfRss,
        scorer_cache_metrics: { full: cacheFull, half: cacheHalf },
        scorer_rss_target_mb: round(cacheBytes / 2 ** 20 + 1024, 0),
        scorer_within_target: serveRss ? ownPeak <= cacheBytes / 2 ** 20 + 1024 : null,
        // The serving processes' allocator settings (the images' unless --glibc-defaults or the environment's own).
        allocator_env: { MALLOC_ARENA_MAX: vars.MALLOC_ARENA_MAX ?? null, MALLOC_MMAP_THRESHOLD_: vars.MALLOC_MMAP_THRESHOLD_ ?? null },
        scorer_memory: scorerMemory,
        ...(variant ? { variant } : {}),
      });
    } else {
      Object.assign(result, { rerank_p50_ms: {}, rerank_p95_ms: {}, search_p50_ms: {} });
    }
    sample();
    result.rss_peak_mb = Object.fromEntries(ROLES.filter((r) => samples[r]?.length).map((r) => [r, round(Math.max(...samples[r].map((s) => s.rss)), 1)]));
    result.rss_hwm_mb = Object.fromEntries(Object.entries(hwm).map(([r, v]) => [r, round(v, 1)]));
    result.rss_steady_mb = Object.fromEntries(ROLES.filter((r) => samples[r]?.length).map((r) => [r, summarizeRss(samples[r].map((s) => s.rss))?.steadyMb ?? null]));
    result.cpu_seconds = Object.fromEntries(ROLES.map((r) => [r, round(cpuOf(r), 1)]));
    result.total_seconds = round((performance.now() - t00) / 1000, 0);
    for (const r of ROLES) {
      const s = ingestRss[r];
      if (s) say(`RSS ${r.padEnd(13)} ingest: peak ${s.peakMb} MB, steady ${s.steadyMb} MB, 2nd quarter ${s.q2Mb} MB -> last quarter ${s.q4Mb} MB`);
    }
    checkScaleResult(result);
    return result;
  } finally {
    clearInterval(sampler);
    counter?.disconnect();
    for (const role of ['api', 'scorer', 'ingest-worker']) await procs[role]?.stop().catch(() => undefined);
    await procs.s3?.stop().catch(() => undefined);
    await redis?.stop().catch(() => undefined);
    if (!keep && !reuseDir) rmSync(dir, { recursive: true, force: true });
  }
}
