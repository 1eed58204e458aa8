/**
 * `npm run bench -- encode [--models LIST] [--docs N] [--real-docs N] [--passes N] [--json]`
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
 * wall time during which no session.run was in flight, per document (the glue that a GPU would
 * wait for), and `cpu outside run ms/doc` = process CPU time minus the process CPU time spent
 * while a session.run was in flight, per document (meaningful with one ONNX Runtime thread, the
 * stand-ins' default, where the run is on the calling thread; not for the multi-threaded real
 * models). The CPU figure holds on a loaded machine, where the wall figures grow with the load.
 * Ratios only compare within one run: the machine is shared.
 */
import { join, resolve } from 'node:path';
import { copyFileSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { parseArgs } from 'node:util';
import { TokenEncoder } from '../../libs/model/src/token-encoder';
import { setInferenceObserver } from '../../libs/kernels/src/inference-observer';
import { GraphBuilder, floatTensor, int64Tensor, makeModel, makeValueInfo, writeModel } from '../../libs/kernels/src/onnx-graph';
import { loadCranfield } from '../lib/cranfield';

const HELP = `npm run bench -- encode [options]

  --models LIST     comma-separated model directories under --dir
                    (default test-transformer,minilm-l6-384-free,minilm-l6-384,minilm-l6-384-int8,glove-ctx-100d;
                    missing ones are skipped; minilm-l6-384-free = minilm-l6-384's tokenizer and manifest, trivial graph)
  --dir DIR         model directories (default .cache/models)
  --data DIR        Cranfield files (default data/cranfield)
  --docs N          documents for the stand-ins test-transformer and minilm-l6-384-free (default all 1,398 non-empty ones)
  --real-docs N     documents for the other models (default 200: minilm encodes ~25 docs/s here)
  --passes N        timed passes per model after one warm-up (default 3; the median is reported)
  --threads N       ONNX Runtime intra-op threads (default: 1 for test-transformer, ONNX Runtime's for the others)
  --json            print the result as one JSON object on the last line
  --help            this text`;

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor((xs.length - 1) / 2)]!;
const round = (x: number, d = 3) => Number(x.toFixed(d));

export interface EncodeBenchModel {
  model: string;
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

function positiveInt(name: string, v: string | undefined, fallback: number): number {
  if (v === undefined) return fallback;
  const n = Number(v);
  if (!Number.isInteger(n) || n < 1) throw new Error(`--${name}: a positive integer (got ${v})`);
  return n;
}

export async function runEncodeBench(argv: string[]): Promise<Record<string, unknown>> {
  const { values } = parseArgs({
    args: argv,
    strict: true,
    options: {
      models: { type: 'string', default: 'test-transformer,minilm-l6-384-free,minilm-l6-384,minilm-l6-384-int8,glove-ctx-100d' },
      dir: { type: 'string', default: '.cache/models' },
      data: { type: 'string', default: 'data/cranfield' },
      docs: { type: 'string' },
      'real-docs': { type: 'string' },
      passes: { type: 'string' },
      threads: { type: 'string' },
      json: { type: 'boolean', default: false },
      help: { type: 'boolean', default: false },
    },
  });
  if (values.help) {
    console.log(HELP);
    return { help: true };
  }
  const passes = positiveInt('passes', values.passes, 3);
  const threads = values.threads === undefined ? undefined : positiveInt('threads', values.threads, 1);
  const all = loadCranfield(resolve(values.data)).docs.map((d) => d.text).filter((t) => t.length > 0); // 1,398 (two records are empty)
  const tinyDocs = Math.min(all.length, positiveInt('docs', values.docs, all.length));
  const realDocs = Math.min(all.length, positiveInt('real-docs', values['real-docs'], 200));

  // Inside session.run: the summed time, and the union of in-flight intervals (runs may overlap the glue).
  let runMs = 0;
  let inFlight = 0;
  let busySince = 0;
  let busyMs = 0;
  // Process CPU time while a run is in flight (onnxruntime-node runs on the calling thread with
  // one intra-op thread): unlike the wall time, it does not grow with the machine's load.
  let cpuSince = process.cpuUsage();
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
    const enc = await TokenEncoder.load(dir, { executionProvider: 'cpu', ...(intraOpThreads ? { intraOpThreads } : {}) });
    const texts = all.slice(0, tiny ? tinyDocs : realDocs);
    const tokens = texts.reduce((s, t) => s + enc.countTokens(t, 'doc', enc.manifest.maxDocTokens), 0);
    // Time in flight, measured around the session's own run (wraps the private session's run).
    const session = (enc as unknown as { session: { run: (...a: unknown[]) => Promise<unknown> } }).session;
    const run = session.run.bind(session);
    session.run = async (...a: unknown[]) => {
      if (inFlight++ === 0) {
        busySince = performance.now();
        cpuSince = process.cpuUsage();
      }
      try {
        return await run(...a);
      } finally {
        if (--inFlight === 0) {
          busyMs += performance.now() - busySince;
          const c = process.cpuUsage(cpuSince);
          busyCpuMs += (c.user + c.system) / 1000;
        }
      }
    };
    await enc.encodeDocuments(texts); // warm-up
    const passMs: number[] = [];
    const outside: number[] = [];
    const cpuOutside: number[] = [];
    const shares: number[] = [];
    for (let p = 0; p < passes; p++) {
      runMs = 0;
      busyMs = 0;
      busyCpuMs = 0;
      const cpu0 = process.cpuUsage();
      const t0 = performance.now();
      await enc.encodeDocuments(texts);
      const ms = performance.now() - t0;
      const cpu = process.cpuUsage(cpu0);
      passMs.push(ms);
      outside.push((ms - busyMs) / texts.length);
      cpuOutside.push(((cpu.user + cpu.system) / 1000 - busyCpuMs) / texts.length);
      shares.push(runMs / ms);
    }
    await enc.release();
    if (free) rmSync(dir, { recursive: true, force: true });
    const ms = median(passMs);
    const r: EncodeBenchModel = {
      model,
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
      `${model}: ${r.docs} docs, ${r.tokens} tokens; median pass ${Math.round(ms)} ms: ${r.docsPerS} docs/s, ${r.tokensPerS} tokens/s; ` +
        `session.run ${(r.runShare * 100).toFixed(1)}% of wall; outside session.run ${r.outsideRunMsPerDoc} ms/doc (wall), ${r.cpuOutsideRunMsPerDoc} ms/doc (cpu)`,
    );
  }
  setInferenceObserver(undefined);
  return { bench: 'encode', node: process.version, passes, threads: threads ?? 'default', results };
}
