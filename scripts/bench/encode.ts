/**
 * `npm run bench -- encode [--models LIST] [--docs N] [--real-docs N] [--passes N] [--inference thread|inline|both] [--json]`
 *
 * The service's own encoder (`TokenEncoder.encodeDocuments`, onnxruntime-node, CPU provider) over a
 * fixed corpus, the Cranfield documents (title + abstract, `data/cranfield`), to see what the
 * JavaScript around `session.run` costs:
 *
 * - `test-transformer`, the tiny test model, stands in for a free GPU: its `session.run` is
 *   nearly free, so the pass is the glue (tokenizing, input tensors, output normalisation and
 *   copies, allocation and GC) and its cost per document is the figure to cut;
 * - `minilm-l6-384-free` stands in for the default model on a free GPU: minilm-l6-384's own
 *   tokenizer.json and manifest (WordPiece, 256 tokens, 384 dims, skiplist) with a trivial graph
 *   (each token's vector is an affine function of its id), written to a temp directory, so the
 *   glue is the service's real glue for its default model;
 * - the real models on this CPU (`minilm-l6-384`, `minilm-l6-384-int8`, `glove-ctx-100d`, those
 *   present under --dir) give docs/s and tokens/s as the service sees them.
 *
 * Per model: one warm-up pass, then --passes timed passes (the median is reported). Figures:
 * docs/s, tokens/s (real tokens, specials included), `run share` = the time inside session.run
 * (summed over batches, the inference observer) over the wall time, tokens counted as the model
 * sees them (capped at its maxDocTokens), `outside run ms/doc` = the
 * wall time during which the session was not running, per document (the glue that a GPU would
 * wait for; with the session in its own thread the glue overlaps the runs and only what is not
 * hidden counts), and `cpu outside run ms/doc` = the CPU time of the glue per document: the
 * calling thread's CPU time (Linux /proc/thread-self/schedstat) less, when the session runs on it
 * (`--inference inline`), its CPU time inside the runs (meaningful with one ONNX Runtime thread,
 * the stand-ins' default, where the whole run is on the calling thread; not for the
 * multi-threaded real models); V8's background GC threads are not counted. The CPU figure holds
 * on a loaded machine, where the wall figures grow with the load.
 * `--inference both` loads each model both ways and alternates their passes, so the two compare
 * within one run. Ratios only compare within one run: the machine is shared.
 *
 * `--queries N`: then the first N Cranfield queries, each encoded alone (`encodeQueries([q])`, the
 * search path's call) by every listed model in turn, the models' order rotating from query to query
 * so that none always runs first, --passes times over; the median ms per query and model, and the
 * median query length in tokens. Two graphs of one model compare within the run this way.
 */
import { join, resolve } from 'node:path';
import { copyFileSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { TokenEncoder } from '../../libs/model/src/token-encoder';
import { setInferenceObserver } from '../../libs/kernels/src/inference-observer';
import { GraphBuilder, floatTensor, int64Tensor, makeModel, makeValueInfo, writeModel } from '../../libs/kernels/src/onnx-graph';
import { loadCranfield } from '../lib/cranfield';
import { CliUsageError, intFlag, parseCliOrExit } from '../lib/cli';

const HELP = `usage: npm run bench -- encode [options]

  --models LIST     comma-separated model directories under --dir
                    (default test-transformer,minilm-l6-384-free,minilm-l6-384,minilm-l6-384-int8,glove-ctx-100d;
                    missing ones are skipped; minilm-l6-384-free = minilm-l6-384's tokenizer and manifest, trivial graph)
  --dir DIR         model directories (default .cache/models)
  --data DIR        Cranfield files (default data/cranfield)
  --docs N          documents for the stand-ins test-transformer and minilm-l6-384-free (default all 1,398 non-empty ones)
  --real-docs N     documents for the other models (default 200: minilm encodes ~25 docs/s here)
  --passes N        timed passes per model after one warm-up (default 3; the median is reported)
  --threads N       ONNX Runtime intra-op threads (default: 1 for test-transformer, ONNX Runtime's for the others)
  --inference MODE  thread: the session in its own thread, batches pipelined (the service's default);
                    inline: on the calling thread, one batch after the other (as before);
                    both: each model both ways, passes alternated (default thread)
  --queries N       then encode the first N Cranfield queries one at a time, the models alternated query by query (default 0: none)
  --json            print the result as one JSON object on the last line
  --help            this text`;

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor((xs.length - 1) / 2)]!;
const round = (x: number, d = 3) => Number(x.toFixed(d));

export interface EncodeBenchModel {
  model: string;
  inference: 'thread' | 'inline';
  docs: number;
  tokens: number;
  passMs: number[];
  docsPerS: number;
  tokensPerS: number;
  runShare: number;
  outsideRunMsPerDoc: number;
  cpuOutsideRunMsPerDoc: number;
}

const FREE = '-free';

/** CPU time of the calling thread in ms (Linux: /proc/thread-self/schedstat, nanoseconds on the CPU); NaN elsewhere. */
function threadCpuMs(): number {
  try {
    return Number(readFileSync('/proc/thread-self/schedstat', 'utf8').split(' ')[0]) / 1e6;
  } catch {
    return Number.NaN;
  }
}

/**
 * `<model>-free`: the model directory's tokenizer.json and manifest.json with a graph that costs
 * next to nothing (vector = id x w + b, w and b fixed [dims] vectors; every input the manifest
 * names is a graph input), in a temp directory that the caller removes.
 */
export function writeFreeGraphModel(source: string): string {
  const dir = mkdtempSync(join(tmpdir(), 'lateral-free-model-'));
  const manifest = JSON.parse(readFileSync(join(source, 'manifest.json'), 'utf8')) as {
    dims: number;
    name: string;
    staticEmbeddings?: unknown;
    inputs?: { inputIds?: string; attentionMask?: string | null; tokenTypeIds?: string | null; dtype?: 'int64' | 'int32' };
    outputs?: { tokenEmbeddings?: string; tokenWeights?: string | null };
  };
  copyFileSync(join(source, 'tokenizer.json'), join(dir, 'tokenizer.json'));
  writeFileSync(join(dir, 'manifest.json'), JSON.stringify({ ...manifest, name: `${manifest.name}${FREE}`, staticEmbeddings: null, outputs: { ...manifest.outputs, tokenWeights: null } }));
  const dims = manifest.dims;
  const dtype = manifest.inputs?.dtype ?? 'int64';
  const names = [manifest.inputs?.inputIds ?? 'input_ids', manifest.inputs?.attentionMask === undefined ? 'attention_mask' : manifest.inputs.attentionMask, manifest.inputs?.tokenTypeIds ?? null];
  const g = new GraphBuilder();
  const ids = g.op('Cast', [names[0]!], { to: 1 });
  const col = g.op('Unsqueeze', [ids, g.constant(int64Tensor('axes', [1], [2]))]);
  const w = g.constant(floatTensor('w', [dims], Array.from({ length: dims }, (_, k) => Math.sin(k + 1) * 1e-3)));
  const b = g.constant(floatTensor('b', [dims], Array.from({ length: dims }, (_, k) => Math.cos(k + 1))));
  g.op('Add', [g.op('Mul', [col, w]), b], {}, manifest.outputs?.tokenEmbeddings ?? 'last_hidden_state');
  const inputs = names.filter((n): n is string => !!n).map((n) => makeValueInfo(n, dtype === 'int64' ? 'INT64' : 'INT32', ['batch', 'seq']));
  writeModel(join(dir, 'model.onnx'), makeModel(g.build('free', inputs, [makeValueInfo(manifest.outputs?.tokenEmbeddings ?? 'last_hidden_state', 'FLOAT', ['batch', 'seq', dims])])));
  return dir;
}

export async function runEncodeBench(argv: string[]): Promise<Record<string, unknown>> {
  // The whole command line is read before any model loads: an unknown flag or a bad value exits 2 with the usage, --help prints it and exits 0.
  const { values, passes, modes, threads, docs, realDocs, queries } = parseCliOrExit(
    'bench encode',
    HELP,
    argv,
    {
      models: { type: 'string', default: 'test-transformer,minilm-l6-384-free,minilm-l6-384,minilm-l6-384-int8,glove-ctx-100d' },
      dir: { type: 'string', default: '.cache/models' },
      data: { type: 'string', default: 'data/cranfield' },
      docs: { type: 'string' },
      'real-docs': { type: 'string' },
      passes: { type: 'string', default: '3' },
      threads: { type: 'string' },
      inference: { type: 'string', default: 'thread' },
      queries: { type: 'string', default: '0' },
      json: { type: 'boolean', default: false },
    },
    {},
    ({ values }) => {
      if (!['thread', 'inline', 'both'].includes(values.inference)) throw new CliUsageError(`--inference: thread, inline or both (got ${values.inference})`);
      return {
        values,
        passes: intFlag('passes', values.passes),
        modes: (values.inference === 'both' ? ['inline', 'thread'] : [values.inference]) as ('thread' | 'inline')[],
        threads: values.threads === undefined ? undefined : intFlag('threads', values.threads),
        docs: values.docs === undefined ? undefined : intFlag('docs', values.docs),
        realDocs: intFlag('real-docs', values['real-docs'] ?? '200'),
        queries: intFlag('queries', values.queries, 0),
      };
    },
  );
  const cranfield = loadCranfield(resolve(values.data));
  const all = cranfield.docs.map((d) => d.text).filter((t) => t.length > 0); // 1,398 (two records are empty)
  const tinyDocs = Math.min(all.length, docs ?? all.length);
  const realCount = Math.min(all.length, realDocs);

  // Inside session.run: the summed time (the inference observer), and the runs' own intervals.
  let runMs = 0;
  let busyMs = 0;
  // The calling thread's CPU time inside the runs (inline: onnxruntime-node runs on the calling
  // thread, with one intra-op thread all of it): unlike the wall time, it does not grow with the load.
  let busyCpuMs = 0;
  setInferenceObserver((e) => {
    runMs += e.ms;
  });
  const results: EncodeBenchModel[] = [];
  for (const model of values.models.split(',').filter(Boolean)) {
    const free = model.endsWith(FREE);
    const source = join(resolve(values.dir), free ? model.slice(0, -FREE.length) : model);
    if (!existsSync(join(source, 'model.onnx'))) {
      console.log(`${model}: not found under ${values.dir}, skipped (npm run build-model)`);
      continue;
    }
    const dir = free ? writeFreeGraphModel(source) : source;
    const tiny = free || model === 'test-transformer';
    // The stand-in for a free GPU runs on one ONNX Runtime thread, so the CPU time outside its runs is the glue's.
    const intraOpThreads = threads ?? (tiny ? 1 : undefined);
    const texts = all.slice(0, tiny ? tinyDocs : realCount);
    const encs: { mode: 'thread' | 'inline'; enc: TokenEncoder }[] = [];
    for (const mode of modes) {
      const enc = await TokenEncoder.load(dir, { executionProvider: 'cpu', inferenceThread: mode === 'thread', ...(intraOpThreads ? { intraOpThreads } : {}) });
      // The runs' intervals as the runner measured them (in the session thread, or around the call inline).
      const runner = (enc as unknown as { runner: { offThread: boolean; run: (...a: unknown[]) => Promise<{ start: number; end: number }> } }).runner;
      const run = runner.run.bind(runner);
      runner.run = async (...a: unknown[]) => {
        const cpu0 = runner.offThread ? null : threadCpuMs();
        const r = await run(...a);
        busyMs += r.end - r.start;
        if (cpu0 !== null) busyCpuMs += threadCpuMs() - cpu0;
        return r;
      };
      await enc.encodeDocuments(texts); // warm-up
      encs.push({ mode, enc });
    }
    const tokens = texts.reduce((s, t) => s + encs[0]!.enc.countTokens(t, 'doc', encs[0]!.enc.manifest.maxDocTokens), 0);
    const per = encs.map(() => ({ passMs: [] as number[], outside: [] as number[], cpuOutside: [] as number[], shares: [] as number[] }));
    for (let p = 0; p < passes; p++) {
      for (const [k, { enc }] of encs.entries()) {
        runMs = 0;
        busyMs = 0;
        busyCpuMs = 0;
        const thread0 = threadCpuMs();
        const t0 = performance.now();
        await enc.encodeDocuments(texts);
        const ms = performance.now() - t0;
        const glueCpu = threadCpuMs() - thread0 - busyCpuMs;
        per[k]!.passMs.push(ms);
        per[k]!.outside.push(Math.max(0, ms - busyMs) / texts.length);
        per[k]!.cpuOutside.push(glueCpu / texts.length);
        per[k]!.shares.push(runMs / ms);
      }
    }
    for (const { enc } of encs) await enc.release();
    if (free) rmSync(dir, { recursive: true, force: true });
    for (const [k, { mode }] of encs.entries()) {
      const { passMs, outside, cpuOutside, shares } = per[k]!;
      const ms = median(passMs);
      const r: EncodeBenchModel = {
        model,
        inference: mode,
        docs: texts.length,
        tokens,
        passMs: passMs.map((x) => round(x, 1)),
        docsPerS: round((texts.length / ms) * 1000, 1),
        tokensPerS: Math.round((tokens / ms) * 1000),
        runShare: round(median(shares)),
        outsideRunMsPerDoc: round(median(outside), 4),
        cpuOutsideRunMsPerDoc: round(median(cpuOutside), 4),
      };
      results.push(r);
      console.log(
        `${model} (${mode}): ${r.docs} docs, ${r.tokens} tokens; median pass ${Math.round(ms)} ms: ${r.docsPerS} docs/s, ${r.tokensPerS} tokens/s; ` +
          `session.run ${(r.runShare * 100).toFixed(1)}% of wall; outside session.run ${r.outsideRunMsPerDoc} ms/doc (wall), ${r.cpuOutsideRunMsPerDoc} ms/doc (cpu); passes ${r.passMs.map((x) => Math.round(x)).join(', ')} ms`,
      );
    }
  }
  setInferenceObserver(undefined);
  const queryResults = queries > 0 ? await queryPasses(values.models.split(',').filter(Boolean), resolve(values.dir), cranfield.queries.slice(0, queries).map((q) => q.text), passes, threads) : [];
  return { bench: 'encode', node: process.version, passes, threads: threads ?? 'default', inference: values.inference, results, queries: queryResults };
}

export interface QueryBenchModel {
  model: string;
  queries: number;
  medianTokens: number;
  medianMs: number;
  p90Ms: number;
}

/** Each query alone through every model in turn (the order rotating per query), `passes` times over: median and p90 ms per model. */
async function queryPasses(models: string[], dir: string, texts: string[], passes: number, threads: number | undefined): Promise<QueryBenchModel[]> {
  const encs: { model: string; enc: TokenEncoder; ms: number[] }[] = [];
  for (const model of models) {
    const source = join(dir, model);
    if (model.endsWith(FREE) || !existsSync(join(source, 'model.onnx'))) continue;
    const enc = await TokenEncoder.load(source, { executionProvider: 'cpu', ...(threads ? { intraOpThreads: threads } : {}) });
    for (const t of texts.slice(0, 20)) await enc.encodeQueries([t]); // warm-up
    encs.push({ model, enc, ms: [] });
  }
  for (let p = 0; p < passes; p++) {
    for (const [i, t] of texts.entries()) {
      for (let k = 0; k < encs.length; k++) {
        const e = encs[(i + p + k) % encs.length]!;
        const t0 = performance.now();
        await e.enc.encodeQueries([t]);
        e.ms.push(performance.now() - t0);
      }
    }
  }
  const out: QueryBenchModel[] = [];
  for (const { model, enc, ms } of encs) {
    const lengths = (await enc.encodeQueries(texts)).map((q) => q.length);
    const sorted = [...ms].sort((a, b) => a - b);
    const r = { model, queries: texts.length, medianTokens: median(lengths), medianMs: round(median(ms)), p90Ms: round(sorted[Math.floor(0.9 * (sorted.length - 1))]!) };
    out.push(r);
    console.log(`${model}: ${r.queries} queries one at a time (median ${r.medianTokens} tokens), ${passes} passes alternated with the other models: median ${r.medianMs} ms, p90 ${r.p90Ms} ms per query`);
    await enc.release();
  }
  return out;
}
