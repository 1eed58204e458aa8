/**
 * `npm run bench -- rerank-batch [--quick] [--rows N] [--model NAME] [--chunk-rows N] [--json]`
 *
 * Batch re-ranking end to end, the way users run it: a JSONL file of TREC DL 2019's 43 queries x
 * their 100 first-stage candidate *texts* (../shared/datasets/trec-dl-2019-passage), repeated to
 * at least N rows (default 10,000; --quick: 2 repetitions), uploaded to POST /v1/batches of the
 * all-in-one server (API + workers, embedded Redis and S3) and run twice:
 *  - first run: every distinct text is encoded by the encode-texts jobs into the text cache;
 *  - second run (the same file again): every text is reused, none encoded.
 * Reported per run: rows/s and candidate tokens/s from the upload to the batch's completion, the
 * texts encoded / reused, and the share of the wall time spent encoding (encode-texts jobs and
 * query encoding), scoring, and the rest (queues, S3, parsing, result files). The jobs of the two
 * pools run concurrently in this process, so the shares can overlap.
 * The phases of each run: upload (POST until 202: a JSONL body is validated and cut into chunk
 * files as it streams in), plan (from the 202 until the record's startedAt: only for a batch whose
 * plan job cuts it, none here), chunks (re-rank and result files until completion). The completion
 * is waited for with `GET /v1/batches/{id}?wait=10` (woken by the finalize job's completion, no
 * polling; the progress is logged whenever a wait runs out).
 * The MaxSim kernel in the same run: the scorers' GEMM kernel (GemmMaxsim, the one a chunk's
 * maxsim runs) over the same fp16-rounded candidate vectors and encoded queries, one query per
 * call (each query's 100 candidates), and with the query repeated as often as a chunk repeats it
 * (rows sharing a candidate list are scored in one pass). Timed before and after each batch run;
 * the second run's candidate-token rate is reported as a share of the kernel's (median of the
 * passes around it), against both shapes: `secondVsKernel` is the smaller share. The same per CPU
 * second of this process (`secondVsKernelCpu`), steadier than wall time on a machine shared with
 * other work.
 * Checked: the nDCG@10 of the result file equals the in-process evaluation's (MaxSim over the
 * same model's vectors, rounded to fp16 as the text cache keeps them), and every repetition of a
 * query returns the same hits.
 */
import { createReadStream, createWriteStream, mkdtempSync, rmSync } from 'node:fs';
import { Readable } from 'node:stream';
import os from 'node:os';
import path from 'node:path';
import { once } from 'node:events';
import { roundToHalf } from '@lateral/codec';
import { getEncoder, type EncodedText } from '@lateral/model';
import { GemmMaxsim } from '@lateral/kernels';
import { maxsim, topK } from '@lateral/scoring';
import { loadConfig } from '@lateral/shared';
import { startServer, type Server } from '../../apps/all-in-one/src/server';
import { fetchRetrying } from '../lib/client';
import { intFlag, parseCliOrExit } from '../lib/cli';
import { ndcgAt } from '../lib/metrics';
import { loadTrecDlFolder } from '../lib/trec-dl';

const DATASET = '../shared/datasets/trec-dl-2019-passage';

const USAGE = `usage: npm run bench -- rerank-batch [--quick] [--rows N (10000)] [--model NAME (glove-ctx-100d)] [--chunk-rows N (BATCH_CHUNK_ROWS)] [--json]
  --quick       2 repetitions of the 43 judged queries instead of --rows
  --rows N      at least N rows (the queries repeated)
  --model NAME  DEFAULT_MODEL of the server (a model under .cache/models)
  --chunk-rows  BATCH_CHUNK_ROWS of the server (default: the configured one)
  --json        the result as one JSON object on the last line`;

interface RunFigures {
  rows: number;
  seconds: number;
  /** CPU seconds of this process (every thread: API, workers, embedded S3, ONNX Runtime) during the run, and candidate tokens per CPU second. */
  cpuSeconds: number;
  candidateTokensPerCpuSecond: number;
  /** Seconds of each phase: POST until 202, the plan step, the chunks until completion. */
  phases: { upload: number; plan: number; chunks: number };
  rowsPerSecond: number;
  candidateTokensPerSecond: number;
  texts: { encoded: number; reused: number };
  share: { encoding: number; scoring: number; queuesAndS3: number };
  timingsMs: Record<string, number>;
  ndcg10: number;
}

/** POSTs the JSONL file (streamed in 1 MiB reads; a fresh stream per try) through the shared client: 503 / 429 retried after Retry-After. */
async function post(url: string, file: string): Promise<{ status: number; body: Record<string, unknown> }> {
  const res = await fetchRetrying(url, () => ({ method: 'POST', headers: { 'content-type': 'application/jsonl' }, body: Readable.toWeb(createReadStream(file, { highWaterMark: 1 << 20 })) as ReadableStream, duplex: 'half' }) as RequestInit);
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}

export async function runRerankBatchBench(args: string[]): Promise<Record<string, unknown>> {
  const opts = parseCliOrExit('bench rerank-batch', USAGE, args, { quick: { type: 'boolean' }, rows: { type: 'string', default: '10000' }, model: { type: 'string', default: 'glove-ctx-100d' }, 'chunk-rows': { type: 'string' }, json: { type: 'boolean' } }, {}, ({ values: v }) => ({
    quick: v.quick === true,
    rows: intFlag('rows', v.rows),
    model: v.model,
    chunkRows: v['chunk-rows'] === undefined ? undefined : String(intFlag('chunk-rows', v['chunk-rows'])),
  }));
  const { quick, model } = opts;
  const log = (m: string) => process.stderr.write(`${m}\n`);
  const { queries, qrels } = loadTrecDlFolder(path.resolve(DATASET));
  const judged = queries.filter((q) => qrels.has(q.qid) && q.hits.length > 0);
  const reps = quick ? 2 : Math.ceil(opts.rows / judged.length);
  const rows = reps * judged.length;

  // In-process reference: the same model, MaxSim on fp16-rounded document vectors (as cached).
  const enc = await getEncoder(path.resolve('.cache/models', model), { executionProvider: 'cpu' });
  const d = enc.dims;
  let refSum = 0;
  let refSumFp32 = 0;
  let tokensPerRep = 0;
  const refTop = new Map<string, string[]>();
  const kernelCases: { query: EncodedText; docs: Float32Array; offsets: Uint32Array }[] = [];
  for (const q of judged) {
    const [qe] = await enc.encodeQueries([q.text]);
    const docs = await enc.encodeDocuments(q.hits.map((h) => h.content));
    tokensPerRep += docs.reduce((s, e) => s + e.length, 0);
    kernelCases.push(concatRounded(qe, docs, d));
    const ids = q.hits.map((h) => h.docid);
    const s16 = Float32Array.from(docs, (e) => maxsim(qe.vectors, qe.length, roundToHalf(e.vectors), e.length, d));
    const s32 = Float32Array.from(docs, (e) => maxsim(qe.vectors, qe.length, e.vectors, e.length, d));
    const top = topK(s16, ids, 10).map((h) => h.id);
    refTop.set(q.qid, top);
    refSum += ndcgAt(top, qrels.get(q.qid)!, 10);
    refSumFp32 += ndcgAt(topK(s32, ids, 10).map((h) => h.id), qrels.get(q.qid)!, 10);
  }
  const refNdcg = refSum / judged.length;
  const refNdcgFp32 = refSumFp32 / judged.length;
  log(`rerank-batch: ${judged.length} queries x ${reps} = ${rows} rows, ${tokensPerRep} candidate tokens per repetition (${model}); in-process nDCG@10 ${refNdcg.toFixed(4)} (fp16 vectors), ${refNdcgFp32.toFixed(4)} (fp32)`);

  const dir = mkdtempSync(path.join(os.tmpdir(), 'lateral-bench-batch-'));
  const file = path.join(dir, 'batch.jsonl');
  const out = createWriteStream(file);
  const lines = judged.map((q) => JSON.stringify({ query: q.text, candidates: q.hits.map((h) => ({ id: h.docid, text: h.content })), top_k: 10 }).slice(1));
  for (let r = 0; r < reps; r++) {
    for (let i = 0; i < judged.length; i++) {
      if (!out.write(`{"custom_id":"${judged[i].qid}.${r}",${lines[i]}\n`)) await once(out, 'drain');
    }
  }
  out.end();
  await once(out, 'finish');

  const config = loadConfig({
    ...process.env,
    PORT: '0',
    LOG_LEVEL: 'warn',
    DATA_DIR: path.join(dir, 'data'),
    DEFAULT_MODEL: model,
    ...(opts.chunkRows ? { BATCH_CHUNK_ROWS: opts.chunkRows } : {}),
    TEXT_CACHE_MEMORY_MB: process.env.TEXT_CACHE_MEMORY_MB ?? '512',
  });
  // The kernel, as the scorers create it; `grouped`: each query repeated as often as a chunk holds it.
  const gemm = await GemmMaxsim.create(config.ORT_INTRA_OP_THREADS);
  const grouped = Math.max(1, Math.round(Math.min(config.BATCH_CHUNK_ROWS, rows) / judged.length));
  const kernelRate = async (copies: number): Promise<{ wall: number; cpu: number }> => {
    const t = performance.now();
    const c0 = process.cpuUsage();
    for (const c of kernelCases) await gemm.score(Array.from({ length: copies }, () => c.query), c.docs, c.offsets, d);
    const cpu = cpuSecondsSince(c0);
    return { wall: (copies * tokensPerRep) / ((performance.now() - t) / 1000), cpu: (copies * tokensPerRep) / cpu };
  };
  const kernel: { single: number[]; grouped: number[]; singleCpu: number[]; groupedCpu: number[] } = { single: [], grouped: [], singleCpu: [], groupedCpu: [] };
  const timeKernel = async () => {
    const one = await kernelRate(1);
    const many = await kernelRate(grouped);
    kernel.single.push(one.wall);
    kernel.singleCpu.push(one.cpu);
    kernel.grouped.push(many.wall);
    kernel.groupedCpu.push(many.cpu);
  };
  await kernelRate(1); // warm-up
  let server: Server | null = null;
  const runs: RunFigures[] = [];
  try {
    server = await startServer(config, { quiet: true });
    for (const label of ['first (encoding)', 'second (reuse)']) {
      await timeKernel();
      if (process.env.BENCH_PROFMARK) log(`PROFMARK start ${process.hrtime.bigint() / 1000n}`);
      const t0 = performance.now();
      const cpu0 = process.cpuUsage();
      const wallStart = Date.now();
      const created = await post(`${server.url}/v1/batches?model=${model}&topK=10`, file);
      const acceptedAt = Date.now();
      if (created.status !== 202) throw new Error(`POST /v1/batches: ${created.status} ${JSON.stringify(created.body)}`);
      const id = created.body.id as string;
      let st: Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any
      for (;;) {
        st = (await (await fetchRetrying(`${server.url}/v1/batches/${id}?wait=10`)).json()) as Record<string, unknown>;
        if (['completed', 'failed', 'cancelled'].includes(st.state)) break;
        log(`  ${label}: ${st.state} ${(100 * (st.progress?.fraction ?? 0)).toFixed(0)}% eta ${st.progress?.etaSeconds ?? '?'} s`);
      }
      const seconds = (performance.now() - t0) / 1000;
      const cpuSeconds = cpuSecondsSince(cpu0);
      if (process.env.BENCH_PROFMARK) log(`PROFMARK end ${process.hrtime.bigint() / 1000n}`);
      await timeKernel();
      if (st.state !== 'completed') throw new Error(`batch ${id} ${st.state}: ${st.error ?? ''}`);
      // nDCG@10 of the result file, and every repetition equal to the in-process top 10.
      const res = await fetchRetrying(`${server.url}/v1/batches/${id}/results`);
      const text = await res.text();
      let sum = 0;
      let n = 0;
      let mismatched = 0;
      for (const line of text.split('\n')) {
        if (!line) continue;
        const r = JSON.parse(line) as { custom_id: string; hits?: { id: string }[]; error?: unknown };
        if (!r.hits) throw new Error(`row ${r.custom_id} failed: ${JSON.stringify(r.error)}`);
        const qid = r.custom_id.split('.')[0];
        const ranking = r.hits.map((h) => h.id);
        if (ranking.join() !== refTop.get(qid)!.join()) mismatched++;
        sum += ndcgAt(ranking, qrels.get(qid)!, 10);
        n++;
      }
      if (n !== rows) throw new Error(`result file has ${n} rows, expected ${rows}`);
      const t = st.timings as Record<string, number>;
      const encoding = (t.encodeTextsMs ?? 0) + (t.encodeQueriesMs ?? 0);
      const scoring = t.scoreMs ?? 0;
      const wallMs = seconds * 1000;
      const fig: RunFigures = {
        rows,
        seconds,
        cpuSeconds,
        candidateTokensPerCpuSecond: (tokensPerRep * reps) / cpuSeconds,
        phases: phasesOf(st, wallStart, acceptedAt, seconds),
        rowsPerSecond: rows / seconds,
        candidateTokensPerSecond: (tokensPerRep * reps) / seconds,
        texts: { encoded: st.texts.encoded, reused: st.texts.reused },
        share: { encoding: encoding / wallMs, scoring: scoring / wallMs, queuesAndS3: Math.max(0, 1 - (encoding + scoring) / wallMs) },
        timingsMs: t,
        ndcg10: sum / n,
      };
      runs.push(fig);
      log(
        `${label}: ${rows} rows in ${seconds.toFixed(1)} s: ${fig.rowsPerSecond.toFixed(1)} rows/s, ${(fig.candidateTokensPerSecond / 1000).toFixed(1)}k candidate tokens/s; ` +
          `${cpuSeconds.toFixed(1)} CPU s (${(fig.candidateTokensPerCpuSecond / 1000).toFixed(1)}k candidate tokens per CPU s); phases: upload ${fig.phases.upload.toFixed(1)} s, plan ${fig.phases.plan.toFixed(1)} s, chunks ${fig.phases.chunks.toFixed(1)} s; ` +
          `texts encoded ${fig.texts.encoded}, reused ${fig.texts.reused}; time encoding ${(100 * fig.share.encoding).toFixed(0)}%, scoring ${(100 * fig.share.scoring).toFixed(0)}%, queues+S3+rest ${(100 * fig.share.queuesAndS3).toFixed(0)}%; ` +
          `nDCG@10 ${fig.ndcg10.toFixed(4)} (in-process ${refNdcg.toFixed(4)}), rows differing from the in-process top 10: ${mismatched}`,
      );
      if (mismatched > 0 || Math.abs(fig.ndcg10 - refNdcg) > 1e-9) throw new Error(`nDCG@10 ${fig.ndcg10} of the batch differs from the in-process ${refNdcg} (${mismatched} rows differ)`);
    }
  } finally {
    await server?.stop();
    rmSync(dir, { recursive: true, force: true });
  }
  // The passes just before and after the second run.
  const around = (xs: number[]) => median(xs.slice(-2));
  const kernelSingle = around(kernel.single);
  const kernelGrouped = around(kernel.grouped);
  const kernelSingleCpu = around(kernel.singleCpu);
  const kernelGroupedCpu = around(kernel.groupedCpu);
  const second = runs[1].candidateTokensPerSecond;
  const secondCpu = runs[1].candidateTokensPerCpuSecond;
  const pct = (x: number) => `${(100 * x).toFixed(1)}%`;
  log(
    `MaxSim kernel (GemmMaxsim, d = ${d}, same run): ${(kernelSingle / 1e6).toFixed(2)}M candidate tokens/s one query per call, ${(kernelGrouped / 1e6).toFixed(2)}M with ${grouped} copies of each query per call (as a chunk groups them); ` +
      `second run = ${pct(second / kernelSingle)} / ${pct(second / kernelGrouped)} of the kernel's rate; per CPU second: kernel ${(kernelSingleCpu / 1e6).toFixed(2)}M / ${(kernelGroupedCpu / 1e6).toFixed(2)}M, second run ${pct(secondCpu / kernelSingleCpu)} / ${pct(secondCpu / kernelGroupedCpu)}`,
  );
  return {
    dataset: DATASET,
    model,
    queries: judged.length,
    repetitions: reps,
    rows,
    candidateTokensPerRepetition: tokensPerRep,
    chunkRows: config.BATCH_CHUNK_ROWS,
    inProcessNdcg10: refNdcg,
    inProcessNdcg10Fp32: refNdcgFp32,
    first: runs[0],
    second: runs[1],
    secondVsFirst: runs[0].seconds / runs[1].seconds,
    kernel: { candidateTokensPerSecond: kernelSingle, groupedCandidateTokensPerSecond: kernelGrouped, candidateTokensPerCpuSecond: kernelSingleCpu, groupedCandidateTokensPerCpuSecond: kernelGroupedCpu, groupedCopies: grouped, passes: kernel },
    secondVsKernel: Math.min(second / kernelSingle, second / kernelGrouped),
    secondVsKernelCpu: Math.min(secondCpu / kernelSingleCpu, secondCpu / kernelGroupedCpu),
  };
}

const cpuSecondsSince = (c0: NodeJS.CpuUsage) => {
  const c = process.cpuUsage(c0);
  return (c.user + c.system) / 1e6;
};

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[s.length >> 1] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};

/** One query's candidates as the kernel takes them: fp16-rounded token vectors, one after another. */
function concatRounded(query: EncodedText, docs: EncodedText[], d: number): { query: EncodedText; docs: Float32Array; offsets: Uint32Array } {
  const offsets = new Uint32Array(docs.length + 1);
  docs.forEach((e, i) => (offsets[i + 1] = offsets[i] + e.length));
  const all = new Float32Array(offsets[docs.length] * d);
  docs.forEach((e, i) => all.set(roundToHalf(e.vectors.subarray(0, e.length * d)), offsets[i] * d));
  return { query, docs: all, offsets };
}

/** Upload (POST until 202), plan (202 until the record's startedAt, when a plan job cuts the chunks) and chunk phases. */
function phasesOf(st: { startedAt?: string }, wallStart: number, acceptedAt: number, seconds: number): RunFigures['phases'] {
  const upload = (acceptedAt - wallStart) / 1000;
  const plan = st.startedAt ? Math.max(0, Date.parse(st.startedAt) - acceptedAt) / 1000 : 0;
  return { upload, plan, chunks: seconds - upload - plan };
}
